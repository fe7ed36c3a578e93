#!/usr/bin/env bash
# The nightly GPU job. On a GPU machine with only the CUDA toolkit (no package registry) it uses
# binaries carried from a build machine (ci/package-gpu.sh) or, when the build dependencies are
# there, builds them. It runs the gpu tests, the stress harness on every workload with
# --device cuda (CUPTI observer on), compute-sanitizer --leak-check full on the GPU tests when
# installed, bench_leakbound when built, and `leakbound watch` on two PyTorch CUDA programs (a
# summed-loss leak and its clean twin, with the CUDA injection and torch's counters), writes
# everything into one output folder and diffs the run against baselines/h200/. Budget: under 8
# minutes on an H200.
# Usage: ci/nightly-gpu.sh [--carried DIR] [--out DIR] [--update-baselines]
set -uo pipefail
cd "$(dirname "$0")/.."
carried=""
out=${OUT:-out/nightly-gpu}
update=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --carried) carried=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --update-baselines) update=1; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "nightly-gpu: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out" "$out/watch"
log="$out/nightly.log"
exec > >(tee -a "$log") 2>&1
start=$SECONDS
status=0
stage() { echo; echo "=== $* ($((SECONDS - start)) s)"; }

if [[ -n $carried ]]; then
  bin=$(cd "$carried/bin" && pwd)
  echo "using carried binaries from $bin (commit $(cat "$carried/COMMIT" 2>/dev/null || echo unknown))"
else
  stage "build"
  cmake --preset default -DLEAKBOUND_CUDA=ON >/dev/null && cmake --build --preset default -j "$(nproc)" || exit 2
  bin=$PWD/build/default
fi
find_bin() { find "$bin" -maxdepth 4 -type f -name "$1" -perm -u+x | head -1; }
lb=$(find_bin leakbound)
[[ -x $lb ]] || { echo "nightly-gpu: leakbound binary not found under $bin"; exit 2; }

stage "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/device.txt" || true

stage "gpu tests"
for t in cuda_backend_tests cupti_ledger_tests runtime_tests; do
  exe=$(find_bin "$t")
  if [[ -z $exe ]]; then echo "$t: not built"; continue; fi
  timeout 180 "$exe" --gtest_output="xml:$out/$t.xml" >"$out/$t.log" 2>&1
  rc=$?
  tail -3 "$out/$t.log"
  grep -E "SKIPPED|FAILED" "$out/$t.log" | head -20
  [[ $rc -ne 0 ]] && { echo "$t: exit $rc"; status=1; }
done

stage "stress harness on cuda (CUPTI observer on)"
timeout 240 "$lb" run --all --device cuda --out "$out/stress"
rc=$?
[[ $rc -ne 0 ]] && { echo "stress: exit $rc"; status=1; }

stage "compute-sanitizer"
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [[ -n $cs ]]; then
  exe=$(find_bin cuda_backend_tests)
  timeout 150 "$cs" --leak-check full --error-exitcode 9 "$exe" >"$out/compute-sanitizer.log" 2>&1
  rc=$?
  tail -5 "$out/compute-sanitizer.log"
  [[ $rc -ne 0 ]] && { echo "compute-sanitizer: exit $rc"; status=1; }
else
  echo "compute-sanitizer is not installed on this machine: skipped" | tee "$out/compute-sanitizer.log"
fi

stage "bench_leakbound"
bench=$(find_bin bench_leakbound)
if [[ -n $bench ]]; then
  timeout 90 "$bench" --benchmark_min_time=0.05 --benchmark_filter='WithStep|WithForward|Probe' \
    --benchmark_out="$out/bench.json" --benchmark_out_format=json | tail -30
else
  echo "bench_leakbound not built: skipped"
fi

stage "watch: PyTorch CUDA programs (CUPTI injection, torch.cuda counters)"
# Expected: sum_loss exits 1 (unbounded-growth on host.heap_bytes and torch.allocated_bytes),
# clean exits 0. The reports (report.json/.md, trace.json) are kept under $out/watch/.
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  for bug in sum_loss clean; do
    want=0; [[ $bug == sum_loss ]] && want=1
    timeout 90 "$lb" watch --cuda --step-on torch.optim.SGD.step --name "torch_cuda_$bug" \
      --out "$out/watch/torch_cuda_$bug" -- python3 watch/tests/programs/torch_cuda_mlp.py "$bug" 200 \
      >"$out/watch/torch_cuda_$bug.log" 2>&1
    rc=$?
    tail -12 "$out/watch/torch_cuda_$bug.log"
    python3 - "$out/watch/torch_cuda_$bug/trace.json" <<'PY' || true
import json, sys
t = json.load(open(sys.argv[1]))["traces"][0]
print("  probes:", "; ".join(p["name"] + " " + p["state"][:120] for p in t["probes"]))
for c in t["counters"]:
    if c["name"].split(".")[0] in ("cupti", "torch") and c["values"]:
        print("  %-28s first %14.0f last %14.0f" % (c["name"], c["values"][0], c["values"][-1]))
PY
    [[ $rc -ne $want ]] && { echo "watch torch_cuda_$bug: exit $rc, want $want"; status=1; }
  done
else
  echo "python3 has no torch with CUDA on this machine: watch stage skipped" | tee "$out/watch.log"
fi

stage "diff against baselines/h200"
if [[ $update -eq 1 ]]; then
  timeout 240 "$lb" check --device cuda --baselines "$out/baselines-h200" --update --out "$out/check" -q
elif ls baselines/h200/*.json >/dev/null 2>&1; then
  timeout 240 "$lb" check --device cuda --baselines baselines/h200 --out "$out/check" -q
  rc=$?
  [[ $rc -ne 0 ]] && { echo "check: exit $rc"; status=1; }
else
  echo "no baselines in baselines/h200 yet: run with --update-baselines and commit them"
fi

echo
echo "nightly-gpu: done in $((SECONDS - start)) s, status $status; outputs in $out"
exit $status
