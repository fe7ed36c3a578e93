#!/usr/bin/env bash
# The long variant of the attribution property suite (docs/watch.md, "Where: measured"): the
# seeded where_family programs (a library call site reached from 2-6 lines, one leaking) at SEEDS
# seeds (default 200), leaking and clean, under `leakbound watch`. Writes
# reports/where/where_property.{md,json}. ctest runs a CI variant with 8 seeds (watch.where_property).
#   bash ci/where-property.sh [SEEDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-200}
[[ "$seeds" =~ ^[0-9]+$ && "$seeds" -ge 1 ]] || { echo "where-property.sh: SEEDS must be a positive number, got '$seeds'" >&2; exit 2; }
bash ci/install_deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target leakbound watch_where_family leakbound_preload
out=reports/where
mkdir -p "$out"
python3 watch/tests/where_property.py --leakbound build/default/harness/leakbound \
  --family build/default/watch/tests/watch_where_family --seeds "$seeds" --out "$out"
