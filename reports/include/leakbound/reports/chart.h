// Inline SVG line charts of counter series for the HTML report: human tick labels, warm-up
// shaded, block boundaries dashed, the baseline dotted. Long series are downsampled with min/max
// per bucket so that a one-step spike in 100,000 samples stays visible. Bar charts of a counter's
// survivors by birth block (its census) share the axes and the style.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "leakbound/reports/report.h"

namespace leakbound::reports {

struct ChartPoint {
  double step = 0;   // sample index (x)
  double value = 0;  // y
  bool operator==(const ChartPoint&) const = default;
};

// At most `max_points` points (>= 2) that keep the extremes: the series is cut into
// max_points / 2 buckets of consecutive samples and each bucket contributes its minimum and its
// maximum, in step order (one point when they coincide). Short series come back whole.
// Non-finite samples ("not measured") are skipped.
std::vector<ChartPoint> DownsampleMinMax(const std::vector<double>& values,
                                         std::size_t max_points = 600);

// An axis: its range and round tick values ("nice" 1-2-5 steps in the display unit).
struct Axis {
  double low = 0;
  double high = 1;
  std::vector<double> ticks;
  std::vector<std::string> labels;  // one per tick
};

// Y axis for values in [low, high] in `unit` ("bytes": binary units, labels like "1.5 MiB";
// anything else: counts, labels like "12.5k"). A constant or single value gets a visible range
// around it. About `target_ticks` ticks.
Axis ValueAxis(double low, double high, const std::string& unit, int target_ticks = 5);

// X axis over sample indices [0, last_step] with integer ticks.
Axis StepAxis(double last_step, int target_ticks = 6);

// What a chart shows besides the series itself.
struct ChartContext {
  int warmup_steps = 0;                 // samples [0, warmup_steps) are shaded
  std::vector<int> block_ends;          // last sample index of each measured block
  std::optional<double> baseline;       // dotted horizontal line ("before setup")
  int width = 560;                      // SVG user units; the chart scales with its container
  int height = 220;
};

// One self-contained <svg> element. Empty or all-"not measured" series render a small
// placeholder that says so.
std::string RenderSeriesSvg(const CounterSeries& series, const ChartContext& context);

// One self-contained <svg> bar chart of a counter's census (CounterVerdict::survivor_bytes):
// bar k is what was born in measured block k and is still live at the last block end, labelled
// "block k+1" and with its value in `unit` (FormatInUnit: bytes for "bytes", counts otherwise).
// The last bar, the youngest block (at most one block old, not aged), is drawn lighter with a
// dashed outline and named in a legend line. Bars grow from zero; zero values draw flat bars and
// non-finite ones none ("n/a"). Titled "<counter>: survivors by birth block (still live at the
// last block end)". Many blocks: labels on every few bars, counted back from the youngest.
std::string RenderSurvivorsSvg(const std::string& counter, const std::vector<double>& survivors,
                               const std::string& unit, int width = 560, int height = 200);

// One self-contained <svg> flame graph of what grows: each growing row (Grows, format.h) with a
// stack is a tower of its frames, the outermost at the bottom; frames that rows share merge, and
// every frame is as wide as the bytes per step of the rows through it. Each frame has a tooltip
// (<title>: the frame, its rate and share); names that do not fit are cut with "..". Empty when
// no growing row has a stack.
std::string RenderGrowthFlameSvg(const std::vector<Attribution>& rows, int width = 960);

}  // namespace leakbound::reports
