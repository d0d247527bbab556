#!/usr/bin/env bash
# Headless Chromium for the console's browser tests (cmd/internal/browsertest).
#
#   scripts/chromium.sh install   install Debian's `chromium` package when missing (idempotent)
#   scripts/chromium.sh path      install, then print the binary's path
#
# Debian's package is used because no browser download (Playwright's, Puppeteer's)
# can reach the internet here; the tests find it through KECE_CHROMIUM or the PATH.
set -euo pipefail

find_bin() {
  bin=${KECE_CHROMIUM:-}
  [ -n "$bin" ] || bin=$(command -v chromium || command -v chromium-browser || true)
}

install() {
  find_bin
  if [ -n "$bin" ]; then
    return 0
  fi
  echo "chromium.sh: installing Debian's chromium package" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "chromium.sh: run as root (apt-get install chromium)" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  find_bin
  if [ -z "$bin" ]; then
    echo "chromium.sh: the package did not provide a chromium binary" >&2
    exit 1
  fi
}

case "${1:-install}" in
  install) install; echo "chromium=$bin" ;;
  path) install; echo "$bin" ;;
  *) echo "usage: $0 install|path" >&2; exit 2 ;;
esac
