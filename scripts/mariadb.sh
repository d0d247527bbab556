#!/usr/bin/env bash
# Private MariaDB instances for dev, tests and CI.
#
#   scripts/mariadb.sh start [control|judge]   install if absent, init, start, wait (idempotent)
#   scripts/mariadb.sh stop  [control|judge]   stop the instance this script started (by its PID file)
#   scripts/mariadb.sh dsn   [control|judge]   print a root DSN for Go (go-sql-driver/mysql)
#
# "control" (port 33061) holds the control plane's databases; "judge" (port 33062)
# stands in for the dedicated judge MySQL of the mysql pool. Data lives under
# $KECE_MARIADB_DIR (default: <repo>/.run/mariadb-<name>, ignored by git). Both bind
# 127.0.0.1 only and use durable settings (innodb_flush_log_at_trx_commit=1).
set -euo pipefail

cmd=${1:-start}
name=${2:-control}
case "$name" in
  control) port=${KECE_MARIADB_PORT:-33061} ;;
  judge) port=${KECE_MARIADB_JUDGE_PORT:-33062} ;;
  *) echo "mariadb.sh: unknown instance '$name' (want control or judge)" >&2; exit 2 ;;
esac

repo=$(cd "$(dirname "$0")/.." && pwd)
base=${KECE_MARIADB_DIR:-$repo/.run}/mariadb-$name
datadir=$base/data
sock=$base/mysqld.sock
pidfile=$base/mysqld.pid
log=$base/mysqld.log

dsn() { echo "root@tcp(127.0.0.1:$port)/?parseTime=true&loc=UTC&multiStatements=true"; }

alive() { [ -S "$sock" ] && mariadb-admin --no-defaults --socket="$sock" -uroot ping >/dev/null 2>&1; }

install() {
  if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
    echo "mariadb.sh: installing mariadb-server from Debian packages" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq mariadb-server mariadb-client >/dev/null
    # Debian's package may start its own service; we never use or stop it.
  fi
}

start() {
  install
  mkdir -p "$base"
  # Concurrent starts (parallel test runs, CI and a developer) serialize here;
  # the server must not inherit fd 9, or it would hold the lock for its life.
  exec 9>"$base.lock"
  flock 9
  if alive; then echo "mariadb.sh: $name already running on 127.0.0.1:$port" >&2; return 0; fi
  mkdir -p "$base"
  if [ ! -d "$datadir/mysql" ]; then
    echo "mariadb.sh: initialising $datadir" >&2
    mariadb-install-db --no-defaults --datadir="$datadir" --user=root \
      --auth-root-authentication-method=normal --skip-test-db >"$base/install.log" 2>&1 \
      || { cat "$base/install.log" >&2; exit 1; }
  fi
  # Stale PID/socket from a killed run.
  rm -f "$sock" "$pidfile"
  setsid /usr/sbin/mariadbd --no-defaults --user=root --datadir="$datadir" \
    --bind-address=127.0.0.1 --port="$port" --socket="$sock" --pid-file="$pidfile" \
    --log-error="$log" --skip-name-resolve \
    --innodb-flush-log-at-trx-commit=1 --sync-binlog=1 \
    --innodb-buffer-pool-size=512M --innodb-log-file-size=256M \
    --max-connections=1000 --innodb-lock-wait-timeout=10 \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_bin \
    --default-time-zone=+00:00 --transaction-isolation=READ-COMMITTED \
    >/dev/null 2>&1 9>&- &
  for _ in $(seq 1 120); do
    if alive; then
      # Root over TCP without a password, loopback only, for tests.
      mariadb --no-defaults --socket="$sock" -uroot -e \
        "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;" >/dev/null
      echo "mariadb.sh: $name ready on 127.0.0.1:$port (socket $sock)" >&2
      return 0
    fi
    sleep 0.5
  done
  echo "mariadb.sh: $name did not become ready; log follows" >&2
  tail -50 "$log" >&2 || true
  exit 1
}

stop() {
  if [ -f "$pidfile" ]; then
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  fi
  rm -f "$sock"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  dsn) dsn ;;
  *) echo "mariadb.sh: unknown command '$cmd' (want start, stop or dsn)" >&2; exit 2 ;;
esac
