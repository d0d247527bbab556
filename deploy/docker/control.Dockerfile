# syntax=docker/dockerfile:1
# kece-control image for operators with a registry, built from the repository
# root:
#
#   docker build -f deploy/docker/control.Dockerfile --build-arg VERSION=v0.1.0 -t kece/kece-control:v0.1.0 .
#
# Without a registry, `make images` builds the same layout from
# deploy/docker/local/control.Dockerfile (deploy/images_test.go compares the
# two final stages). The binary is static (no cgo), the image has no shell
# and runs as an unprivileged user. Settings are the same environment
# variables as under systemd (deploy/control/control.env.example); the image
# only changes the listen address so a published port works.
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/kece-oj/kece/internal/buildinfo.version=${VERSION}" \
      -o /out/kece-control ./cmd/kece-control \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/kece-oj/kece/internal/buildinfo.version=${VERSION}" \
      -o /out/kecectl ./cmd/kecectl \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nkece:x:65532:65532:kece:/var/lib/kece:/sbin/nologin\n' > /out/passwd \
 && printf 'root:x:0:\nkece:x:65532:\n' > /out/group \
 && mkdir -p /out/artifacts

FROM scratch
COPY --from=build /out/kece-control /usr/local/bin/kece-control
# The admin CLI, for `docker exec … kecectl` next to the server.
COPY --from=build /out/kecectl /usr/local/bin/kecectl
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/group /etc/group
# The artifact store; mount a volume (shared by every replica) here.
COPY --from=build --chown=65532:65532 /out/artifacts/ /var/lib/kece/artifacts/
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
