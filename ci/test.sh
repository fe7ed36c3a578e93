#!/usr/bin/env bash
# The test command: installs what is missing, then builds and tests three configurations:
#   1. default (Release, CUDA backend and CUPTI observer when the toolkit is found): every test;
#      device tests skip with their reason on a machine without a GPU.
#   2. ASan+UBSan (CPU stub): every test except the long stress repetitions.
#   3. TSan (CPU stub): the concurrency tests.
# Prints each build's test count and ctest's summary; exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${LEAKBOUND_JOBS:-$(nproc)}
bash ci/install_deps.sh

summary=()
run_build() {  # run_build NAME PRESET CTEST_ARGS...
  local name=$1 preset=$2
  shift 2
  local start=$SECONDS
  echo "=== [$name] configure + build (preset $preset)"
  cmake --preset "$preset" >"$root/build/$preset.configure.log" 2>&1 || {
    cat "$root/build/$preset.configure.log"; return 1; }
  grep -E "leakbound:" "$root/build/$preset.configure.log" || true
  cmake --build --preset "$preset" -j "$jobs"
  echo "=== [$name] ctest $*"
  local log="$root/build/$preset.ctest.log"
  set +e
  ctest --preset "$preset" -j "$jobs" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  local line
  line=$(grep -E "tests passed|tests failed" "$log" | tail -1)
  summary+=("[$name] $line ($((SECONDS - start)) s)")
  return "$rc"
}

mkdir -p build
status=0
run_build "default" default || status=1
run_build "asan+ubsan" asan -E "TwentyRepeated" || status=1
run_build "tsan" tsan -R "Thread|Concurren|threaded|Eight" || status=1

echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
exit $status
