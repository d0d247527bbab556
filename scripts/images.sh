#!/usr/bin/env bash
# make images VERSION=…: builds kece/kece-control:VERSION and
# kece/kece-node:VERSION (both also tagged :latest) on this machine without a
# registry, then `docker save`s them into $DIST (default dist/) for hosts
# without one, and rewrites $DIST/SHA256SUMS.
#
# The static binaries are built here on the host (CGO off, stamped); the
# build context holds only them, the host's CA bundle and the control
# image's passwd/group. kece-control goes on `scratch` (nothing needs a
# shell), kece-node on the debootstrap Debian 12 base of the sandbox runtime
# images (its Compose supervisor one-shot needs /bin/sh and install).
# `docker build --network none`: nothing is downloaded.
#
#   scripts/images.sh VERSION           build, tag, save
#   NO_SAVE=1 scripts/images.sh VERSION build and tag only
#   TAG_LATEST=0 …                      do not move the :latest tags (tests)
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:?usage: scripts/images.sh VERSION}
DIST=${DIST:-dist}
GO=${GO:-go}
arch=$($GO env GOARCH)
log() { echo "[images $(date +%H:%M:%S)] $*"; }
start=$(date +%s)

if [[ ! -f /etc/ssl/certs/ca-certificates.crt ]]; then
	log "installing ca-certificates (the images carry the host's CA bundle)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q ca-certificates >/dev/null
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
log "static binaries for linux/$arch, version $VERSION"
CGO_ENABLED=0 GOOS=linux $GO build -trimpath \
	-ldflags "-s -w -X github.com/kece-oj/kece/internal/buildinfo.version=$VERSION" \
	-o "$ctx/" ./cmd/kece-control ./cmd/kecectl ./cmd/kece-node ./cmd/kece-sandbox-init
cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
# The same accounts deploy/docker/control.Dockerfile writes.
printf 'root:x:0:0:root:/root:/sbin/nologin\nkece:x:65532:65532:kece:/var/lib/kece:/sbin/nologin\n' >"$ctx/passwd"
printf 'root:x:0:\nkece:x:65532:\n' >"$ctx/group"
mkdir "$ctx/artifacts"
cp deploy/docker/local/control.Dockerfile deploy/docker/local/node.Dockerfile "$ctx/"

# The node's base: the runtime images' debootstrap root filesystem, imported once.
base_tar=$(deploy/images/build-local.sh --base-tar)
base=kece/base:$(basename "$base_tar" .tar | sed 's/^base-//')
if ! docker image inspect "$base" >/dev/null 2>&1; then
	log "importing $base_tar as $base"
	docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV LANG=C.UTF-8' --message "kece base from engine/code/recipes/base" "$base_tar" "$base" >/dev/null
fi

build() { # image dockerfile [build args]
	local image=$1 file=$2
	shift 2
	log "docker build $image:$VERSION"
	local tags=(-t "$image:$VERSION")
	[[ ${TAG_LATEST:-1} == 0 ]] || tags+=(-t "$image:latest")
	# The legacy builder: no BuildKit here, and nothing to pull.
	DOCKER_BUILDKIT=0 docker build --network none -q --build-arg VERSION="$VERSION" "$@" \
		-f "$ctx/$file" "${tags[@]}" "$ctx" 2>&1 >/dev/null | { grep -v -e DEPRECATED -e BuildKit -e 'environment-variable' -e '^$' >&2 || true; }
	[[ ${PIPESTATUS[0]} == 0 ]] || { log "docker build $image failed"; exit 1; }
	log "$image:$VERSION $(docker image inspect -f '{{.Size}}' "$image:$VERSION" | awk '{printf "%.1f MB", $1/1e6}')"
}
build kece/kece-control control.Dockerfile
build kece/kece-node node.Dockerfile --build-arg BASE="$base"

if [[ -z ${NO_SAVE:-} ]]; then
	mkdir -p "$DIST"
	for image in kece-control kece-node; do
		out=$DIST/$image-image-$VERSION-linux-$arch.tar.gz
		docker save "kece/$image:$VERSION" | gzip -n >"$out.tmp" && mv "$out.tmp" "$out"
		log "$out $(stat -c %s "$out" | awk '{printf "%.1f MB", $1/1e6}') (docker load -i FILE)"
	done
	(cd "$DIST" && sha256sum -- kece-*.tar* >SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)
fi
log "done in $(($(date +%s) - start))s"
