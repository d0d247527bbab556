# kece-control image built on this machine, no registry needed: `make images`
# (scripts/images.sh) builds the static binary on the host and assembles the
# build context; `docker build --network none` only copies files. The final
# stage matches deploy/docker/control.Dockerfile line for line apart from
# where files come from (deploy/images_test.go compares them and the built
# image). No shell: nothing in this image needs one.
FROM scratch
COPY kece-control /usr/local/bin/kece-control
# The admin CLI, for `docker exec … kecectl` next to the server.
COPY kecectl /usr/local/bin/kecectl
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY passwd /etc/passwd
COPY group /etc/group
# The artifact store; mount a volume (shared by every replica) here.
COPY --chown=65532:65532 artifacts/ /var/lib/kece/artifacts/
ARG VERSION=dev
LABEL org.opencontainers.image.title="kece-control" \
      org.opencontainers.image.description="KECE judge pool control plane" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/kece-oj/kece"
ENV KECE_LISTEN=0.0.0.0:8080 \
    KECE_ARTIFACT_DIR=/var/lib/kece/artifacts
USER 65532:65532
EXPOSE 8080
VOLUME ["/var/lib/kece/artifacts"]
# No curl in the image: kece-control checks its own /healthz on KECE_LISTEN.
HEALTHCHECK --interval=30s --timeout=10s --start-period=1m --retries=3 \
  CMD ["/usr/local/bin/kece-control", "healthcheck", "--quiet"]
ENTRYPOINT ["/usr/local/bin/kece-control"]
CMD ["serve"]
