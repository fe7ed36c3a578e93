#!/usr/bin/env bash
# The main job: build (installing what is missing) and run the stress suite on the CPU stub with
# defaults. Writes reports/latest/{report.json,report.md,report.html} (or $1) and prints the
# summary and detection tables. Exit code: leakbound's (0 all expectations met, 1 not, 2 error).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/latest}
bash ci/install_deps.sh
cmake --preset default >build.configure.log 2>&1 || { cat build.configure.log; exit 2; }
rm -f build.configure.log
cmake --build --preset default -j "$(nproc)" --target leakbound
start=$(date +%s.%N)
set +e
./build/default/harness/leakbound run --all --out "$out"
rc=$?
set -e
echo "stress suite: $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s wall (build excluded), exit $rc"
exit $rc
