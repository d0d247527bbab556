# kece-node image built on this machine, no registry needed: `make images`
# (scripts/images.sh) builds the static binaries on the host; the base is the
# debootstrap Debian 12 root filesystem the sandbox runtime images start from
# (deploy/images/build-local.sh --base-tar, imported as kece/base:<hash>).
# The final stage matches deploy/docker/node.Dockerfile line for line apart
# from the base and where files come from (deploy/images_test.go).
ARG BASE=kece/base:unset
FROM ${BASE}
COPY kece-node /usr/local/bin/kece-node
COPY kece-sandbox-init /usr/local/lib/kece/kece-sandbox-init
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ARG VERSION=dev
LABEL org.opencontainers.image.title="kece-node" \
      org.opencontainers.image.description="KECE judge pool node (every pool)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/kece-oj/kece"
# Root by default: code pools run as root with only CHOWN and DAC_OVERRIDE
# (Compose sets cap_drop/cap_add); the mysql pool runs as 65532 (user:).
# A shell and coreutils stay on purpose: the Compose project's one-shot
# "supervisor" service copies kece-sandbox-init onto the host with them.
STOPSIGNAL SIGTERM
# No curl in the image: kece-node checks its own /healthz (KECE_LISTEN).
HEALTHCHECK --interval=30s --timeout=10s --start-period=2m --retries=3 \
  CMD ["/usr/local/bin/kece-node", "healthcheck", "--quiet"]
ENTRYPOINT ["/usr/local/bin/kece-node"]
