# syntax=docker/dockerfile:1
# kece-control image, built from the repository root:
#
#   docker build -f deploy/docker/control.Dockerfile -t kece/kece-control:dev .
#
# For operators; CI does not build it (no registry is reachable there). The
# binary is static (no cgo), the runtime image has no shell and runs as an
# unprivileged user. Settings are the same environment variables as under
# systemd (deploy/control/control.env.example); the image only changes the
# listen address so a published port works.
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/kece-oj/kece/internal/buildinfo.version=${VERSION}" \
      -o /out/usr/local/bin/kece-control ./cmd/kece-control \
 && mkdir -p /out/var/lib/kece/artifacts

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/usr/local/bin/kece-control /usr/local/bin/kece-control
# The artifact store; mount a volume (shared by every replica) here.
COPY --from=build --chown=65532:65532 /out/var/lib/kece/artifacts /var/lib/kece/artifacts
ENV KECE_LISTEN=0.0.0.0:8080 \
    KECE_ARTIFACT_DIR=/var/lib/kece/artifacts
USER 65532:65532
EXPOSE 8080
VOLUME ["/var/lib/kece/artifacts"]
ENTRYPOINT ["/usr/local/bin/kece-control"]
CMD ["serve"]
