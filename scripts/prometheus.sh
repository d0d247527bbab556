#!/usr/bin/env bash
# Prometheus and promtool for the observability tests (deploy/observability).
#
#   scripts/prometheus.sh install   unpack Debian's `prometheus` package under .run/prometheus (idempotent)
#   scripts/prometheus.sh env       install, then print `export KECE_PROMETHEUS=… KECE_PROMTOOL=…` for eval
#
# The package is unpacked (`apt-get download` + `dpkg -x`), not installed, so
# no system service is started; binaries already on the PATH are used as they
# are. The tests find them through KECE_PROMETHEUS / KECE_PROMTOOL, the PATH,
# or .run/prometheus.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${KECE_PROMETHEUS_DIR:-$repo/.run/prometheus}

find_bins() {
  prom=$(command -v prometheus || true)
  tool=$(command -v promtool || true)
  [ -n "$prom" ] || { [ -x "$dir/root/usr/bin/prometheus" ] && prom=$dir/root/usr/bin/prometheus; } || true
  [ -n "$tool" ] || { [ -x "$dir/root/usr/bin/promtool" ] && tool=$dir/root/usr/bin/promtool; } || true
}

install() {
  find_bins
  if [ -n "$prom" ] && [ -n "$tool" ]; then
    return 0
  fi
  echo "prometheus.sh: unpacking Debian's prometheus package into $dir" >&2
  mkdir -p "$dir"
  (cd "$dir" && rm -f prometheus_*.deb && apt-get download -q prometheus >/dev/null && dpkg -x prometheus_*.deb root)
  find_bins
  if [ -z "$prom" ] || [ -z "$tool" ]; then
    echo "prometheus.sh: the package did not provide prometheus and promtool" >&2
    exit 1
  fi
}

case "${1:-install}" in
  install) install; echo "prometheus=$prom promtool=$tool" ;;
  env) install; echo "export KECE_PROMETHEUS=$prom KECE_PROMTOOL=$tool" ;;
  *) echo "usage: scripts/prometheus.sh install|env" >&2; exit 2 ;;
esac
