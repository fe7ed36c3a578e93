#!/usr/bin/env bash
# Builds and runs bench_leakbound (docs/bench.md), then prints the ratio table with its targets.
# Writes under $BENCH_OUT (default reports/bench):
#   bench.json         the timed run: 3 repetitions, randomly interleaved, medians in the table;
#   bench_memory.json  one repetition of the step/eval/probe families with the memory manager
#                      (Google Benchmark 1.7.1 cannot report it across repetitions);
#   ratios.md          the table printed at the end.
# Extra arguments go to the timed run, e.g. ci/bench.sh --benchmark_filter='^(step|torch)/'.
# Exit code: the benchmark's. A missed target is reported, not failed: timings are noisy.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${BENCH_OUT:-reports/bench}
bash ci/install_deps.sh
cmake --preset default >build.configure.log 2>&1 || { cat build.configure.log; exit 2; }
rm -f build.configure.log
cmake --build --preset default -j "$(nproc)" --target bench_leakbound
bench=./build/default/harness/bench/bench_leakbound
# libtorch's OpenMP pool spins after each parallel region by default; on 2 cores, next to
# OpenBLAS's own worker, that makes the peer 3-4x slower. Passive waiting is its best setting
# here (docs/bench.md); leakbound uses no OpenMP. Override by exporting OMP_WAIT_POLICY.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
mkdir -p "$out"
start=$SECONDS
"$bench" --benchmark_format=console \
  --benchmark_out="$out/bench.json" --benchmark_out_format=json \
  --benchmark_repetitions=3 --benchmark_display_aggregates_only=true \
  --benchmark_enable_random_interleaving=true \
  "$@"
"$bench" --benchmark_format=console --benchmark_filter='^(step|eval|probe)/' \
  --benchmark_min_time=0.01 --benchmark_repetitions=1 \
  --benchmark_out="$out/bench_memory.json" --benchmark_out_format=json >"$out/bench_memory.log"
echo "bench_leakbound: $((SECONDS - start)) s wall (build excluded)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (wall-clock timings: a busy machine inflates them)"
python3 harness/bench/ratios.py "$out/bench.json" "$out/bench_memory.json" | tee "$out/ratios.md"
