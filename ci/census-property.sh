#!/usr/bin/env bash
# The long variant of the census property suite (docs/verdicts.md, "Measured"): every program
# class at SEEDS seeds (default 200), in-process (the Runner, 3/5/8 blocks of 32 steps) and through
# `leakbound watch` (600-step programs, 3/5/8 blocks), plus the power curve. Writes
# reports/census/{inprocess.md, census_property.md, census_property.json, power.csv, power.svg}.
# The published rates come from this script; ctest runs a CI variant with a few seeds.
#   bash ci/census-property.sh [SEEDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-200}
[[ "$seeds" =~ ^[0-9]+$ && "$seeds" -ge 1 ]] || { echo "census-property.sh: SEEDS must be a positive number, got '$seeds'" >&2; exit 2; }
bash ci/install_deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target leakbound census_property_tests watch_census_family leakbound_preload
out=reports/census
mkdir -p "$out"
build=build/default
echo "census-property: in-process, $seeds seeds per class and schedule" >&2
LEAKBOUND_PROPERTY_SEEDS=$seeds LEAKBOUND_PROPERTY_OUT=$out/inprocess.md.tmp \
  "$build/harness/tests/census_property_tests" --gtest_filter='CensusProperty.EveryClass*'
mv "$out/inprocess.md.tmp" "$out/inprocess.md"
LEAKBOUND_PROPERTY_SEEDS=$seeds LEAKBOUND_POWER_OUT=$out/power.csv.tmp \
  "$build/harness/tests/census_property_tests" --gtest_filter='CensusProperty.PowerCurve'
mv "$out/power.csv.tmp" "$out/power.csv"
python3 watch/tests/census_power_svg.py "$out/power.csv" "$out/power.svg"
echo "census-property: through leakbound watch, $seeds seeds per class and schedule" >&2
python3 watch/tests/census_property.py --leakbound "$build/harness/leakbound" \
  --family "$build/watch/tests/watch_census_family" \
  --python-family watch/tests/programs/py_census_family.py --seeds "$seeds" --out "$out"
echo "census-property: tables in $out/" >&2
