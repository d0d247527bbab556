# syntax=docker/dockerfile:1
# kece-node image (every pool) for operators with a registry, built from the
# repository root:
#
#   docker build -f deploy/docker/node.Dockerfile --build-arg VERSION=v0.1.0 -t kece/kece-node:v0.1.0 .
#
# Without a registry, `make images` builds the same layout from
# deploy/docker/local/node.Dockerfile on a debootstrap Debian 12 base
# (deploy/images_test.go compares the two final stages). It carries kece-node
# and the static sandbox supervisor kece-sandbox-init. Run it with
# deploy/compose/node (one Compose project per node), which also explains the
# two things that differ from a plain container: code pools talk to the
# HOST's Docker daemon, so every path the daemon bind-mounts into sandboxes
# (workspace, supervisor) must exist at the same path on the host; the mysql
# pool gets no Docker socket at all.
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/kece-oj/kece/internal/buildinfo.version=${VERSION}" \
      -o /out/kece-node ./cmd/kece-node \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" \
      -o /out/kece-sandbox-init ./cmd/kece-sandbox-init

FROM debian:12-slim
COPY --from=build /out/kece-node /usr/local/bin/kece-node
COPY --from=build /out/kece-sandbox-init /usr/local/lib/kece/kece-sandbox-init
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
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
