// Tests of the HTML renderer: self-contained (no scripts, no network), every report string
// escaped, one chart per series, survivors-by-birth-block charts for counters with a census, and
// badge colours that follow the workload outcome.

#include "leakbound/reports/html.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>
#include <vector>

#include "sample_report.h"

namespace leakbound::reports {
namespace {

std::size_t CountOf(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++count;
  return count;
}

std::string Lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

TEST(ReportHtmlTest, EscapeHtml_EscapesAllFiveSpecialCharacters) {
  EXPECT_EQ(EscapeHtml("<a href=\"x\">Tom & Jerry's</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;");
  EXPECT_EQ(EscapeHtml("plain µ"), "plain µ");
}

TEST(ReportHtmlTest, HostileStrings_AreEscapedEverywhere) {
  Report report = testing::MakeSampleReport();
  const std::string attack = "<script>alert(1)</script>";
  report.workloads[0].name = attack;
  report.workloads[0].description = "\"><img src=x onerror=alert(2)>";
  report.workloads[0].evidence = attack;
  report.workloads[0].series[0].name = "\"><script>alert(3)</script>";  // lands in aria-label
  report.workloads[0].counters[0].evidence = attack;
  report.workloads[0].counters[0].counter = "<script>alert(6)</script>";  // a survivors chart
  report.workloads[0].counters[0].survivor_bytes = {1, 2};
  report.workloads[1].attribution[0].op = attack;
  report.meta.commit = "</title><script>alert(4)</script>";
  report.meta.device_class = "</style><script>alert(5)</script>";
  report.benchmarks[0].name = attack;

  const std::string html = RenderHtml(report);
  const std::string lower = Lowercase(html);
  EXPECT_EQ(lower.find("<script"), std::string::npos);
  EXPECT_EQ(lower.find("<img"), std::string::npos);
  // The page title plus one <title> per chart: the commit's "</title>" was escaped.
  EXPECT_EQ(CountOf(html, "<svg class=\"chart survivors\""), 1u);
  EXPECT_EQ(CountOf(html, "</title>"), 1u + CountOf(html, "<svg class=\"chart"));
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("&quot;&gt;&lt;img src=x onerror=alert(2)&gt;"), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"&quot;&gt;&lt;script&gt;alert(3)&lt;/script&gt; over steps\""),
            std::string::npos);
  EXPECT_NE(html.find("<title>&lt;script&gt;alert(6)&lt;/script&gt;: survivors by birth block"),
            std::string::npos);
  EXPECT_EQ(CountOf(html, "</style>"), 1u);  // only the real one
}

TEST(ReportHtmlTest, Page_IsSelfContained) {
  const std::string html = RenderHtml(testing::MakeSampleReport());
  const std::string lower = Lowercase(html);
  EXPECT_EQ(lower.rfind("<!doctype html>", 0), 0u);
  EXPECT_EQ(lower.find("<script"), std::string::npos);
  EXPECT_EQ(lower.find("<link"), std::string::npos);
  EXPECT_EQ(lower.find("@import"), std::string::npos);
  EXPECT_EQ(lower.find("url("), std::string::npos);
  EXPECT_EQ(lower.find("src="), std::string::npos);
  EXPECT_EQ(lower.find("@font-face"), std::string::npos);
  // The only URL is the SVG namespace, which is an identifier, not a fetch.
  EXPECT_EQ(CountOf(lower, "https:"), 0u);
  EXPECT_EQ(CountOf(lower, "//"), CountOf(lower, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_NE(html.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
}

TEST(ReportHtmlTest, OneChartPerSeries_AndTheSummaryTable) {
  const Report report = testing::MakeSampleReport();
  const std::string html = RenderHtml(report);
  std::size_t series = 0;
  for (const WorkloadResult& workload : report.workloads) series += workload.series.size();
  EXPECT_EQ(CountOf(html, "<svg class=\"chart\""), series);
  EXPECT_EQ(CountOf(html, "<section class=\"card "), report.workloads.size());
  EXPECT_NE(html.find("<td><a href=\"#w0\"><code>mlp_sgd</code></a></td><td>clean</td>"
                      "<td><span class=\"badge pass\">PASS</span></td><td>yes</td><td>-</td>"
                      "<td class=\"num\">-</td><td class=\"num\">1.50 MiB</td>"
                      "<td class=\"num\">2.00 MiB</td>"
                      "<td class=\"num\">12</td><td class=\"num\">1.20 ms</td>"),
            std::string::npos);
}

TEST(ReportHtmlTest, BadgeColours_FollowOutcome) {
  const std::string html = RenderHtml(testing::MakeSampleReport());
  EXPECT_NE(html.find("<section class=\"card pass\" id=\"w0\">"), std::string::npos);  // clean
  EXPECT_NE(html.find("<section class=\"card expected\" id=\"w1\">"),
            std::string::npos);                                                          // zoo hit
  EXPECT_NE(html.find("<section class=\"card missed\" id=\"w2\">"), std::string::npos);  // zoo miss
  EXPECT_NE(html.find("<section class=\"card pass\" id=\"w3\">"), std::string::npos);    // trap
  EXPECT_NE(html.find("<section class=\"card missed\" id=\"w4\">"), std::string::npos);  // false +
  EXPECT_NE(html.find("<span class=\"badge expected\">unbounded-growth</span>"), std::string::npos);
  EXPECT_NE(html.find("<span class=\"badge missed\">peak-over-budget</span>"), std::string::npos);
  EXPECT_NE(html.find(".badge.pass { background: #dcfce7"), std::string::npos);
  EXPECT_NE(html.find(".badge.missed { background: #fee2e2"), std::string::npos);
  EXPECT_NE(html.find(".badge.expected { background: #fef3c7"), std::string::npos);
}

TEST(ReportHtmlTest, GrowingRowsWithStacks_GetAFlameGraph_OthersNone) {
  Report report = testing::MakeSampleReport();
  EXPECT_EQ(RenderHtml(report).find("What grows, by stack"), std::string::npos);
  for (WorkloadResult& workload : report.workloads) {
    for (Attribution& row : workload.attribution) row.stack = {"main c.c:5", row.op};
  }
  const std::string html = RenderHtml(report);
  EXPECT_NE(html.find("<h3>What grows, by stack</h3><svg xmlns=\"http://www.w3.org/2000/svg\" "
                      "class=\"flame\""),
            std::string::npos);
  EXPECT_NE(html.find("<title>matmul \u2014 +65536 B/step (100.0%)</title>"), std::string::npos);
}

TEST(ReportHtmlTest, Cards_ShowEvidenceCounterVerdictsAndAttribution) {
  const std::string html = RenderHtml(testing::MakeSampleReport());
  EXPECT_NE(html.find("<p class=\"evidence\">runtime.live_bytes grows 64.00 KiB/step"),
            std::string::npos);
  EXPECT_NE(html.find("<td><code>matmul</code></td><td>value</td><td>manual</td>"
                      "<td class=\"num\">+65536 B/step</td><td class=\"num\">3 of 3</td>"
                      "<td>-</td><td class=\"num\">3.00 MiB</td><td class=\"num\">48</td>"
                      "<td class=\"num\">1-48</td>"),
            std::string::npos);
  EXPECT_NE(
      html.find("<td class=\"evidence-row\" colspan=\"6\">Grows 64.00 KiB/step; exact counter, "
                "any growth counts.</td>"),
      std::string::npos);
}

TEST(ReportHtmlTest, EmptyReport_RendersValidSkeleton) {
  const std::string html = RenderHtml(Report{});
  EXPECT_NE(html.find("All 0 workloads met their expectation."), std::string::npos);
  EXPECT_EQ(html.substr(html.size() - 15), "</body></html>\n");
}

TEST(ReportHtmlTest, LeaksFirst_MissedThenDetectedThenPassed_AnchorsKeepReportIndex) {
  const std::string html = RenderHtml(testing::MakeSampleReport());
  // w2 zoo miss, w4 false positive, w1 zoo hit, then the passes w0 and w3.
  const std::size_t miss = html.find("<section class=\"card missed\" id=\"w2\">");
  const std::size_t false_positive = html.find("<section class=\"card missed\" id=\"w4\">");
  const std::size_t hit = html.find("<section class=\"card expected\" id=\"w1\">");
  const std::size_t pass = html.find("<section class=\"card pass\" id=\"w0\">");
  ASSERT_NE(pass, std::string::npos);
  EXPECT_LT(miss, false_positive);
  EXPECT_LT(false_positive, hit);
  EXPECT_LT(hit, pass);
  EXPECT_LT(html.find("<a href=\"#w2\">"), html.find("<a href=\"#w0\">"));
}

TEST(ReportHtmlTest, Summary_ShowsTheCounterThatCaughtALeakAndItsRate) {
  const std::string html = RenderHtml(testing::MakeSampleReport());
  EXPECT_NE(html.find("<td><code>runtime.live_bytes</code></td><td class=\"num\">+65536 B/step"
                      "</td><td class=\"num\">3.81 MiB</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td><strong>no</strong>, expected not-returned-to-baseline</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<p class=\"caught\">Caught by <b>runtime.live_bytes +65536 B/step</b> "
                      "&middot; top growing: matmul (value, scope manual): +65536 B/step, rose "
                      "at 3 of 3 block ends; 3.00 MiB in 48 allocations</p>"),
            std::string::npos);
}

TEST(ReportHtmlTest, NoiseFloor_OneFigureWithUnits_InMetadataAndCounterTable) {
  const std::string html = RenderHtml(testing::MakeSampleReport());
  EXPECT_NE(html.find("<tr><th>Noise floors</th><td>host.rss_bytes 4096 B/step"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">12.5 B/step</td><td class=\"num\">4096 B/step</td>"),
            std::string::npos);
}

TEST(ReportHtmlTest, InterruptedReport_ShowsABanner) {
  Report report = testing::MakeSampleReport();
  report.meta.interrupted = true;
  EXPECT_NE(RenderHtml(report).find("<p class=\"result interrupted\">INTERRUPTED: the run was "
                                    "stopped by a signal; only the 5 workloads that finished are "
                                    "in this report"),
            std::string::npos);
  EXPECT_EQ(RenderHtml(testing::MakeSampleReport()).find("result interrupted\">"),
            std::string::npos);
}

// A report of one clean workload (series runtime.live_bytes and host.rss_bytes) whose
// runtime.live_bytes verdict carries `survivors` as its census.
Report ReportWithSurvivors(const std::vector<double>& survivors) {
  Report report;
  report.workloads = {testing::MakeCleanWorkload("census")};
  report.workloads[0].counters[0].survivor_bytes = survivors;
  return report;
}

// The survivors chart of `counter` in `html`: its <svg> element, or empty when there is none.
std::string SurvivorsSvg(const std::string& html, const std::string& counter) {
  const std::string title =
      "<title>" + counter + ": survivors by birth block (still live at the last block end)";
  const std::size_t title_at = html.find(title);
  if (title_at == std::string::npos) return {};
  const std::size_t begin = html.rfind("<svg ", title_at);
  const std::size_t end = html.find("</svg>", title_at);
  if (begin == std::string::npos || end == std::string::npos) return {};
  return html.substr(begin, end + 6 - begin);
}

TEST(ReportHtmlTest, SurvivorsByBirthBlock_OneBarPerBlockWithLabels_YoungestMarked) {
  const std::string html = RenderHtml(ReportWithSurvivors({1024, 1024, 2048}));
  const std::string svg = SurvivorsSvg(html, "runtime.live_bytes");
  ASSERT_FALSE(svg.empty());
  EXPECT_EQ(svg.rfind("<svg class=\"chart survivors\"", 0), 0u);
  EXPECT_NE(html.find("<figcaption><code>runtime.live_bytes</code>: survivors by birth block"),
            std::string::npos);
  EXPECT_EQ(CountOf(svg, "<rect class=\"bar"), 3u);
  EXPECT_EQ(CountOf(svg, "<rect class=\"bar youngest\""), 1u);
  EXPECT_LT(svg.find("<rect class=\"bar\""), svg.find("<rect class=\"bar youngest\""));
  EXPECT_EQ(CountOf(svg, ">1.00 KiB</text>"), 2u);
  EXPECT_EQ(CountOf(svg, ">2.00 KiB</text>"), 1u);
  for (const char* label : {">block 1</text>", ">block 2</text>", ">block 3</text>"}) {
    EXPECT_EQ(CountOf(svg, label), 1u) << label;
  }
  EXPECT_NE(svg.find("youngest (not aged)"), std::string::npos);
  // Beside its counter's own chart: after the runtime.live_bytes series, before host.rss_bytes.
  const std::size_t chart = html.find(svg);
  EXPECT_LT(html.find("aria-label=\"runtime.live_bytes over steps\""), chart);
  EXPECT_GT(html.find("aria-label=\"host.rss_bytes over steps\""), chart);
  EXPECT_NE(html.find("The lighter, dashed last bar is the youngest block"), std::string::npos);
}

TEST(ReportHtmlTest, SurvivorsByBirthBlock_OnlyForCountersWithACensus) {
  Report report = ReportWithSurvivors({0, 512});
  ASSERT_TRUE(report.workloads[0].counters[1].survivor_bytes.empty());  // host.rss_bytes
  const std::string html = RenderHtml(report);
  EXPECT_EQ(CountOf(html, "<svg class=\"chart survivors\""), 1u);
  EXPECT_EQ(CountOf(html, "survivors by birth block (still live"), 2u);  // aria-label, title
  EXPECT_FALSE(SurvivorsSvg(html, "runtime.live_bytes").empty());
  EXPECT_TRUE(SurvivorsSvg(html, "host.rss_bytes").empty());
  EXPECT_EQ(html.find("host.rss_bytes</code>: survivors"), std::string::npos);
  // Without any census the page has no survivors chart and no survivors legend.
  const std::string plain = RenderHtml(ReportWithSurvivors({}));
  EXPECT_EQ(plain.find("survivors"), std::string::npos);
  EXPECT_EQ(plain.find("Survivors"), std::string::npos);
}

TEST(ReportHtmlTest, SurvivorsByBirthBlock_AllZero_RendersFlatBarsWithoutNan) {
  const std::string html = RenderHtml(ReportWithSurvivors({0, 0, 0}));
  const std::string svg = SurvivorsSvg(html, "runtime.live_bytes");
  ASSERT_FALSE(svg.empty());
  EXPECT_EQ(CountOf(svg, "<rect class=\"bar"), 3u);
  EXPECT_EQ(CountOf(svg, "height=\"0.0\""), 3u);
  EXPECT_EQ(CountOf(svg, ">0 B</text>"), 4u);  // the zero tick and three value labels
  EXPECT_NE(svg.find(">block 3</text>"), std::string::npos);
  const std::string lower = Lowercase(svg);
  EXPECT_EQ(lower.find("nan"), std::string::npos);
  EXPECT_EQ(lower.find("inf"), std::string::npos);
}

TEST(ReportHtmlTest, SurvivorsByBirthBlock_NonFiniteValues_ReadNotAvailable) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::string html = RenderHtml(ReportWithSurvivors({nan, inf, -inf, 4096}));
  const std::string svg = SurvivorsSvg(html, "runtime.live_bytes");
  ASSERT_FALSE(svg.empty());
  EXPECT_EQ(CountOf(svg, "<rect class=\"bar"), 4u);
  EXPECT_EQ(CountOf(svg, ">n/a</text>"), 3u);
  EXPECT_NE(svg.find(">4.00 KiB</text>"), std::string::npos);
  const std::string lower = Lowercase(svg);
  EXPECT_EQ(lower.find("nan"), std::string::npos);
  EXPECT_EQ(lower.find("inf"), std::string::npos);
}

TEST(ReportHtmlTest, SurvivorsByBirthBlock_AllocationCounter_UsesCounts) {
  Report report = ReportWithSurvivors({});
  CounterVerdict allocations;
  allocations.counter = "host.heap_allocations";  // no series: charted after the series
  allocations.survivor_bytes = {3, 1500, 12};
  report.workloads[0].counters.push_back(allocations);
  const std::string html = RenderHtml(report);
  const std::string svg = SurvivorsSvg(html, "host.heap_allocations");
  ASSERT_FALSE(svg.empty());
  for (const char* label : {">3</text>", ">1,500</text>", ">12</text>"}) {
    EXPECT_EQ(CountOf(svg, label), 1u) << label;
  }
  EXPECT_EQ(svg.find(" B</text>"), std::string::npos);
  EXPECT_EQ(svg.find("KiB"), std::string::npos);
  EXPECT_GT(html.find(svg), html.find("aria-label=\"host.rss_bytes over steps\""));
}

TEST(ReportHtmlTest, SurvivorsByBirthBlock_ManyBlocks_LabelsCountBackFromTheYoungest) {
  const std::string html = RenderHtml(ReportWithSurvivors(std::vector<double>(40, 64)));
  const std::string svg = SurvivorsSvg(html, "runtime.live_bytes");
  ASSERT_FALSE(svg.empty());
  EXPECT_EQ(CountOf(svg, "<rect class=\"bar"), 40u);
  EXPECT_NE(svg.find(">block 40</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">block 39</text>"), std::string::npos);  // no room for every label
  EXPECT_LT(CountOf(svg, ">64 B</text>"), 40u);
}

}  // namespace
}  // namespace leakbound::reports
