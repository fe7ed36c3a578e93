#!/usr/bin/env bash
# Overhead of `leakbound watch` side by side in one run (docs/watch.md, "Overhead"): a
# malloc/free-heavy C loop bare, under watch (call sites off / on) and under heaptrack; a PyTorch
# CPU training run bare, under watch (call sites on / off; a leaking run with Python lines on /
# off) and under memray when importable.
# Every figure is the median wall time of RUNS runs (default 5; the runs of one row alternate
# with nothing else), and every ratio is against the bare median of the same table.
# Usage: watch/bench/overhead.sh BUILD_DIR [BEFORE_BUILD_DIR]
#   BUILD_DIR has harness/leakbound and the preload; BEFORE_BUILD_DIR (optional) is an older
#   build measured in the same run, for a before/after table. RUNS=N, MEMRAY_PYTHON=python
#   with memray (default /usr/bin/python3), TORCH_STEPS=N (default 300).
set -eu
build=${1:-build/h5}
before=${2:-}
runs=${RUNS:-5}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -I"$here/../include" "$here/malloc_loop.c" -o "$tmp/malloc_loop" -ldl
python=/usr/bin/python3
memray_python=${MEMRAY_PYTHON:-$python}
script=$here/../tests/programs/torch_mlp.py

secs() {  # median wall seconds of RUNS runs of a command
  local times=()
  for _ in $(seq "$runs"); do
    local t0 t1
    t0=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s.%N)
    times+=("$(echo "$t1 - $t0" | bc -l)")
  done
  printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'
}
row() { printf "%-52s %8.3f s  %6.2fx\n" "$1" "$2" "$(echo "$2 / $3" | bc -l)"; }

builds=("$build")
[ -n "$before" ] && builds=("$before" "$build")
label() { if [ "$1" = "$build" ] && [ -n "$before" ]; then echo "after"; elif [ -n "$before" ]; then echo "before"; else echo "watch"; fi; }

pairs=5000000
echo "median of $runs runs each"
echo "malloc/free loop ($pairs pairs)"
bare=$(secs "$tmp/malloc_loop" $pairs)
row "bare" "$bare" "$bare"
for b in "${builds[@]}"; do
  t=$(secs "$b/harness/leakbound" watch --no-call-sites --out "$tmp/w1" -- "$tmp/malloc_loop" $pairs)
  row "$(label "$b"): leakbound watch, call sites off" "$t" "$bare"
  t=$(secs "$b/harness/leakbound" watch --out "$tmp/w2" -- "$tmp/malloc_loop" $pairs)
  row "$(label "$b"): leakbound watch, call sites on" "$t" "$bare"
done
if command -v heaptrack >/dev/null; then
  row "heaptrack" "$(secs heaptrack -o "$tmp/ht" "$tmp/malloc_loop" $pairs)" "$bare"
fi
if "$python" -c "import torch" 2>/dev/null; then
  steps=${TORCH_STEPS:-300}
  echo "PyTorch CPU MLP training, $steps steps (includes interpreter start and import torch)"
  tbare=$(secs "$python" "$script" clean none $steps)
  row "bare" "$tbare" "$tbare"
  for b in "${builds[@]}"; do
    t=$(secs "$b/harness/leakbound" watch --step-on torch.optim.Optimizer.step --out "$tmp/w3" -- \
        "$python" "$script" clean step_on $steps)
    row "$(label "$b"): leakbound watch (PYTHONMALLOC=malloc)" "$t" "$tbare"
    t=$(secs "$b/harness/leakbound" watch --no-call-sites --step-on torch.optim.Optimizer.step \
        --out "$tmp/w4" -- "$python" "$script" clean step_on $steps)
    row "$(label "$b"): leakbound watch --no-call-sites" "$t" "$tbare"
  done
  # The Python module's census collection (docs/watch.md, "Python and the collector"): full
  # collections without the freeze, and none at all.
  t=$(LEAKBOUND_CENSUS_GC=nofreeze secs "$build/harness/leakbound" watch \
      --step-on torch.optim.Optimizer.step --out "$tmp/w5" -- "$python" "$script" clean step_on $steps)
  row "$(label "$build"): watch, LEAKBOUND_CENSUS_GC=nofreeze" "$t" "$tbare"
  t=$(LEAKBOUND_CENSUS_GC=0 secs "$build/harness/leakbound" watch \
      --step-on torch.optim.Optimizer.step --out "$tmp/w6" -- "$python" "$script" clean step_on $steps)
  row "$(label "$build"): watch, LEAKBOUND_CENSUS_GC=0" "$t" "$tbare"
  # Python lines (docs/watch.md, "Where"): a leaking run, whose growing sites switch the tracer
  # on for up to 16 steps, with the lines and without (LEAKBOUND_PYTHON_LINES=0).
  lbare=$(secs "$python" "$script" sum_loss none $steps)
  row "bare, running = running + loss" "$lbare" "$lbare"
  t=$(secs "$build/harness/leakbound" watch --step-on torch.optim.Optimizer.step --out "$tmp/w7" \
      -- "$python" "$script" sum_loss step_on $steps)
  row "$(label "$build"): watch, leaking, Python lines" "$t" "$lbare"
  t=$(LEAKBOUND_PYTHON_LINES=0 secs "$build/harness/leakbound" watch \
      --step-on torch.optim.Optimizer.step --out "$tmp/w8" -- "$python" "$script" sum_loss step_on $steps)
  row "$(label "$build"): watch, leaking, LEAKBOUND_PYTHON_LINES=0" "$t" "$lbare"
  if "$memray_python" -c "import memray, torch" 2>/dev/null; then
    tm=$(secs "$memray_python" -m memray run -f -o "$tmp/m.bin" "$script" clean none $steps)
    row "memray run" "$tm" "$tbare"
  fi
fi
