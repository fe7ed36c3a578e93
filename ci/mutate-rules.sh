#!/usr/bin/env bash
# One-token mutants of the verdict rules (harness/src/census_rule.cc, verdict.cc, judge.cc): each
# changes one comparison, one constant or one block index, and the rule tests must fail on it
# (docs/verdicts.md, "Tests that notice a broken rule"). Builds harness_tests in build/default once
# per mutant and restores the sources after each (also on Ctrl-C). Prints one line per mutant;
# exit 1 if any survived.
#   bash ci/mutate-rules.sh [TEXT]    (TEXT: only the mutants whose file or original contains it)
set -euo pipefail
cd "$(dirname "$0")/.."
only=${1:-}
keep=$(mktemp -d)
files=(census_rule.cc verdict.cc judge.cc)
for f in "${files[@]}"; do cp "harness/src/$f" "$keep/$f"; done
restore() { for f in "${files[@]}"; do cp "$keep/$f" "harness/src/$f"; done; rm -rf "$keep"; }
trap restore EXIT
trap 'exit 130' INT TERM
cmake --preset default >/dev/null
# file<TAB>old<TAB>new, each old text found exactly once in harness/src/file.
mutants=$(cat <<'EOF'
census_rule.cc	departed * kCensusTurnoverSteady >= arrived	departed * kCensusTurnoverSteady > arrived
census_rule.cc	departed_n * kCensusTurnoverSteady >= arrived_n	departed_n * kCensusTurnoverSteady > arrived_n
census_rule.cc	read >= kCensusMinTurnoverTransitions	read > kCensusMinTurnoverTransitions
census_rule.cc	j.departed_bytes >= kCensusTurnoverShare * j.arrived_bytes	j.departed_bytes > kCensusTurnoverShare * j.arrived_bytes
census_rule.cc	departed_blocks >= kCensusTurnoverShare * arrived_blocks	departed_blocks > kCensusTurnoverShare * arrived_blocks
census_rule.cc	2 * j.turnover_steady > read	2 * j.turnover_steady >= read
census_rule.cc	2 * steady_blocks > read	2 * steady_blocks >= read
census_rule.cc	if (arrived < floor_bytes || arrived_n <= 0) continue;	if (arrived <= floor_bytes || arrived_n <= 0) continue;
census_rule.cc	const std::size_t newly = t - 1;	const std::size_t newly = t;
census_rule.cc	for (std::size_t k = 0; k < newly; ++k) {	for (std::size_t k = 0; k <= newly; ++k) {
census_rule.cc	if (j.persistent[static_cast<std::size_t>(k)] >= j.floor_bytes) with.push_back(k);	if (j.persistent[static_cast<std::size_t>(k)] > j.floor_bytes) with.push_back(k);
census_rule.cc	if (shrinking && aged_bytes.back() * kCensusSettlingRatio < aged_bytes.front()) {	if (shrinking && aged_bytes.back() * kCensusSettlingRatio <= aged_bytes.front()) {
census_rule.cc	if (thinning && aged_bytes.front() * thin_ratio < aged_bytes.back()) {	if (thinning && aged_bytes.front() * thin_ratio <= aged_bytes.back()) {
census_rule.cc	if (sorted.front() * kCensusSettlingRatio < sorted.back()) {	if (sorted.front() * kCensusSettlingRatio <= sorted.back()) {
census_rule.cc	const bool alike = least * kCensusRecurringRatio >= most;	const bool alike = least * kCensusRecurringRatio > most;
census_rule.cc	const double thin_ratio = j.decay_pace > 0 ? kCensusRecurringRatio : kCensusSettlingRatio;	const double thin_ratio = j.decay_pace >= 0 ? kCensusRecurringRatio : kCensusSettlingRatio;
census_rule.cc	for (int k = 0; k + 2 < blocks; ++k) {  // blocks that were already aged a block ago	for (int k = 0; k + 1 < blocks; ++k) {  // blocks that were already aged a block ago
census_rule.cc	if (then[i] < j.floor_bytes || then_blocks[i] <= 0) continue;	if (then[i] <= j.floor_bytes || then_blocks[i] <= 0) continue;
census_rule.cc	std::max(0.0, 1.0 - kCensusDecayBlocks * pace[learnt_from]);	std::max(0.0, 1.0 - 3.0 * pace[learnt_from]);
census_rule.cc	if (c.born_step < schedule.warmup_steps) {	if (c.born_step <= schedule.warmup_steps) {
census_rule.cc	j.turnover = read >= kCensusMinTurnoverTransitions && j.departed_measured_bytes > 0 &&	j.turnover = read >= kCensusMinTurnoverTransitions && j.departed_measured_bytes >= 0 &&
census_rule.cc	j.departed_measured_bytes += std::max(0.0, then.bytes[k] - now.bytes[k]);	j.departed_measured_bytes += std::max(0.0, then.before - now.before);
census_rule.cc	const int aged = blocks - 1;	const int aged = blocks;
census_rule.cc	if (aged < kCensusMinAgedBlocks) {	if (aged <= kCensusMinAgedBlocks) {
verdict.cc	const bool floor_grew = last.min > first.min && rises.floor >= 2;	const bool floor_grew = rises.floor >= 2;
verdict.cc	const bool ceiling_grew = last.max > first.max && rises.ceiling >= 2;	const bool ceiling_grew = rises.ceiling >= 2;
verdict.cc	ranges.push_back(RangeOf(measured.subspan(static_cast<std::size_t>(b) * n, n)));	ranges.push_back(RangeOf(measured.subspan(static_cast<std::size_t>(b) * n, n - 1)));
verdict.cc	options.sigma_multiplier * max_standard_error	0 * max_standard_error
verdict.cc	trend.slope_per_step * window > floor.total_growth;	trend.slope_per_step * window >= floor.total_growth;
verdict.cc	trend.grew = trend.slope_per_step > floor.slope_per_step &&	trend.grew = trend.slope_per_step >= floor.slope_per_step &&
judge.cc	      if (p.peak_of == live->name) {	      if (p.peak_of == live->name && false) {
judge.cc	used->verdict == reports::kPass && used->judged) {	used->verdict == reports::kPass) {
judge.cc	last - first_measured + (first_measured == 0 ? 0 : 1)	last - first_measured
EOF
)
killed=0 survived=0
while IFS=$'\t' read -r file old new; do
  [[ -z "$old" ]] && continue
  [[ -n "$only" && "$file $old" != *"$only"* ]] && continue
  for f in "${files[@]}"; do cp "$keep/$f" "harness/src/$f"; done
  if ! python3 - "harness/src/$file" "$old" "$new" <<'PY'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
if text.count(old) != 1:
    sys.exit("mutate-rules.sh: %r occurs %d times in %s (must be once)" % (old, text.count(old), path))
open(path, "w").write(text.replace(old, new))
PY
  then exit 2; fi
  if ! cmake --build --preset default --target harness_tests >/dev/null 2>&1; then
    echo "killed (does not build): $new"; killed=$((killed + 1)); continue
  fi
  if build/default/harness/tests/harness_tests --gtest_filter='CensusRule.*:Judge*:Verdict.*' >/dev/null 2>&1; then
    echo "SURVIVED: $old  ->  $new"; survived=$((survived + 1))
  else
    echo "killed: $new"; killed=$((killed + 1))
  fi
done <<< "$mutants"
for f in "${files[@]}"; do cp "$keep/$f" "harness/src/$f"; done
cmake --build --preset default --target harness_tests >/dev/null
echo "mutate-rules: $killed killed, $survived survived"
[[ $survived -eq 0 ]]
