#!/usr/bin/env bash
# One-token mutants of the census rule (harness/src/census_rule.cc): each changes one comparison, one
# constant or one block index, and the census rule tests must fail on it (docs/verdicts.md, "Tests
# that notice a broken rule"). Builds harness_tests in build/default once per mutant and restores
# the source after each (also on Ctrl-C). Prints one line per mutant; exit 1 if any survived.
#   bash ci/mutate-census.sh [TEXT]    (TEXT: only the mutants whose original contains it)
set -euo pipefail
cd "$(dirname "$0")/.."
only=${1:-}
src=harness/src/census_rule.cc
keep=$(mktemp)
cp "$src" "$keep"
restore() { cp "$keep" "$src"; rm -f "$keep"; }
trap restore EXIT
trap 'exit 130' INT TERM
cmake --preset default >/dev/null
# old<TAB>new, each old text found exactly once in census_rule.cc.
mutants=$(cat <<'EOF'
departed * kCensusTurnoverSteady >= arrived	departed * kCensusTurnoverSteady > arrived
departed_n * kCensusTurnoverSteady >= arrived_n	departed_n * kCensusTurnoverSteady > arrived_n
read >= kCensusMinTurnoverTransitions	read > kCensusMinTurnoverTransitions
j.departed_bytes >= kCensusTurnoverShare * j.arrived_bytes	j.departed_bytes > kCensusTurnoverShare * j.arrived_bytes
departed_blocks >= kCensusTurnoverShare * arrived_blocks	departed_blocks > kCensusTurnoverShare * arrived_blocks
2 * j.turnover_steady > read	2 * j.turnover_steady >= read
2 * steady_blocks > read	2 * steady_blocks >= read
if (arrived < floor_bytes || arrived_n <= 0) continue;	if (arrived <= floor_bytes || arrived_n <= 0) continue;
const std::size_t newly = t - 1;	const std::size_t newly = t;
for (std::size_t k = 0; k < newly; ++k) {	for (std::size_t k = 0; k <= newly; ++k) {
if (j.persistent[static_cast<std::size_t>(k)] >= j.floor_bytes) with.push_back(k);	if (j.persistent[static_cast<std::size_t>(k)] > j.floor_bytes) with.push_back(k);
if (shrinking && aged_bytes.back() * kCensusSettlingRatio < aged_bytes.front()) {	if (shrinking && aged_bytes.back() * kCensusSettlingRatio <= aged_bytes.front()) {
if (thinning && aged_bytes.front() * thin_ratio < aged_bytes.back()) {	if (thinning && aged_bytes.front() * thin_ratio <= aged_bytes.back()) {
if (sorted.front() * kCensusSettlingRatio < sorted.back()) {	if (sorted.front() * kCensusSettlingRatio <= sorted.back()) {
const bool alike = least * kCensusRecurringRatio >= most;	const bool alike = least * kCensusRecurringRatio > most;
const double thin_ratio = j.decay_pace > 0 ? kCensusRecurringRatio : kCensusSettlingRatio;	const double thin_ratio = j.decay_pace >= 0 ? kCensusRecurringRatio : kCensusSettlingRatio;
for (int k = 0; k + 2 < blocks; ++k) {  // blocks that were already aged a block ago	for (int k = 0; k + 1 < blocks; ++k) {  // blocks that were already aged a block ago
if (then[i] < j.floor_bytes || then_blocks[i] <= 0) continue;	if (then[i] <= j.floor_bytes || then_blocks[i] <= 0) continue;
std::max(0.0, 1.0 - kCensusDecayBlocks * pace[learnt_from]);	std::max(0.0, 1.0 - 3.0 * pace[learnt_from]);
if (c.born_step < schedule.warmup_steps) {	if (c.born_step <= schedule.warmup_steps) {
const int aged = blocks - 1;	const int aged = blocks;
if (aged < kCensusMinAgedBlocks) {	if (aged <= kCensusMinAgedBlocks) {
EOF
)
killed=0 survived=0
while IFS=$'\t' read -r old new; do
  [[ -z "$old" ]] && continue
  [[ -n "$only" && "$old" != *"$only"* ]] && continue
  cp "$keep" "$src"
  if ! python3 - "$src" "$old" "$new" <<'PY'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
if text.count(old) != 1:
    sys.exit("mutate-census.sh: %r occurs %d times in %s (must be once)" % (old, text.count(old), path))
open(path, "w").write(text.replace(old, new))
PY
  then exit 2; fi
  if ! cmake --build --preset default --target harness_tests >/dev/null 2>&1; then
    echo "killed (does not build): $new"; killed=$((killed + 1)); continue
  fi
  if build/default/harness/tests/harness_tests --gtest_filter='CensusRule.*:Judge*' >/dev/null 2>&1; then
    echo "SURVIVED: $old  ->  $new"; survived=$((survived + 1))
  else
    echo "killed: $new"; killed=$((killed + 1))
  fi
done <<< "$mutants"
cp "$keep" "$src"
cmake --build --preset default --target harness_tests >/dev/null
echo "mutate-census: $killed killed, $survived survived"
[[ $survived -eq 0 ]]
