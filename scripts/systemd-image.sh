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
. "$(dirname "$self")/chroot-image.sh"
cd "$(dirname "$0")/.."
log() { echo "[systemd-image $(date +%H:%M:%S)] $*" >&2; }
chroot_image_tag systemd "$self"
chroot_install systemd systemd systemd-sysv dbus
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
