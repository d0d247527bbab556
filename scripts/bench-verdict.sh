#!/usr/bin/env bash
# kece-bench verdict (docs/verdict-time.md) with the host tools its native
# baseline runs: it installs the Debian packages of the missing ones (gcc,
# g++, default-jdk-headless, python3, nodejs, node-typescript) with apt-get,
# waiting for the dpkg lock at most KECE_BENCH_APT_WAIT seconds (default 600),
# builds kece-bench, kece-control, kece-node and kece-sandbox-init from this
# tree into a temporary directory (KECE_BENCH_BIN_DIR: use the binaries
# there instead) and runs the benchmark with the arguments given.
#
# It needs what the benchmark needs: the private MariaDB
# (scripts/mariadb.sh start control), Docker (scripts/docker.sh start) and the
# runtime images (deploy/images/build-local.sh).
#
#   scripts/bench-verdict.sh [-n 20] [-languages c17,cpp17,java17,python3,javascript,arkts] [-kinds …]
set -euo pipefail
# A relative KECE_BENCH_BIN_DIR is relative to where the script was started.
case "${KECE_BENCH_BIN_DIR:-}" in '' | /*) ;; *) KECE_BENCH_BIN_DIR=$PWD/$KECE_BENCH_BIN_DIR ;; esac
cd "$(dirname "$0")/.."

have() { command -v "$1" >/dev/null 2>&1; }
need=()
have gcc || need+=(gcc)
have g++ || need+=(g++)
{ have javac && have java; } || need+=(default-jdk-headless)
have python3 || need+=(python3)
have node || need+=(nodejs)
have tsc || need+=(node-typescript)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench-verdict.sh: missing packages ${need[*]}: run as root, or apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  wait=${KECE_BENCH_APT_WAIT:-600}
  echo "bench-verdict.sh: installing ${need[*]} (waiting at most ${wait}s for the dpkg lock)" >&2
  apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$wait" install -y -qq --no-install-recommends "${need[@]}"
  }
  # A machine whose package lists were never fetched knows no candidate:
  # fetch them once and try again.
  if ! apt_install; then
    apt-get -o DPkg::Lock::Timeout="$wait" update -qq
    apt_install
  fi
fi

if [ -n "${KECE_BENCH_BIN_DIR:-}" ]; then
  bin=$KECE_BENCH_BIN_DIR
else
  bin=$(mktemp -d)
  trap 'rm -rf "$bin"' EXIT
  go build -o "$bin/" ./cmd/kece-bench ./cmd/kece-control ./cmd/kece-node
  # The supervisor runs inside every runtime image: static.
  CGO_ENABLED=0 go build -o "$bin/" ./cmd/kece-sandbox-init
fi
"$bin/kece-bench" verdict -bin "$bin" "$@"
