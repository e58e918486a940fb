#!/usr/bin/env bash
# Renders the documentation's figures from their sources in docs/figures/ (Graphviz `dot`, Debian package
# graphviz): docs/figures/journey.dot -> docs/figures/journey.svg, the picture in docs/ARCHITECTURE.md.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v dot >/dev/null || { echo "make_figures: needs Graphviz's dot (apt-get install graphviz)" >&2; exit 1; }
for src in docs/figures/*.dot; do
  dot -Tsvg "$src" -o "${src%.dot}.svg"
  echo "make_figures: wrote ${src%.dot}.svg"
done
