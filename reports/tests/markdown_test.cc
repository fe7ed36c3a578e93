// Tests of the Markdown renderer: exact table rows for the sample report, details only for
// workloads that need attention, and escaping of hostile names.

#include "leakbound/reports/markdown.h"

#include <gtest/gtest.h>

#include <string>

#include "leakbound/reports/format.h"
#include "leakbound/reports/html.h"
#include "sample_report.h"

namespace leakbound::reports {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ReportMarkdownTest, Heading_ShowsRunMetadata) {
  const std::string markdown = RenderMarkdown(testing::MakeSampleReport());
  EXPECT_EQ(markdown.rfind("# leakbound report\n\n| Run | Value |\n|---|---|\n", 0), 0u)
      << markdown;
  EXPECT_TRUE(Contains(markdown, "| Device | cpu (CPU stub) (class cpu) |\n"));
  EXPECT_TRUE(Contains(markdown, "| Commit | 4598ec4 |\n"));
  EXPECT_TRUE(Contains(markdown, "| Compiler | GNU 12.2.0 |\n"));
  EXPECT_TRUE(Contains(markdown, "| Build type | Release |\n"));
  EXPECT_TRUE(Contains(markdown, "| Schedule | 4 blocks x 50 steps, warm-up auto-detected |\n"));
  EXPECT_TRUE(Contains(markdown, "| Started | 2025-01-15T03:12:44Z (wall 12.8 s) |\n"));
  EXPECT_TRUE(Contains(markdown, "**Result: 2 of 5 workloads did not meet their expectation.**"));
}

TEST(ReportMarkdownTest, SummaryTable_HasOneExactRowPerWorkload) {
  const std::string markdown = RenderMarkdown(testing::MakeSampleReport());
  EXPECT_TRUE(Contains(markdown,
                       "| Workload | Kind | Expectation | Verdict | Met? | Steady live | Peak | "
                       "Allocs/step | Step time |\n|---|---|---|---|---|---:|---:|---:|---:|\n"
                       "| mlp_sgd | clean | PASS | PASS | yes | 1.50 MiB | 2.00 MiB | 12 | "
                       "1.20 ms |\n"))
      << markdown;
  EXPECT_TRUE(Contains(markdown,
                       "| zoo_loss_history | zoo | unbounded-growth | unbounded-growth | yes | "
                       "3.81 MiB | 3.81 MiB | 9 | 310 us |\n"));
  EXPECT_TRUE(Contains(markdown,
                       "| stress_transformer_block | clean | PASS | peak-over-budget | **NO** | "
                       "24.00 MiB | 40.00 MiB | 131.25 | 2.50 ms |\n"));
}

TEST(ReportMarkdownTest, DetectionTable_ComparesPlantedAndDetected) {
  const std::string markdown = RenderMarkdown(testing::MakeSampleReport());
  EXPECT_TRUE(Contains(
      markdown, "| zoo_loss_history | zoo | unbounded-growth | unbounded-growth | detected |\n"));
  EXPECT_TRUE(Contains(markdown,
                       "| zoo_cached_workspace | zoo | not-returned-to-baseline | PASS | "
                       "**missed** (no leak found) |\n"));
  EXPECT_TRUE(Contains(markdown, "| mlp_sgd | clean | none | PASS | 0 false positives |\n"));
  EXPECT_TRUE(Contains(
      markdown,
      "| stress_transformer_block | clean | none | peak-over-budget | **1 false positive** |\n"));
  EXPECT_TRUE(Contains(markdown,
                       "Zoo: 1 of 2 planted leaks detected with their class. Clean and trap "
                       "workloads: 1 false positive in 3 workloads.\n"));
}

// A program `leakbound watch` ran has no expectation: no "expected", no "Met?", no false
// positive; the result line says whether a leak was found.
Report WatchedReport(VerdictClass verdict) {
  Report report = testing::MakeSampleReport();
  report.workloads.resize(1);
  WorkloadResult& w = report.workloads[0];
  w.name = "train.py";
  w.kind = "watched";
  w.expectation = kPass;
  w.verdict = verdict;
  w.met_expectation = verdict == kPass;
  return report;
}

TEST(ReportMarkdownTest, WatchedProgram_HasNoExpectation) {
  const std::string leak = RenderMarkdown(WatchedReport(kUnboundedGrowth));
  EXPECT_TRUE(Contains(leak, "**Result: a leak was found (unbounded-growth).**")) << leak;
  EXPECT_FALSE(Contains(leak, "expectation")) << leak;
  EXPECT_FALSE(Contains(leak, "expected")) << leak;
  EXPECT_TRUE(Contains(leak, "| train.py | watched | - (a watched program) | unbounded-growth | "
                             "**leak found** |\n"))
      << leak;
  EXPECT_TRUE(Contains(leak, "1 false positive") == false) << leak;
  const std::string unjudged = RenderMarkdown(WatchedReport(kInconclusive));
  EXPECT_TRUE(Contains(unjudged, "**Result: no verdict on memory (inconclusive)")) << unjudged;
  EXPECT_TRUE(Contains(unjudged, "| train.py | watched | - (a watched program) | inconclusive | "
                                 "no verdict |\n"))
      << unjudged;
  EXPECT_FALSE(Contains(unjudged, "false positive**")) << unjudged;
  EXPECT_TRUE(Contains(RenderMarkdown(WatchedReport(kPass)), "**Result: no leak was found.**"));
  const std::string html = RenderHtml(WatchedReport(kUnboundedGrowth));
  EXPECT_TRUE(Contains(html, "Result: a leak was found (unbounded-growth).")) << html;
  EXPECT_FALSE(Contains(html, "expected PASS")) << html;
}

// A watched program has no baseline leakbound saw and no probe it timed: those figures are left
// out ("-"), never printed as 0 or as the last sample that the judge uses in their place.
TEST(ReportMarkdownTest, WatchedProgram_LeavesOutBaselineAndProbe) {
  constexpr double kMiB = 1024.0 * 1024.0;
  Report report = WatchedReport(kUnboundedGrowth);
  WorkloadResult& w = report.workloads[0];
  w.counters = {CounterVerdict{"host.heap_bytes", kUnboundedGrowth, 24, 0, 3 * kMiB, 3 * kMiB,
                               4 * kMiB, "grew"}};
  w.probe_time_ns = 0;
  w.baseline_live_bytes = 0;
  const std::string markdown = RenderMarkdown(report);
  EXPECT_TRUE(Contains(markdown, "| host.heap_bytes | unbounded-growth | 24 B/step | - | - | "
                                 "3.00 MiB | 4.00 MiB |"))
      << markdown;
  const std::string html = RenderHtml(report);
  EXPECT_FALSE(Contains(html, "<span>probe <b>")) << html;
  EXPECT_FALSE(Contains(html, "<span>baseline <b>")) << html;
  EXPECT_FALSE(Contains(html, "Dotted: baseline")) << html;
  w.kind = "zoo";  // the same figures in a run's workload are measured, and shown
  const std::string run_html = RenderHtml(report);
  EXPECT_TRUE(Contains(run_html, "<span>probe <b>")) << run_html;
  EXPECT_TRUE(Contains(run_html, "<span>baseline <b>")) << run_html;
  EXPECT_TRUE(Contains(RenderMarkdown(report), "| 24 B/step | - | 3.00 MiB | 3.00 MiB |"));
}

TEST(ReportMarkdownTest, Details_OnlyForWorkloadsThatDidNotPassOrMissed) {
  const std::string markdown = RenderMarkdown(testing::MakeSampleReport());
  EXPECT_FALSE(Contains(markdown, "### mlp_sgd"));
  EXPECT_FALSE(Contains(markdown, "### trap_param_reuse"));
  EXPECT_TRUE(Contains(
      markdown,
      "### zoo_loss_history: unbounded-growth (expected unbounded-growth, detected as planted)\n"));
  EXPECT_TRUE(Contains(
      markdown, "### zoo_cached_workspace: PASS (expected not-returned-to-baseline, MISSED)\n"));
  EXPECT_TRUE(Contains(markdown,
                       "### stress_transformer_block: peak-over-budget (expected PASS, MISSED)\n"));
  // Evidence sentence, counter verdicts in the counter's unit, attribution with ages.
  EXPECT_TRUE(Contains(markdown, "> runtime.live_bytes grows 64.00 KiB/step across 4 blocks"));
  EXPECT_TRUE(
      Contains(markdown,
               "| runtime.live_bytes | unbounded-growth | 65536 B/step | - | 0 B | 3.00 MiB "
               "| 3.81 MiB | Grows 64.00 KiB/step; exact counter, any growth counts. |\n"));
  EXPECT_TRUE(
      Contains(markdown, "| tracking.outstanding | unbounded-growth | 1/step | - | 0 | 48 | 72 |"));
  EXPECT_TRUE(Contains(
      markdown,
      "| Op | Role | Scope | Growth | Rose at | Census (survivors by block) | Bytes | Allocations "
      "| Age (steps) |\n"));
  EXPECT_TRUE(Contains(
      markdown, "| matmul | value | manual | +65536 B/step | 3 of 3 | - | 3.00 MiB | 48 | 1-48 |\n"));
  // A row with no growth figures (one block end, an older report): dashes, not zeros.
  EXPECT_TRUE(
      Contains(markdown, "| conv2d | workspace | none | - | - | - | 256.00 KiB | 1 | 200 |\n"));
}

// A row with a census of its own: the census decides whether it grows, not rose_at, and the
// table shows the outcome with the survivors by block.
TEST(ReportMarkdownTest, Attribution_RowCensusDecidesGrowthAndIsShown) {
  Report report = testing::MakeSampleReport();
  Attribution* found = nullptr;  // the sample's matmul row: rose at every block end
  for (WorkloadResult& w : report.workloads)
    for (Attribution& a : w.attribution)
      if (a.op == "matmul" && found == nullptr) found = &a;
  ASSERT_NE(found, nullptr);
  Attribution& row = *found;
  ASSERT_TRUE(Grows(row));
  row.census = "bounded";
  row.survivor_bytes = {0, 0, 4096};
  row.census_from_block = 2;
  EXPECT_FALSE(Grows(row));  // ... but its census says bounded
  EXPECT_TRUE(Contains(RenderMarkdown(report), "| bounded: 0 B, 0 B, 4.00 KiB (blocks 2-) |"));
  row.census = "growth";
  row.survivor_bytes = {1024, 1024, 1024};
  row.census_from_block = 1;
  EXPECT_TRUE(Grows(row));
  EXPECT_EQ(FormatRowCensus(row), "growth: 1.00 KiB, 1.00 KiB, 1.00 KiB");
  row.bytes_per_step = 0;
  EXPECT_FALSE(Grows(row));  // a census that grows at no rate does not make a growing row
}

TEST(ReportMarkdownTest, Benchmarks_ListedWithUnits) {
  const std::string markdown = RenderMarkdown(testing::MakeSampleReport());
  EXPECT_TRUE(Contains(markdown, "| probe_overhead_ns | 850 ns |\n"));
  EXPECT_TRUE(Contains(markdown, "| steps_per_second | 833.30 steps/s |\n"));
}

TEST(ReportMarkdownTest, UnjudgedCounter_ShowsNotJudgedInsteadOfPass) {
  Report report = testing::MakeSampleReport();
  // The detected zoo entry: its details (and counter table) are rendered.
  ASSERT_EQ(report.workloads[1].kind, "zoo");
  ASSERT_FALSE(report.workloads[1].counters.empty());
  CounterVerdict& counter = report.workloads[1].counters.back();
  counter.verdict = kPass;
  counter.judged = false;
  const std::string markdown = RenderMarkdown(report);
  EXPECT_TRUE(Contains(markdown, "| " + MarkdownEscape(counter.counter) + " | not judged |"))
      << markdown.substr(0, 3000);
  EXPECT_TRUE(Contains(RenderHtml(report), "<span class=\"badge info\">not judged</span>"));
}

TEST(ReportMarkdownTest, FormatFigure_NamesEveryUnitOnce) {
  EXPECT_EQ(FormatFigure({"t", 24.5e6, "ns"}), "24.5 ms");
  EXPECT_EQ(FormatFigure({"b", 65536, "bytes"}), "64.00 KiB");
  EXPECT_EQ(FormatFigure({"s", 2048, "bytes/step"}), "2.00 KiB/step");
  EXPECT_EQ(FormatFigure({"p", 0.0109, "%"}), "0.0109%");
  EXPECT_EQ(FormatFigure({"c", 12, ""}), "12");
}

TEST(ReportMarkdownTest, HostileNames_CannotBreakTablesOrInjectHtml) {
  Report report = testing::MakeSampleReport();
  report.workloads[2].name = "a|b <script>alert(1)</script>\nnext";
  const std::string markdown = RenderMarkdown(report);
  EXPECT_FALSE(Contains(markdown, "<script>"));
  EXPECT_TRUE(Contains(markdown, "| a\\|b \\<script\\>alert(1)\\</script\\> next | zoo |"));
}

TEST(ReportMarkdownTest, MarkdownEscape_EscapesTableAndHtmlCharacters) {
  EXPECT_EQ(MarkdownEscape("mlp_sgd"), "mlp_sgd");
  EXPECT_EQ(MarkdownEscape("a|b\\c`d*e[f]<g>"), "a\\|b\\\\c\\`d\\*e\\[f\\]\\<g\\>");
  EXPECT_EQ(MarkdownEscape("one\r\ntwo\nthree"), "one two three");
}

TEST(ReportMarkdownTest, EmptyReport_StillRendersHeadingAndEmptyTables) {
  const std::string markdown = RenderMarkdown(Report{});
  EXPECT_TRUE(Contains(markdown, "**Result: all 0 workloads met their expectation.**"));
  EXPECT_FALSE(Contains(markdown, "## Details"));
  EXPECT_FALSE(Contains(markdown, "## Benchmarks"));
}

TEST(ReportMarkdownTest, InterruptedReport_OpensWithABannerCountingWhatFinished) {
  Report report = testing::MakeSampleReport();
  report.meta.interrupted = true;
  report.workloads.resize(2);
  const std::string markdown = RenderMarkdown(report);
  EXPECT_TRUE(Contains(markdown,
                       "\n**INTERRUPTED**: the run was stopped by a signal; only the 2 "
                       "workloads that finished are in this report, and the rest were "
                       "not run.\n\n**Result:"))
      << markdown;
  EXPECT_FALSE(Contains(RenderMarkdown(testing::MakeSampleReport()), "INTERRUPTED"));
}

TEST(ReportMarkdownTest, LeakDetail_NamesTheCounterRateAndTopOwner) {
  const std::string markdown = RenderMarkdown(testing::MakeSampleReport());
  EXPECT_TRUE(Contains(markdown,
                       "Caught by: runtime.live_bytes +65536 B/step\n\n"
                       "Top growing: matmul (value, scope manual): +65536 B/step, rose at 3 of "
                       "3 block ends; 3.00 MiB in 48 allocations\n\n"))
      << markdown;
}

TEST(ReportMarkdownTest, TopOwner_ThatDidNotRiseAtEveryBlockEnd_IsOutstandingNotGrowing) {
  Report report = testing::MakeSampleReport();
  for (WorkloadResult& workload : report.workloads) {
    for (Attribution& row : workload.attribution) row.rose_at = row.transitions > 0 ? 2 : 0;
  }
  const std::string markdown = RenderMarkdown(report);
  EXPECT_TRUE(Contains(markdown,
                       "Top outstanding: matmul (value, scope manual): 3.00 MiB in 48 "
                       "allocations\n\n"))
      << markdown;
  EXPECT_FALSE(Contains(markdown, "Top growing")) << markdown;
}

TEST(ReportMarkdownTest, NoiseFloors_OnceInTheMetadata_InBytesPerStep) {
  const std::string markdown = RenderMarkdown(testing::MakeSampleReport());
  EXPECT_TRUE(Contains(markdown, "| Noise floors | host.rss_bytes 4096 B/step |\n")) << markdown;
}

}  // namespace
}  // namespace leakbound::reports
