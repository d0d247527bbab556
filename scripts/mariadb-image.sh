#!/usr/bin/env bash
# Builds kece/mariadb:<tag> for the Compose quick start (deploy/compose/quickstart)
# from Debian's own mariadb-server package, without a registry: the debootstrap
# base of the runtime images (deploy/images/build-local.sh --base-tar), the
# package installed in a chroot, `docker import`. Not for production.
#
# The image starts `kece-mariadb PORT`: it initialises /var/lib/mysql on first
# start (root without a password, reachable on loopback only, which is all
# host networking exposes), creates the database named by KECE_DB_NAME if set,
# and runs mariadbd on 127.0.0.1:PORT with the settings the tests use.
#
#   scripts/mariadb-image.sh         build if the tag is missing, print the image
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
. "$(dirname "$self")/chroot-image.sh"
cd "$(dirname "$0")/.."
log() { echo "[mariadb-image $(date +%H:%M:%S)] $*" >&2; }
# The tag is this script's hash (and its library's): a change builds a new image.
chroot_image_tag mariadb "$self"
chroot_install mariadb-server mariadb-server
rm -rf "$dir"/var/lib/mysql/*
cat >"$dir/usr/local/bin/kece-mariadb" <<'SH'
#!/bin/sh
# kece-mariadb PORT: the quick start's MariaDB on 127.0.0.1:PORT.
set -e
port=${1:?usage: kece-mariadb PORT}
mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld /var/lib/mysql
if [ ! -d /var/lib/mysql/mysql ]; then
	mariadb-install-db --user=mysql --datadir=/var/lib/mysql --auth-root-authentication-method=normal \
		--skip-test-db >/dev/null
fi
init=/run/mysqld/init.sql
: >"$init"
if [ -n "${KECE_DB_NAME:-}" ]; then
	echo "CREATE DATABASE IF NOT EXISTS \`$KECE_DB_NAME\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;" >"$init"
fi
exec mariadbd --user=mysql --datadir=/var/lib/mysql --bind-address=127.0.0.1 --port="$port" \
	--socket=/run/mysqld/mysqld-"$port".sock --init-file="$init" --skip-name-resolve \
	--transaction-isolation=READ-COMMITTED --innodb-lock-wait-timeout=10 --character-set-server=utf8mb4 \
	--collation-server=utf8mb4_bin --default-time-zone=+00:00 --max-connections=500
SH
chmod 0755 "$dir/usr/local/bin/kece-mariadb"
tar -C "$dir" -c . | docker import \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' --change 'ENV LANG=C.UTF-8' \
	--change 'ENTRYPOINT ["/usr/local/bin/kece-mariadb"]' --change 'VOLUME ["/var/lib/mysql"]' \
	--message "MariaDB from Debian's package for the KECE quick start" - "$tag" >/dev/null
log "$tag built in $(($(date +%s) - start))s ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
echo "$tag"
