// Tests of the human-readable number formats shared by all renderers.

#include "leakbound/reports/format.h"

#include <gtest/gtest.h>

#include <limits>

#include "sample_report.h"

namespace leakbound::reports {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(ReportFormatTest, FormatBytes_UsesBinaryUnitsWithTwoDecimals) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(4), "4 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(12.5), "12.5 B");
  EXPECT_EQ(FormatBytes(1024), "1.00 KiB");
  EXPECT_EQ(FormatBytes(1.5 * 1024 * 1024), "1.50 MiB");
  EXPECT_EQ(FormatBytes(1024.0 * 1024 - 1), "1.00 MiB");  // not "1024.00 KiB"
  EXPECT_EQ(FormatBytes(-2.0 * 1024 * 1024 * 1024), "-2.00 GiB");
  EXPECT_EQ(FormatBytes(141.0 * 1024 * 1024 * 1024), "141.00 GiB");
  EXPECT_EQ(FormatBytes(kNaN), "n/a");
}

TEST(ReportFormatTest, FormatSignedBytes_ShowsSignExceptForZero) {
  EXPECT_EQ(FormatSignedBytes(1024), "+1.00 KiB");
  EXPECT_EQ(FormatSignedBytes(-4), "-4 B");
  EXPECT_EQ(FormatSignedBytes(0), "0 B");
}

TEST(ReportFormatTest, FormatCount_GroupsThousandsAndKeepsFractions) {
  EXPECT_EQ(FormatCount(0), "0");
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(1234567), "1,234,567");
  EXPECT_EQ(FormatCount(-1234), "-1,234");
  EXPECT_EQ(FormatCount(12.5), "12.50");
  EXPECT_EQ(FormatSignedCount(3), "+3");
  EXPECT_EQ(FormatCount(kNaN), "n/a");
}

TEST(ReportFormatTest, FormatDuration_PicksUnitWithThreeSignificantDigits) {
  EXPECT_EQ(FormatDuration(850), "850 ns");
  EXPECT_EQ(FormatDuration(999.7), "1.00 us");
  EXPECT_EQ(FormatDuration(12345), "12.3 us");
  EXPECT_EQ(FormatDuration(4.56e6), "4.56 ms");
  EXPECT_EQ(FormatDuration(1.2e6), "1.20 ms");
  EXPECT_EQ(FormatDuration(250e6), "250 ms");
  EXPECT_EQ(FormatDuration(12.75e9), "12.8 s");
  EXPECT_EQ(FormatSignedDuration(-3e3), "-3.00 us");
}

TEST(ReportFormatTest, FormatSignedPercent_OneDecimal) {
  EXPECT_EQ(FormatSignedPercent(0.1), "+10.0%");
  EXPECT_EQ(FormatSignedPercent(-0.023), "-2.3%");
  EXPECT_EQ(FormatSignedPercent(0), "0.0%");
  EXPECT_EQ(FormatSignedPercent(kNaN), "n/a");
}

TEST(ReportFormatTest, FormatBytesInUnit_TrimsTrailingZeros) {
  EXPECT_STREQ(ByteUnitFor(3.0 * 1024 * 1024), "MiB");
  EXPECT_STREQ(ByteUnitFor(100), "B");
  EXPECT_EQ(FormatBytesInUnit(1.5 * 1024 * 1024, "MiB"), "1.5 MiB");
  EXPECT_EQ(FormatBytesInUnit(2.0 * 1024 * 1024, "MiB"), "2 MiB");
  EXPECT_EQ(FormatCountCompact(950), "950");
  EXPECT_EQ(FormatCountCompact(12500), "12.5k");
  EXPECT_EQ(FormatCountCompact(3e6), "3M");
}

TEST(ReportFormatTest, WorkloadOutcome_DistinguishesPassDetectionAndMiss) {
  EXPECT_EQ(WorkloadOutcome(testing::MakeCleanWorkload("a")), Outcome::kPassed);
  EXPECT_EQ(WorkloadOutcome(testing::MakeDetectedZooWorkload("b")), Outcome::kExpectedDetection);
  EXPECT_EQ(WorkloadOutcome(testing::MakeMissedZooWorkload("c")), Outcome::kMissed);
  EXPECT_EQ(WorkloadOutcome(testing::MakeLongSpikyWorkload("d")), Outcome::kMissed);
}

TEST(ReportFormatTest, FalsePositives_CountsFlaggedCountersOfCleanWorkloads) {
  EXPECT_EQ(FalsePositives(testing::MakeCleanWorkload("a")), 0);
  EXPECT_EQ(FalsePositives(testing::MakeLongSpikyWorkload("d")), 1);  // one of two counters
  EXPECT_EQ(FalsePositives(testing::MakeDetectedZooWorkload("b")), 0);  // zoo: not applicable
  WorkloadResult flagged_without_counters = testing::MakeCleanWorkload("e");
  flagged_without_counters.verdict = kUnboundedGrowth;
  flagged_without_counters.counters.clear();
  EXPECT_EQ(FalsePositives(flagged_without_counters), 1);
}

TEST(ReportFormatTest, CounterUnit_FromSeriesElseFromName) {
  const WorkloadResult workload = testing::MakeDetectedZooWorkload("b");
  EXPECT_EQ(CounterUnit(workload, "tracking.outstanding"), "count");
  EXPECT_EQ(CounterUnit(workload, "runtime.live_bytes"), "bytes");
  EXPECT_EQ(CounterUnit(workload, "cuda.reserved_bytes"), "bytes");  // no series: by name
  EXPECT_EQ(CounterUnit(workload, "cupti.allocations"), "count");
}

// Every spelled verdict: the four about memory are findings; PASS and the two "no verdict" ones
// are not (watch's exit code, the suite's count and the result lines all read this one test).
TEST(ReportFormatTest, IsMemoryFinding_EveryVerdictClass) {
  int findings = 0;
  for (const auto& [verdict, name] : kVerdictSpellings) {
    const bool want = verdict == kPeakOverBudget || verdict == kNotReturnedToBaseline ||
                      verdict == kPoolFragmentation || verdict == kUnboundedGrowth;
    EXPECT_EQ(IsMemoryFinding(verdict), want) << name;
    findings += IsMemoryFinding(verdict) ? 1 : 0;
  }
  EXPECT_EQ(findings, 4);
}

TEST(ReportFormatTest, FormatAgeSteps_ShowsNewestToOldest) {
  EXPECT_EQ(FormatAgeSteps(Attribution{"op", "value", "step", 1, 1, 48, 1}), "1-48");
  EXPECT_EQ(FormatAgeSteps(Attribution{"op", "value", "step", 1, 1, 7, 7}), "7");
}

}  // namespace
}  // namespace leakbound::reports
