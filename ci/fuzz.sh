#!/usr/bin/env bash
# Fuzzes the report reader, writer, renderers and diff (reports/fuzz/report_fuzz.cc) for a bounded
# time: ci/fuzz.sh [SECONDS] (default 60). Builds a separate Clang build in build/fuzz with
# libFuzzer + ASan + UBSan, replays reports/fuzz/regressions/*, then fuzzes one process over a
# scratch copy of reports/fuzz/corpus and baselines/*/*.json (the repository is never written).
# Prints executions, executions per second and coverage. Exit code: 0 clean; 1 a crash, hang,
# leak or failed invariant (the input is kept under build/fuzz/artifacts/ and its path printed);
# 2 a usage, toolchain or build error.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seconds=${1:-60}
if [[ ! $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: ci/fuzz.sh [SECONDS]   (whole seconds of fuzzing, default 60)" >&2
  exit 2
fi
build=$root/build/fuzz
fuzzer=$build/reports/fuzz/report_fuzz
jobs=${LEAKBOUND_JOBS:-$(nproc)}

bash ci/install_deps.sh
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; install clang and its runtime (Debian: apt-get install clang" \
       "libclang-rt-14-dev)" >&2
  exit 2
fi
echo "fuzz: $(clang++ --version | head -1)"

mkdir -p "$build"
# RelWithDebInfo: optimised like CI's other builds, with line numbers in sanitizer stacks.
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLEAKBOUND_FUZZ=ON -DLEAKBOUND_CUDA=OFF -DLEAKBOUND_BUILD_BENCH=OFF \
    -DLEAKBOUND_BUILD_TESTS=OFF >"$build/configure.log" 2>&1; then
  cat "$build/configure.log"
  exit 2
fi
rm -f "$build/configure.log"
cmake --build "$build" -j "$jobs" --target report_fuzz || exit 2
if [[ ! -x $fuzzer ]]; then
  echo "fuzz: $fuzzer was not built (is LEAKBOUND_FUZZ wired into reports/CMakeLists.txt?)" >&2
  exit 2
fi

# A sanitizer finding must end the input with a report libFuzzer sees; leaks are checked per input.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

status=0
artifacts=$build/artifacts
mkdir -p "$artifacts"

# Saved crash inputs first: each must now run clean. One process per input, since a crash ends it.
shopt -s nullglob
regressions=(reports/fuzz/regressions/*)
failed_regressions=()
for input in "${regressions[@]}"; do
  if ! "$fuzzer" -runs=1 "$input" >"$build/regression.log" 2>&1; then
    failed_regressions+=("$input")
    echo "fuzz: regression input still fails: $input"
    grep -E "runtime error|ERROR: |invariant violated|terminate called|what\(\)" \
      "$build/regression.log" | head -5 | sed 's/^/    /'
  fi
done
echo "fuzz: regressions: ${#regressions[@]} replayed, ${#failed_regressions[@]} still failing"
((${#failed_regressions[@]} == 0)) || status=1

# Scratch corpus: the seeds plus every committed baseline. libFuzzer adds what it finds here.
work=$(mktemp -d "${TMPDIR:-/tmp}/leakbound-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
seeds=(reports/fuzz/corpus/* baselines/*/*.json)
for seed in "${seeds[@]}"; do
  # Flatten baselines/cpu/x.json to cpu__x.json: names may repeat across device classes.
  cp "$seed" "$work/corpus/$(echo "${seed#baselines/}" | tr / _)"
done
echo "fuzz: corpus of ${#seeds[@]} seed files; fuzzing for $seconds s (one process)"

log=$build/fuzz.log
set +e
# -timeout: one input running 10 s is a hang. -rss_limit_mb: past 2 GiB (or one malloc that
# large) is a memory blow-up. No -max_len: libFuzzer takes the largest seed (up to 1 MiB), so
# whole baselines stay valid seeds.
"$fuzzer" "$work/corpus" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -dict=reports/fuzz/report.dict -artifact_prefix="$artifacts/" -print_final_stats=1 \
  >"$log" 2>&1
rc=$?
set -e

# Executions: libFuzzer's "Done N runs in S second(s)" when the time ran out, and its final stats
# (-print_final_stats) in every case, a crash included. Coverage: the last status line.
done_line=$(grep -E "^Done [0-9]+ runs in [0-9]+ second" "$log" | tail -1 || true)
executed=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
per_second=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -1)
cov_line=$(grep -E "^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)[[:space:]]" "$log" | tail -1 || true)
if [[ -n $done_line ]]; then echo "fuzz: $done_line"; fi
echo "fuzz: executions: ${executed:-?} (${per_second:-?} exec/s)"
if [[ -n $cov_line ]]; then
  echo "fuzz: coverage: $(echo "$cov_line" | grep -oE "cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*")" \
       "(cov: instrumented edges reached, ft: features, corp: inputs/bytes kept)"
fi
if ((rc != 0)); then
  status=1
  echo "fuzz: report_fuzz failed (exit $rc); the end of its log ($log):"
  tail -60 "$log"
  echo "fuzz: cause:"
  grep -E "runtime error|invariant violated|terminate called|what\(\)|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)" \
    "$log" | head -5 | sed 's/^/    /'
  crashes=$(grep -oE "Test unit written to [^ ]+" "$log" | sed 's/Test unit written to //' || true)
  if [[ -n $crashes ]]; then
    echo "fuzz: failing input(s), replay with: $fuzzer FILE"
    echo "$crashes" | sed 's/^/    /'
    echo "fuzz: minimise with: $fuzzer -minimize_crash=1 -runs=100000 FILE; then save it under" \
         "reports/fuzz/regressions/"
  fi
fi
exit "$status"
