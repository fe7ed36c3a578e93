// Tests of the SVG chart helpers: min/max downsampling keeps spikes, axes get round ticks with
// human labels, and degenerate series (1 sample, constant, none) still render something legible.

#include "leakbound/reports/chart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace leakbound::reports {
namespace {

std::size_t CountOf(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++count;
  return count;
}

// The number of "x,y" pairs in the series polyline.
std::size_t SeriesPointCount(const std::string& svg) {
  const std::string marker = "class=\"series\"";
  const std::size_t series = svg.find(marker);
  const std::size_t begin = svg.find("points=\"", series) + 8;
  const std::size_t end = svg.find('"', begin);
  const std::string points = svg.substr(begin, end - begin);
  return points.empty()
             ? 0
             : static_cast<std::size_t>(std::count(points.begin(), points.end(), ' ')) + 1;
}

TEST(ReportChartTest, Downsample_ShortSeries_ComesBackWhole) {
  const std::vector<ChartPoint> points = DownsampleMinMax({5, 6, 7});
  EXPECT_EQ(points, (std::vector<ChartPoint>{{0, 5}, {1, 6}, {2, 7}}));
}

TEST(ReportChartTest, Downsample_LongSeries_KeepsSpikeAndDipWithinBudget) {
  std::vector<double> values(10000, 100.0);
  values[7777] = 5000;  // one-sample spike
  values[1234] = -50;   // one-sample dip
  const std::vector<ChartPoint> points = DownsampleMinMax(values, 600);
  EXPECT_LE(points.size(), 600u);
  EXPECT_GE(points.size(), 300u);
  EXPECT_NE(std::find(points.begin(), points.end(), ChartPoint{7777, 5000}), points.end());
  EXPECT_NE(std::find(points.begin(), points.end(), ChartPoint{1234, -50}), points.end());
  // In step order, first and last samples' buckets represented.
  EXPECT_TRUE(
      std::is_sorted(points.begin(), points.end(),
                     [](const ChartPoint& a, const ChartPoint& b) { return a.step < b.step; }));
  EXPECT_EQ(points.front().step, 0);
  EXPECT_GE(points.back().step, 9966);
}

TEST(ReportChartTest, Downsample_SkipsNotMeasuredSamples) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(DownsampleMinMax({1, nan, 3}), (std::vector<ChartPoint>{{0, 1}, {2, 3}}));
  EXPECT_TRUE(DownsampleMinMax({nan, nan}).empty());
}

// Found with the fuzz harness (regressions/chart_value_axis_subnormal_range.json): a range of
// 2e-323 made the tick step underflow to 0 and cast inf to int (UB).
TEST(ReportChartTest, ValueAxis_SubnormalRange_GivesFiniteTicks) {
  const Axis axis = ValueAxis(0, 2e-323, "count");
  EXPECT_TRUE(std::isfinite(axis.low));
  EXPECT_TRUE(std::isfinite(axis.high));
  EXPECT_FALSE(axis.labels.empty());
}

TEST(ReportChartTest, ValueAxis_BytesGetRoundTicksInOneBinaryUnit) {
  const Axis axis = ValueAxis(0, 3.0 * 1024 * 1024, "bytes");
  EXPECT_EQ(axis.labels, (std::vector<std::string>{"0 MiB", "1 MiB", "2 MiB", "3 MiB", "4 MiB"}));
  EXPECT_EQ(axis.low, 0);
  EXPECT_EQ(axis.high, 4.0 * 1024 * 1024);
}

TEST(ReportChartTest, ValueAxis_FractionalStepsKeepNeededDecimals) {
  const Axis axis = ValueAxis(1.0 * 1024 * 1024, 2.0 * 1024 * 1024, "bytes");
  EXPECT_EQ(axis.labels, (std::vector<std::string>{"0.8 MiB", "1 MiB", "1.2 MiB", "1.4 MiB",
                                                   "1.6 MiB", "1.8 MiB", "2 MiB", "2.2 MiB"}));
}

TEST(ReportChartTest, ValueAxis_TinyRangeAtLargeValue_UsesFinerUnit) {
  const double base = 100.0 * 1024 * 1024;
  const Axis axis = ValueAxis(base, base + 3, "bytes");
  ASSERT_GE(axis.labels.size(), 2u);
  // Labels must differ from each other: they are written in B, not "100 MiB" repeated.
  EXPECT_NE(axis.labels[0], axis.labels[1]);
  EXPECT_EQ(axis.labels[0].substr(axis.labels[0].size() - 2), " B");
}

TEST(ReportChartTest, ValueAxis_ConstantValue_GetsBandAroundIt) {
  const Axis axis = ValueAxis(256 * 1024, 256 * 1024, "bytes");
  EXPECT_LT(axis.low, 256 * 1024);
  EXPECT_GT(axis.high, 256 * 1024);
  EXPECT_GE(axis.ticks.size(), 3u);
  std::vector<std::string> unique = axis.labels;
  std::sort(unique.begin(), unique.end());
  EXPECT_EQ(std::unique(unique.begin(), unique.end()), unique.end()) << "duplicate tick labels";
}

TEST(ReportChartTest, ValueAxis_CountsUseThousandsSuffixFrom10k) {
  EXPECT_EQ(ValueAxis(0, 40000, "count").labels,
            (std::vector<std::string>{"0k", "10k", "20k", "30k", "40k", "50k"}));
  EXPECT_EQ(ValueAxis(0, 4, "count").labels,
            (std::vector<std::string>{"0", "1", "2", "3", "4", "5"}));
}

TEST(ReportChartTest, StepAxis_IntegerTicksAndSingleSampleCentred) {
  EXPECT_EQ(StepAxis(209).labels, (std::vector<std::string>{"0", "50", "100", "150", "200"}));
  const Axis single = StepAxis(0);
  EXPECT_EQ(single.labels, (std::vector<std::string>{"0"}));
  EXPECT_LT(single.low, 0);
  EXPECT_GT(single.high, 0);
}

TEST(ReportChartTest, RenderSeriesSvg_BaselineOutsideTheFittedRange_IsNamedNotDrawn) {
  CounterSeries series{"runtime.live_bytes", "bytes", true, std::vector<double>(60, 2048)};
  ChartContext context;
  context.baseline = 0;
  const std::string svg = RenderSeriesSvg(series, context);
  EXPECT_EQ(CountOf(svg, "stroke-dasharray=\"1.5 3\""), 0u);
  EXPECT_NE(svg.find(">baseline 0 B (below)</text>"), std::string::npos) << svg;
}

TEST(ReportChartTest, RenderSeriesSvg_SmallLeakOnALargeValue_FillsThePlotWithOffsetLabels) {
  // 32 B/step on 115 KiB: the y range is fitted to the samples and labelled as the change from
  // the first one, so the line climbs across the plot instead of lying flat.
  std::vector<double> values;
  for (int i = 0; i < 48; ++i) values.push_back(117760 + 32.0 * i);
  CounterSeries series{"runtime.live_bytes", "bytes", true, values};
  ChartContext context;
  context.baseline = 0;
  const std::string svg = RenderSeriesSvg(series, context);
  EXPECT_NE(svg.find(">change from first sample, 115.00 KiB</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">0 KiB</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">+1.5 KiB</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">baseline 0 B (below)</text>"), std::string::npos) << svg;
  // The line spans most of the plot height (172 units between the margins); drawn on a range
  // from the 0 B baseline it would rise under one unit.
  const std::size_t points = svg.find("class=\"series\"");
  ASSERT_NE(points, std::string::npos);
  const std::size_t first = svg.find("points=\"", points) + 8;
  const double first_y = std::stod(svg.substr(svg.find(',', first) + 1));
  const std::size_t last_space = svg.find("\"/>", first);
  const std::string list = svg.substr(first, last_space - first);
  const double last_y = std::stod(list.substr(list.rfind(',') + 1));
  EXPECT_GT(first_y - last_y, 120.0) << list;
}

TEST(ReportChartTest, RenderSeriesSvg_DrawsWarmupBlocksAndBaseline) {
  std::vector<double> values(60, 2048);
  values[0] = 0;  // the series starts at the baseline, so the baseline is in range
  CounterSeries series{"runtime.live_bytes", "bytes", true, values};
  ChartContext context;
  context.warmup_steps = 10;
  context.block_ends = {29, 49, 59};
  context.baseline = 0;
  const std::string svg = RenderSeriesSvg(series, context);
  EXPECT_EQ(svg.rfind("<svg class=\"chart\"", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 6), "</svg>");
  EXPECT_EQ(CountOf(svg, "stroke-dasharray=\"4 3\""), 3u);    // block boundaries
  EXPECT_EQ(CountOf(svg, "stroke-dasharray=\"1.5 3\""), 1u);  // baseline
  EXPECT_EQ(CountOf(svg, "fill=\"#f3f4f6\""), 1u);            // warm-up band
  EXPECT_NE(svg.find(">warm-up</text>"), std::string::npos);
  EXPECT_NE(svg.find(">baseline</text>"), std::string::npos);
  EXPECT_EQ(SeriesPointCount(svg), 60u);
}

TEST(ReportChartTest, RenderSeriesSvg_SingleSample_IsVisibleAsAMarker) {
  const std::string svg = RenderSeriesSvg({"c", "count", true, {42}}, ChartContext{});
  EXPECT_EQ(CountOf(svg, "<circle"), 1u);
  EXPECT_EQ(SeriesPointCount(svg), 1u);
}

TEST(ReportChartTest, RenderSeriesSvg_LongSeries_IsDownsampled) {
  std::vector<double> values(20000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i % 97);
  const std::string svg = RenderSeriesSvg({"c", "count", true, values}, ChartContext{});
  EXPECT_LE(SeriesPointCount(svg), 600u);
  EXPECT_EQ(CountOf(svg, "<circle"), 0u);
}

TEST(ReportChartTest, RenderSeriesSvg_EmptyOrAllNull_SaysSo) {
  EXPECT_NE(RenderSeriesSvg({"c", "count", true, {}}, ChartContext{}).find(">no samples</text>"),
            std::string::npos);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(RenderSeriesSvg({"c", "count", true, {nan}}, ChartContext{})
                .find(">not measured (all samples null)</text>"),
            std::string::npos);
}

TEST(ReportChartTest, RenderSeriesSvg_OutOfRangeBlockEnds_AreIgnored) {
  ChartContext context;
  context.block_ends = {-5, 3, 1000};
  const std::string svg = RenderSeriesSvg({"c", "count", true, {1, 2, 3, 4, 5}}, context);
  EXPECT_EQ(CountOf(svg, "stroke-dasharray=\"4 3\""), 1u);
}

// Flame graph of what grows (RenderGrowthFlameSvg).
Attribution GrowingRow(std::vector<std::string> stack, double per_step) {
  Attribution row;
  row.op = stack.empty() ? "site" : stack.back();
  row.role = "heap";
  row.scope = "none";
  row.bytes = 1000;
  row.allocations = 10;
  row.bytes_per_step = per_step;
  row.rose_at = row.transitions = 2;
  row.stack = std::move(stack);
  return row;
}

// The width of the rect whose <title> starts with `frame`.
double FlameWidthOf(const std::string& svg, const std::string& frame) {
  const std::size_t title = svg.find("<title>" + frame + " ");
  if (title == std::string::npos) return -1;
  const std::size_t width = svg.find("width=\"", title);
  return std::stod(svg.substr(width + 7));
}

TEST(ReportChartTest, FlameGraph_SharedFramesMerge_AndWidthsFollowBytesPerStep) {
  const std::string svg =
      RenderGrowthFlameSvg({GrowingRow({"main c.c:5", "Keep c.c:10", "malloc"}, 300),
                            GrowingRow({"main c.c:5", "Cache c.c:20"}, 100)},
                           800);
  ASSERT_FALSE(svg.empty());
  EXPECT_EQ(CountOf(svg, "<title>main c.c:5 "), 1u) << "a frame two rows share is drawn once";
  EXPECT_NEAR(FlameWidthOf(svg, "main c.c:5"), 799.5, 0.1);
  EXPECT_NEAR(FlameWidthOf(svg, "Keep c.c:10"), 599.5, 0.1);
  EXPECT_NEAR(FlameWidthOf(svg, "Cache c.c:20"), 199.5, 0.1);
  EXPECT_NE(svg.find("<title>Keep c.c:10 \u2014 +300 B/step (75.0%)</title>"), std::string::npos)
      << svg;
  EXPECT_NE(svg.find("all growth (+400 B/step)"), std::string::npos);
}

TEST(ReportChartTest, FlameGraph_NothingGrowingWithAStack_IsEmpty) {
  Attribution steady = GrowingRow({"main c.c:5"}, 0);
  steady.rose_at = 0;
  Attribution once = GrowingRow({"main c.c:5"}, 50);
  once.rose_at = 1;  // grew, but not at every block end
  EXPECT_EQ(RenderGrowthFlameSvg({steady, once, GrowingRow({}, 20)}), "");
  EXPECT_EQ(RenderGrowthFlameSvg({}), "");
}

TEST(ReportChartTest, FlameGraph_InfiniteTotal_IsNoGraph_AndADeepStackIsCut) {
  EXPECT_EQ(RenderGrowthFlameSvg({GrowingRow({"a", "b"}, 1e308), GrowingRow({"a", "c"}, 1e308)}),
            "");
  const std::string deep =
      RenderGrowthFlameSvg({GrowingRow(std::vector<std::string>(100000, "x"), 8)});
  EXPECT_EQ(CountOf(deep, "<rect"), 65u) << "the root and the 64 outermost frames";
  EXPECT_EQ(deep.find("nan"), std::string::npos);
}

TEST(ReportChartTest, FlameGraph_HostileFrameNames_AreEscaped_AndLongOnesCut) {
  const std::string long_name(400, 'x');
  const std::string svg = RenderGrowthFlameSvg(
      {GrowingRow({"<script>alert(1)</script> a.py:1", long_name}, 10)}, 300);
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  EXPECT_NE(svg.find("&lt;script&gt;"), std::string::npos);
  EXPECT_EQ(svg.find(">" + long_name + "<"), std::string::npos) << "a name wider than its frame";
  EXPECT_NE(svg.find("x..</text>"), std::string::npos);
}

}  // namespace
}  // namespace leakbound::reports
