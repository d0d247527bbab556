#!/usr/bin/env bash
# kece-bench scheduler on a private MariaDB, as River's run.sh runs River on
# a private PostgreSQL: a fresh server in a temporary data dir on
# 127.0.0.1:${KECE_BENCH_PORT:-33071}, durable (flush at commit, sync binlog),
# the same settings as scripts/mariadb.sh, removed afterwards. A private server
# keeps the figures free of other clients of a shared one (table-cache churn,
# CPU). Arguments go to `kece-bench scheduler`; KECE_BENCH_MYSQLD_ARGS adds
# server options for an A/B of a setting (e.g. --thread-handling=pool-of-threads);
# KECE_BENCH_BIN runs a prebuilt kece-bench instead of building this tree's.
#
# The server is measured in its steady state: before the bench, its redo log
# is written through once. A new server's redo log file is allocated but never
# written (fallocate: unwritten extents), and on ext4 the first write of each
# block makes the commit's fdatasync convert the extent and write its metadata
# too: one more device round trip per group commit until the log has wrapped,
# which a server that has run for a while never pays again. PostgreSQL zero-fills
# its WAL segments when it creates them, so River's fresh server does not pay
# it either. KECE_BENCH_FRESH_REDO=1 skips the warm-up (measures a new server).
#
#   scripts/bench-scheduler.sh [-nodes 8] [-slots 4] [-enqueuers 4] [-duration 8s]
set -euo pipefail
# A relative KECE_BENCH_BIN is relative to where the script was started.
case "${KECE_BENCH_BIN:-}" in '' | /*) ;; *) KECE_BENCH_BIN=$PWD/$KECE_BENCH_BIN ;; esac
cd "$(dirname "$0")/.."
port=${KECE_BENCH_PORT:-33071}
tmp=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
mariadb-install-db --no-defaults --datadir="$tmp/data" --user=root \
  --auth-root-authentication-method=normal --skip-test-db >"$tmp/install.log" 2>&1 \
  || { cat "$tmp/install.log" >&2; exit 1; }
/usr/sbin/mariadbd --no-defaults --user=root --datadir="$tmp/data" \
  --bind-address=127.0.0.1 --port="$port" --socket="$tmp/sock" --pid-file="$tmp/pid" \
  --log-error="$tmp/log" --skip-name-resolve \
  --innodb-flush-log-at-trx-commit=1 --sync-binlog=1 \
  --innodb-buffer-pool-size=512M --innodb-log-file-size=256M \
  --max-connections=1000 --innodb-lock-wait-timeout=10 \
  --character-set-server=utf8mb4 --collation-server=utf8mb4_bin \
  --default-time-zone=+00:00 --transaction-isolation=READ-COMMITTED ${KECE_BENCH_MYSQLD_ARGS:-} >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 120); do
  if mariadb-admin --no-defaults --socket="$tmp/sock" -uroot ping >/dev/null 2>&1; then break; fi
  sleep 0.5
done
if ! mariadb-admin --no-defaults --socket="$tmp/sock" -uroot ping >/dev/null 2>&1; then
  echo "bench-scheduler: the private MariaDB did not start; its log:" >&2
  tail -30 "$tmp/log" >&2 2>/dev/null || true
  exit 1
fi
mariadb --no-defaults --socket="$tmp/sock" -uroot -e \
  "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
if [ -n "${KECE_BENCH_BIN:-}" ]; then
  cp "$KECE_BENCH_BIN" "$tmp/kece-bench"
else
  go build -o "$tmp/kece-bench" ./cmd/kece-bench
fi
# Unwritten extents of the redo log (filefrag, e2fsprogs; -1 if unknown).
unwritten() {
  local n
  n=$(filefrag -v "$tmp/data/ib_logfile0" 2>/dev/null | grep -c unwritten) || true
  if command -v filefrag >/dev/null 2>&1; then echo "${n:-0}"; else echo -1; fi
}
if [ "${KECE_BENCH_FRESH_REDO:-0}" = 1 ]; then
  echo "redo_warmup=off redo_unwritten_extents=$(unwritten)"
else
  before=$(unwritten)
  # 1 MiB rows, a log file's size and 16 MiB more, in a database dropped
  # after; its pages are written back during the warm-up, not the bench.
  mb=$(( $(mariadb --no-defaults --socket="$tmp/sock" -uroot -N -e "SELECT @@innodb_log_file_size") / 1048576 + 16 ))
  mariadb --no-defaults --socket="$tmp/sock" -uroot -e \
    "CREATE DATABASE kece_redo_warmup; USE kece_redo_warmup;
     CREATE TABLE w (b LONGBLOB NOT NULL) ENGINE=InnoDB;
     INSERT INTO w SELECT REPEAT('x', 1048576) FROM seq_1_to_$mb;
     DROP DATABASE kece_redo_warmup;"
  echo "redo_warmup_mb=$mb redo_unwritten_extents_before=$before redo_unwritten_extents=$(unwritten)"
fi
"$tmp/kece-bench" scheduler -dsn "root@tcp(127.0.0.1:$port)/" -server-pid "$pid" "$@"
