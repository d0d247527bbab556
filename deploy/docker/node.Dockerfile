# syntax=docker/dockerfile:1
# kece-node image (every pool), built from the repository root:
#
#   docker build -f deploy/docker/node.Dockerfile -t kece/kece-node:dev .
#
# For operators; CI does not build it. It carries kece-node and the static
# sandbox supervisor kece-sandbox-init. Run it with deploy/compose/node (one
# Compose project per node), which also explains the two things that differ
# from a plain container: code pools talk to the HOST's Docker daemon, so every
# path the daemon bind-mounts into sandboxes (workspace, supervisor) must exist
# at the same path on the host; the mysql pool gets no Docker socket at all.
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

# A shell and coreutils are kept on purpose: the compose project's one-shot
# "supervisor" service copies kece-sandbox-init onto the host.
FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/kece-node /usr/local/bin/kece-node
COPY --from=build /out/kece-sandbox-init /usr/local/lib/kece/kece-sandbox-init
# Code pools run as root inside the container with only CHOWN and
# DAC_OVERRIDE (compose sets cap_drop/cap_add); the mysql pool runs as 65532.
STOPSIGNAL SIGTERM
# No curl in the image: kece-node checks its own /healthz (KECE_LISTEN).
HEALTHCHECK --interval=30s --timeout=10s --start-period=2m --retries=3 \
  CMD ["/usr/local/bin/kece-node", "healthcheck", "--quiet"]
ENTRYPOINT ["/usr/local/bin/kece-node"]
