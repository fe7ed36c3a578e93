// Verdict rules for exact and noisy counters (specified in docs/verdicts.md) and the robust
// statistics under them. Pure functions over spans: the only heap use is Theil-Sen's pair
// scratch and the evidence strings.
#include "leakbound/harness/verdict.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "evidence_format.h"
#include "leakbound/reports/format.h"

namespace leakbound::harness {
namespace detail {

// Formatting for evidence sentences, shared with census_rule.cc (evidence_format.h).
std::string FormatAmount(double value, const std::string& unit) {
  return reports::FormatInUnit(value, unit);
}

// A per-step rate. Bytes stay in plain B below 1 MiB/step so that small leaks read exactly
// ("1 B/step", "2.67 B/step"); integers print exactly, fractions with three significant digits.
std::string FormatRate(double per_step, const std::string& unit) {
  if (unit == "bytes" && std::fabs(per_step) >= 1024.0 * 1024.0) {
    return reports::FormatBytes(per_step) + "/step";
  }
  char buf[64];
  if (per_step == std::trunc(per_step) && std::fabs(per_step) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", per_step);
  } else if (std::fabs(per_step) >= 100) {
    std::snprintf(buf, sizeof buf, "%.1f", per_step);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g", per_step);
  }
  if (unit == "bytes") return std::string(buf) + " B/step";
  if (unit.empty() || unit == "count") return std::string(buf) + "/step";
  return std::string(buf) + " " + unit + "/step";
}

}  // namespace detail

namespace {

using detail::FormatAmount;
using detail::FormatRate;

using reports::CounterVerdict;

// ---- Formatting for evidence sentences -------------------------------------------------------
// Levels and deltas use the report layer's formatters (reports/format.h), so evidence and the
// rendered tables write "1.50 MiB" the same way; only per-step rates are formatted here.


std::string FormatSigned(double value, const std::string& unit) {
  return unit == "bytes" ? reports::FormatSignedBytes(value) : reports::FormatSignedCount(value);
}

// ---- Robust statistics -----------------------------------------------------------------------

// Median of a scratch vector (reordered); the mean of the two middle values for an even count.
double MedianInPlace(std::vector<double>& v) {
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lower + upper);
}

std::uint64_t SplitMix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void RequireFinite(std::span<const double> values, const char* what) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      throw std::invalid_argument(std::string(what) + "[" + std::to_string(i) +
                                  "] is not finite (" + std::to_string(values[i]) +
                                  "); a probe must report a number for every sample");
    }
  }
}

// Theil-Sen over pairs (i, j), i < j, with abscissae x_at(i). Pairs with equal x are skipped.
// Above kTheilSenExactMaxPoints the pairs are a fixed-seed sample, so results are reproducible.
template <typename XAt>
double TheilSenImpl(std::span<const double> y, XAt x_at) {
  RequireFinite(y, "Theil-Sen y");
  const std::size_t n = y.size();
  if (n < 2) return 0;
  std::vector<double> slopes;
  auto add_pair = [&](std::size_t i, std::size_t j) {
    const double dx = x_at(j) - x_at(i);
    if (dx != 0) slopes.push_back((y[j] - y[i]) / dx);
  };
  if (n <= kTheilSenExactMaxPoints) {
    slopes.reserve(n * (n - 1) / 2);
    for (std::size_t i = 0; i + 1 < n; ++i) {
      for (std::size_t j = i + 1; j < n; ++j) add_pair(i, j);
    }
  } else {
    slopes.reserve(kTheilSenSampledPairs);
    std::uint64_t state = 0x6C65616B626F756Eull;  // "leakboun": fixed seed, deterministic
    for (std::size_t k = 0; k < kTheilSenSampledPairs; ++k) {
      const std::size_t i = SplitMix64(state) % n;
      const std::size_t j = (i + 1 + SplitMix64(state) % (n - 1)) % n;  // any index but i
      add_pair(std::min(i, j), std::max(i, j));
    }
  }
  if (slopes.empty()) {
    throw std::invalid_argument("Theil-Sen slope: all " + std::to_string(n) +
                                " x values are equal; a slope needs at least two distinct x");
  }
  return MedianInPlace(slopes);
}

// ---- Blocks ----------------------------------------------------------------------------------

struct BlockRange {
  double min = 0;
  double max = 0;
  bool operator==(const BlockRange&) const = default;
};

BlockRange RangeOf(std::span<const double> block) {
  const auto [lo, hi] = std::minmax_element(block.begin(), block.end());
  return {*lo, *hi};
}

std::vector<BlockRange> BlockRanges(std::span<const double> measured, int blocks,
                                    int steps_per_block) {
  std::vector<BlockRange> ranges;
  ranges.reserve(static_cast<std::size_t>(blocks));
  const auto n = static_cast<std::size_t>(steps_per_block);
  for (int b = 0; b < blocks; ++b) {
    ranges.push_back(RangeOf(measured.subspan(static_cast<std::size_t>(b) * n, n)));
  }
  return ranges;
}

// What the trend half of a verdict found: the slope to report and one sentence.
struct Trend {
  double slope_per_step = 0;
  double slope_bound = 0;  // the floor the slope was judged against; 0 for exact counters
  bool grew = false;
  bool one_time = false;   // exact counters: one rise that did not recur
  int one_time_step = -1;  // sample index at which it rose
  std::string sentence;
};

// Rises of an exact counter's block floor (min) and ceiling (max) between consecutive blocks.
struct Rises {
  int floor = 0;
  int ceiling = 0;
  int first_floor_block = -1;  // index of the block after the first floor rise
  int first_ceiling_block = -1;
};

Rises CountRises(const std::vector<BlockRange>& ranges) {
  Rises r;
  for (std::size_t b = 1; b < ranges.size(); ++b) {
    if (ranges[b].min > ranges[b - 1].min) {
      if (r.floor++ == 0) r.first_floor_block = static_cast<int>(b);
    }
    if (ranges[b].max > ranges[b - 1].max) {
      if (r.ceiling++ == 0) r.first_ceiling_block = static_cast<int>(b);
    }
  }
  return r;
}

// Where a new floor began: one past the last sample below `level` before `block_start` (the
// first sample of the first block with that floor).
std::size_t StepOfFloorRise(std::span<const double> measured, std::size_t block_start,
                            double level) {
  std::size_t step = 0;
  for (std::size_t i = 0; i < block_start && i < measured.size(); ++i) {
    if (measured[i] < level) step = i + 1;
  }
  return step;
}

// Where a new ceiling was first reached: the first sample of the block at `level`.
std::size_t StepOfCeilingRise(std::span<const double> measured, std::size_t block_start,
                              double level) {
  for (std::size_t i = block_start; i < measured.size(); ++i) {
    if (measured[i] >= level) return i;
  }
  return block_start;
}

// Exact counters, on block ranges (min, max) of the measured blocks:
//  - flat: every block has the same min and max;
//  - growth: the floor rose at two or more block transitions with a net rise (first to last
//    block), or the ceiling did so (a leak that lands in the last steps of a block);
//  - a one-time rise: the floor or ceiling rose at exactly one transition. Not growth: it is
//    reported, and the counter is then judged on return to baseline. The Runner runs
//    confirmation blocks when it sees one (NeedsConfirmation), so a slow leak rises again.
// The slope is the net rise between the first and last block over the (B-1)*N steps between.
Trend ExactTrend(const CounterInfo& info, std::span<const double> measured,
                 const Schedule& schedule) {
  const std::vector<BlockRange> ranges =
      BlockRanges(measured, schedule.blocks, schedule.steps_per_block);
  const std::string over = " over " + std::to_string(schedule.blocks) + " blocks of " +
                           std::to_string(schedule.steps_per_block) + " steps";
  const BlockRange first = ranges.front();
  const BlockRange last = ranges.back();
  const bool flat =
      std::all_of(ranges.begin(), ranges.end(), [&](const BlockRange& r) { return r == first; });
  Trend trend;
  if (flat) {
    trend.sentence = info.name + " flat" + over + " (every block: min " +
                     FormatAmount(first.min, info.unit) + ", max " +
                     FormatAmount(first.max, info.unit) + ")";
    return trend;
  }
  const double steps_between = static_cast<double>(schedule.blocks - 1) * schedule.steps_per_block;
  // "A → B (+rise)": the rise is printed too, since a 1 B/step leak leaves A and B looking equal.
  auto change = [&](double from, double to) {
    return FormatAmount(from, info.unit) + " → " + FormatAmount(to, info.unit) + " (" +
           FormatSigned(to - from, info.unit) + ")";
  };
  const std::string minima = change(first.min, last.min);
  const std::string maxima = change(first.max, last.max);
  const Rises rises = CountRises(ranges);
  const bool floor_grew = last.min > first.min && rises.floor >= 2;
  const bool ceiling_grew = last.max > first.max && rises.ceiling >= 2;
  const std::string times = [&](int n) { return " (rose at " + std::to_string(n) + " of " +
                                                std::to_string(schedule.blocks - 1) +
                                                " block transitions)"; }(
      floor_grew ? rises.floor : rises.ceiling);
  if (floor_grew) {
    trend.grew = true;
    trend.slope_per_step = (last.min - first.min) / steps_between;
    trend.sentence = info.name + " grew " + FormatRate(trend.slope_per_step, info.unit) +
                     ": block minima " + minima + over + times;
  } else if (ceiling_grew) {
    trend.grew = true;
    trend.slope_per_step = (last.max - first.max) / steps_between;
    trend.sentence = info.name + " grew " + FormatRate(trend.slope_per_step, info.unit) +
                     ": block maxima " + maxima + over + times + " (minima " + minima + ")";
  } else if (last.min > first.min || last.max > first.max) {
    // One rise that did not recur: a one-time event (a lazy cache, a late allocation).
    const bool on_floor = last.min > first.min;
    const int block = on_floor ? rises.first_floor_block : rises.first_ceiling_block;
    const double level = on_floor ? ranges[static_cast<std::size_t>(block)].min
                                  : ranges[static_cast<std::size_t>(block)].max;
    const double before = on_floor ? ranges[static_cast<std::size_t>(block) - 1].min
                                   : ranges[static_cast<std::size_t>(block) - 1].max;
    const std::size_t block_start =
        static_cast<std::size_t>(block) * static_cast<std::size_t>(schedule.steps_per_block);
    const std::size_t step = on_floor ? StepOfFloorRise(measured, block_start, level)
                                      : StepOfCeilingRise(measured, block_start, level);
    trend.one_time = true;
    trend.one_time_step = static_cast<int>(step) + schedule.warmup_steps;
    trend.slope_per_step = 0;
    trend.sentence = info.name + " one-time rise of " + FormatAmount(level - before, info.unit) +
                     " at step " + std::to_string(trend.one_time_step) +
                     " that did not recur" + over + " (block " + (on_floor ? "minima " : "maxima ") +
                     (on_floor ? minima : maxima) + "): not growth";
  } else {
    // Changed without a net rise (shrank, or rose and fell back): bounded as far as the window
    // can tell. The signed floor slope is still reported.
    trend.slope_per_step = (last.min - first.min) / steps_between;
    trend.sentence = info.name + " changed across blocks without rising: block minima " + minima +
                     ", maxima " + maxima + over;
  }
  return trend;
}

// Noisy counters: Theil-Sen slope over the measured window against the noise floor. Growth
// needs slope > floor.slope_per_step AND slope * B*N > floor.total_growth, i.e. the slope must
// clear max(slope_per_step, total_growth / (B*N)), which is reported as slope_bound.
Trend NoisyTrend(const CounterInfo& info, std::span<const double> measured,
                 const NoiseFloor& floor) {
  const double window = static_cast<double>(measured.size());
  Trend trend;
  trend.slope_bound = std::max(floor.slope_per_step, floor.total_growth / window);
  trend.slope_per_step = TheilSenSlope(measured);
  trend.grew = trend.slope_per_step > floor.slope_per_step &&
               trend.slope_per_step * window > floor.total_growth;
  const std::string fit = " (Theil-Sen over " + std::to_string(measured.size()) + " measured steps";
  if (trend.grew) {
    trend.sentence = info.name + " grew " + FormatRate(trend.slope_per_step, info.unit) + fit +
                     ", " + FormatSigned(trend.slope_per_step * window, info.unit) +
                     " over the window), above the noise floor of " +
                     FormatRate(trend.slope_bound, info.unit);
  } else {
    trend.sentence = info.name + " slope " + FormatRate(trend.slope_per_step, info.unit) + fit +
                     ") within the noise floor of " + FormatRate(trend.slope_bound, info.unit);
  }
  return trend;
}


}  // namespace

void ValidateSchedule(const Schedule& schedule, std::size_t sample_count) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("Schedule: " + what); };
  if (schedule.blocks < 2) {
    fail("blocks must be >= 2 so that blocks can be compared (got " +
         std::to_string(schedule.blocks) + ")");
  }
  if (schedule.steps_per_block < 1) {
    fail("steps_per_block must be >= 1 (got " + std::to_string(schedule.steps_per_block) + ")");
  }
  if (schedule.warmup_steps < 0) {
    fail("warmup_steps must be >= 0 (got " + std::to_string(schedule.warmup_steps) + ")");
  }
  const std::int64_t expected = std::int64_t{schedule.warmup_steps} +
                                std::int64_t{schedule.blocks} * schedule.steps_per_block;
  if (expected > std::numeric_limits<int>::max()) {
    fail("W + B*N = " + std::to_string(expected) + " steps does not fit in an int");
  }
  if (static_cast<std::uint64_t>(expected) != sample_count) {
    fail("expected W + B*N = " + std::to_string(schedule.warmup_steps) + " + " +
         std::to_string(schedule.blocks) + "*" + std::to_string(schedule.steps_per_block) + " = " +
         std::to_string(expected) + " samples (one per step), got " + std::to_string(sample_count));
  }
}

std::vector<int> BlockEnds(const Schedule& schedule) {
  std::vector<int> ends;
  for (int b = 1; b <= schedule.blocks; ++b) {
    ends.push_back(schedule.warmup_steps + b * schedule.steps_per_block - 1);
  }
  return ends;
}

CounterVerdict JudgeCounter(const CounterInfo& info, std::span<const double> values,
                            const Schedule& schedule, double baseline, double final_value,
                            const JudgeOptions& options) {
  try {
    ValidateSchedule(schedule, values.size());
    RequireFinite(values, "values");
    const double extras[] = {baseline, final_value, options.observed_peak.value_or(0),
                             options.peak_budget.value_or(0)};
    RequireFinite(extras, "baseline, final_value, observed_peak, peak_budget");
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(info.name + ": " + e.what());
  }

  CounterVerdict verdict;
  verdict.counter = info.name;
  verdict.baseline = baseline;
  verdict.final_value = final_value;
  verdict.peak = std::max({*std::max_element(values.begin(), values.end()), baseline, final_value,
                           options.observed_peak.value_or(baseline)});

  const auto measured = values.subspan(static_cast<std::size_t>(schedule.warmup_steps));
  Trend trend =
      info.exact ? ExactTrend(info, measured, schedule) : NoisyTrend(info, measured, options.noise);
  // The census decides growth when it can; the curve stays as supporting evidence.
  bool unsettled = false;  // the census cannot decide yet: a verdict of inconclusive
  if (info.exact && options.census && options.census->outcome != CensusOutcome::kTooFewBlocks) {
    const CensusJudgement& census = *options.census;
    const std::string curve = " [curve: " + trend.sentence + "]";
    const bool grew = census.outcome == CensusOutcome::kGrowth ||
                      census.outcome == CensusOutcome::kRecurring;
    trend.grew = grew;
    trend.one_time = census.outcome == CensusOutcome::kOneTime;
    trend.slope_per_step = grew ? census.rate_per_step : 0;
    // Where nothing can confirm a one-time event (a watched program), it is inconclusive unless
    // it is small beside what the newest block holds (an old object or two that a bounded
    // structure keeps: a real run of PyTorch leaves 336 B from one block beside 11.5 KiB).
    double aged = 0;
    for (std::size_t k = 0; k + 1 < census.persistent.size(); ++k) aged += census.persistent[k];
    const double newest = census.survivor_bytes.empty() ? 0 : census.survivor_bytes.back();
    const bool unconfirmed = census.outcome == CensusOutcome::kOneTime &&
                             !options.census_can_confirm;
    const bool small = unconfirmed && aged * kCensusSettlingRatio <= newest;
    unsettled = census.outcome == CensusOutcome::kSettling || (unconfirmed && !small);
    trend.one_time = census.outcome == CensusOutcome::kOneTime;
    trend.sentence = census.sentence;
    if (unconfirmed && small) {
      trend.sentence += "; bounded: the older survivors (" + FormatAmount(aged, info.unit) +
                        ") are less than a quarter of what the newest block holds (" +
                        FormatAmount(newest, info.unit) + ")";
    } else if (unconfirmed) {
      trend.sentence += "; nothing can confirm it in a watched program: run at least " +
                        std::to_string(2 * schedule.TotalSteps()) +
                        " steps to tell it from a leak that fires less often than once a block";
    }
    trend.sentence += curve;
  } else if (info.exact && options.census) {
    trend.sentence += "; " + options.census->sentence;
  }
  verdict.slope_per_step = trend.slope_per_step;
  verdict.slope_bound = trend.slope_bound;

  // Findings in precedence order: growth > not returned to baseline > peak over budget.
  // Returned-to-baseline is only meaningful for exact counters (noisy ones never come back
  // to the byte).
  std::vector<std::pair<reports::VerdictClass, std::string>> findings;
  if (trend.grew) findings.emplace_back(reports::kUnboundedGrowth, trend.sentence);
  const double residue = final_value - baseline;
  if (info.exact && residue != 0 && options.judge_return_to_baseline) {
    findings.emplace_back(reports::kNotReturnedToBaseline,
                          info.name + " did not return to baseline: residue " +
                              FormatSigned(residue, info.unit) + " after teardown (baseline " +
                              FormatAmount(baseline, info.unit) + ", final " +
                              FormatAmount(final_value, info.unit) + ")" +
                              (trend.one_time ? "; " + trend.sentence : std::string()));
  }
  const bool has_budget = options.peak_budget.has_value();
  if (has_budget && verdict.peak > *options.peak_budget) {
    findings.emplace_back(reports::kPeakOverBudget,
                          info.name + " peaked at " + FormatAmount(verdict.peak, info.unit) + ", " +
                              FormatAmount(verdict.peak - *options.peak_budget, info.unit) +
                              " over the budget of " +
                              FormatAmount(*options.peak_budget, info.unit));
  }
  // A census that cannot decide yet ranks below every definite finding.
  if (unsettled && info.judged) findings.emplace_back(reports::kInconclusive, trend.sentence);

  if (!info.judged) {
    verdict.verdict = reports::kPass;
    verdict.judged = false;
    // A noisy counter is judged only against a noise floor calibrated on clean runs; without
    // one (calibration off, e.g. --no-calibrate) it is reported, and the evidence says why.
    verdict.evidence = info.name +
                       (info.missing_noise_floor
                            ? std::string(" is not judged (noisy counter with no calibrated "
                                          "noise floor: calibration was off)")
                            : std::string(" is informational (not judged)")) +
                       ": slope " +
                       FormatRate(trend.slope_per_step, info.unit) + ", peak " +
                       FormatAmount(verdict.peak, info.unit);
    return verdict;
  }
  if (findings.empty()) {
    verdict.verdict = reports::kPass;
    verdict.evidence = trend.sentence;
    if (info.exact && options.judge_return_to_baseline) verdict.evidence += "; returned to baseline";
    if (info.exact && !options.judge_return_to_baseline && residue != 0) {
      verdict.evidence += "; return to baseline not judged (a watched program): " +
                          FormatSigned(residue, info.unit) + " from first to last sample";
    }
    if (has_budget) {
      verdict.evidence += "; peak " + FormatAmount(verdict.peak, info.unit) + " within budget " +
                          FormatAmount(*options.peak_budget, info.unit);
    }
    return verdict;
  }
  verdict.verdict = findings.front().first;
  verdict.evidence = findings.front().second;
  for (std::size_t i = 1; i < findings.size(); ++i) {
    verdict.evidence += "; also " + findings[i].second;
  }
  return verdict;
}

bool NeedsConfirmation(std::span<const double> values, const Schedule& schedule) {
  ValidateSchedule(schedule, values.size());
  const auto measured = values.subspan(static_cast<std::size_t>(schedule.warmup_steps));
  const std::vector<BlockRange> ranges =
      BlockRanges(measured, schedule.blocks, schedule.steps_per_block);
  const Rises rises = CountRises(ranges);
  const bool floor_once = ranges.back().min > ranges.front().min && rises.floor == 1;
  const bool ceiling_once = ranges.back().max > ranges.front().max && rises.ceiling == 1;
  const bool grew = (ranges.back().min > ranges.front().min && rises.floor >= 2) ||
                    (ranges.back().max > ranges.front().max && rises.ceiling >= 2);
  return !grew && (floor_once || ceiling_once);
}

double TheilSenSlope(std::span<const double> y) {
  return TheilSenImpl(y, [](std::size_t i) { return static_cast<double>(i); });
}

double TheilSenSlopeAt(std::span<const double> y, std::span<const double> x) {
  if (x.size() != y.size()) {
    throw std::invalid_argument("Theil-Sen slope: " + std::to_string(y.size()) + " y values but " +
                                std::to_string(x.size()) + " x values; they must pair up");
  }
  RequireFinite(x, "Theil-Sen x");
  return TheilSenImpl(y, [x](std::size_t i) { return x[i]; });
}

int DetectWarmupEnd(const std::vector<std::span<const double>>& exact_series, int steps_per_block,
                    int max_warmup_blocks) {
  if (steps_per_block < 1) {
    throw std::invalid_argument("DetectWarmupEnd: steps_per_block must be >= 1 (got " +
                                std::to_string(steps_per_block) + ")");
  }
  if (max_warmup_blocks < 0) {
    throw std::invalid_argument("DetectWarmupEnd: max_warmup_blocks must be >= 0 (got " +
                                std::to_string(max_warmup_blocks) + ")");
  }
  if (exact_series.empty()) return 0;  // nothing to wait for
  const std::size_t length = exact_series.front().size();
  for (std::size_t s = 0; s < exact_series.size(); ++s) {
    if (exact_series[s].size() != length) {
      throw std::invalid_argument("DetectWarmupEnd: series " + std::to_string(s) + " has " +
                                  std::to_string(exact_series[s].size()) +
                                  " samples but series 0 has " + std::to_string(length) +
                                  "; all series must come from the same run");
    }
  }
  const auto n = static_cast<std::size_t>(steps_per_block);
  for (std::size_t k = 0; k <= static_cast<std::size_t>(max_warmup_blocks); ++k) {
    if ((k + kWarmupStableBlocks) * n > length) break;
    if (k * n > static_cast<std::size_t>(std::numeric_limits<int>::max())) break;
    const bool stable =
        std::all_of(exact_series.begin(), exact_series.end(), [&](std::span<const double> series) {
          const BlockRange first = RangeOf(series.subspan(k * n, n));
          for (std::size_t b = 1; b < static_cast<std::size_t>(kWarmupStableBlocks); ++b) {
            if (!(RangeOf(series.subspan((k + b) * n, n)) == first)) return false;
          }
          return true;
        });
    if (stable) return static_cast<int>(k * n);
  }
  return -1;
}

NoiseFloor CalibrateNoiseFloor(const std::vector<std::span<const double>>& clean_windows,
                               const CalibrationOptions& options) {
  if (clean_windows.empty()) {
    throw std::invalid_argument(
        "CalibrateNoiseFloor: no clean windows; run the clean workload at least once first");
  }
  double max_abs_slope = 0;
  double max_standard_error = 0;
  std::vector<double> residuals;
  for (std::size_t w = 0; w < clean_windows.size(); ++w) {
    const std::span<const double> y = clean_windows[w];
    if (y.size() < 3) {
      throw std::invalid_argument("CalibrateNoiseFloor: window " + std::to_string(w) + " has " +
                                  std::to_string(y.size()) +
                                  " samples; a residual spread needs at least 3");
    }
    const double slope = TheilSenSlope(y);
    residuals.assign(y.begin(), y.end());
    for (std::size_t i = 0; i < y.size(); ++i) residuals[i] -= slope * static_cast<double>(i);
    std::vector<double> scratch = residuals;
    const double center = MedianInPlace(scratch);
    for (double& r : residuals) r = std::fabs(r - center);
    // 1.4826 * MAD estimates the standard deviation of Gaussian noise, ignoring outliers.
    const double sigma = 1.4826 * MedianInPlace(residuals);
    const double n = static_cast<double>(y.size());
    const double standard_error = sigma * std::sqrt(12.0 / (n * (n * n - 1.0)));
    max_abs_slope = std::max(max_abs_slope, std::fabs(slope));
    max_standard_error = std::max(max_standard_error, standard_error);
  }
  NoiseFloor floor;
  floor.slope_per_step =
      std::max(options.min_slope_per_step, options.safety_factor * max_abs_slope +
                                               options.sigma_multiplier * max_standard_error);
  floor.total_growth = options.min_total_growth;
  return floor;
}

}  // namespace leakbound::harness
