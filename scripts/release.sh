#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: one tarball per target in $DIST (default dist/),
# each holding every binary (static, CGO off, cross-compiled) and the operator
# files in the repository's own layout (deploy/…), so the install steps of
# docs/operations.md work the same from a clone and from an unpacked tarball.
# Then SHA256SUMS over everything in $DIST. Reproducible: sorted entries,
# numeric root owner, mtime of the last commit, gzip without a timestamp.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:?usage: scripts/release.sh VERSION}
DIST=${DIST:-dist}
TARGETS=${TARGETS:-linux/amd64 linux/arm64}
GO=${GO:-go}
case $VERSION in v[0-9]*) ;; *) echo "release: VERSION must look like vX.Y.Z, got $VERSION" >&2; exit 2 ;; esac
mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)
epoch=$(git log -1 --format=%ct 2>/dev/null || date +%s)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# What an operator needs besides the binaries (paths as in the repository).
files=(
	README.md CHANGELOG.md
	docs/operations.md docs/node.md
	deploy/README.md
	deploy/systemd/kece-control.service deploy/systemd/kece-node@.service deploy/systemd/kece-node-sql@.service
	deploy/systemd/node-cpp-01.env.example deploy/systemd/node-mysql-01.env.example
	deploy/control/control.env.example deploy/node/node.env.example
	deploy/nginx/kece-control.conf
	deploy/images/seccomp-kece.json
)
while IFS= read -r f; do files+=("$f"); done < <(git ls-files deploy/compose deploy/docker 2>/dev/null || find deploy/compose deploy/docker -type f)

for target in $TARGETS; do
	os=${target%/*} arch=${target#*/}
	name=kece-$VERSION-$os-$arch
	dir=$stage/$name
	mkdir -p "$dir/bin"
	echo "== $name"
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch $GO build -trimpath \
		-ldflags "-s -w -X github.com/kece-oj/kece/internal/buildinfo.version=$VERSION" -o "$dir/bin/" ./cmd/...
	for f in "${files[@]}"; do
		install -D -m "$(stat -c %a "$f")" "$f" "$dir/$f"
	done
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$stage" -cf - "$name" | gzip -n -9 > "$DIST/$name.tar.gz"
	ls -l "$DIST/$name.tar.gz" | awk '{printf "   %s %d bytes\n", $NF, $5}'
done
# Over every artifact in $DIST (the release tarballs and, after make images,
# the image tarballs), so one file verifies whatever a host was given.
(cd "$DIST" && sha256sum -- kece-*.tar* > SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)
echo "== $DIST/SHA256SUMS"
cat "$DIST/SHA256SUMS"
