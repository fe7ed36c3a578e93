#!/usr/bin/env bash
# What `leakbound watch` costs, side by side in one run (docs/watch.md, "Overhead"): paired,
# alternating runs of bare / three reference preloads (exact_counter.c: forwarding only, an exact
# counter by malloc_usable_size, one by glibc's chunk header) / watch (call sites off, on, Python lines) / heaptrack / memray on a malloc/free loop,
# a 4-thread malloc/free loop, a PyTorch CPU training run (also leaking, for Python lines) and a
# PyTorch run fed by DataLoader workers; medians, ranges and peak RSS.
#
# Usage: watch/bench/overhead.sh [BUILD_DIR] [-- OVERHEAD_PY_OPTIONS]
#   BUILD_DIR (default build/default) has harness/leakbound. Options after -- go to
#   watch/bench/overhead.py (--rounds N, default 5; --pairs N; --torch-steps N, default 1500;
#   --loader-steps N; --only malloc,threads,torch,lines,loader; --out FILE).
#   memray comes from PyPI in a virtual environment made here (MEMRAY_VENV, default
#   BUILD_DIR/bench-venv, over Debian's python3 with its site packages, so torch imports);
#   when pip cannot install it the memray row is skipped with a note. MEMRAY=0 skips it.
# Takes ~10 minutes with the defaults on 2 cores.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=build/default
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build=$1; shift; fi
[ "${1:-}" = "--" ] && shift
leakbound=$build/harness/leakbound
[ -x "$leakbound" ] || { echo "overhead.sh: no $leakbound: build first (cmake --preset default && cmake --build --preset default)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -I"$here/../include" "$here/malloc_loop.c" -o "$tmp/malloc_loop"
cc -O2 -pthread "$here/malloc_threads.c" -o "$tmp/malloc_threads"
cc -O2 -shared -fPIC -ftls-model=initial-exec "$here/exact_counter.c" -o "$tmp/exact_counter.so"
cc -O2 -shared -fPIC -DFORWARD_ONLY "$here/exact_counter.c" -o "$tmp/forward_only.so"
cc -O2 -shared -fPIC -ftls-model=initial-exec -DFROM_HEADER "$here/exact_counter.c" -o "$tmp/exact_header.so"

memray=(--memray-skip "MEMRAY=0")
if [ "${MEMRAY:-1}" != 0 ]; then
  venv=${MEMRAY_VENV:-$build/bench-venv}
  if ! "$venv/bin/python" -c "import memray" 2>/dev/null; then
    echo "overhead.sh: installing memray from PyPI into $venv" >&2
    /usr/bin/python3 -m venv --system-site-packages "$venv" >"$tmp/venv.log" 2>&1 &&
      "$venv/bin/pip" install -q memray >>"$tmp/venv.log" 2>&1 || true
  fi
  if "$venv/bin/python" -c "import memray, torch" 2>/dev/null; then
    memray=(--memray-python "$venv/bin/python")
  else
    memray=(--memray-skip "pip install memray into $venv failed: $(tail -1 "$tmp/venv.log" 2>/dev/null || echo 'no log')")
  fi
fi
/usr/bin/python3 "$here/overhead.py" --leakbound "$leakbound" \
  --malloc-loop "$tmp/malloc_loop" --malloc-threads "$tmp/malloc_threads" \
  --exact-counter "$tmp/exact_counter.so" --forward-only "$tmp/forward_only.so" \
  --exact-header "$tmp/exact_header.so" \
  --programs "$here/../tests/programs" "${memray[@]}" "$@"
