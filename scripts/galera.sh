#!/usr/bin/env bash
# A 3-node MariaDB Galera cluster on loopback, for the HA run of
# `kece-bench chaos -galera` (docs/operations.md, "Database failover").
#
#   scripts/galera.sh start       install galera-4/rsync if absent, bootstrap node 1, join 2 and 3,
#                                 wait for wsrep_cluster_size=3 (idempotent: only starts what is down)
#   scripts/galera.sh stop        stop every node this script started (by PID file), last bootstrapper last
#   scripts/galera.sh status      per node: pid, wsrep_cluster_size, wsrep_local_state_comment, wsrep_ready
#   scripts/galera.sh kill N      SIGKILL node N (a crash: no clean leave from the group)
#   scripts/galera.sh restart N   start node N again; it rejoins the running cluster (IST, or rsync SST)
#   scripts/galera.sh dsn N       print a root DSN for Go for node N
#   scripts/galera.sh clean       stop, then remove the data directories
#
# Node i (1..3) listens on 127.0.0.1 with client port ${BASE}7i, group
# communication ${BASE}8i, IST ${BASE}9i and rsync SST ${BASE+1}0i, BASE=347 by
# default (34771/34781/34791/34801 for node 1), away from the shared servers'
# 33061/33062 and the 3307x range other tools pick. Data lives under $KECE_GALERA_DIR (default /var/tmp/kece-galera),
# owned by the `mysql` user the servers run as (rsync SST as root is refused by
# the SST script's checks on some setups; as mysql it works).
set -euo pipefail

cmd=${1:-status}
arg=${2:-}
base=${KECE_GALERA_DIR:-/var/tmp/kece-galera}
pre=${KECE_GALERA_PORT_PREFIX:-347}
nodes=(1 2 3)

port() { echo "${pre}7$1"; }
gport() { echo "${pre}8$1"; }
iport() { echo "${pre}9$1"; }
sport() { echo "$((pre + 1))0$1"; }
dir() { echo "$base/node$1"; }
sock() { echo "$(dir "$1")/mysqld.sock"; }
pidfile() { echo "$(dir "$1")/mysqld.pid"; }

need_node() {
  case "${1:-}" in 1|2|3) ;; *) echo "galera.sh: want a node number 1, 2 or 3, got '${1:-}'" >&2; exit 2 ;; esac
}

install() {
  local missing=()
  [ -f /usr/lib/galera/libgalera_smm.so ] || missing+=(galera-4)
  command -v rsync >/dev/null 2>&1 || missing+=(rsync)
  command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server mariadb-client)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "galera.sh: installing ${missing[*]} from Debian packages" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  id mysql >/dev/null 2>&1 || { echo "galera.sh: no 'mysql' user (mariadb-server creates it)" >&2; exit 1; }
}

alive() { [ -S "$(sock "$1")" ] && mariadb-admin --no-defaults --socket="$(sock "$1")" -uroot ping >/dev/null 2>&1; }

q() { mariadb --no-defaults --socket="$(sock "$1")" -uroot -N -B -e "$2" 2>/dev/null; }

wsrep() { q "$1" "SHOW GLOBAL STATUS LIKE '$2'" | awk '{print $2}'; }

any_alive() { local n; for n in "${nodes[@]}"; do alive "$n" && { echo "$n"; return 0; }; done; return 1; }

launch() { # launch N [--wsrep-new-cluster]
  local i=$1; shift
  local d; d=$(dir "$i")
  mkdir -p "$d"
  chown mysql:mysql "$base" "$d"
  if [ ! -d "$d/data/mysql" ]; then
    # Joiners get their data by state transfer; only node 1 needs an initial
    # system database, but an empty one on a joiner is replaced by SST anyway.
    mariadb-install-db --no-defaults --datadir="$d/data" --user=mysql \
      --auth-root-authentication-method=normal --skip-test-db >"$d/install.log" 2>&1 \
      || { cat "$d/install.log" >&2; exit 1; }
  fi
  rm -f "$(sock "$i")" "$(pidfile "$i")"
  local others="" j
  for j in "${nodes[@]}"; do others+="${others:+,}127.0.0.1:$(gport "$j")"; done
  # setsid: the server outlives this script and takes no signal from its shell.
  setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$d/data" \
    --bind-address=127.0.0.1 --port="$(port "$i")" --socket="$(sock "$i")" --pid-file="$(pidfile "$i")" \
    --log-error="$d/mysqld.log" --skip-name-resolve \
    --innodb-flush-log-at-trx-commit=1 --innodb-buffer-pool-size=128M --innodb-log-file-size=64M \
    --max-connections=500 --innodb-lock-wait-timeout=10 \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_bin \
    --default-time-zone=+00:00 --transaction-isolation=READ-COMMITTED \
    --binlog-format=ROW --default-storage-engine=InnoDB --innodb-autoinc-lock-mode=2 \
    --wsrep-on=ON --wsrep-provider=/usr/lib/galera/libgalera_smm.so \
    --wsrep-cluster-name=kece-galera --wsrep-cluster-address="gcomm://$others" \
    --wsrep-node-name="node$i" --wsrep-node-address=127.0.0.1 \
    --wsrep-node-incoming-address="127.0.0.1:$(port "$i")" \
    --wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:$(gport "$i");ist.recv_addr=127.0.0.1:$(iport "$i");gcache.size=128M" \
    --wsrep-sst-method=rsync --wsrep-sst-receive-address="127.0.0.1:$(sport "$i")" \
    "$@" >/dev/null 2>&1 &
}

wait_synced() { # wait_synced N seconds
  local i=$1 limit=$2
  for _ in $(seq 1 $((limit * 2))); do
    if alive "$i" && [ "$(wsrep "$i" wsrep_local_state_comment)" = "Synced" ]; then return 0; fi
    sleep 0.5
  done
  echo "galera.sh: node $i not synced within ${limit}s; log follows" >&2
  tail -40 "$(dir "$i")/mysqld.log" >&2 || true
  exit 1
}

start_node() { # start_node N: join a running cluster, or bootstrap when none runs
  local i=$1
  if alive "$i"; then return 0; fi
  if any_alive >/dev/null; then
    echo "galera.sh: node $i joining" >&2
    launch "$i"
  else
    echo "galera.sh: node $i bootstrapping a new cluster" >&2
    # A cluster stopped cleanly marks its last node safe to bootstrap; after
    # a crash of all nodes the operator picks the most advanced one. Here the
    # node asked for is forced, which is right for this throwaway test cluster.
    local g; g="$(dir "$i")/data/grastate.dat"
    [ -f "$g" ] && sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$g"
    launch "$i" --wsrep-new-cluster
  fi
  wait_synced "$i" 180
  # Root over TCP without a password, loopback only, for the bench (DCL
  # replicates to the whole cluster).
  q "$i" "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;" >/dev/null || true
}

start() {
  install
  mkdir -p "$base"
  exec 9>"$base.lock"
  flock 9
  local i
  for i in "${nodes[@]}"; do start_node "$i" 9>&-; done
  local first; first=$(any_alive)
  for _ in $(seq 1 120); do
    [ "$(wsrep "$first" wsrep_cluster_size)" = "${#nodes[@]}" ] && { status; return 0; }
    sleep 0.5
  done
  echo "galera.sh: wsrep_cluster_size never reached ${#nodes[@]}" >&2
  status
  exit 1
}

stop_node() {
  local i=$1 pf; pf=$(pidfile "$i")
  [ -f "$pf" ] || return 0
  local pid; pid=$(cat "$pf")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  rm -f "$(sock "$i")"
}

stop() {
  # Last one down is node 1, so it is safe_to_bootstrap for the next start.
  local i
  for i in 3 2 1; do stop_node "$i"; done
}

status() {
  local i
  for i in "${nodes[@]}"; do
    if alive "$i"; then
      echo "node=$i port=$(port "$i") pid=$(cat "$(pidfile "$i")" 2>/dev/null) cluster_size=$(wsrep "$i" wsrep_cluster_size) state=$(wsrep "$i" wsrep_local_state_comment) ready=$(wsrep "$i" wsrep_ready)"
    else
      echo "node=$i port=$(port "$i") down"
    fi
  done
}

kill_node() {
  local pf; pf=$(pidfile "$1")
  [ -f "$pf" ] || { echo "galera.sh: node $1 is not running" >&2; exit 1; }
  kill -9 "$(cat "$pf")" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$(cat "$pf")" 2>/dev/null || break; sleep 0.1; done
  rm -f "$pf" "$(sock "$1")"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  kill) need_node "$arg"; kill_node "$arg" ;;
  restart) need_node "$arg"; install; start_node "$arg" ;;
  dsn) need_node "$arg"; echo "root@tcp(127.0.0.1:$(port "$arg"))/?parseTime=true&loc=UTC" ;;
  clean) stop; rm -rf "$base" "$base.lock" ;;
  *) echo "galera.sh: unknown command '$cmd' (want start, stop, status, kill N, restart N, dsn N or clean)" >&2; exit 2 ;;
esac
