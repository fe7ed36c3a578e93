#!/usr/bin/env bash
# Rates of the DataLoader process-tree twins (docs/watch.md, "Process trees"): RUNS runs each of
# the clean twin and the leaking twin (worker 1 keeps 4 KiB a sample; MODES adds the copy-on-read
# twin) of
# watch/tests/programs/torch_tree.py at each trainer step count, under `leakbound watch`, on
# Debian's python3-torch. Writes reports/tree/tree_rates.{md,json}. ctest runs one of each
# (watch.torch_tree_loader_clean at 6,000 steps, watch.torch_tree_loader_leak at 3,000).
#   bash ci/tree-rates.sh [RUNS [STEPS...]]     (default: 40 runs at 480 and 1,500 steps)
# Environment: JOBS=N runs N at once (default 1; 2 is the load of `ctest -j2`), MODES="..." picks
# the twins (default "loader-clean loader-leak"; "cow" is the copy-on-read clean twin),
# WATCH_ARGS="..." adds options to each `leakbound watch` (e.g. --keep-pymalloc), KEEP_FLAGGED=1
# keeps the reports of the clean twins' flagged runs in reports/tree/flagged/.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-40}
[[ "$runs" =~ ^[0-9]+$ && "$runs" -ge 1 ]] || { echo "tree-rates.sh: RUNS must be a positive number, got '$runs'" >&2; exit 2; }
shift || true
if [ $# -gt 0 ]; then steps=("$@"); else steps=(480 1500); fi
for s in "${steps[@]}"; do
  [[ "$s" =~ ^[0-9]+$ && "$s" -ge 100 ]] || { echo "tree-rates.sh: STEPS must be numbers of at least 100, got '$s'" >&2; exit 2; }
done
bash ci/install_deps.sh
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "tree-rates.sh: Debian's python3-torch is needed (/usr/bin/python3 -c 'import torch' failed)" >&2; exit 2; }
cmake --preset default >/dev/null
cmake --build --preset default --target leakbound leakbound_preload
mkdir -p reports/tree
read -ra modes <<<"${MODES:-loader-clean loader-leak}"
read -ra watch_args <<<"${WATCH_ARGS:-}"
extra=()
for a in "${watch_args[@]}"; do extra+=("--watch-arg=$a"); done
[ "${KEEP_FLAGGED:-0}" = 1 ] && extra+=(--keep-flagged)
python3 watch/tests/tree_rates.py --leakbound build/default/harness/leakbound \
  --program watch/tests/programs/torch_tree.py --runs "$runs" --steps "${steps[@]}" --out reports/tree \
  --jobs "${JOBS:-1}" --modes "${modes[@]}" "${extra[@]}"
