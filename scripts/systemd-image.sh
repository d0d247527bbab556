#!/usr/bin/env bash
# Builds kece/systemd:<tag>: Debian 12 with systemd as PID 1, for the systemd
# end-to-end test (deploy/systemd_e2e_test.go), without a registry: the
# debootstrap base of the runtime images, Debian's systemd package installed
# in a chroot, `docker import`. Boot it with
#   docker run --cap-add SYS_ADMIN --security-opt seccomp=unconfined --tmpfs /run \
#     --tmpfs /run/lock -v /sys/fs/cgroup:/sys/fs/cgroup:ro --network host IMAGE /lib/systemd/systemd
# (--privileged does not work here: the capability bounding set lacks
# CAP_SYS_RESOURCE). Prints the image name.
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/.."
log() { echo "[systemd-image $(date +%H:%M:%S)] $*" >&2; }
tag=kece/systemd:$(sha256sum <"$self" | cut -c1-12)
if docker image inspect "$tag" >/dev/null 2>&1; then
	echo "$tag"
	exit 0
fi
base_tar=$(deploy/images/build-local.sh --base-tar)
dir=$(mktemp -d)
cleanup() { umount "$dir/proc" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
start=$(date +%s)
log "systemd from Debian into $dir"
tar -C "$dir" -xf "$base_tar"
cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d" && chmod +x "$dir/usr/sbin/policy-rc.d"
mount -t proc proc "$dir/proc"
export DEBIAN_FRONTEND=noninteractive
chroot "$dir" apt-get update -q >/dev/null
chroot "$dir" apt-get install -y -q --no-install-recommends systemd systemd-sysv dbus >/dev/null
chroot "$dir" apt-get clean
umount "$dir/proc"
rm -rf "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir/usr/sbin/policy-rc.d"
: >"$dir/etc/resolv.conf"
# Nothing a container has no use for: consoles, udev, time sync.
for u in getty@tty1.service console-getty.service systemd-udevd.service systemd-timesyncd.service; do
	ln -sf /dev/null "$dir/etc/systemd/system/$u"
done
tar -C "$dir" -c . | docker import \
	--change 'ENV container=docker' \
	--change 'CMD ["/lib/systemd/systemd"]' \
	--message "Debian 12 with systemd for the KECE systemd test" - "$tag" >/dev/null
log "$tag built in $(($(date +%s) - start))s"
echo "$tag"
