#!/usr/bin/env bash
# The census judge's known failures, measured (docs/verdicts.md, "Failure modes, stated"): each
# program of watch/tests/programs/known_limits.{c,py} runs RUNS times under `leakbound watch`, and
# the verdicts are tabled against the truth (a leak, or bounded). Not part of CI: these are the
# cases the judge gets wrong today, kept so that a change to the rule shows what it fixes.
# Writes reports/limits/known_limits.md.
#   bash ci/known-limits.sh [RUNS]     (default 3; ~2 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
[[ "$runs" =~ ^[0-9]+$ && "$runs" -ge 1 ]] || { echo "known-limits.sh: RUNS must be a positive number, got '$runs'" >&2; exit 2; }
bash ci/install_deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target leakbound leakbound_preload leakbound_watch_python watch_known_limits
lb=build/default/harness/leakbound
c=build/default/watch/tests/watch_known_limits
py=watch/tests/programs/known_limits.py
out=reports/limits
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$out"
# truth | what the program is | command
cases=(
  "leak|C: a queue, two 64-byte entries in and the oldest out each step (2,000 steps)|$c fifo-growth 2000"
  "leak|C: one buffer realloc'd 64 bytes larger each step (2,000 steps)|$c realloc-growth 2000"
  "leak|C: one buffer copied into one 64 bytes larger each step, the old freed (2,000 steps)|$c copy-growth 2000"
  "leak|C: 64 bytes a step into an array that doubles when full, as a std::vector (2,000 steps)|$c doubling-growth 2000"
  "leak|Python: a string grown by += 64 characters each step (3,000 steps)|/usr/bin/python3 $py str-growth 3000"
  "leak|Python: None appended to a list each step (3,000 steps)|/usr/bin/python3 $py list-growth 3000"
  "bounded|Python: a full OrderedDict LRU of 300, Pareto-skewed keys, seed 1 (3,000 steps)|/usr/bin/python3 $py lru-pareto 3000 1 300"
  "bounded|Python: the same, seed 2|/usr/bin/python3 $py lru-pareto 3000 2 300"
  "bounded|Python: the same, 100 entries, seed 5|/usr/bin/python3 $py lru-pareto 3000 5 100"
)
{
  echo "# Known limits of the census judge, measured"
  echo
  echo "\`bash ci/known-limits.sh $runs\` at $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%Y-%m-%d):"
  echo "each program $runs times under \`leakbound watch\` (default 3 blocks). Exit codes: 0 PASS,"
  echo "1 a leak, 4 inconclusive. docs/verdicts.md, \"Failure modes, stated\", says why."
  echo
  echo "| program | truth | PASS | leak | inconclusive | other | right |"
  echo "|---|---|---:|---:|---:|---:|---:|"
} >"$out/known_limits.md.tmp"
for entry in "${cases[@]}"; do
  IFS='|' read -r truth what command <<<"$entry"
  pass=0 leak=0 inconclusive=0 other=0
  for ((r = 1; r <= runs; r++)); do
    echo "known-limits: $what, run $r of $runs" >&2
    rc=0
    # shellcheck disable=SC2086  # the command is split into its words on purpose
    "$lb" watch --out "$scratch/w" -- $command >/dev/null 2>&1 || rc=$?
    case $rc in
      0) pass=$((pass + 1)) ;;
      1) leak=$((leak + 1)) ;;
      4) inconclusive=$((inconclusive + 1)) ;;
      *) other=$((other + 1)) ;;
    esac
  done
  right=$([ "$truth" = leak ] && echo "$leak" || echo "$pass")
  echo "| $what | $truth | $pass | $leak | $inconclusive | $other | $right of $runs |" >>"$out/known_limits.md.tmp"
done
mv "$out/known_limits.md.tmp" "$out/known_limits.md"
cat "$out/known_limits.md"
