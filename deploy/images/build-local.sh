#!/usr/bin/env bash
# Builds the local sandbox runtime images from Debian packages (no registry is
# reachable): one debootstrap --variant=minbase root filesystem shared by all
# pools, then per pool `apt-get install` in a chroot and `docker import` as
# kece/runtime-<pool>:<recipe-hash>. A pool whose tag already exists is skipped.
#
# The recipe is engine/code/recipes/{base,<pool>}; the tag is the first 12 hex
# digits of sha256(base || <pool>) — engine/code.DefaultRuntime computes the
# same hash from the same (embedded) files, so Go code and images agree.
#
#   deploy/images/build-local.sh              build every missing pool image
#   deploy/images/build-local.sh cpp python   build only these pools
#   deploy/images/build-local.sh --print-tag cpp
#   deploy/images/build-local.sh --base-tar   make the shared base (if missing), print its path
#                                             (scripts/images.sh builds kece-node on it)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
RECIPES=$ROOT/engine/code/recipes
BUILD=$ROOT/deploy/images/.build
ALL_POOLS=(cpp java python arkts)

tag_of() { # pool -> image reference
	local h
	h=$(cat "$RECIPES/base" "$RECIPES/$1" | sha256sum | cut -c1-12)
	echo "kece/runtime-$1:$h"
}
packages_of() { grep -v -E '^\s*(#|$)' "$RECIPES/$1" | tr '\n' ' '; }
base_field() { awk -v k="$1" '$1==k {print $2}' "$RECIPES/base"; }
log() { echo "[build-local $(date +%H:%M:%S)] $*"; }

if [[ ${1:-} == --print-tag ]]; then
	tag_of "$2"
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
base_hash=$(sha256sum <"$RECIPES/base" | cut -c1-12)
base_tar=$BUILD/base-$base_hash.tar
ensure_base() { # makes $base_tar (the debootstrap root filesystem) if missing
	mkdir -p "$BUILD"
	# Several builds may want the base at once (the image, MariaDB and systemd
	# builds of the deploy tests run in parallel): one makes it, the others
	# wait on the lock and then reuse it.
	exec {base_lock}>"$BUILD/base.lock"
	flock "$base_lock"
	if [[ -f $base_tar ]]; then
		log "reusing base root filesystem $base_tar"
		flock -u "$base_lock"
		return
	fi
	if ! command -v debootstrap >/dev/null; then
		log "installing debootstrap"
		apt-get install -y -q debootstrap >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q debootstrap >/dev/null; }
	fi
	# The Debian mirror this host already uses (deb822 .sources or one-line lists).
	local srcs mirror suite variant
	shopt -s nullglob
	srcs=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
	shopt -u nullglob
	mirror=$( (cat "${srcs[@]}" 2>/dev/null || true) |
		grep -o -E '(https?|file)://[^ ]+/debian/?( |$)' | grep -v security | head -n1 | tr -d ' ' || true)
	mirror=${mirror:-http://deb.debian.org/debian}
	suite=$(base_field suite)
	variant=$(base_field variant)
	log "debootstrap --variant=$variant $suite from $mirror (shared base for all pools)"
	# debootstrap mounts proc in the new root; an interrupted run leaves it
	# mounted, and a removal must never walk into it.
	unmount_base() { while read -r _ m _; do case $m in "$BUILD/base-rootfs"/*) umount -l "$m" || true ;; esac; done < <(tac /proc/mounts); }
	trap unmount_base EXIT
	unmount_base
	rm -rf "$BUILD/base-rootfs"
	debootstrap --variant="$variant" "$suite" "$BUILD/base-rootfs" "$mirror" >"$BUILD/debootstrap.log" 2>&1 ||
		{ tail -n 30 "$BUILD/debootstrap.log" >&2; exit 1; }
	unmount_base
	tar -C "$BUILD/base-rootfs" -cf "$base_tar.tmp" . && mv "$base_tar.tmp" "$base_tar"
	rm -rf "$BUILD/base-rootfs"
	flock -u "$base_lock"
	log "base root filesystem ready ($(du -sh "$base_tar" | cut -f1))"
}

if [[ ${1:-} == --base-tar ]]; then
	ensure_base >&2
	echo "$base_tar"
	exit 0
fi

pools=("$@")
[[ ${#pools[@]} -gt 0 ]] || pools=("${ALL_POOLS[@]}")

need=()
for p in "${pools[@]}"; do
	[[ -f $RECIPES/$p && $p != base ]] || { echo "unknown pool $p" >&2; exit 2; }
	t=$(tag_of "$p")
	if docker image inspect "$t" >/dev/null 2>&1; then
		log "$p: $t present, skipping"
	else
		need+=("$p")
	fi
done
[[ ${#need[@]} -gt 0 ]] || { log "all images present"; exit 0; }

start=$(date +%s)
ensure_base
build_pool() { # pool: runs in a subshell, logs to $BUILD/<pool>.log
	p=$1
	t=$(tag_of "$p")
	dir=$BUILD/rootfs-$p
	cleanup() { umount "$dir/proc" 2>/dev/null || true; rm -rf "$dir"; }
	trap cleanup EXIT
	rm -rf "$dir" && mkdir -p "$dir"
	tar -C "$dir" -xf "$base_tar"
	cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
	printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d" && chmod +x "$dir/usr/sbin/policy-rc.d"
	mount -t proc proc "$dir/proc"
	chroot "$dir" apt-get update -q
	# shellcheck disable=SC2046
	chroot "$dir" apt-get install -y -q --no-install-recommends $(packages_of "$p")
	chroot "$dir" apt-get clean
	umount "$dir/proc"
	rm -rf "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir/usr/sbin/policy-rc.d"
	: >"$dir/etc/resolv.conf"
	tar -C "$dir" -c . | docker import \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV LANG=C.UTF-8' \
		--message "kece runtime $p from engine/code/recipes" - "$t" >/dev/null
}

pids=()
for p in "${need[@]}"; do
	log "$p: building $(tag_of "$p") [packages: $(packages_of "$p")] (log: $BUILD/$p.log)"
	(build_pool "$p" >"$BUILD/$p.log" 2>&1) &
	pids+=($!)
done
fail=0
for i in "${!need[@]}"; do
	if wait "${pids[$i]}"; then
		log "${need[$i]}: done $(tag_of "${need[$i]}")"
	else
		log "${need[$i]}: FAILED, last lines of $BUILD/${need[$i]}.log:"
		tail -n 20 "$BUILD/${need[$i]}.log" >&2
		fail=1
	fi
done
log "image build took $(($(date +%s) - start))s"
exit $fail
