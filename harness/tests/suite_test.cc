// The stress suite on the CPU stub: every clean workload and trap PASSes, every zoo entry is
// flagged with its planted class on the counter it names; repeated clean runs give no false
// positives. Prints the detection table.
#include <gtest/gtest.h>

#include <iostream>

#include "leakbound/harness/suite.h"

namespace leakbound::harness {
namespace {

SuiteOptions Quiet() {
  SuiteOptions o;
  o.progress = false;
  o.measure_probe_cost = false;
  return o;
}

TEST(Suite, EveryWorkloadMeetsItsExpectation_CleanPassZooFlaggedWithItsClass) {
  const reports::Report report = RunSuite(Quiet());
  PrintSummary(report, std::cout);
  PrintDetectionTable(report, std::cout);
  int zoo = 0, clean = 0;
  for (const auto& w : report.workloads) {
    EXPECT_TRUE(w.met_expectation) << w.name << ": expected " << w.expectation << ", got "
                                   << w.verdict << " — " << w.evidence;
    if (w.kind == "zoo") {
      ++zoo;
      EXPECT_NE(w.verdict, reports::kPass) << w.name;
    } else {
      ++clean;
      EXPECT_EQ(w.verdict, reports::kPass) << w.name << ": " << w.evidence;
    }
  }
  EXPECT_GE(zoo, 9);
  EXPECT_GE(clean, 9);
}

TEST(Suite, GrowthVerdictAttributesTheLeakToItsTag) {
  SuiteOptions o = Quiet();
  o.calibrate = false;
  o.workloads = {"zoo_workspace_not_released"};
  const reports::Report report = RunSuite(o);
  ASSERT_EQ(report.workloads.size(), 1u);
  const auto& w = report.workloads[0];
  EXPECT_EQ(w.verdict, reports::kUnboundedGrowth);
  ASSERT_FALSE(w.attribution.empty());
  EXPECT_EQ(w.attribution[0].role, "workspace") << "the grown group comes first";
  EXPECT_GT(w.attribution[0].oldest_age_steps, w.attribution[0].newest_age_steps);
}

TEST(Suite, TwentyRepeatedCleanRuns_ZeroFalsePositives) {
  SuiteOptions o = Quiet();
  for (const auto& reg : workloads::AllWorkloads())
    if (reg.info.kind != workloads::Kind::kZoo && !reg.info.needs_cuda)
      o.workloads.push_back(reg.info.name);
  o.run.noise_floors = Runner(o.run).Calibrate({"mlp_sgd", "mlp_eval"}, 2);
  o.calibrate = false;
  int false_positives = 0, runs = 0;
  for (int r = 0; r < 20; ++r) {
    const reports::Report report = RunSuite(o);
    for (const auto& w : report.workloads) {
      ++runs;
      if (w.verdict != reports::kPass) {
        ++false_positives;
        ADD_FAILURE() << "run " << r << " " << w.name << ": " << w.verdict << " — " << w.evidence;
      }
    }
  }
  std::cout << "[figures] clean runs: " << runs << ", false positives: " << false_positives << "\n";
  EXPECT_EQ(false_positives, 0);
}

// threaded_sessions steps four sessions (two SGD, two Adam MLPs) on four threads: its measured
// peak depends on the interleaving, its bound must not. The bound is the sum of the sessions'
// own peaks, so it equals twice mlp_sgd's peak plus twice mlp_adam's (the same rigs, one session
// each), and it bounds every measured peak. Deterministic workloads carry no bound.
TEST(Suite, ThreadedSessionsPeakBound_IsScheduleIndependentAndBoundsThePeak) {
  SuiteOptions o = Quiet();
  o.calibrate = false;
  o.workloads = {"mlp_sgd", "mlp_adam", "threaded_sessions"};
  reports::Report report = RunSuite(o);
  o.workloads = {"threaded_sessions"};
  for (int again = 0; again < 2; ++again) report.workloads.push_back(RunSuite(o).workloads.at(0));
  ASSERT_EQ(report.workloads.size(), 5u);
  const auto& sgd = report.workloads[0];
  const auto& adam = report.workloads[1];
  EXPECT_FALSE(sgd.peak_bound_bytes.has_value());
  EXPECT_FALSE(adam.peak_bound_bytes.has_value());
  const double expected = 2 * sgd.peak_bytes + 2 * adam.peak_bytes;
  for (std::size_t i = 2; i < 5; ++i) {
    const auto& w = report.workloads[i];
    ASSERT_TRUE(w.peak_bound_bytes.has_value()) << "run " << i;
    EXPECT_EQ(*w.peak_bound_bytes, expected) << "run " << i;
    EXPECT_LE(w.peak_bytes, *w.peak_bound_bytes) << "run " << i;
    // At least one session's full step sits on top of everyone's persistent state.
    EXPECT_GT(w.peak_bytes, w.steady_live_bytes) << "run " << i;
  }
}

// Without calibration the exact host heap still catches a host leak (no floor needed), while a
// noisy cross-check (mallinfo2) says it was not judged for want of a floor, and RSS says it is
// merely informational.
TEST(Suite, WithoutCalibration_ExactHostHeapCatchesTheLeakAndNoisyCountersSayWhy) {
  SuiteOptions o = Quiet();
  o.calibrate = false;
  o.workloads = {"zoo_host_malloc_bypass"};
  const reports::Report report = RunSuite(o);
  ASSERT_EQ(report.workloads.size(), 1u);
  ASSERT_TRUE(report.meta.calibrated.has_value());
  EXPECT_FALSE(*report.meta.calibrated);
  EXPECT_TRUE(report.workloads[0].met_expectation) << report.workloads[0].evidence;
  bool saw_heap = false, saw_rss = false;
  for (const auto& c : report.workloads[0].counters) {
    if (c.counter == "host.heap_bytes") {
      saw_heap = true;
      EXPECT_EQ(c.verdict, reports::kUnboundedGrowth) << c.evidence;
      EXPECT_EQ(c.slope_per_step, 16384) << c.evidence;
    }
    if (c.counter == "host.malloc_arena_bytes") {
      EXPECT_NE(c.evidence.find("no calibrated noise floor"), std::string::npos) << c.evidence;
    }
    if (c.counter == "host.rss_bytes") {
      saw_rss = true;
      EXPECT_NE(c.evidence.find("informational (not judged)"), std::string::npos) << c.evidence;
    }
  }
  EXPECT_TRUE(saw_heap);
  EXPECT_TRUE(saw_rss);
}

TEST(Suite, UnknownWorkloadName_IsRejectedWithTheKnownNames) {
  SuiteOptions o = Quiet();
  o.workloads = {"no_such_workload"};
  try {
    RunSuite(o);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("mlp_sgd"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace leakbound::harness
