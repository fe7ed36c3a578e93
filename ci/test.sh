#!/usr/bin/env bash
# The test command: installs what is missing, then builds and tests in five steps:
#   1. default (Release, CUDA backend and CUPTI observer when the toolkit is found): every test;
#      device tests skip with their reason on a machine without a GPU.
#   2. ASan+UBSan (CPU stub): every test except the long stress repetitions and the `watch`
#      label (which preloads leakbound's malloc into other processes).
#   3. TSan (CPU stub): the concurrency tests (sessions on threads, 8 threads x 500 steps with a
#      sampler, the threaded workload, the heap interposer's thread tests).
#   4. libFuzzer (clang): report parsing, rendering and diffing for a bounded time
#      (LEAKBOUND_FUZZ_SECONDS, default 45), after replaying the saved regressions.
#   5. consumer (ci/consumer.sh): the default build installed into a temporary prefix and
#      examples/consumer built against it (find_package, pkg-config, the .deb), then through
#      FetchContent.
# Prints each build's test count, ctest's summary and the skipped tests with their reasons; exits
# non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${LEAKBOUND_JOBS:-$(nproc)}
bash ci/install_deps.sh

summary=()
# skipped_tests BUILD_DIR CTEST_LOG: "; N skipped (count: reason; ...)", or nothing. ctest lists a
# skipped test as "(Skipped)"; the reason is the line after GoogleTest's "file:line: Skipped" in
# the test's output, which ctest keeps in Testing/Temporary/LastTest.log.
skipped_tests() {
  local count reasons
  count=$(grep -c '(Skipped)$' "$2" || true)
  ((count > 0)) || return 0
  reasons=$(awk '/: Skipped$/ { if ((getline r) <= 0 || r ~ /^\[  SKIPPED/) r = "no reason given";
                                 print substr(r, 1, 90) }' \
              "$1/Testing/Temporary/LastTest.log" 2>/dev/null |
            sort | uniq -c | sort -rn |
            awk '{ n = $1; $1 = ""; printf "%s%d: %s", (NR > 1 ? "; " : ""), n, substr($0, 2) }')
  echo "; $count skipped (${reasons:-no reason printed})"
}

run_build() {  # run_build NAME PRESET "TARGETS (empty: all)" CTEST_ARGS...
  local name=$1 preset=$2 targets=$3
  shift 3
  local start=$SECONDS
  echo "=== [$name] configure + build (preset $preset)"
  # Warnings are errors in CI builds (not for users: a newer compiler's new warning must not
  # break their build).
  cmake --preset "$preset" -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >"$root/build/$preset.configure.log" 2>&1 || {
    cat "$root/build/$preset.configure.log"; return 1; }
  grep -E "leakbound:" "$root/build/$preset.configure.log" || true
  if [[ -n $targets ]]; then
    # shellcheck disable=SC2086
    cmake --build --preset "$preset" -j "$jobs" --target $targets
  else
    cmake --build --preset "$preset" -j "$jobs"
  fi
  echo "=== [$name] ctest $*"
  local log="$root/build/$preset.ctest.log"
  set +e
  ctest --preset "$preset" -j "$jobs" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  local line
  line=$(grep -E "tests passed|tests failed" "$log" | tail -1)
  summary+=("[$name] $line$(skipped_tests "$root/build/$preset" "$log") ($((SECONDS - start)) s)")
  return "$rc"
}

# run_step NAME WHAT LOG SUMMARISE COMMAND...: runs COMMAND with its output in build/LOG; the
# summary line is what SUMMARISE (a function of the log's path) prints, and the time taken, or
# FAILED after showing the log's tail.
run_step() {
  local name=$1 what=$2 log=$root/build/$3 summarise=$4
  shift 4
  local start=$SECONDS
  echo "=== [$name] $what"
  if "$@" >"$log" 2>&1; then
    summary+=("[$name] $("$summarise" "$log")($((SECONDS - start)) s)")
  else
    tail -40 "$log"
    summary+=("[$name] FAILED ($((SECONDS - start)) s): $(tail -1 "$log"); see ${log#"$root"/}")
    return 1
  fi
}

mkdir -p build
status=0
run_build "default" default "" || status=1

# leakbound as a dependency, from the default build (nothing of leakbound is compiled again but
# for the FetchContent route, which must build it as a subproject).
# shellcheck disable=SC2317  # called through run_step
consumer_summary() { tail -1 "$1" | sed 's/^consumer: //; s/$/ /'; }
run_step consumer "install + find_package, pkg-config, .deb, FetchContent (examples/consumer)" \
  consumer.log consumer_summary bash ci/consumer.sh "$root/build/default" || status=1
grep -E '^\[|^note:' "$root/build/consumer.log" || true

# `watch` tests preload leakbound's own malloc into other processes; under ASan the sanitizer
# runtime must come first in every process, so they run in the default build only.
run_build "asan+ubsan" asan "" -E "TwentyRepeated" -LE watch || status=1
# TSan: only the binaries with concurrency tests are built; -R picks those tests.
run_build "tsan" tsan "runtime_tests reliability_tests workloads_tests heap_tests heap_core_tests" \
  -R "Thread|Concurren|threaded|Eight|Heap" || status=1

# shellcheck disable=SC2317  # called through run_step
fuzz_summary() { grep -E '^fuzz: (Done|regressions)' "$1" | tr '\n' ' '; }
run_step fuzz "report parsing, rendering, diffing" fuzz.log fuzz_summary \
  bash ci/fuzz.sh "${LEAKBOUND_FUZZ_SECONDS:-45}" || status=1

echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
exit $status
