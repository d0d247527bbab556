#!/usr/bin/env bash
# Renders docs/diagrams/*.dot to SVG and PNG with Graphviz from Debian
# (installed here when missing). The rendered files are committed next to
# their sources; run this (or `make diagrams`) after editing a .dot file.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v dot >/dev/null 2>&1; then
	echo "== installing graphviz (Debian package)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null
fi
for src in docs/diagrams/*.dot; do
	base=${src%.dot}
	dot -Tsvg "$src" -o "$base.svg"
	dot -Tpng -Gdpi=110 "$src" -o "$base.png"
	echo "rendered $base.svg $base.png"
done
