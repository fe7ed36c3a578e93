// Tests of DiffReports: tolerances (exact memory figures tight, step time loose), verdict
// changes, missing/new workloads, device-class mismatch, and the Markdown it prints.

#include "leakbound/reports/diff.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "sample_report.h"

namespace leakbound::reports {
namespace {

using testing::kMiB;

// The row for (workload, metric); fails the test when absent.
const DiffRow& Row(const DiffResult& result, const std::string& workload,
                   const std::string& metric) {
  for (const DiffRow& row : result.rows) {
    if (row.workload == workload && row.metric == metric) return row;
  }
  ADD_FAILURE() << "no row " << workload << " / " << metric;
  static const DiffRow kNone;
  return kNone;
}

WorkloadResult* Find(Report& report, const std::string& name) {
  for (WorkloadResult& workload : report.workloads) {
    if (workload.name == name) return &workload;
  }
  return nullptr;
}

TEST(ReportDiffTest, IdenticalReports_NoRegressionNoImprovement) {
  const Report report = testing::MakeSampleReport();
  const DiffResult result = DiffReports(report, report, DiffTolerance{});
  EXPECT_FALSE(result.regression);
  EXPECT_EQ(result.regressions, 0);
  EXPECT_EQ(result.improvements, 0);
  EXPECT_EQ(result.notes, 0);
  // Five workloads x (verdict + 4 metrics).
  EXPECT_EQ(result.rows.size(), 25u);
  for (const DiffRow& row : result.rows)
    EXPECT_EQ(row.status, DiffStatus::kUnchanged) << row.metric;
  EXPECT_EQ(result.markdown.rfind("**OK**: 0 regressions, 0 improvements, 0 notes (base 4598ec4 -> "
                                  "new 4598ec4, device class cpu).\n",
                                  0),
            0u)
      << result.markdown;
}

TEST(ReportDiffTest, PeakUpTenPercent_IsARegressionWithExactRow) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  Find(fresh, "mlp_sgd")->peak_bytes = 2 * kMiB * 1.10;
  const DiffResult result = DiffReports(base, fresh, DiffTolerance{});
  EXPECT_TRUE(result.regression);
  EXPECT_EQ(result.regressions, 1);
  const DiffRow& row = Row(result, "mlp_sgd", "peak");
  EXPECT_EQ(row.status, DiffStatus::kRegression);
  EXPECT_EQ(row.base_text, "2.00 MiB");
  EXPECT_EQ(row.new_text, "2.20 MiB");
  EXPECT_EQ(row.delta_text, "+204.80 KiB");
  EXPECT_EQ(row.percent_text, "+10.0%");
  EXPECT_NE(result.markdown.find("| mlp_sgd | peak | 2.00 MiB | 2.20 MiB | +204.80 KiB | +10.0% | "
                                 "**REGRESSION** (grew past tolerance 5%) |\n"),
            std::string::npos)
      << result.markdown;
  EXPECT_EQ(result.markdown.rfind(
                "**REGRESSION**: 1 regression in mlp_sgd (peak), 0 improvements, 0 notes", 0),
            0u)
      << result.markdown;
  EXPECT_NE(result.markdown.find("Regressions:\n\n- mlp_sgd: peak 2.00 MiB -> 2.20 MiB (+10.0%), "
                                 "grew past tolerance 5%\n"),
            std::string::npos);
}

// A workload whose sessions step on several threads: its measured peak depends on how they
// interleave, so diff reports the move as a note and judges the schedule-independent bound.
TEST(ReportDiffTest, ScheduleDependentPeak_MovesAsANote_TheBoundIsJudged) {
  Report base = testing::MakeSampleReport();
  Find(base, "mlp_sgd")->peak_bound_bytes = 3 * kMiB;
  Report fresh = base;
  Find(fresh, "mlp_sgd")->peak_bytes = 2 * kMiB * 1.13;  // another interleaving
  DiffResult result = DiffReports(base, fresh, DiffTolerance{});
  EXPECT_FALSE(result.regression) << result.markdown;
  EXPECT_EQ(result.notes, 1);
  EXPECT_EQ(Row(result, "mlp_sgd", "peak").status, DiffStatus::kNote);
  EXPECT_EQ(Row(result, "mlp_sgd", "peak").reason,
            "schedule-dependent peak (threads interleave); judged on its bound");
  EXPECT_EQ(Row(result, "mlp_sgd", "peak bound").status, DiffStatus::kUnchanged);

  // The bound itself growing past tolerance is a regression, whatever the measured peak did.
  Find(fresh, "mlp_sgd")->peak_bytes = 2 * kMiB;
  Find(fresh, "mlp_sgd")->peak_bound_bytes = 3 * kMiB * 1.10;
  result = DiffReports(base, fresh, DiffTolerance{});
  EXPECT_TRUE(result.regression);
  EXPECT_EQ(result.regressions, 1);
  const DiffRow& bound = Row(result, "mlp_sgd", "peak bound");
  EXPECT_EQ(bound.status, DiffStatus::kRegression);
  EXPECT_EQ(bound.base_text, "3.00 MiB");
  EXPECT_EQ(bound.new_text, "3.30 MiB");
  EXPECT_EQ(Row(result, "mlp_sgd", "peak").status, DiffStatus::kUnchanged);
}

// Without a bound on both sides (a baseline written before the bound existed) the measured peak
// is judged as before: no silent loosening.
TEST(ReportDiffTest, BoundOnOneSideOnly_JudgesTheMeasuredPeak) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  Find(fresh, "mlp_sgd")->peak_bytes = 2 * kMiB * 1.10;
  Find(fresh, "mlp_sgd")->peak_bound_bytes = 4 * kMiB;
  const DiffResult result = DiffReports(base, fresh, DiffTolerance{});
  EXPECT_TRUE(result.regression);
  EXPECT_EQ(Row(result, "mlp_sgd", "peak").status, DiffStatus::kRegression);
  for (const DiffRow& row : result.rows) EXPECT_NE(row.metric, "peak bound");
}

TEST(ReportDiffTest, PeakUpTwoPercent_WithinFivePercentTolerance_IsNotARegression) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  Find(fresh, "mlp_sgd")->peak_bytes = 2 * kMiB * 1.02;
  Find(fresh, "mlp_sgd")->steady_live_bytes = 1.5 * kMiB * 0.98;
  const DiffResult result = DiffReports(base, fresh, DiffTolerance{});
  EXPECT_FALSE(result.regression);
  EXPECT_EQ(Row(result, "mlp_sgd", "peak").status, DiffStatus::kUnchanged);
  EXPECT_EQ(Row(result, "mlp_sgd", "peak").percent_text, "+2.0%");
  EXPECT_EQ(Row(result, "mlp_sgd", "steady live").status, DiffStatus::kUnchanged);
}

TEST(ReportDiffTest, ExactlyAtTolerance_IsAccepted_JustPastIsNot) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  Find(fresh, "mlp_sgd")->allocations_per_step = 12 + 0.6;  // 5% of 12
  EXPECT_FALSE(DiffReports(base, fresh).regression);
  Find(fresh, "mlp_sgd")->allocations_per_step = 13;
  const DiffResult result = DiffReports(base, fresh);
  EXPECT_EQ(Row(result, "mlp_sgd", "allocs/step").status, DiffStatus::kRegression);
  EXPECT_EQ(Row(result, "mlp_sgd", "allocs/step").delta_text, "+1");
}

TEST(ReportDiffTest, SteadyLiveDownPastTolerance_IsAnImprovement) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  Find(fresh, "mlp_sgd")->steady_live_bytes = 1 * kMiB;
  const DiffResult result = DiffReports(base, fresh);
  EXPECT_FALSE(result.regression);
  EXPECT_EQ(result.improvements, 1);
  EXPECT_EQ(Row(result, "mlp_sgd", "steady live").status, DiffStatus::kImprovement);
  EXPECT_EQ(Row(result, "mlp_sgd", "steady live").percent_text, "-33.3%");
}

TEST(ReportDiffTest, GrowthFromZeroBytes_IsARegressionUnlessUnderAbsoluteFloor) {
  Report base = testing::MakeSampleReport();
  Find(base, "mlp_sgd")->steady_live_bytes = 0;
  Report fresh = base;
  Find(fresh, "mlp_sgd")->steady_live_bytes = 512;
  EXPECT_EQ(Row(DiffReports(base, fresh), "mlp_sgd", "steady live").status,
            DiffStatus::kRegression);
  EXPECT_EQ(Row(DiffReports(base, fresh), "mlp_sgd", "steady live").percent_text, "n/a");
  DiffTolerance tolerance;
  tolerance.absolute_bytes = 1024;
  EXPECT_EQ(Row(DiffReports(base, fresh, tolerance), "mlp_sgd", "steady live").status,
            DiffStatus::kUnchanged);
}

TEST(ReportDiffTest, StepTimeNoiseWithinLooseTolerance_IsNotARegression) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  Find(fresh, "mlp_sgd")->step_time_ns = 1.2e6 * 1.4;  // +40%: noisy CI, under 50%
  const DiffResult result = DiffReports(base, fresh, DiffTolerance{});
  EXPECT_FALSE(result.regression);
  EXPECT_EQ(Row(result, "mlp_sgd", "step time").status, DiffStatus::kUnchanged);
  EXPECT_EQ(Row(result, "mlp_sgd", "step time").percent_text, "+40.0%");
}

TEST(ReportDiffTest, StepTimeDoubling_IsARegression) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  Find(fresh, "mlp_sgd")->step_time_ns = 2.4e6;
  const DiffResult result = DiffReports(base, fresh, DiffTolerance{});
  EXPECT_TRUE(result.regression);
  EXPECT_EQ(Row(result, "mlp_sgd", "step time").status, DiffStatus::kRegression);
  EXPECT_EQ(Row(result, "mlp_sgd", "step time").delta_text, "+1.20 ms");
}

// check compares against baselines from another machine: step time is shown, never judged.
TEST(ReportDiffTest, StepTimeNotCompared_DoublingIsShownButNotARegression) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  Find(fresh, "mlp_sgd")->step_time_ns *= 2;
  DiffTolerance tolerance;
  tolerance.compare_step_time = false;
  const DiffResult result = DiffReports(base, fresh, tolerance);
  EXPECT_FALSE(result.regression) << result.markdown;
  const DiffRow& row = Row(result, "mlp_sgd", "step time");
  EXPECT_EQ(row.status, DiffStatus::kUnchanged);
  EXPECT_EQ(row.percent_text, "+100.0%");
  EXPECT_NE(result.markdown.find("step time shown, not compared."), std::string::npos);
}

// A watched program's step time: shown, not judged, when compare_watched_step_time is off
// (`leakbound diff` without --time-tolerance); judged again when it is on, and a workload
// leakbound ran keeps its comparison either way.
TEST(ReportDiffTest, WatchedStepTime_ShownNotComparedUnlessAsked) {
  Report base = testing::MakeSampleReport();
  Find(base, "mlp_sgd")->kind = "watched";
  Find(base, "mlp_sgd")->step_time_ns = 10000;
  Find(base, "trap_param_reuse")->step_time_ns = 10000;
  Report fresh = base;
  Find(fresh, "mlp_sgd")->step_time_ns = 20000;
  Find(fresh, "trap_param_reuse")->step_time_ns = 20000;
  DiffTolerance tolerance;
  tolerance.compare_watched_step_time = false;
  const DiffResult quiet = DiffReports(base, fresh, tolerance);
  EXPECT_EQ(Row(quiet, "mlp_sgd", "step time").status, DiffStatus::kUnchanged) << quiet.markdown;
  EXPECT_EQ(Row(quiet, "mlp_sgd", "step time").percent_text, "+100.0%");
  EXPECT_EQ(Row(quiet, "trap_param_reuse", "step time").status, DiffStatus::kRegression);
  EXPECT_NE(quiet.markdown.find("a watched program's: shown, not compared"), std::string::npos);
  const DiffResult asked = DiffReports(base, fresh, DiffTolerance{});
  EXPECT_EQ(Row(asked, "mlp_sgd", "step time").status, DiffStatus::kRegression);
}

TEST(ReportDiffTest, StepTimeUnderAbsoluteFloor_IsNotARegression) {
  Report base = testing::MakeSampleReport();
  Find(base, "mlp_sgd")->step_time_ns = 400;
  Report fresh = base;
  Find(fresh, "mlp_sgd")->step_time_ns = 900;  // +125% but only 500 ns
  EXPECT_EQ(Row(DiffReports(base, fresh), "mlp_sgd", "step time").status, DiffStatus::kUnchanged);
}

TEST(ReportDiffTest, VerdictFlipFromPass_IsARegression) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  WorkloadResult& workload = *Find(fresh, "mlp_sgd");
  workload.verdict = kUnboundedGrowth;
  workload.met_expectation = false;
  const DiffResult result = DiffReports(base, fresh);
  EXPECT_TRUE(result.regression);
  const DiffRow& row = Row(result, "mlp_sgd", "verdict");
  EXPECT_EQ(row.status, DiffStatus::kRegression);
  EXPECT_EQ(row.base_text, "PASS (met)");
  EXPECT_EQ(row.new_text, "unbounded-growth (expectation missed)");
  EXPECT_EQ(row.reason, "met its expectation (PASS) before, misses it now");
}

TEST(ReportDiffTest, FirstLine_NamesANewLeakBeforeAStepTimeThatMoved) {
  // mlp_sgd comes first in the report and only got slower; trap_param_reuse now leaks: the
  // first line names the leak first, whatever the order of the workloads.
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  Find(fresh, "mlp_sgd")->step_time_ns *= 2;
  WorkloadResult& leaking = *Find(fresh, "trap_param_reuse");
  leaking.verdict = kUnboundedGrowth;
  leaking.met_expectation = false;
  const DiffResult result = DiffReports(base, fresh);
  EXPECT_EQ(result.regressions, 2);
  EXPECT_EQ(result.markdown.rfind("**REGRESSION**: 2 regressions in trap_param_reuse (verdict), "
                                  "mlp_sgd (step time), 0 improvements",
                                  0),
            0u)
      << result.markdown;
}

TEST(ReportDiffTest, PassToOtherClassWithoutMetChange_IsStillARegression) {
  // A zoo entry that was missed (PASS) and is now misclassified: both unmet, still PASS -> other.
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  Find(fresh, "zoo_cached_workspace")->verdict = kPeakOverBudget;
  const DiffResult result = DiffReports(base, fresh);
  const DiffRow& row = Row(result, "zoo_cached_workspace", "verdict");
  EXPECT_EQ(row.status, DiffStatus::kRegression);
  EXPECT_EQ(row.reason, "was PASS, now peak-over-budget");
}

TEST(ReportDiffTest, ZooDetectionLost_IsARegression_AndRegainedIsAnImprovement) {
  const Report with_detection = testing::MakeSampleReport();
  Report without = with_detection;
  Find(without, "zoo_loss_history")->verdict = kPass;
  Find(without, "zoo_loss_history")->met_expectation = false;
  EXPECT_EQ(Row(DiffReports(with_detection, without), "zoo_loss_history", "verdict").status,
            DiffStatus::kRegression);
  const DiffResult regained = DiffReports(without, with_detection);
  EXPECT_EQ(Row(regained, "zoo_loss_history", "verdict").status, DiffStatus::kImprovement);
  EXPECT_FALSE(regained.regression);
  EXPECT_EQ(regained.improvements, 1);
}

TEST(ReportDiffTest, OtherVerdictChange_IsANote) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  Find(fresh, "stress_transformer_block")->verdict = kUnboundedGrowth;  // unmet -> unmet
  const DiffResult result = DiffReports(base, fresh);
  EXPECT_FALSE(result.regression);
  EXPECT_EQ(result.notes, 1);
  EXPECT_EQ(Row(result, "stress_transformer_block", "verdict").status, DiffStatus::kNote);
}

TEST(ReportDiffTest, MissingWorkload_IsARegression_NewWorkloadIsANote) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  fresh.workloads.erase(fresh.workloads.begin() + 3);  // trap_param_reuse gone
  fresh.workloads.push_back(testing::MakeCleanWorkload("conv_adam"));
  const DiffResult result = DiffReports(base, fresh);
  EXPECT_TRUE(result.regression);
  EXPECT_EQ(result.regressions, 1);
  EXPECT_EQ(result.notes, 1);
  EXPECT_EQ(Row(result, "trap_param_reuse", "workload").status, DiffStatus::kRegression);
  EXPECT_EQ(Row(result, "trap_param_reuse", "workload").new_text, "missing");
  EXPECT_EQ(Row(result, "conv_adam", "workload").status, DiffStatus::kNote);
  EXPECT_EQ(Row(result, "conv_adam", "workload").base_text, "absent");
}

TEST(ReportDiffTest, ChangedSchedule_IsANote) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  Find(fresh, "mlp_sgd")->blocks = 8;
  const DiffResult result = DiffReports(base, fresh);
  EXPECT_FALSE(result.regression);
  EXPECT_EQ(Row(result, "mlp_sgd", "schedule").base_text, "10 warm-up + 4 x 50 steps");
  EXPECT_EQ(Row(result, "mlp_sgd", "schedule").new_text, "10 warm-up + 8 x 50 steps");
}

TEST(ReportDiffTest, NotMeasuredMetric_IsNeitherRegressionNorImprovement) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  Find(fresh, "mlp_sgd")->step_time_ns = std::numeric_limits<double>::quiet_NaN();
  const DiffResult result = DiffReports(base, fresh);
  EXPECT_FALSE(result.regression);
  EXPECT_EQ(Row(result, "mlp_sgd", "step time").status, DiffStatus::kNotMeasured);
}

TEST(ReportDiffTest, DeviceClassMismatch_ThrowsNamingBothClasses) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  fresh.meta.device_class = "h200";
  fresh.meta.device = "cuda:0 NVIDIA H200";
  try {
    DiffReports(base, fresh, DiffTolerance{});
    FAIL() << "expected ReportError";
  } catch (const ReportError& error) {
    EXPECT_EQ(error.kind(), ReportErrorKind::kDeviceClassMismatch);
    EXPECT_EQ(std::string(error.what()),
              "diff: cannot compare reports from different device classes: base is \"cpu\" "
              "(cpu (CPU stub)), new is \"h200\" (cuda:0 NVIDIA H200); diff against the baseline "
              "under baselines/h200/ or rerun on a cpu machine");
  }
}

TEST(ReportDiffTest, Markdown_EscapesWorkloadNames) {
  Report base = testing::MakeSampleReport();
  base.workloads[0].name = "a|b<i>";
  Report fresh = base;
  base.workloads[0].peak_bytes = 1;  // force a listed regression row too
  const DiffResult result = DiffReports(base, fresh);
  EXPECT_EQ(result.markdown.find("a|b<i>"), std::string::npos);
  EXPECT_NE(result.markdown.find("| a\\|b\\<i\\> | peak |"), std::string::npos) << result.markdown;
}

TEST(ReportDiffTest, NewLeak_WithAGrowingStack_ListsTheStackUnderTheEvidence) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  WorkloadResult& workload = *Find(fresh, "mlp_sgd");
  workload.verdict = kUnboundedGrowth;
  workload.met_expectation = false;
  workload.counters.push_back(
      CounterVerdict{"host.heap_bytes", kUnboundedGrowth, 24, 0, 0, 0, 0, "grew"});
  Attribution grows{"main at c.c:80", "heap", "none", 4608, 192, 191, 0, 24, 2, 2};
  grows.stack = {"_start", "main c.c:80"};
  workload.attribution = {grows};
  const DiffResult result = DiffReports(base, fresh);
  EXPECT_EQ(Row(result, "mlp_sgd", "verdict").stack, grows.stack);
  EXPECT_NE(result.markdown.find("  - evidence: host.heap_bytes +24 B/step; top growing: main at "
                                 "c.c:80 (heap, scope none): +24 B/step, rose at 2 of 2 block "
                                 "ends; 4.50 KiB in 192 allocations\n"
                                 "  - growing stack (outermost first): _start > main c.c:80\n"),
            std::string::npos)
      << result.markdown;
  // A top owner that does not grow at every block end carries no stack.
  workload.attribution.front().rose_at = 1;
  EXPECT_TRUE(Row(DiffReports(base, fresh), "mlp_sgd", "verdict").stack.empty());
}

TEST(ReportDiffTest, NewLeak_VerdictRowCarriesCounterRateFloorAndTopOwner) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  WorkloadResult& workload = *Find(fresh, "mlp_sgd");
  workload.verdict = kUnboundedGrowth;
  workload.met_expectation = false;
  workload.counters.push_back(CounterVerdict{"host.heap_bytes", kUnboundedGrowth, 16400,
                                             1365.3333333333333, 0, 0, 0, "grew"});
  workload.attribution = {Attribution{"param", "parameter", "none", 38440, 4, 47, 47},
                          Attribution{"relu", "workspace", "step", 4096, 1, 0, 0}};
  const DiffResult result = DiffReports(base, fresh);
  const DiffRow& row = Row(result, "mlp_sgd", "verdict");
  EXPECT_EQ(row.evidence,
            "host.heap_bytes +16400 B/step (noise floor 1365.3 B/step); top outstanding: param "
            "(parameter, scope none): 37.54 KiB in 4 allocations");
  EXPECT_NE(result.markdown.find(
                "- mlp_sgd: verdict PASS (met) -> unbounded-growth (expectation missed), met its "
                "expectation (PASS) before, misses it now\n"
                "  - evidence: host.heap_bytes +16400 B/step (noise floor 1365.3 B/step); top "
                "outstanding: param (parameter, scope none): 37.54 KiB in 4 allocations\n"),
            std::string::npos)
      << result.markdown;
}

TEST(ReportDiffTest, UnchangedLeak_HasNoEvidenceLine) {
  const Report base = testing::MakeSampleReport();
  const DiffResult result = DiffReports(base, base);
  EXPECT_EQ(Row(result, "zoo_loss_history", "verdict").evidence, "");
  EXPECT_EQ(result.markdown.find("evidence:"), std::string::npos);
}

// One report per clean workload, as `check --update` writes them.
std::vector<Report> BaselinesOf(const Report& report) {
  std::vector<Report> baselines;
  for (const WorkloadResult& workload : report.workloads) {
    if (workload.kind != "clean") continue;
    Report one;
    one.meta = report.meta;
    one.workloads.push_back(workload);
    baselines.push_back(one);
  }
  return baselines;
}

TEST(ReportDiffTest, AgainstBaselines_RegressionInTheSecondBaseline_IsNamedOnTheFirstLine) {
  const Report fresh = testing::MakeSampleReport();
  std::vector<Report> baselines = BaselinesOf(fresh);
  ASSERT_EQ(baselines.size(), 2u);
  ASSERT_EQ(baselines[1].workloads[0].name, "stress_transformer_block");
  baselines[1].workloads[0].peak_bytes *= 0.8;  // the fresh run's peak is 25% higher
  const DiffResult result =
      DiffAgainstBaselines(baselines, fresh, DiffTolerance{}, "baselines/cpu");
  EXPECT_TRUE(result.regression);
  EXPECT_EQ(result.regressions, 1);
  const std::string first_line = result.markdown.substr(0, result.markdown.find('\n'));
  EXPECT_EQ(first_line,
            "**REGRESSION**: 1 regression in stress_transformer_block (peak), 0 improvements, "
            "0 notes (base 4598ec4 -> new 4598ec4, device class cpu).");
  // One document: a single verdict line and a single table.
  EXPECT_EQ(result.markdown.find("**OK**"), std::string::npos);
  EXPECT_EQ(result.markdown.find("| Workload | Metric |"),
            result.markdown.rfind("| Workload | Metric |"));
}

TEST(ReportDiffTest, AgainstBaselines_AllWithinTolerance_OpensWithOk) {
  const Report fresh = testing::MakeSampleReport();
  const DiffResult result =
      DiffAgainstBaselines(BaselinesOf(fresh), fresh, DiffTolerance{}, "baselines/cpu");
  EXPECT_FALSE(result.regression);
  EXPECT_EQ(result.markdown.substr(0, result.markdown.find('\n')),
            "**OK**: 0 regressions, 0 improvements, 0 notes (base 4598ec4 -> new 4598ec4, device "
            "class cpu).");
}

TEST(ReportDiffTest, AgainstBaselines_CleanWorkloadWithoutBaseline_FailsOnTheFirstLine) {
  const Report fresh = testing::MakeSampleReport();
  std::vector<Report> baselines = BaselinesOf(fresh);
  baselines.pop_back();  // stress_transformer_block has none
  const DiffResult result = DiffAgainstBaselines(baselines, fresh, DiffTolerance{}, "base/cpu");
  EXPECT_TRUE(result.regression);
  EXPECT_EQ(result.regressions, 0);
  EXPECT_EQ(result.unchecked, 1);
  EXPECT_EQ(result.markdown.substr(0, result.markdown.find('\n')),
            "**FAIL**: 0 regressions, 1 clean workload without a baseline "
            "(stress_transformer_block), 0 improvements, 0 notes (base 4598ec4 -> new 4598ec4, "
            "device class cpu).");
  EXPECT_EQ(Row(result, "stress_transformer_block", "baseline").reason,
            "Not checked (fails the check): clean workload without a baseline in base/cpu; add one "
            "with `leakbound check --baselines base/cpu --update` (rewrites all) after review");
}

TEST(ReportDiffTest, InterruptedNewReport_MissingWorkloadsAreNotRunRegressions) {
  const Report base = testing::MakeSampleReport();
  Report fresh = base;
  fresh.meta.interrupted = true;
  fresh.workloads.resize(2);  // stopped during the third workload
  const DiffResult result = DiffReports(base, fresh);
  EXPECT_TRUE(result.regression);
  EXPECT_TRUE(result.fresh_interrupted);
  EXPECT_EQ(result.regressions, 3);
  const DiffRow& row = Row(result, "zoo_cached_workspace", "workload");
  EXPECT_EQ(row.new_text, "not run");
  EXPECT_EQ(row.reason, "not run: the new report was interrupted before this workload finished");
  EXPECT_NE(result.markdown.find("\n\n**Interrupted**: the new report was stopped by a signal"),
            std::string::npos)
      << result.markdown;
  EXPECT_EQ(result.markdown.rfind("**REGRESSION**: 3 regressions in zoo_cached_workspace "
                                  "(workload), trap_param_reuse (workload), "
                                  "stress_transformer_block (workload), 0 improvements",
                                  0),
            0u)
      << result.markdown;
}

}  // namespace
}  // namespace leakbound::reports
