# Sourced by the scripts that build a Debian image without a registry
# (scripts/mariadb-image.sh, scripts/systemd-image.sh): the debootstrap base of
# the runtime images (deploy/images/build-local.sh --base-tar), Debian
# packages installed in a chroot, then `docker import` by the caller.
#
#   chroot_image_tag NAME SCRIPT   prints kece/NAME:<hash of SCRIPT and this file>
#                                  (a change to either builds a new image) and
#                                  exits 0 when that image exists already
#   chroot_install LABEL PKG...    unpacks the base into $dir (set, with a cleanup
#                                  trap) and installs PKG... there
chroot_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")

chroot_image_tag() {
	tag=kece/$1:$(cat "$2" "$chroot_lib" | sha256sum | cut -c1-12)
	if docker image inspect "$tag" >/dev/null 2>&1; then
		echo "$tag"
		exit 0
	fi
}

chroot_install() {
	local label=$1
	shift
	base_tar=$(deploy/images/build-local.sh --base-tar)
	dir=$(mktemp -d)
	trap 'umount "$dir/proc" 2>/dev/null || true; rm -rf "$dir"' EXIT
	start=$(date +%s)
	log "$label from Debian into $dir"
	tar -C "$dir" -xf "$base_tar"
	cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
	printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d" && chmod +x "$dir/usr/sbin/policy-rc.d"
	mount -t proc proc "$dir/proc"
	DEBIAN_FRONTEND=noninteractive chroot "$dir" apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive chroot "$dir" apt-get install -y -q --no-install-recommends "$@" >/dev/null
	chroot "$dir" apt-get clean
	umount "$dir/proc"
	rm -rf "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir/usr/sbin/policy-rc.d"
	: >"$dir/etc/resolv.conf"
}
