// The census rule (docs/verdicts.md, "The census of survivors"): survivors by birth block at the
// last block end (JudgeSurvivors), then turnover across every block end (JudgeTurnover).
// Declared in leakbound/harness/verdict.h; the rest of the verdict rules are in verdict.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "evidence_format.h"
#include "leakbound/harness/verdict.h"

namespace leakbound::harness {
namespace {

using detail::FormatAmount;
using detail::FormatRate;

std::string JoinAmounts(const std::vector<double>& values, const std::string& unit) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    out += (i == 0 ? "" : ", ") + FormatAmount(values[i], unit);
  }
  return out;
}

}  // namespace

namespace {

// Survivors of one census by measured block (bytes, or blocks when `count`), and what was born
// before the blocks.
std::vector<double> ByBlock(std::span<const CensusCohort> cohorts, const Schedule& schedule,
                            bool count, double* before, std::vector<double>* blocks_out) {
  std::vector<double> out(static_cast<std::size_t>(std::max(schedule.blocks, 0)), 0.0);
  if (blocks_out) blocks_out->assign(out.size(), 0.0);
  const int n = std::max(schedule.steps_per_block, 1);
  for (const CensusCohort& c : cohorts) {
    const double amount = static_cast<double>(count ? c.blocks : c.bytes);
    if (c.born_step < schedule.warmup_steps) {
      if (before) *before += amount;
      continue;
    }
    const std::int64_t k = (c.born_step - schedule.warmup_steps) / n;
    if (k >= schedule.blocks) continue;  // born after the census's last block
    out[static_cast<std::size_t>(k)] += amount;
    if (blocks_out) (*blocks_out)[static_cast<std::size_t>(k)] += static_cast<double>(c.blocks);
  }
  return out;
}

}  // namespace

namespace {

CensusJudgement JudgeSurvivors(const std::string& counter, std::span<const CensusCohort> cohorts,
                               int census_step, const Schedule& schedule, bool count,
                               std::span<const CensusCohort> previous) {
  CensusJudgement j;
  j.census_step = census_step;
  const int blocks = schedule.blocks;
  const int n = schedule.steps_per_block;
  j.survivor_bytes = ByBlock(cohorts, schedule, count, &j.before_bytes, &j.survivor_blocks);
  j.persistent = j.survivor_bytes;
  j.floor_bytes = count ? 1.0 : std::max(1.0, kCensusFloorBytesPerStep * n);
  // Decay: blocks that were aged a block ago and have fewer survivors now. A recycling runtime
  // (CPython's free lists reuse memory born blocks ago) frees old blocks' survivors slowly; a leak
  // frees none; a one-off free (a grown array moved, a cache dropped) hits one block once. The
  // pace is the median share lost over those blocks (reported; it also halves the thinning
  // ratio). With one such block (3 blocks), that block counts what kCensusDecayBlocks more
  // blocks at its pace would leave. With more, nothing is taken off here: a share of a block's
  // survivors cannot tell a runtime's recycled bytes from a leak beside them (a 9.6 KiB/block
  // leak beside CPython's free lists was once discounted to nothing that way); the turnover test
  // (JudgeTurnover, over every block end) decides those.
  std::string decayed;  // "1 (888 B -> 792 B), 2 (1.41 KiB -> 1.10 KiB)"
  if (!previous.empty()) {
    const std::string unit_name = count ? "count" : "bytes";
    std::vector<double> then_blocks;
    const std::vector<double> then = ByBlock(previous, schedule, count, nullptr, &then_blocks);
    // A block's pace is the smaller of the shares of its surviving bytes and of its surviving
    // allocations freed: a one-off free of one large block (a grown array of leaked pointers
    // moved by realloc) is many bytes but one allocation of many; a leak of large objects beside
    // a runtime recycling many small ones is many allocations but few bytes; recycling alone
    // frees both alike.
    std::vector<double> pace(static_cast<std::size_t>(blocks), 0.0);
    std::vector<double> paces;
    std::size_t learnt_from = 0;  // the block of the last pace
    for (int k = 0; k + 2 < blocks; ++k) {  // blocks that were already aged a block ago
      const std::size_t i = static_cast<std::size_t>(k);
      if (then[i] < j.floor_bytes || then_blocks[i] <= 0) continue;
      learnt_from = i;
      pace[i] = std::min(std::max(0.0, then[i] - j.survivor_bytes[i]) / then[i],
                         std::max(0.0, then_blocks[i] - j.survivor_blocks[i]) / then_blocks[i]);
      paces.push_back(pace[i]);
      if (then[i] > j.survivor_bytes[i]) {
        decayed += (decayed.empty() ? "" : ", ") + std::to_string(k + 1) + " (" +
                   FormatAmount(then[i], unit_name) + " -> " +
                   FormatAmount(j.survivor_bytes[i], unit_name) + ")";
      }
    }
    if (!paces.empty()) {
      std::sort(paces.begin(), paces.end());
      const std::size_t m = paces.size() / 2;
      j.decay_pace = paces.size() % 2 == 1 ? paces[m] : 0.5 * (paces[m - 1] + paces[m]);
    }
    if (paces.size() == 1 && j.decay_pace > 0) {
      // One block to learn the pace from (3 blocks, or the others under the floor): a one-off
      // free cannot be told from a steady one, so only that block is discounted, by fewer
      // blocks ahead.
      j.persistent[learnt_from] =
          j.survivor_bytes[learnt_from] *
          std::max(0.0, 1.0 - kCensusDecayBlocks * pace[learnt_from]);
      j.decay_ahead = kCensusDecayBlocks;
    }
    if (j.decay_ahead == 0) decayed.clear();  // nothing taken off
  }
  const int aged = blocks - 1;
  const std::string unit = count ? "count" : "bytes";
  const std::string listed = "born in blocks 1-" + std::to_string(blocks) +
                             " and still live at step " + std::to_string(census_step) + ": " +
                             JoinAmounts(j.survivor_bytes, unit);
  if (aged < kCensusMinAgedBlocks) {
    j.outcome = CensusOutcome::kTooFewBlocks;
    j.sentence = counter + " census: " + listed + "; " + std::to_string(blocks) +
                 " blocks leave " + std::to_string(std::max(aged, 0)) +
                 " aged block, the census needs " + std::to_string(kCensusMinAgedBlocks) +
                 " (3 blocks or more)";
    return j;
  }
  std::vector<int> with;  // aged blocks whose lasting survivors reach the floor
  for (int k = 0; k < aged; ++k) {
    if (j.persistent[static_cast<std::size_t>(k)] >= j.floor_bytes) with.push_back(k);
  }
  const std::vector<double> aged_bytes(j.persistent.begin(), j.persistent.begin() + aged);
  const std::string decay_text =
      decayed.empty() ? std::string()
                      : "; survivors still being freed, " +
                            std::to_string(static_cast<int>(std::lround(100 * j.decay_pace))) +
                            "% a block (median; block " + decayed + "), so " +
                            (j.decay_ahead == kCensusDecayBlocks ? "that block counts"
                                                                 : "each block counts") +
                            " what " + std::to_string(static_cast<int>(j.decay_ahead)) +
                            " more blocks at that pace would leave";
  // Older blocks keep fewer survivors than newer ones: a slow turnover (bounded).
  const auto thinned = [&] {
    j.outcome = CensusOutcome::kThinning;
    j.sentence = counter + " bounded: survivors thin out with age (" + listed +
                 "): what a structure that turns over more slowly than a block of " +
                 std::to_string(n) + " steps leaves (a free list, a slow cache)" + decay_text;
    return j;
  };
  const std::string floor_text =
      " (a block's survivors count from " + FormatAmount(j.floor_bytes, unit) +
      (count ? std::string(")") : ", " + FormatRate(kCensusFloorBytesPerStep, unit) + ")");
  if (static_cast<int>(with.size()) == aged) {
    bool shrinking = true;
    for (int k = 1; k < aged; ++k) {
      if (aged_bytes[static_cast<std::size_t>(k)] > aged_bytes[static_cast<std::size_t>(k) - 1])
        shrinking = false;
    }
    if (shrinking && aged_bytes.back() * kCensusSettlingRatio < aged_bytes.front()) {
      j.outcome = CensusOutcome::kSettling;
      j.sentence = counter + " survivors per block decelerating (" + listed +
                   "): likely a bounded cache still filling; run longer than " +
                   std::to_string(2 * schedule.TotalSteps()) + " steps to decide";
      j.sentence += decay_text;
    return j;
    }
    bool thinning = true;  // older blocks keep fewer: what a slow cache does (see docs)
    for (int k = 1; k < aged; ++k) {
      if (aged_bytes[static_cast<std::size_t>(k)] < aged_bytes[static_cast<std::size_t>(k) - 1])
        thinning = false;
    }
    // Older blocks keep fewer by 4x; or by 2x while survivors are seen being freed (the decay
    // above): a leak keeps alike amounts at every age, what leaks beside a recycling runtime too.
    const double thin_ratio = j.decay_pace > 0 ? kCensusRecurringRatio : kCensusSettlingRatio;
    if (thinning && aged_bytes.front() * thin_ratio < aged_bytes.back()) {
      return thinned();
    }
    std::vector<double> sorted = aged_bytes;
    std::sort(sorted.begin(), sorted.end());
    if (sorted.front() * kCensusSettlingRatio < sorted.back()) {
      // Survivors from every block but in unlike amounts, neither shrinking nor thinning: not
      // the signature of a leak (which leaves alike amounts), not proof of bounds either.
      j.outcome = CensusOutcome::kOneTime;
      j.sentence = counter + " census: " + listed +
                   ": survivors from every block in unlike amounts (" +
                   FormatAmount(sorted.front(), unit) + " to " + FormatAmount(sorted.back(), unit) +
                   "), unlike a steady leak";
      j.sentence += decay_text;
      return j;
    }
    // The newest block is never aged, but a leak leaves it a block's worth too (block ends are
    // census points: it holds whole cohorts), plus what is in flight. Far fewer there than in
    // every aged block, after aged blocks that were already slowing (the newest aged one below
    // the oldest), is growth that slowed and stopped before the window ended: a cache that
    // filled late in the run (a judge review built one filling to step 1,400 of 2,000, judged
    // growth at 24 KiB, 15.5 KiB, then 0 B). Not growth until a longer run shows it. Aged blocks
    // alike to the last (24, 24, then 4 KiB) stay growth: a leak that stopped only in the last
    // block (a final evaluation, a teardown) is what that looks like too, and no longer run
    // would tell them apart. Only from a census taken once the newest block ended (else it holds
    // part of a block).
    const double newest = j.survivor_bytes[static_cast<std::size_t>(aged)];
    const bool newest_whole = census_step >= schedule.TotalSteps() - 1;
    const bool slowing = aged_bytes.back() < aged_bytes.front();
    if (newest_whole && slowing && newest * kCensusSettlingRatio < sorted.front()) {
      j.outcome = CensusOutcome::kSettling;
      j.sentence = counter + " survivors per block decelerating (" + listed +
                   "): every aged block kept " + FormatAmount(sorted.front(), unit) +
                   " or more, the newest " + FormatAmount(newest, unit) +
                   ": growth that slowed or stopped (a cache that filled); run longer than " +
                   std::to_string(2 * schedule.TotalSteps()) + " steps to decide";
      j.sentence += decay_text;
      return j;
    }
    const double median = sorted.size() % 2 == 1
                              ? sorted[sorted.size() / 2]
                              : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
    j.rate_per_step = median / n;
    j.outcome = CensusOutcome::kGrowth;
    j.sentence = counter + " grew " + FormatRate(j.rate_per_step, unit) + ": " + listed +
                 " (survivors from every block, " + std::to_string(n) + " steps each)";
    j.sentence += decay_text;
    return j;
  }
  // Survivors from the newest aged block alone are what a slow turnover leaves when the older
  // blocks' survivors are still being freed (the program shows it turns over); with older blocks
  // that left nothing at all, they are one event like any other.
  if (with.empty() || (with.size() == 1 && with.front() == aged - 1 && !decayed.empty())) {
    j.outcome = CensusOutcome::kBounded;
    j.sentence = counter + " bounded: " + listed +
                 (with.empty() ? " (nothing older than one block survives)"
                               : " (only the newest aged block left survivors, and older blocks' "
                                 "are being freed: a slow turnover)") +
                 floor_text;
    j.sentence += decay_text;
    return j;
  }
  bool gap = false;
  for (std::size_t i = 1; i < with.size(); ++i) {
    if (with[i] > with[i - 1] + 1) gap = true;
  }
  double least = 0, most = 0;  // the blocks that left survivors: a leak leaves alike amounts
  for (int k : with) {
    const double v = aged_bytes[static_cast<std::size_t>(k)];
    least = least == 0 ? v : std::min(least, v);
    most = std::max(most, v);
  }
  const bool alike = least * kCensusRecurringRatio >= most;
  const bool to_the_end = with.back() == aged - 1;  // survivors up to the newest aged block
  const std::string blocks_with = [&] {
    std::string out;
    for (int k : with) out += (out.empty() ? "" : ", ") + std::to_string(k + 1);
    return out;
  }();
  if (with.size() >= 2 && alike && (gap || to_the_end)) {
    double sum = 0;
    for (int k : with) sum += aged_bytes[static_cast<std::size_t>(k)];
    j.rate_per_step = sum / (static_cast<double>(aged) * n);
    j.outcome = CensusOutcome::kRecurring;
    j.sentence = counter + " grew " + FormatRate(j.rate_per_step, unit) + ": " + listed +
                 " (alike survivors from blocks " + blocks_with +
                 (gap ? ", recurring after a block that left none: a leak that fires less often "
                        "than once every " + std::to_string(n) + " steps)"
                      : ": a leak that began after block 1 or fires less often than once every " +
                            std::to_string(n) + " steps)");
    j.sentence += decay_text;
    return j;
  }
  // Survivors up to the newest aged block, growing with newness past 4x, older blocks empty: the
  // same thinning as above (a slow turnover); anything else is left to confirmation.
  bool thinning = to_the_end && with.size() >= 2 &&
                  aged_bytes[static_cast<std::size_t>(with.front())] * kCensusSettlingRatio <
                      aged_bytes[static_cast<std::size_t>(with.back())];
  for (std::size_t i = 1; i < with.size(); ++i) {
    if (aged_bytes[static_cast<std::size_t>(with[i])] <
        aged_bytes[static_cast<std::size_t>(with[i - 1])])
      thinning = false;
  }
  if (thinning) return thinned();
  j.outcome = CensusOutcome::kOneTime;
  j.sentence = counter + " census: " + listed + ": survivors from block" +
               (with.size() == 1 ? " " : "s ") + blocks_with +
               (with.size() == 1 ? std::string(" only, unlike a steady leak: a one-time event")
                                 : " only, then none: growth that stopped (a one-time event "
                                   "spread over blocks, a cache that filled)") +
               floor_text;
  j.sentence += decay_text;
  return j;
}

// Turnover from one block end to the next (kCensusTurnoverShare): what became aged against what
// older was freed meanwhile, in bytes and in allocations. `ends[k]`: the census at the end of
// block k (k = 0..B-1); an empty one was not taken and skips its transitions.
void JudgeTurnover(std::span<const std::span<const CensusCohort>> ends, const Schedule& schedule,
                   double floor_bytes, CensusJudgement& j) {
  struct Side {
    double before = 0;
    std::vector<double> bytes, blocks;
  };
  const auto side = [&](std::span<const CensusCohort> c) {
    Side s;
    double before_blocks = 0;
    s.bytes = ByBlock(c, schedule, false, &s.before, &s.blocks);
    ByBlock(c, schedule, true, &before_blocks, nullptr);
    s.blocks.push_back(before_blocks);  // the last entry: blocks born before the measured ones
    return s;
  };
  double arrived_blocks = 0, departed_blocks = 0;
  int steady_blocks = 0;
  for (std::size_t t = 1; t < ends.size(); ++t) {
    if (ends[t - 1].empty() || ends[t].empty()) continue;
    const Side then = side(ends[t - 1]);
    const Side now = side(ends[t]);
    const std::size_t newly = t - 1;  // the block that becomes aged at this block end
    const double arrived = now.bytes[newly];
    const double arrived_n = now.blocks[newly];
    if (arrived < floor_bytes || arrived_n <= 0) continue;
    double older_then = then.before, older_now = now.before;
    double older_then_n = then.blocks.back(), older_now_n = now.blocks.back();
    for (std::size_t k = 0; k < newly; ++k) {
      older_then += then.bytes[k];
      older_now += now.bytes[k];
      older_then_n += then.blocks[k];
      older_now_n += now.blocks[k];
    }
    const double departed = std::max(0.0, older_then - older_now);
    const double departed_n = std::max(0.0, older_then_n - older_now_n);
    for (std::size_t k = 0; k < newly; ++k) {
      j.departed_measured_bytes += std::max(0.0, then.bytes[k] - now.bytes[k]);
    }
    ++j.turnover_transitions;
    j.arrived_bytes += arrived;
    j.departed_bytes += departed;
    arrived_blocks += arrived_n;
    departed_blocks += departed_n;
    if (departed * kCensusTurnoverSteady >= arrived) ++j.turnover_steady;
    if (departed_n * kCensusTurnoverSteady >= arrived_n) ++steady_blocks;
  }
  const int read = j.turnover_transitions;
  j.turnover = read >= kCensusMinTurnoverTransitions && j.departed_measured_bytes > 0 &&
               j.departed_bytes >= kCensusTurnoverShare * j.arrived_bytes &&
               departed_blocks >= kCensusTurnoverShare * arrived_blocks &&
               2 * j.turnover_steady > read && 2 * steady_blocks > read;
}

}  // namespace

CensusJudgement JudgeCensus(const std::string& counter, std::span<const CensusCohort> cohorts,
                            int census_step, const Schedule& schedule, bool count,
                            std::span<const CensusCohort> previous,
                            std::span<const std::vector<CensusCohort>> block_ends) {
  CensusJudgement j = JudgeSurvivors(counter, cohorts, census_step, schedule, count, previous);
  if (j.outcome == CensusOutcome::kTooFewBlocks || j.outcome == CensusOutcome::kBounded ||
      block_ends.size() + 1 != static_cast<std::size_t>(schedule.blocks)) {
    return j;
  }
  std::vector<std::span<const CensusCohort>> ends(block_ends.begin(), block_ends.end());
  ends.push_back(cohorts);
  JudgeTurnover(ends, schedule, std::max(1.0, kCensusFloorBytesPerStep * schedule.steps_per_block),
                j);
  if (!j.turnover) return j;
  j.sentence = counter + " bounded: aged survivors replace older ones: at " +
               std::to_string(j.turnover_transitions) + " block ends " +
               FormatAmount(j.arrived_bytes, "bytes") + " became a block old while " +
               FormatAmount(j.departed_bytes, "bytes") +
               " born earlier was freed (at " + std::to_string(j.turnover_steady) + " of " +
               std::to_string(j.turnover_transitions) +
               " at least a quarter of what aged): a structure that turns over (a runtime's free "
               "lists reusing old memory, a cache), not a leak, which frees nothing older [census: " +
               j.sentence + "]";
  j.outcome = CensusOutcome::kBounded;
  j.rate_per_step = 0;
  return j;
}

}  // namespace leakbound::harness
