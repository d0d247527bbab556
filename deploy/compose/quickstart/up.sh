#!/usr/bin/env bash
# The KECE quick start on this machine (see compose.yaml): brings the project
# up with `docker-compose up -d`, creates the admin token, joins a cpp, a
# python and a mysql node (join codes handed over through
# KECE_JOIN_CODE_FILE, so each node joins on its first start), verifies and
# enables them, and prints the URL and a business token for the curl
# session of docs/business.md. Run it as root from anywhere; run it again
# at any time (it reuses what exists). Needs docker-compose (1.29 or the v2
# plugin as `docker compose`) and the images: `make images` and
# scripts/mariadb-image.sh (run here when KECE_MARIADB_IMAGE is unset).
#
#   deploy/compose/quickstart/up.sh          up, join, print KECE and TOKEN
#   deploy/compose/quickstart/up.sh down     stop and remove it, with its data
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export KECE_QS_DIR=${KECE_QS_DIR:-/var/lib/kece/quickstart}
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-kece-quickstart}
if command -v docker-compose >/dev/null 2>&1; then dc=(docker-compose); else dc=(docker compose); fi
dc+=(-f "$here/compose.yaml")
log() { echo "[quickstart $(date +%H:%M:%S)] $*" >&2; }

if [[ ${1:-} == down ]]; then
	KECE_MARIADB_IMAGE=${KECE_MARIADB_IMAGE:-unused} "${dc[@]}" down -v --remove-orphans
	rm -rf "$KECE_QS_DIR"
	exit 0
fi
export KECE_MARIADB_IMAGE=${KECE_MARIADB_IMAGE:-$("$here/../../../scripts/mariadb-image.sh")}
start=$(date +%s)

install -d -m 0755 "$KECE_QS_DIR"
install -d -m 0700 "$KECE_QS_DIR/cpp" "$KECE_QS_DIR/python"
install -d -m 0700 -o 65532 -g 65532 "$KECE_QS_DIR/mysql"
if [[ ! -f $KECE_QS_DIR/mysql/judge-dsn ]]; then
	install -m 0400 -o 65532 -g 65532 /dev/null "$KECE_QS_DIR/mysql/judge-dsn"
	echo 'root@tcp(127.0.0.1:33072)/' >"$KECE_QS_DIR/mysql/judge-dsn"
fi

log "docker-compose up -d db judge-db control"
"${dc[@]}" up -d db judge-db control >&2
until "${dc[@]}" exec -T control kece-control healthcheck --quiet 2>/dev/null; do
	sleep 1
done
ctl() { "${dc[@]}" exec -T -e KECE_ADMIN_URL=http://127.0.0.1:8090 -e KECE_ADMIN_TOKEN="$admin" control kecectl "$@"; }
token() { # kind name -> a new token on stdout
	"${dc[@]}" exec -T control kece-control token create --kind "$1" --name "$2-$(date +%s)" | tr -d '\r'
}
if [[ ! -s $KECE_QS_DIR/admin.token ]]; then
	(umask 077 && token admin quickstart-admin >"$KECE_QS_DIR/admin.token")
fi
admin=$(cat "$KECE_QS_DIR/admin.token")
ctl host-group list | grep -q '\bquickstart\b' || ctl host-group create --name quickstart --slots 8 >&2

pools=(cpp python mysql)
for pool in "${pools[@]}"; do
	d=$KECE_QS_DIR/$pool
	[[ -f $d/credential ]] && continue
	log "node qs-$pool: join code for its first start"
	if ctl node list | grep -q "\bqs-$pool\b"; then
		out=$(ctl node join-code "qs-$pool")
	else
		out=$(ctl node create --name "qs-$pool" --pool "$pool" --group quickstart --slots 2)
	fi
	code=$(grep -o 'kjc_[A-Za-z0-9_-]*' <<<"$out" | head -n1)
	owner=0
	[[ $pool == mysql ]] && owner=65532
	install -m 0600 -o "$owner" -g "$owner" /dev/null "$d/join-code"
	echo "$code" >"$d/join-code"
done

log "docker-compose up -d"
"${dc[@]}" up -d >&2
for pool in "${pools[@]}"; do
	if ! ctl node show "qs-$pool" | grep -q 'ENABLED'; then
		log "node qs-$pool: verify and enable"
		ctl node verify "qs-$pool" --reason "quick start" --wait >&2
		ctl node enable "qs-$pool" --reason "quick start" --wait >&2
	fi
	rm -f "$KECE_QS_DIR/$pool/join-code"
done
if [[ ! -s $KECE_QS_DIR/business.token ]]; then
	(umask 077 && token business quickstart-oj >"$KECE_QS_DIR/business.token")
fi
log "ready in $(($(date +%s) - start))s: console http://127.0.0.1:8090/console/ (admin token in $KECE_QS_DIR/admin.token)"
echo "KECE=http://127.0.0.1:8090"
echo "TOKEN=$(cat "$KECE_QS_DIR/business.token")"
