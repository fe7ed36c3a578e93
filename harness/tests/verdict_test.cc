// Tests for the verdict rules (docs/verdicts.md) on synthetic series: each planted pattern
// (linear, step, sawtooth, warm-up, cache, noise, outliers) is built here so the expected slope
// and verdict are known exactly.
#include "leakbound/harness/verdict.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace leakbound::harness {
namespace {

constexpr double kBase = 1 << 20;  // live bytes before the workload (1 MiB)
constexpr double kRssBase = 200.0 * (1 << 20);

CounterInfo ExactBytes(std::string name = "runtime.live_bytes") {
  return {std::move(name), "bytes", /*exact=*/true, /*judged=*/true};
}
CounterInfo NoisyBytes(std::string name = "host.rss_bytes") {
  return {std::move(name), "bytes", /*exact=*/false, /*judged=*/true};
}

// values[i] = f(i) for every step of the schedule (warm-up included).
std::vector<double> Series(const Schedule& s, const std::function<double(int)>& f) {
  std::vector<double> v;
  for (int i = 0; i < s.TotalSteps(); ++i) v.push_back(f(i));
  return v;
}

// Deterministic bell-shaped jitter in [-3, 3) * amplitude: the sum of three uniforms taken from
// mt19937_64's raw output (whose sequence, unlike std::normal_distribution's, is standardised).
std::vector<double> Jitter(int n, std::uint64_t seed, double amplitude) {
  std::mt19937_64 rng(seed);
  auto uniform = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53 * 2.0 - 1.0; };
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(amplitude * (uniform() + uniform() + uniform()));
  return v;
}

// An RSS-like measured window: base + slope*i + jitter, with a few large outliers.
std::vector<double> NoisyWindow(int n, std::uint64_t seed, double slope, bool outliers) {
  std::vector<double> v = Jitter(n, seed, 16 * 1024);
  for (int i = 0; i < n; ++i) v[i] += kRssBase + slope * i;
  if (outliers) {
    v[5] += 8 << 20;
    v[n / 2] += 8 << 20;
    v[n / 2 + 1] -= 4 << 20;
    v[n - 3] += 8 << 20;
  }
  return v;
}

template <typename Fn>
void ExpectInvalidArgument(Fn fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected std::invalid_argument containing '" << fragment << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

bool Contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

// ---- Exact counters --------------------------------------------------------------------------

TEST(Verdict, JudgeCounter_Flat_Passes) {
  const Schedule s{4, 3, 16};
  const auto values = Series(s, [](int) { return kBase; });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kPass);
  EXPECT_EQ(v.counter, "runtime.live_bytes");
  EXPECT_EQ(v.slope_per_step, 0.0);
  EXPECT_EQ(v.slope_bound, 0.0);
  EXPECT_EQ(v.peak, kBase);
  EXPECT_EQ(v.evidence,
            "runtime.live_bytes flat over 3 blocks of 16 steps (every block: min 1.00 MiB, max "
            "1.00 MiB); returned to baseline");
}

TEST(Verdict, JudgeCounter_LinearGrowth_FlagsExactSlope) {
  const Schedule s{4, 3, 16};
  const auto values = Series(s, [](int i) { return kBase + 4096.0 * (i + 1); });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kUnboundedGrowth);
  EXPECT_EQ(v.slope_per_step, 4096.0);
  EXPECT_EQ(v.slope_bound, 0.0);
  EXPECT_EQ(v.peak, kBase + 4096.0 * s.TotalSteps());
  EXPECT_EQ(v.evidence,
            "runtime.live_bytes grew 4096 B/step: block minima 1.02 MiB → 1.14 MiB (+128.00 KiB) "
            "over 3 blocks of 16 steps (rose at 2 of 2 block transitions)");
}

TEST(Verdict, JudgeCounter_SmallestLeakOneBytePerStep_Flagged) {
  const Schedule s{0, 3, 8};
  const auto values = Series(s, [](int i) { return kBase + i; });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kUnboundedGrowth);
  EXPECT_EQ(v.slope_per_step, 1.0);
  EXPECT_EQ(v.evidence,
            "runtime.live_bytes grew 1 B/step: block minima 1.00 MiB → 1.00 MiB (+16 B) over 3 "
            "blocks of 8 steps (rose at 2 of 2 block transitions)");
}

TEST(Verdict, JudgeCounter_StepLeakEvery7StepsWithin16StepBlocks_Flagged) {
  const Schedule s{0, 3, 16};
  const auto values = Series(s, [](int i) { return kBase + 32.0 * ((i + 1) / 7); });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kUnboundedGrowth);
  // Block minima: step 0 holds 0 leaked allocations, step 32 holds 4: 128 B over 32 steps.
  EXPECT_EQ(v.slope_per_step, 4.0);
}

TEST(Verdict, JudgeCounter_StepLeakEvery20StepsWith8StepBlocks_OneRiseNeedsConfirmation) {
  const Schedule s{0, 4, 8};
  // One 64 B allocation after step 19 (in block 2 of 4): one rise, which alone is not growth.
  const auto values = Series(s, [](int i) { return kBase + 64.0 * ((i + 1) / 20); });
  EXPECT_TRUE(NeedsConfirmation(values, s));
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kPass);
  EXPECT_TRUE(Contains(v.evidence, "one-time rise of 64 B at step 19 that did not recur"))
      << v.evidence;
}

TEST(Verdict, JudgeCounter_StepLeakEvery20StepsAfterConfirmationBlocks_Flagged) {
  const Schedule s{0, 8, 8};  // the 4 planned blocks and 4 confirmation blocks
  const auto values = Series(s, [](int i) { return kBase + 64.0 * ((i + 1) / 20); });
  EXPECT_FALSE(NeedsConfirmation(values, s));
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kUnboundedGrowth);
  // Minima: block 0 holds 0 allocations, block 7 (steps 56..63) holds 2: 128 B over 56 steps.
  EXPECT_DOUBLE_EQ(v.slope_per_step, 128.0 / 56.0);
  EXPECT_TRUE(Contains(v.evidence, "block minima")) << v.evidence;
}

TEST(Verdict, JudgeCounter_RiseInsideLastBlockOnly_NeedsConfirmationThenCaughtByMaxima) {
  const Schedule planned{0, 4, 8};
  // The only rise is after step 29, inside the last block: minima stay flat, the last max rises.
  const auto first = Series(planned, [](int i) { return kBase + 64.0 * ((i + 1) / 30); });
  EXPECT_TRUE(NeedsConfirmation(first, planned));
  const Schedule confirmed{0, 8, 8};
  const auto values = Series(confirmed, [](int i) { return kBase + 64.0 * ((i + 1) / 30); });
  const auto v = JudgeCounter(ExactBytes(), values, confirmed, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kUnboundedGrowth);
  EXPECT_DOUBLE_EQ(v.slope_per_step, 128.0 / 56.0);
  EXPECT_TRUE(Contains(v.evidence, "block maxima")) << v.evidence;
}

TEST(Verdict, JudgeCounter_OneTimeRiseFreedAtTeardown_PassesAndNamesTheStep) {
  const Schedule s{16, 6, 16};
  // 8 MiB allocated once, at step 50, kept until teardown.
  const auto values = Series(s, [](int i) { return kBase + (i >= 50 ? 8.0 * 1024 * 1024 : 0); });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kPass) << v.evidence;
  EXPECT_EQ(v.slope_per_step, 0.0);
  EXPECT_TRUE(Contains(v.evidence, "one-time rise of 8.00 MiB at step 50")) << v.evidence;
}

TEST(Verdict, JudgeCounter_OneTimeRiseNeverFreed_IsNotReturnedToBaseline) {
  const Schedule s{16, 6, 16};
  const double big = 8.0 * 1024 * 1024;
  const auto values = Series(s, [&](int i) { return kBase + (i >= 50 ? big : 0); });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase + big);
  EXPECT_EQ(v.verdict, reports::kNotReturnedToBaseline) << v.evidence;
  EXPECT_TRUE(Contains(v.evidence, "residue +8.00 MiB")) << v.evidence;
  EXPECT_TRUE(Contains(v.evidence, "one-time rise of 8.00 MiB at step 50")) << v.evidence;
}

TEST(Verdict, NeedsConfirmation_FlatOrTwiceRisingSeries_IsFalse) {
  const Schedule s{0, 3, 8};
  EXPECT_FALSE(NeedsConfirmation(Series(s, [](int) { return kBase; }), s));
  EXPECT_FALSE(NeedsConfirmation(Series(s, [](int i) { return kBase + i; }), s));
  EXPECT_TRUE(NeedsConfirmation(Series(s, [](int i) { return kBase + (i >= 12 ? 1 : 0); }), s));
}

TEST(Verdict, JudgeCounter_Sawtooth_EvenBlockLength_Passes) {
  const Schedule s{2, 4, 16};
  const auto values = Series(s, [](int i) { return kBase + (i % 2 == 1 ? 4096.0 : 0.0); });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kPass) << v.evidence;
  EXPECT_EQ(v.slope_per_step, 0.0);
  EXPECT_EQ(v.peak, kBase + 4096.0);
}

TEST(Verdict, JudgeCounter_Sawtooth_OddBlockLength_Passes) {
  // Odd N and odd W: block b starts on an odd step for even b and on an even step for odd b, so
  // block sums alternate; per-block min and max do not.
  const Schedule s{3, 4, 15};
  const auto values = Series(s, [](int i) { return kBase + (i % 2 == 1 ? 4096.0 : 0.0); });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kPass) << v.evidence;
  EXPECT_EQ(v.slope_per_step, 0.0);
}

TEST(Verdict, JudgeCounter_SawtoothWithRisingFloor_Flagged) {
  const Schedule s{0, 3, 15};
  const auto values =
      Series(s, [](int i) { return kBase + (i % 2 == 1 ? 4096.0 : 0.0) + 8.0 * i; });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kUnboundedGrowth);
  // Minima sit on even steps: block 0 at step 0, block 2 (steps 30..44) at step 30.
  EXPECT_EQ(v.slope_per_step, 8.0);
}

TEST(Verdict, JudgeCounter_LazyOneTimeAllocationAtStep0_Passes) {
  const Schedule s{0, 4, 8};
  // A handle/workspace created on first use and released at teardown.
  const auto values = Series(s, [](int) { return kBase + 65536.0; });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kPass) << v.evidence;
  EXPECT_EQ(v.peak, kBase + 65536.0);
}

TEST(Verdict, JudgeCounter_CapLimitedCache_PassesAfterDetectedWarmup) {
  // A cache adding 256 B per step until it holds 10 entries, then evicting one per insert.
  const Schedule run{0, 8, 4};
  const auto values = Series(run, [](int i) { return kBase + 256.0 * std::min(i + 1, 10); });
  const int warmup = DetectWarmupEnd({values}, 4, 5);
  EXPECT_EQ(warmup, 12);  // last rise after step 9, inside block [8, 12)

  const Schedule measured{warmup, 4, 4};
  const std::vector<double> tail(values.begin(), values.begin() + measured.TotalSteps());
  const auto v = JudgeCounter(ExactBytes(), tail, measured, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kPass) << v.evidence;

  // The trade-off: measured before the cap is reached, the filling cache is growth.
  const Schedule too_early{0, 7, 4};
  const std::vector<double> early(values.begin(), values.begin() + too_early.TotalSteps());
  EXPECT_EQ(JudgeCounter(ExactBytes(), early, too_early, kBase, kBase).verdict,
            reports::kUnboundedGrowth);
}

TEST(Verdict, JudgeCounter_ShrinkingCounter_PassesWithNote) {
  const Schedule s{0, 3, 8};
  const auto values = Series(s, [](int i) { return kBase + 4096.0 * (24 - i); });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kPass);
  EXPECT_EQ(v.slope_per_step, -4096.0);
  EXPECT_TRUE(Contains(v.evidence, "changed across blocks without rising")) << v.evidence;
}

TEST(Verdict, JudgeCounter_RiseThenFallBack_PassesWithNote) {
  const Schedule s{0, 3, 4};
  const auto values = Series(s, [](int i) { return kBase + (i >= 4 && i < 8 ? 512.0 : 0.0); });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kPass);
  EXPECT_EQ(v.slope_per_step, 0.0);
  EXPECT_TRUE(Contains(v.evidence, "without rising")) << v.evidence;
}

// Two rises of the block floor and ceiling, then a fall below where they began: rises alone are
// not growth, the last block must also end above the first (the `last.min > first.min` guard and
// its ceiling twin).
TEST(Verdict, JudgeCounter_TwoRisesThenNetFall_IsNotGrowth) {
  const Schedule s{0, 4, 4};
  const double levels[] = {100, 110, 120, 90};
  const auto values = Series(s, [&](int i) { return kBase + levels[i / 4]; });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase + 90, kBase + 90);
  EXPECT_EQ(v.verdict, reports::kPass) << v.evidence;
  EXPECT_TRUE(Contains(v.evidence, "without rising")) << v.evidence;
}

// Each block's last sample is its maximum: a block's range must include its last step.
TEST(Verdict, JudgeCounter_CeilingRisingOnEachBlocksLastSample_IsGrowth) {
  const Schedule s{0, 4, 4};
  const auto values =
      Series(s, [](int i) { return kBase + (i % 4 == 3 ? 64.0 * (i / 4 + 1) : 0.0); });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase);
  EXPECT_EQ(v.verdict, reports::kUnboundedGrowth) << v.evidence;
  EXPECT_EQ(v.slope_per_step, 16.0);  // maxima +64 -> +256 over 12 steps
}

TEST(Verdict, JudgeCounter_NotReturnedToBaseline_ReportsResidue) {
  const Schedule s{0, 2, 8};
  const auto values = Series(s, [](int) { return kBase + 8192.0; });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase + 4096.0);
  EXPECT_EQ(v.verdict, reports::kNotReturnedToBaseline);
  EXPECT_EQ(v.baseline, kBase);
  EXPECT_EQ(v.final_value, kBase + 4096.0);
  EXPECT_EQ(v.evidence,
            "runtime.live_bytes did not return to baseline: residue +4.00 KiB after teardown "
            "(baseline 1.00 MiB, final 1.00 MiB)");
}

TEST(Verdict, JudgeCounter_FinalBelowBaseline_IsNotReturned) {
  const Schedule s{0, 2, 8};
  const auto values = Series(s, [](int) { return kBase; });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase - 1.0);
  EXPECT_EQ(v.verdict, reports::kNotReturnedToBaseline);
  EXPECT_TRUE(Contains(v.evidence, "residue -1 B")) << v.evidence;
}

TEST(Verdict, JudgeCounter_GrowthAndResidue_GrowthWinsAndEvidenceNamesBoth) {
  const Schedule s{0, 3, 8};
  const auto values = Series(s, [](int i) { return kBase + 16.0 * i; });
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase + 256.0);
  EXPECT_EQ(v.verdict, reports::kUnboundedGrowth);
  EXPECT_TRUE(Contains(v.evidence, "grew 16 B/step")) << v.evidence;
  EXPECT_TRUE(Contains(v.evidence, "; also runtime.live_bytes did not return to baseline"))
      << v.evidence;
}

TEST(Verdict, JudgeCounter_PeakOverBudget_Flagged) {
  const Schedule s{0, 3, 8};
  const auto values = Series(s, [](int i) { return kBase + (i % 2 == 1 ? 4096.0 : 0.0); });
  JudgeOptions options;
  options.peak_budget = kBase + 1024.0;
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase, options);
  EXPECT_EQ(v.verdict, reports::kPeakOverBudget);
  EXPECT_EQ(v.peak, kBase + 4096.0);
  EXPECT_EQ(v.evidence,
            "runtime.live_bytes peaked at 1.00 MiB, 3.00 KiB over the budget of 1.00 MiB");
}

TEST(Verdict, JudgeCounter_ObservedPeakBetweenSamplesOverBudget_Flagged) {
  const Schedule s{0, 2, 4};
  const auto values = Series(s, [](int) { return kBase; });
  JudgeOptions options;
  options.peak_budget = 2.0 * kBase;
  options.observed_peak = 3.0 * kBase;
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase, options);
  EXPECT_EQ(v.verdict, reports::kPeakOverBudget);
  EXPECT_EQ(v.peak, 3.0 * kBase);
  EXPECT_TRUE(Contains(v.evidence, "peaked at 3.00 MiB, 1.00 MiB over the budget of 2.00 MiB"));
}

TEST(Verdict, JudgeCounter_PeakWithinBudget_PassesAndSaysSo) {
  const Schedule s{0, 2, 4};
  const auto values = Series(s, [](int) { return kBase; });
  JudgeOptions options;
  options.peak_budget = kBase;  // equal is within budget
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase, options);
  EXPECT_EQ(v.verdict, reports::kPass);
  EXPECT_TRUE(Contains(v.evidence, "peak 1.00 MiB within budget 1.00 MiB")) << v.evidence;
}

TEST(Verdict, JudgeCounter_ResidueAndPeakOverBudget_NotReturnedWins) {
  const Schedule s{0, 2, 4};
  const auto values = Series(s, [](int) { return 2.0 * kBase; });
  JudgeOptions options;
  options.peak_budget = kBase;
  const auto v = JudgeCounter(ExactBytes(), values, s, kBase, kBase + 1.0, options);
  EXPECT_EQ(v.verdict, reports::kNotReturnedToBaseline);
  EXPECT_TRUE(Contains(v.evidence, "; also runtime.live_bytes peaked at 2.00 MiB")) << v.evidence;
}

TEST(Verdict, JudgeCounter_NotJudged_NeverFlaggedButReportsSlopeAndPeak) {
  const Schedule s{0, 3, 8};
  const CounterInfo info{"runtime.total_allocations", "count", /*exact=*/true, /*judged=*/false};
  const auto values = Series(s, [](int i) { return 3.0 * (i + 1); });
  JudgeOptions options;
  options.peak_budget = 10;
  const auto v = JudgeCounter(info, values, s, 0, 100, options);
  EXPECT_EQ(v.verdict, reports::kPass);
  EXPECT_EQ(v.slope_per_step, 3.0);
  EXPECT_EQ(v.peak, 100.0);
  EXPECT_EQ(v.evidence,
            "runtime.total_allocations is informational (not judged): slope 3/step, "
            "peak 100");
}

TEST(Verdict, JudgeCounter_NoisyNotJudged_NeverFlagged) {
  const Schedule s{0, 4, 32};
  const CounterInfo info{"host.rss_bytes", "bytes", /*exact=*/false, /*judged=*/false};
  const auto values = Series(s, [](int i) { return kRssBase + 8192.0 * i; });
  const auto v = JudgeCounter(info, values, s, kRssBase, kRssBase + 1e6);
  EXPECT_EQ(v.verdict, reports::kPass);
  EXPECT_EQ(v.slope_per_step, 8192.0);
}

// ---- Noisy counters --------------------------------------------------------------------------

TEST(Verdict, JudgeCounter_NoisyFlatWithJitterAndOutliers_PassesAgainstCalibratedFloor) {
  const int n = 128;
  const auto clean1 = NoisyWindow(n, 1, 0, false);
  const auto clean2 = NoisyWindow(n, 2, 0, true);
  const auto clean3 = NoisyWindow(n, 3, 0, false);
  CalibrationOptions calibration;
  calibration.min_total_growth = 4096;  // one page
  const NoiseFloor floor = CalibrateNoiseFloor({clean1, clean2, clean3}, calibration);
  EXPECT_GT(floor.slope_per_step, 0.0);
  EXPECT_EQ(floor.total_growth, 4096.0);

  const Schedule s{0, 4, 32};
  JudgeOptions options;
  options.noise = floor;
  for (std::uint64_t seed = 10; seed < 20; ++seed) {
    const auto values = NoisyWindow(n, seed, 0, true);
    const auto v = JudgeCounter(NoisyBytes(), values, s, kRssBase, kRssBase + 12345, options);
    EXPECT_EQ(v.verdict, reports::kPass) << "seed " << seed << ": " << v.evidence;
    EXPECT_EQ(v.slope_bound, std::max(floor.slope_per_step, 4096.0 / n));
    EXPECT_TRUE(Contains(v.evidence, "within the noise floor")) << v.evidence;
  }
}

TEST(Verdict, JudgeCounter_NoisyClearSlope_Flagged) {
  const int n = 128;
  const NoiseFloor floor =
      CalibrateNoiseFloor({NoisyWindow(n, 1, 0, false), NoisyWindow(n, 2, 0, true)});
  const Schedule s{0, 4, 32};
  JudgeOptions options;
  options.noise = floor;
  const auto values = NoisyWindow(n, 7, 2048, true);  // 2 KiB/step under 16 KiB jitter
  const auto v = JudgeCounter(NoisyBytes(), values, s, kRssBase, kRssBase, options);
  EXPECT_EQ(v.verdict, reports::kUnboundedGrowth) << v.evidence;
  EXPECT_NEAR(v.slope_per_step, 2048.0, 150.0);
  EXPECT_LT(floor.slope_per_step, 1024.0);
  EXPECT_TRUE(Contains(v.evidence, "above the noise floor")) << v.evidence;
}

TEST(Verdict, JudgeCounter_NoisySlopeUnderTotalGrowthFloor_Passes) {
  const Schedule s{0, 4, 32};
  JudgeOptions options;
  options.noise = {0, 4096};  // 10 B/step * 128 steps = 1280 B, under one page
  const auto values = Series(s, [](int i) { return kRssBase + 10.0 * i; });
  const auto v = JudgeCounter(NoisyBytes(), values, s, kRssBase, kRssBase, options);
  EXPECT_EQ(v.verdict, reports::kPass);
  EXPECT_EQ(v.slope_per_step, 10.0);
  EXPECT_EQ(v.slope_bound, 32.0);  // 4096 B / 128 steps
}

TEST(Verdict, JudgeCounter_NoisySlopeOverTotalGrowthFloor_Flagged) {
  const Schedule s{0, 4, 32};
  JudgeOptions options;
  options.noise = {0, 4096};  // 40 B/step * 128 steps = 5120 B, over one page
  const auto values = Series(s, [](int i) { return kRssBase + 40.0 * i; });
  const auto v = JudgeCounter(NoisyBytes(), values, s, kRssBase, kRssBase, options);
  EXPECT_EQ(v.verdict, reports::kUnboundedGrowth);
  EXPECT_EQ(v.slope_per_step, 40.0);
  EXPECT_EQ(v.slope_bound, 32.0);
}

// Exactly on the floor is not above it: growth needs slope * window > total_growth and
// slope > slope_per_step, both strict.
TEST(Verdict, JudgeCounter_NoisySlopeExactlyOnTheFloors_Passes) {
  const Schedule s{0, 4, 32};
  const auto values = Series(s, [](int i) { return kRssBase + 32.0 * i; });
  JudgeOptions total;
  total.noise = {0, 4096};  // 32 B/step * 128 steps = 4096 B: on the total-growth floor
  auto v = JudgeCounter(NoisyBytes(), values, s, kRssBase, kRssBase, total);
  EXPECT_EQ(v.slope_per_step, 32.0);
  EXPECT_EQ(v.verdict, reports::kPass) << v.evidence;
  JudgeOptions slope;
  slope.noise = {32, 0};  // on the slope floor
  v = JudgeCounter(NoisyBytes(), values, s, kRssBase, kRssBase, slope);
  EXPECT_EQ(v.verdict, reports::kPass) << v.evidence;
}

TEST(Verdict, JudgeCounter_NoisyCounterResidue_NotJudgedForBaseline) {
  const Schedule s{0, 2, 8};
  const auto values = Series(s, [](int) { return kRssBase; });
  const auto v = JudgeCounter(NoisyBytes(), values, s, kRssBase, kRssBase + 65536);
  EXPECT_EQ(v.verdict, reports::kPass) << v.evidence;
}

// ---- Schedule and input validation -----------------------------------------------------------

TEST(Verdict, ValidateSchedule_BadFields_ThrowWithClearMessage) {
  ExpectInvalidArgument([] { ValidateSchedule({0, 1, 8}, 8); }, "blocks must be >= 2");
  ExpectInvalidArgument([] { ValidateSchedule({0, 2, 0}, 0); }, "steps_per_block must be >= 1");
  ExpectInvalidArgument([] { ValidateSchedule({-1, 2, 8}, 15); }, "warmup_steps must be >= 0");
  ExpectInvalidArgument(
      [] {
        ValidateSchedule({4, 3, 16}, 50);
      },
      "expected W + B*N = 4 + 3*16 = 52 samples (one per step), got 50");
  EXPECT_NO_THROW(ValidateSchedule({4, 3, 16}, 52));
}

TEST(Verdict, JudgeCounter_ScheduleMismatch_ThrowsNamingCounter) {
  const std::vector<double> values(10, kBase);
  ExpectInvalidArgument(
      [&] {
        JudgeCounter(ExactBytes(), values, {0, 2, 4}, kBase, kBase);
      },
      "runtime.live_bytes: Schedule: expected W + B*N = 0 + 2*4 = 8 samples");
}

TEST(Verdict, JudgeCounter_NonFiniteSample_Throws) {
  std::vector<double> values(8, kBase);
  values[3] = std::nan("");
  ExpectInvalidArgument(
      [&] {
        JudgeCounter(ExactBytes(), values, {0, 2, 4}, kBase, kBase);
      },
      "runtime.live_bytes: values[3] is not finite");
}

TEST(Verdict, BlockEnds_LastSampleIndexOfEachBlock) {
  EXPECT_EQ(BlockEnds({4, 3, 16}), (std::vector<int>{19, 35, 51}));
}

// ---- Warm-up detection -----------------------------------------------------------------------

TEST(Verdict, DetectWarmupEnd_GrowthThenFlat_ReturnsFirstStableBoundary) {
  // Live bytes grow until step 12, workspace bytes until step 17; both flat afterwards.
  std::vector<double> live, workspace;
  for (int i = 0; i < 64; ++i) {
    live.push_back(kBase + 100.0 * std::min(i, 12));
    workspace.push_back(512.0 * std::min(i, 17));
  }
  EXPECT_EQ(DetectWarmupEnd({live}, 4, 10), 12);
  EXPECT_EQ(DetectWarmupEnd({live, workspace}, 4, 10), 20);
  EXPECT_EQ(DetectWarmupEnd({live, workspace}, 4, 4), -1);  // 20 is block 5, past the limit

  const Schedule s{20, 4, 4};
  const std::vector<double> run(live.begin(), live.begin() + s.TotalSteps());
  EXPECT_EQ(JudgeCounter(ExactBytes(), run, s, kBase, kBase).verdict, reports::kPass);
}

TEST(Verdict, DetectWarmupEnd_EndlessGrowth_ReturnsMinusOne) {
  std::vector<double> values;
  for (int i = 0; i < 200; ++i) values.push_back(kBase + i);
  EXPECT_EQ(DetectWarmupEnd({values}, 8, 20), -1);
}

TEST(Verdict, DetectWarmupEnd_SawtoothFromStart_ReturnsZero) {
  std::vector<double> values;
  for (int i = 0; i < 40; ++i) values.push_back(kBase + (i % 2) * 4096.0);
  EXPECT_EQ(DetectWarmupEnd({values}, 5, 4), 0);
  EXPECT_EQ(DetectWarmupEnd({values}, 8, 4), 0);
}

TEST(Verdict, DetectWarmupEnd_TooShortOrBadInput_HandledClearly) {
  const std::vector<double> short_series(7, kBase);
  EXPECT_EQ(DetectWarmupEnd({short_series}, 4, 3), -1);  // not even two blocks
  EXPECT_EQ(DetectWarmupEnd({}, 4, 3), 0);               // nothing to wait for
  ExpectInvalidArgument([&] { DetectWarmupEnd({short_series}, 0, 3); },
                        "steps_per_block must be >= 1");
  ExpectInvalidArgument([&] { DetectWarmupEnd({short_series}, 4, -1); },
                        "max_warmup_blocks must be >= 0");
  const std::vector<double> other(8, kBase);
  ExpectInvalidArgument(
      [&] {
        DetectWarmupEnd({short_series, other}, 4, 3);
      },
      "series 1 has 8 samples but series 0 has 7");
}

// ---- Theil-Sen -------------------------------------------------------------------------------

TEST(Verdict, TheilSenSlope_ExactLine_IsExact) {
  std::vector<double> y;
  for (int i = 0; i < 100; ++i) y.push_back(3.0 * i + 5.0);
  EXPECT_EQ(TheilSenSlope(y), 3.0);
}

TEST(Verdict, TheilSenSlope_LineWithOutliers_IgnoresThemWhereLeastSquaresFails) {
  std::vector<double> y;
  for (int i = 0; i < 20; ++i) y.push_back(2.0 * i + 1.0);
  y[2] = 1e6;
  y[10] = 1e6;
  y[17] = -1e6;
  EXPECT_EQ(TheilSenSlope(y), 2.0);  // 136 of 190 pairwise slopes are exactly 2

  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < 20; ++i) {
    sx += i;
    sy += y[i];
    sxx += 1.0 * i * i;
    sxy += i * y[i];
  }
  const double least_squares = (20 * sxy - sx * sy) / (20 * sxx - sx * sx);
  EXPECT_GT(std::fabs(least_squares - 2.0), 1000.0);
}

TEST(Verdict, TheilSenSlope_KnownSmallCases_MedianOfPairwiseSlopes) {
  EXPECT_EQ(TheilSenSlope(std::vector<double>{0, 1, 3}), 1.5);  // slopes 1, 1.5, 2
  // Slopes -1, 0.5, 1.5, 5/3, 2, 4: even count, mean of the middle two.
  EXPECT_DOUBLE_EQ(TheilSenSlope(std::vector<double>{0, 2, 1, 5}), (1.5 + 5.0 / 3.0) / 2);
  EXPECT_EQ(TheilSenSlope(std::vector<double>{7}), 0.0);
  EXPECT_EQ(TheilSenSlope(std::vector<double>{}), 0.0);
}

TEST(Verdict, TheilSenSlopeAt_IrregularX_ExactAndValidated) {
  const std::vector<double> x{0, 1, 5, 6, 20};
  std::vector<double> y;
  for (double xi : x) y.push_back(-0.5 * xi + 4);
  EXPECT_EQ(TheilSenSlopeAt(y, x), -0.5);
  // Pairs with equal x are skipped rather than dividing by zero: slopes 4 and 3 remain.
  EXPECT_EQ(TheilSenSlopeAt(std::vector<double>{1, 2, 5}, std::vector<double>{0, 0, 1}), 3.5);
  ExpectInvalidArgument(
      [&] {
        TheilSenSlopeAt(y, std::vector<double>{0, 1});
      },
      "5 y values but 2 x values");
  ExpectInvalidArgument(
      [] {
        TheilSenSlopeAt(std::vector<double>{1, 2}, std::vector<double>{3, 3});
      },
      "all 2 x values are equal");
  ExpectInvalidArgument([] { TheilSenSlope(std::vector<double>{1, INFINITY}); }, "not finite");
}

TEST(Verdict, TheilSenSlope_AboveExactLimit_SampledDeterministicAndAccurate) {
  const int n = 5000;  // > kTheilSenExactMaxPoints: sampled pairs
  std::vector<double> line;
  for (int i = 0; i < n; ++i) line.push_back(3.0 * i + 5.0);
  EXPECT_EQ(TheilSenSlope(line), 3.0);  // every pair of an exact line has slope exactly 3

  std::vector<double> noisy = Jitter(n, 42, 1000);
  for (int i = 0; i < n; ++i) noisy[i] += 0.5 * i;
  const double first = TheilSenSlope(noisy);
  EXPECT_EQ(TheilSenSlope(noisy), first);  // bit-identical on a rerun
  EXPECT_NEAR(first, 0.5, 0.05);
}

// ---- Noise-floor calibration -----------------------------------------------------------------

TEST(Verdict, CalibrateNoiseFloor_NoiselessWindows_SafetyTimesSlopeOrMinimums) {
  std::vector<double> flat(64, kRssBase), tilted;
  for (int i = 0; i < 64; ++i) tilted.push_back(kRssBase + 1.0 * i);
  CalibrationOptions options;
  options.min_total_growth = 4096;
  options.min_slope_per_step = 0.5;
  NoiseFloor floor = CalibrateNoiseFloor({flat}, options);
  EXPECT_EQ(floor.slope_per_step, 0.5);  // the minimum: no slope, no spread
  EXPECT_EQ(floor.total_growth, 4096.0);
  floor = CalibrateNoiseFloor({flat, tilted}, options);
  EXPECT_EQ(floor.slope_per_step, 2.0);  // safety 2 * |slope| 1, zero residual spread
}

// Noise raises the floor above what the slopes alone give: the slope's standard error counts.
TEST(Verdict, CalibrateNoiseFloor_NoisyWindow_AddsTheSlopesStandardError) {
  std::vector<double> window = Jitter(64, 7, 4096);
  for (double& x : window) x += kRssBase;
  CalibrationOptions options;
  options.min_total_growth = 0;
  options.min_slope_per_step = 1e-9;
  const NoiseFloor floor = CalibrateNoiseFloor({window}, options);
  const double slopes_alone = options.safety_factor * std::fabs(TheilSenSlope(window));
  // sigma ~ 4096 (the jitter's spread), n = 64: se = sigma * sqrt(12 / (n (n^2 - 1))) ~ 28 B/step
  EXPECT_GT(floor.slope_per_step, slopes_alone + options.sigma_multiplier * 10.0)
      << "slopes alone " << slopes_alone;
  EXPECT_LT(floor.slope_per_step, slopes_alone + options.sigma_multiplier * 80.0);
}

TEST(Verdict, CalibrateNoiseFloor_BadInput_Throws) {
  ExpectInvalidArgument([] { CalibrateNoiseFloor({}); }, "no clean windows");
  const std::vector<double> tiny{1, 2};
  ExpectInvalidArgument([&] { CalibrateNoiseFloor({tiny}); }, "window 0 has 2 samples");
}

}  // namespace
}  // namespace leakbound::harness
