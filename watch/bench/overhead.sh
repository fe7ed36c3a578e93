#!/usr/bin/env bash
# Overhead of `leakbound watch` side by side in one run (docs/watch.md, "Overhead"): a
# malloc/free-heavy C loop bare, under watch (call sites off / on) and under heaptrack; a PyTorch
# CPU training run bare and under watch (and memray, when installed). Prints wall times and ratios.
# Usage: watch/bench/overhead.sh BUILD_DIR   (BUILD_DIR has harness/leakbound and the preload)
set -eu
build=${1:-build/h5}
here=$(cd "$(dirname "$0")" && pwd)
leakbound=$build/harness/leakbound
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -I"$here/../include" "$here/malloc_loop.c" -o "$tmp/malloc_loop" -ldl
python=/usr/bin/python3
script=$here/../tests/programs/torch_mlp.py

secs() {  # wall seconds of a command (best of 3)
  local best=
  for _ in 1 2 3; do
    local t0 t1
    t0=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s.%N)
    local d; d=$(echo "$t1 - $t0" | bc -l)
    if [ -z "$best" ] || (( $(echo "$d < $best" | bc -l) )); then best=$d; fi
  done
  echo "$best"
}
row() { printf "%-44s %8.3f s  %6.2fx\n" "$1" "$2" "$(echo "$2 / $3" | bc -l)"; }

pairs=5000000
bare=$(secs "$tmp/malloc_loop" $pairs)
nosites=$(secs "$leakbound" watch --no-call-sites --out "$tmp/w1" -- "$tmp/malloc_loop" $pairs)
sites=$(secs "$leakbound" watch --out "$tmp/w2" -- "$tmp/malloc_loop" $pairs)
echo "malloc/free loop ($pairs pairs)"
row "bare" "$bare" "$bare"
row "leakbound watch, call sites off" "$nosites" "$bare"
row "leakbound watch, call sites on" "$sites" "$bare"
if command -v heaptrack >/dev/null; then
  ht=$(secs heaptrack -o "$tmp/ht" "$tmp/malloc_loop" $pairs)
  row "heaptrack" "$ht" "$bare"
fi
if "$python" -c "import torch" 2>/dev/null; then
  steps=300
  tbare=$(secs "$python" "$script" clean none $steps)
  twatch=$(secs "$leakbound" watch --step-on torch.optim.Optimizer.step --out "$tmp/w3" -- \
           "$python" "$script" clean step_on $steps)
  twatch_pymalloc=$(secs "$leakbound" watch --keep-pymalloc --step-on torch.optim.Optimizer.step \
           --out "$tmp/w4" -- "$python" "$script" clean step_on $steps)
  echo "PyTorch CPU MLP training, $steps steps (includes interpreter start and import torch)"
  row "bare" "$tbare" "$tbare"
  row "leakbound watch (PYTHONMALLOC=malloc)" "$twatch" "$tbare"
  row "leakbound watch --keep-pymalloc" "$twatch_pymalloc" "$tbare"
  if "$python" -c "import memray" 2>/dev/null; then
    tm=$(secs "$python" -m memray run -o "$tmp/m.bin" "$script" clean none $steps)
    row "memray" "$tm" "$tbare"
  fi
fi
