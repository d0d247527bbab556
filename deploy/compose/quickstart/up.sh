#!/usr/bin/env bash
# The KECE quick start on this machine (see compose.yaml): `docker-compose up
# -d` (its one-shots `setup` and `enable` create the tokens, join, verify and
# enable a cpp, a python and a mysql node), then waits for `enable` to finish
# and prints the URL and the business token for the curl session of
# docs/business.md. Run it as root from anywhere; run it again at any time
# (it reuses what exists). Needs docker-compose (1.29 or the v2 plugin as
# `docker compose`) and the images: `make images` and
# scripts/mariadb-image.sh (run here when KECE_MARIADB_IMAGE is unset).
#
#   deploy/compose/quickstart/up.sh          up, wait, print KECE and TOKEN
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

log "docker-compose up -d"
"${dc[@]}" up -d >&2
# `enable` verifies and enables the nodes; wait (at most 10 minutes) for it.
cid=$("${dc[@]}" ps -a -q enable)
if ! code=$(timeout 600 docker wait "$cid") || [[ $code != 0 ]]; then
	"${dc[@]}" logs --no-color setup enable >&2 || true
	log "the enable one-shot did not finish (exit ${code:-timeout}); see the logs above"
	exit 1
fi
log "ready in $(($(date +%s) - start))s: console http://127.0.0.1:8090/console/ (admin token in $KECE_QS_DIR/admin.token)"
echo "KECE=http://127.0.0.1:8090"
echo "TOKEN=$(cat "$KECE_QS_DIR/business.token")"
