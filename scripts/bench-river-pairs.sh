#!/usr/bin/env bash
# KECE against River in alternating pairs, in one regime, with the totals:
# the comparison docs/scheduling.md reports, as one command. Each pair runs
# River's benchmark first (RIVER_RUN: its run.sh, which starts a private
# PostgreSQL and runs River with the same workload shape as
# `kece-bench scheduler`), then scripts/bench-scheduler.sh (a private MariaDB),
# one after the other so neither shares the machine with the other.
#
#   RIVER_RUN=/path/to/river/run.sh scripts/bench-river-pairs.sh [-regime disk|tmpfs] [-pairs 4] [-duration 20s]
#
# -regime disk keeps both data directories where mktemp puts them (TMPDIR or
# /tmp: commits wait for the device's fsync, the commit-bound regime);
# -regime tmpfs puts both on /dev/shm (fsync is free: what a machine with
# fast fsync sees, the CPU-bound regime). KECE_BENCH_BIN runs a prebuilt
# kece-bench (default: this tree's, built once); KECE_RUN replaces
# scripts/bench-scheduler.sh (the script's own test uses it).
#
# Prints, per pair, both systems' figures and the ratio, then
#   pairs=N regime=R river_jobs_per_s_mean=… kece_lifecycles_per_s_mean=… ratio_together=…
# where ratio_together is KECE's lifecycles over River's jobs summed over
# the pairs (the machine's speed moves within an hour; one pair proves little).
set -euo pipefail
# Paths given relative to where the script was started from stay valid
# after the cd below.
abs() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
[ -z "${RIVER_RUN:-}" ] || RIVER_RUN=$(abs "$RIVER_RUN")
[ -z "${KECE_RUN:-}" ] || KECE_RUN=$(abs "$KECE_RUN")
[ -z "${KECE_BENCH_BIN:-}" ] || export KECE_BENCH_BIN=$(abs "$KECE_BENCH_BIN")
cd "$(dirname "$0")/.."
regime=disk pairs=4 duration=20s
while [ $# -gt 0 ]; do
  case "$1" in
    -regime) regime=${2:?-regime needs disk or tmpfs}; shift 2 ;;
    -pairs) pairs=${2:?-pairs needs a number}; shift 2 ;;
    -duration) duration=${2:?-duration needs a Go duration, e.g. 20s}; shift 2 ;;
    *) echo "bench-river-pairs: unknown argument $1 (want -regime disk|tmpfs, -pairs N, -duration D)" >&2; exit 2 ;;
  esac
done
case "$regime" in
  disk) ;;
  tmpfs)
    [ -d /dev/shm ] && [ -w /dev/shm ] || { echo "bench-river-pairs: -regime tmpfs needs a writable /dev/shm" >&2; exit 2; }
    export TMPDIR=/dev/shm ;;
  *) echo "bench-river-pairs: -regime must be disk or tmpfs, not $regime" >&2; exit 2 ;;
esac
case "$pairs" in
  '' | *[!0-9]* | 0) echo "bench-river-pairs: -pairs must be a whole number of at least 1, not $pairs" >&2; exit 2 ;;
esac
if [ -z "${RIVER_RUN:-}" ]; then
  echo "bench-river-pairs: set RIVER_RUN to River's benchmark script (run.sh: a private PostgreSQL, River with -workers 32 -enqueuers 4 -conns 13); this repository does not carry River" >&2
  exit 2
fi
[ -x "$RIVER_RUN" ] || { echo "bench-river-pairs: RIVER_RUN=$RIVER_RUN is not an executable file" >&2; exit 2; }
kece_run=${KECE_RUN:-scripts/bench-scheduler.sh}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "${KECE_BENCH_BIN:-}" ] && [ -z "${KECE_RUN:-}" ]; then
  go build -o "$work/kece-bench" ./cmd/kece-bench
  export KECE_BENCH_BIN=$work/kece-bench
fi

# lookup KEY FILE: the value of the last KEY=value field in FILE, or nothing.
lookup() {
  grep -oE "(^|[[:space:]])$1=[0-9.]+" "$2" | tail -1 | cut -d= -f2 || true
}

# figure KEY FILE: as lookup, but a run that printed no KEY is an error.
figure() {
  local v
  v=$(lookup "$1" "$2")
  if [ -z "$v" ]; then
    echo "bench-river-pairs: no $1= in the output of that run:" >&2
    cat "$2" >&2
    exit 1
  fi
  echo "$v"
}

river_sum=0 kece_sum=0
for i in $(seq 1 "$pairs"); do
  "$RIVER_RUN" -duration "$duration" >"$work/river.out" 2>&1 || { cat "$work/river.out" >&2; echo "bench-river-pairs: River's run failed (pair $i)" >&2; exit 1; }
  "$kece_run" -duration "$duration" >"$work/kece.out" 2>&1 || { cat "$work/kece.out" >&2; echo "bench-river-pairs: KECE's run failed (pair $i)" >&2; exit 1; }
  r=$(figure river_jobs_per_s "$work/river.out")
  rc=$(figure river_commit_rate_per_s "$work/river.out")
  k=$(figure lifecycles_per_s "$work/kece.out")
  kc=$(figure commit_rate_per_s "$work/kece.out")
  ks=$(lookup server_cpu_ms_per_lifecycle "$work/kece.out")
  river_sum=$(awk -v a="$river_sum" -v b="$r" 'BEGIN { print a + b }')
  kece_sum=$(awk -v a="$kece_sum" -v b="$k" 'BEGIN { print a + b }')
  awk -v i="$i" -v r="$r" -v rc="$rc" -v k="$k" -v kc="$kc" -v ks="$ks" -v g="$regime" 'BEGIN {
    printf "pair=%d regime=%s river_jobs_per_s=%s river_commit_rate_per_s=%s lifecycles_per_s=%s commit_rate_per_s=%s", i, g, r, rc, k, kc
    if (ks != "") printf " server_cpu_ms_per_lifecycle=%s", ks
    printf " ratio=%.2f\n", (r > 0 ? k / r : 0)
  }'
done
awk -v n="$pairs" -v g="$regime" -v r="$river_sum" -v k="$kece_sum" 'BEGIN {
  printf "pairs=%d regime=%s river_jobs_per_s_mean=%.0f kece_lifecycles_per_s_mean=%.0f ratio_together=%.2f\n", n, g, r / n, k / n, (r > 0 ? k / r : 0)
}'
