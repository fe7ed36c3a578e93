// Inline SVG charts for the HTML report (see chart.h): line charts of counter series and bar
// charts of a counter's survivors by birth block. Coordinates are written with one decimal;
// every text that comes from a report goes through EscapeHtml.

#include "leakbound/reports/chart.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "leakbound/reports/format.h"
#include "leakbound/reports/html.h"

namespace leakbound::reports {
namespace {

constexpr const char* kLineColour = "#2563eb";
constexpr const char* kGridColour = "#e5e7eb";
constexpr const char* kAxisColour = "#9ca3af";
constexpr const char* kTextColour = "#4b5563";
constexpr const char* kWarmupFill = "#f3f4f6";
constexpr const char* kBlockColour = "#a8a29e";
constexpr const char* kBaselineColour = "#d97706";
// The youngest block's survivors: the line colour, lighter, with a dashed outline.
constexpr const char* kYoungestFill = "#bfdbfe";

// Chart margins in SVG units: room for y labels on the left and x labels below.
constexpr double kMarginLeft = 74;
constexpr double kMarginRight = 14;
constexpr double kMarginTop = 14;
constexpr double kMarginBottom = 34;

// Survivor bars: at most this wide, and a label (value above, block below) needs about this much
// room; narrower slots label every few bars, counted back from the youngest.
constexpr double kMaxBarWidth = 64;
constexpr double kBarLabelWidth = 62;

// printf's "%.1f" (std::to_chars with a precision is specified as printf's text), without
// printf's cost: a chart's path is a few thousand coordinates, and snprintf was most of the time
// report.html took for a 20,000-step run.
std::string Fixed1(double value) {
  char buffer[320];  // the largest double's 309 digits, a sign, the point and a decimal
  const std::to_chars_result written =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed, 1);
  return std::string(buffer, written.ptr);
}

// The plotting area of a chart, in SVG units.
struct PlotArea {
  double left;
  double right;
  double top;
  double bottom;
};

PlotArea PlotAreaOf(double width, double height) {
  return {kMarginLeft, width - kMarginRight, kMarginTop, height - kMarginBottom};
}

// The opening <svg> tag of a chart with its accessible label and <title>, both escaped.
std::string SvgOpen(const char* css_class, double width, double height,
                    const std::string& aria_label, const std::string& title) {
  return "<svg class=\"" + std::string(css_class) +
         "\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + Fixed1(width) + " " +
         Fixed1(height) + "\" width=\"" + Fixed1(width) + "\" height=\"" + Fixed1(height) +
         "\" role=\"img\" aria-label=\"" + EscapeHtml(aria_label) + "\"><title>" +
         EscapeHtml(title) + "</title>";
}

// A chart with nothing to draw: a centred note, and the closing tag.
std::string CentredNote(double width, double height, const char* note) {
  return "<text x=\"" + Fixed1(width / 2) + "\" y=\"" + Fixed1(height / 2) +
         "\" text-anchor=\"middle\" fill=\"" + kTextColour + "\" font-size=\"13\">" + note +
         "</text></svg>";
}

// The y coordinate of `value` on `axis` (low at the bottom of the plot, high at its top).
double YOf(const Axis& axis, const PlotArea& plot, double value) {
  return plot.bottom - (value - axis.low) / (axis.high - axis.low) * (plot.bottom - plot.top);
}

// Horizontal grid lines and y labels, one per tick.
void AppendValueGrid(const Axis& axis, const PlotArea& plot, std::string& svg) {
  for (std::size_t i = 0; i < axis.ticks.size(); ++i) {
    const double y = YOf(axis, plot, axis.ticks[i]);
    svg += "<line x1=\"" + Fixed1(plot.left) + "\" x2=\"" + Fixed1(plot.right) + "\" y1=\"" +
           Fixed1(y) + "\" y2=\"" + Fixed1(y) + "\" stroke=\"" + kGridColour + "\"/>";
    svg += "<text x=\"" + Fixed1(plot.left - 6) + "\" y=\"" + Fixed1(y + 4) +
           "\" text-anchor=\"end\" font-size=\"11\" fill=\"" + kTextColour + "\">" +
           EscapeHtml(axis.labels[i]) + "</text>";
  }
}

// The left and bottom axes, drawn over the grid.
void AppendAxisLines(const PlotArea& plot, std::string& svg) {
  svg += "<polyline points=\"" + Fixed1(plot.left) + "," + Fixed1(plot.top) + " " +
         Fixed1(plot.left) + "," + Fixed1(plot.bottom) + " " + Fixed1(plot.right) + "," +
         Fixed1(plot.bottom) + "\" fill=\"none\" stroke=\"" + kAxisColour + "\"/>";
}

// The name of an axis, in the bottom right corner below the x labels.
void AppendAxisName(const PlotArea& plot, double height, const char* name, std::string& svg) {
  svg += "<text x=\"" + Fixed1(plot.right) + "\" y=\"" + Fixed1(height - 4) +
         "\" text-anchor=\"end\" font-size=\"11\" fill=\"" + kTextColour + "\">" + name + "</text>";
}

// Text of `value` with `decimals` decimals and no trailing zeros ("1.50" -> "1.5").
std::string Trimmed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  std::string text = buffer;
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  if (text == "-0") text = "0";
  return text;
}

// 1, 2 or 5 times a power of ten, near `rough` (rounding to the nearest rather than up keeps
// the data filling most of the plot once the range is widened to whole ticks).
double NiceStep(double rough) {
  if (!(rough > 0) || !std::isfinite(rough)) return 1;
  const double power = std::pow(10.0, std::floor(std::log10(rough)));
  if (!(power > 0)) return rough;  // subnormal range: 10^-324 underflows to 0
  const double fraction = rough / power;
  const double nice = fraction < 1.5 ? 1 : fraction < 3 ? 2 : fraction < 7 ? 5 : 10;
  return nice * power;
}

struct DisplayScale {
  double divisor;      // label value = value / divisor
  double threshold;    // used once the largest magnitude reaches this
  const char* suffix;  // appended to labels: " MiB", "k"
};

constexpr std::array<DisplayScale, 6> kByteScales = {
    DisplayScale{1, 0, " B"},
    DisplayScale{1024.0, 1024.0, " KiB"},
    DisplayScale{1024.0 * 1024, 1024.0 * 1024, " MiB"},
    DisplayScale{1024.0 * 1024 * 1024, 1024.0 * 1024 * 1024, " GiB"},
    DisplayScale{1024.0 * 1024 * 1024 * 1024, 1024.0 * 1024 * 1024 * 1024, " TiB"},
    DisplayScale{1024.0 * 1024 * 1024 * 1024 * 1024, 1024.0 * 1024 * 1024 * 1024 * 1024, " PiB"}};

// Counts switch to "k" only from 10,000 so that 1500 stays "1500".
constexpr std::array<DisplayScale, 4> kCountScales = {
    DisplayScale{1, 0, ""}, DisplayScale{1e3, 1e4, "k"}, DisplayScale{1e6, 1e6, "M"},
    DisplayScale{1e9, 1e9, "G"}};

}  // namespace

std::vector<ChartPoint> DownsampleMinMax(const std::vector<double>& values,
                                         std::size_t max_points) {
  max_points = std::max<std::size_t>(max_points, 2);
  std::vector<ChartPoint> points;
  std::size_t finite = 0;
  for (double value : values) finite += std::isfinite(value) ? 1 : 0;
  if (finite <= max_points) {
    points.reserve(finite);
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (std::isfinite(values[i])) points.push_back({static_cast<double>(i), values[i]});
    }
    return points;
  }
  const std::size_t buckets = max_points / 2;
  points.reserve(buckets * 2);
  for (std::size_t bucket = 0; bucket < buckets; ++bucket) {
    // Integer bucket bounds: every sample lands in exactly one bucket.
    const std::size_t begin = bucket * values.size() / buckets;
    const std::size_t end = (bucket + 1) * values.size() / buckets;
    std::size_t min_index = end;
    std::size_t max_index = end;
    for (std::size_t i = begin; i < end; ++i) {
      if (!std::isfinite(values[i])) continue;
      if (min_index == end || values[i] < values[min_index]) min_index = i;
      if (max_index == end || values[i] > values[max_index]) max_index = i;
    }
    if (min_index == end) continue;  // bucket of "not measured" only
    const std::size_t first = std::min(min_index, max_index);
    const std::size_t second = std::max(min_index, max_index);
    points.push_back({static_cast<double>(first), values[first]});
    if (second != first) points.push_back({static_cast<double>(second), values[second]});
  }
  return points;
}

Axis ValueAxis(double low, double high, const std::string& unit, int target_ticks) {
  if (!std::isfinite(low) || !std::isfinite(high)) {
    low = 0;
    high = 1;
  }
  if (low > high) std::swap(low, high);
  if (high == low) {
    // A constant series: a band around the value, so the line sits in the middle.
    const double pad = std::max(std::fabs(low) * 0.05, 1.0);
    low -= pad;
    high += pad;
  } else {
    const double pad = (high - low) * 0.05;
    // Do not push a non-negative series below zero just for padding.
    low = (low >= 0 && low - pad < 0) ? 0 : low - pad;
    high += pad;
  }
  // The display unit suits the largest magnitude, and the tick step is "nice" in that unit
  // (0.5 MiB, not 1,000,000 B). A range too narrow for two decimals in that unit moves to a
  // finer one: 100 MiB +- 3 B is labelled in B.
  const double largest = std::max(std::fabs(low), std::fabs(high));
  const bool bytes = unit == "bytes";
  const DisplayScale* scales = bytes ? kByteScales.data() : kCountScales.data();
  const std::size_t scale_count = bytes ? kByteScales.size() : kCountScales.size();
  std::size_t chosen = 0;
  for (std::size_t i = 0; i < scale_count; ++i) {
    if (largest >= scales[i].threshold) chosen = i;
  }
  const double rough_step = (high - low) / std::max(target_ticks - 1, 1);
  double scaled_step = NiceStep(rough_step / scales[chosen].divisor);
  while (chosen > 0 && scaled_step < 1e-2) {
    --chosen;
    scaled_step = NiceStep(rough_step / scales[chosen].divisor);
  }
  const DisplayScale& scale = scales[chosen];
  const double step = scaled_step * scale.divisor;
  const int decimals =
      static_cast<int>(std::clamp(std::ceil(-std::log10(scaled_step) - 1e-9), 0.0, 6.0));
  Axis axis;
  axis.low = std::floor(low / step) * step;
  axis.high = std::ceil(high / step) * step;
  // Index-based ticks avoid accumulating floating-point error over the range.
  const auto count = static_cast<int>(std::llround((axis.high - axis.low) / step));
  for (int i = 0; i <= count; ++i) {
    const double tick = axis.low + i * step;
    axis.ticks.push_back(tick);
    axis.labels.push_back(Trimmed(tick / scale.divisor, decimals) + scale.suffix);
  }
  return axis;
}

Axis StepAxis(double last_step, int target_ticks) {
  Axis axis;
  if (!(last_step > 0)) {  // one sample: centre it
    axis.low = -1;
    axis.high = 1;
    axis.ticks = {0};
    axis.labels = {"0"};
    return axis;
  }
  axis.low = 0;
  axis.high = last_step;
  const double step = std::max(1.0, NiceStep(axis.high / std::max(target_ticks - 1, 1)));
  for (double tick = 0; tick <= axis.high + 1e-9; tick += step) {
    axis.ticks.push_back(tick);
    axis.labels.push_back(Trimmed(tick, 0));
  }
  return axis;
}

std::string RenderSeriesSvg(const CounterSeries& series, const ChartContext& context) {
  const double width = context.width;
  const double height = context.height;
  const PlotArea plot = PlotAreaOf(width, height);

  std::string svg = SvgOpen("chart", width, height, series.name + " over steps",
                            series.name + " (" + series.unit + ")");

  const std::vector<ChartPoint> points = DownsampleMinMax(series.values);
  if (points.empty()) {
    return svg +
           CentredNote(width, height,
                       series.values.empty() ? "no samples" : "not measured (all samples null)");
  }

  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  for (const ChartPoint& point : points) {
    low = std::min(low, point.value);
    high = std::max(high, point.value);
  }
  // The y range is fitted to the samples, not stretched to the baseline: a 32 B/step leak on
  // 115 KiB must fill the plot. When the range is a sliver of the values (under 2% of the
  // largest magnitude), the axis is labelled as the change from the first sample, so the labels
  // differ in their leading digits ("+0 B", "+50 B") instead of all reading "115.2 KiB".
  double anchor = 0;
  const double largest = std::max(std::fabs(low), std::fabs(high));
  const bool offsets = high > low && largest > 0 && (high - low) < 0.02 * largest;
  if (offsets) anchor = points.front().value;
  Axis y_axis = ValueAxis(low - anchor, high - anchor, series.unit);
  if (offsets) {
    for (std::size_t i = 0; i < y_axis.ticks.size(); ++i) {
      if (y_axis.ticks[i] > 0) y_axis.labels[i] = "+" + y_axis.labels[i];
      y_axis.ticks[i] += anchor;
    }
    y_axis.low += anchor;
    y_axis.high += anchor;
  }
  const bool has_baseline = context.baseline.has_value() && std::isfinite(*context.baseline);
  const bool show_baseline =
      has_baseline && *context.baseline >= y_axis.low && *context.baseline <= y_axis.high;
  const double last_step = static_cast<double>(series.values.size() - 1);
  const Axis x_axis = StepAxis(last_step);

  const auto x_of = [&](double step) {
    const double clamped = std::clamp(step, x_axis.low, x_axis.high);
    return plot.left +
           (clamped - x_axis.low) / (x_axis.high - x_axis.low) * (plot.right - plot.left);
  };
  const auto y_of = [&](double value) { return YOf(y_axis, plot, value); };

  // Warm-up band first, so that grid and data draw over it.
  if (context.warmup_steps > 0) {
    const double band_right = x_of(context.warmup_steps - 0.5);
    svg += "<rect x=\"" + Fixed1(plot.left) + "\" y=\"" + Fixed1(plot.top) + "\" width=\"" +
           Fixed1(std::max(band_right - plot.left, 0.0)) + "\" height=\"" +
           Fixed1(plot.bottom - plot.top) + "\" fill=\"" + kWarmupFill + "\"/>";
    if (band_right - plot.left > 44) {
      svg += "<text x=\"" + Fixed1(plot.left + 4) + "\" y=\"" + Fixed1(plot.top + 12) +
             "\" font-size=\"10\" fill=\"" + kTextColour + "\">warm-up</text>";
    }
  }
  AppendValueGrid(y_axis, plot, svg);
  // X ticks and labels.
  for (std::size_t i = 0; i < x_axis.ticks.size(); ++i) {
    const double x = x_of(x_axis.ticks[i]);
    svg += "<line x1=\"" + Fixed1(x) + "\" x2=\"" + Fixed1(x) + "\" y1=\"" + Fixed1(plot.bottom) +
           "\" y2=\"" + Fixed1(plot.bottom + 4) + "\" stroke=\"" + kAxisColour + "\"/>";
    svg += "<text x=\"" + Fixed1(x) + "\" y=\"" + Fixed1(plot.bottom + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\" fill=\"" + kTextColour + "\">" +
           x_axis.labels[i] + "</text>";
  }
  AppendAxisName(plot, height, "step", svg);
  // Block boundaries: between the last step of a block and the first of the next.
  for (int block_end : context.block_ends) {
    if (block_end < 0 || block_end > last_step) continue;
    const double x = x_of(block_end + 0.5);
    svg += "<line x1=\"" + Fixed1(x) + "\" x2=\"" + Fixed1(x) + "\" y1=\"" + Fixed1(plot.top) +
           "\" y2=\"" + Fixed1(plot.bottom) + "\" stroke=\"" + kBlockColour +
           "\" stroke-dasharray=\"4 3\"/>";
  }
  if (show_baseline) {
    const double y = y_of(*context.baseline);
    svg += "<line x1=\"" + Fixed1(plot.left) + "\" x2=\"" + Fixed1(plot.right) + "\" y1=\"" +
           Fixed1(y) + "\" y2=\"" + Fixed1(y) + "\" stroke=\"" + kBaselineColour +
           "\" stroke-width=\"1.5\" stroke-dasharray=\"1.5 3\"/>";
    svg += "<text x=\"" + Fixed1(plot.right - 2) + "\" y=\"" + Fixed1(y - 4) +
           "\" text-anchor=\"end\" font-size=\"10\" fill=\"" + kBaselineColour +
           "\">baseline</text>";
  }
  const auto value_text = [&](double value) {
    return series.unit == "bytes" ? FormatBytes(value) : FormatCount(value);
  };
  if (offsets) {
    svg += "<text x=\"" + Fixed1(plot.left + 4) + "\" y=\"" + Fixed1(plot.top + 24) +
           "\" font-size=\"10\" fill=\"" + kTextColour + "\">change from first sample, " +
           EscapeHtml(value_text(anchor)) + "</text>";
  }
  if (has_baseline && !show_baseline) {
    svg += "<text x=\"" + Fixed1(plot.right - 2) + "\" y=\"" +
           Fixed1(*context.baseline < y_axis.low ? plot.bottom - 4 : plot.top + 10) +
           "\" text-anchor=\"end\" font-size=\"10\" fill=\"" + kBaselineColour + "\">baseline " +
           EscapeHtml(value_text(*context.baseline)) +
           (*context.baseline < y_axis.low ? " (below)" : " (above)") + "</text>";
  }
  // Axes on top of the grid.
  AppendAxisLines(plot, svg);
  // The data.
  svg += "<polyline class=\"series\" fill=\"none\" stroke=\"" + std::string(kLineColour) +
         "\" stroke-width=\"1.5\" stroke-linejoin=\"round\" points=\"";
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (i > 0) svg += ' ';
    svg += Fixed1(x_of(points[i].step)) + "," + Fixed1(y_of(points[i].value));
  }
  svg += "\"/>";
  // Few points: mark each sample, so a single sample is visible at all.
  if (points.size() <= 40) {
    for (const ChartPoint& point : points) {
      svg += "<circle cx=\"" + Fixed1(x_of(point.step)) + "\" cy=\"" + Fixed1(y_of(point.value)) +
             "\" r=\"2.5\" fill=\"" + kLineColour + "\"/>";
    }
  }
  svg += "</svg>";
  return svg;
}

std::string RenderSurvivorsSvg(const std::string& counter, const std::vector<double>& survivors,
                               const std::string& unit, int width_units, int height_units) {
  const double width = width_units;
  const double height = height_units;
  const PlotArea plot = PlotAreaOf(width, height);
  const std::string title =
      counter + ": survivors by birth block (still live at the last block end)";
  std::string svg = SvgOpen("chart survivors", width, height, title, title);
  if (survivors.empty()) return svg + CentredNote(width, height, "no census");

  // Bars grow from zero; "not measured" (non-finite) values draw none and read "n/a".
  double low = 0;
  double high = 0;
  for (double value : survivors) {
    if (!std::isfinite(value)) continue;
    low = std::min(low, value);
    high = std::max(high, value);
  }
  Axis y_axis;
  if (high > low) y_axis = ValueAxis(low, high, unit);
  if (!(high > low) || !std::isfinite(y_axis.high - y_axis.low) || !(y_axis.high > y_axis.low)) {
    // All zero (or a range beyond double): one zero line, every bar flat on it.
    y_axis = Axis{};
    y_axis.ticks = {0};
    y_axis.labels = {FormatInUnit(0, unit)};
  }
  const auto y_of = [&](double value) {
    return YOf(y_axis, plot,
               std::clamp(std::isfinite(value) ? value : 0.0, y_axis.low, y_axis.high));
  };
  AppendValueGrid(y_axis, plot, svg);

  const std::size_t count = survivors.size();
  const double slot = (plot.right - plot.left) / static_cast<double>(count);
  const double bar_width = std::min(slot * 0.6, kMaxBarWidth);
  const auto stride =
      static_cast<std::size_t>(std::max(1.0, std::ceil(kBarLabelWidth / std::max(slot, 1e-9))));
  const double zero_y = y_of(0);
  for (std::size_t k = 0; k < count; ++k) {
    const bool youngest = k + 1 == count;
    const double top = std::min(y_of(survivors[k]), zero_y);
    const double x = plot.left + slot * static_cast<double>(k) + (slot - bar_width) / 2;
    svg += "<rect class=\"" + std::string(youngest ? "bar youngest" : "bar") + "\" x=\"" +
           Fixed1(x) + "\" y=\"" + Fixed1(top) + "\" width=\"" + Fixed1(bar_width) +
           "\" height=\"" + Fixed1(std::fabs(y_of(survivors[k]) - zero_y)) + "\" fill=\"" +
           (youngest ? kYoungestFill : kLineColour) + "\"" +
           (youngest ? std::string(" stroke=\"") + kLineColour + "\" stroke-dasharray=\"3 2\""
                     : std::string()) +
           "/>";
    if ((count - 1 - k) % stride != 0) continue;  // labels counted back from the youngest
    const double centre = x + bar_width / 2;
    svg += "<text x=\"" + Fixed1(centre) + "\" y=\"" + Fixed1(top - 4) +
           "\" text-anchor=\"middle\" font-size=\"10\" fill=\"" + kTextColour + "\">" +
           EscapeHtml(FormatInUnit(survivors[k], unit)) + "</text>";
    svg += "<text x=\"" + Fixed1(centre) + "\" y=\"" + Fixed1(plot.bottom + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\" fill=\"" + kTextColour + "\">block " +
           std::to_string(k + 1) + "</text>";
  }
  AppendAxisName(plot, height, "birth block", svg);
  // Legend: the youngest block's swatch.
  svg += "<rect x=\"" + Fixed1(plot.left) + "\" y=\"" + Fixed1(height - 13) +
         "\" width=\"10.0\" height=\"10.0\" fill=\"" + kYoungestFill + "\" stroke=\"" +
         kLineColour + "\" stroke-dasharray=\"3 2\"/>";
  svg += "<text x=\"" + Fixed1(plot.left + 14) + "\" y=\"" + Fixed1(height - 4) +
         "\" font-size=\"10\" fill=\"" + kTextColour +
         "\">youngest (not aged): born in the last block, at most one block old</text>";
  AppendAxisLines(plot, svg);
  svg += "</svg>";
  return svg;
}

namespace {

// A frame of the flame graph: its name, the bytes per step through it, the frames it calls.
struct FlameNode {
  std::string name;
  double weight = 0;
  std::vector<FlameNode> children;
};

int FlameDepth(const FlameNode& node) {
  int deepest = 0;
  for (const FlameNode& child : node.children) deepest = std::max(deepest, FlameDepth(child));
  return deepest + 1;
}

// A warm colour per frame name (stable from report to report); the user's own lines (a file:line
// in the name) redder than library frames.
std::string FlameFill(const std::string& name) {
  std::uint32_t hash = 2166136261u;
  for (const char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
  const bool has_line = name.find(':') != std::string::npos && name.find('+') == std::string::npos;
  const int hue = has_line ? static_cast<int>(hash % 20) : 25 + static_cast<int>(hash % 30);
  const int light = 55 + static_cast<int>((hash >> 8) % 15);
  return "hsl(" + std::to_string(hue) + ",80%," + std::to_string(light) + "%)";
}

constexpr double kFlameRow = 18;
constexpr int kFlameMostDepth = 64;
constexpr double kFlameTitle = 22;
constexpr double kFlameCharWidth = 6.6;  // 11px monospace, about

void AppendFlameNode(const FlameNode& node, double total, double x, double width, int level,
                     double height, std::string& svg) {
  if (width < 0.5) return;
  const double y = height - (level + 1) * kFlameRow;
  const std::string share = Fixed1(100 * node.weight / total);
  svg += "<g><title>" + EscapeHtml(node.name) + " \u2014 " +
         EscapeHtml(FormatRate(node.weight, "bytes", true)) + " (" + share + "%)</title>";
  svg += "<rect x=\"" + Fixed1(x) + "\" y=\"" + Fixed1(y) + "\" width=\"" +
         Fixed1(std::max(width - 0.5, 0.5)) + "\" height=\"" + Fixed1(kFlameRow - 1) +
         "\" rx=\"2\" fill=\"" + FlameFill(node.name) + "\"/>";
  const auto fits = static_cast<std::size_t>(std::max(0.0, (width - 6) / kFlameCharWidth));
  if (fits >= 4) {
    std::string label = node.name;
    if (label.size() > fits) {
      std::size_t cut = fits - 2;
      while (cut > 0 && (static_cast<unsigned char>(label[cut]) & 0xC0) == 0x80) --cut;
      label = label.substr(0, cut) + "..";
    }
    svg += "<text x=\"" + Fixed1(x + 3) + "\" y=\"" + Fixed1(y + kFlameRow - 5) +
           "\" font-size=\"11\" font-family=\"monospace\" fill=\"#1f2937\">" +
           EscapeHtml(label) + "</text>";
  }
  svg += "</g>";
  double at = x;
  for (const FlameNode& child : node.children) {
    const double w = width * child.weight / node.weight;
    AppendFlameNode(child, total, at, w, level + 1, height, svg);
    at += w;
  }
}

}  // namespace

std::string RenderGrowthFlameSvg(const std::vector<Attribution>& rows, int width) {
  FlameNode root;
  root.name = "all growth";
  for (const Attribution& row : rows) {
    if (!Grows(row) || row.stack.empty()) continue;
    root.weight += row.bytes_per_step;
    FlameNode* node = &root;
    int depth = 0;
    for (const std::string& frame : row.stack) {
      if (++depth > kFlameMostDepth) break;  // the outermost frames; a report holds at most 256
      auto child = std::find_if(node->children.begin(), node->children.end(),
                                [&](const FlameNode& c) { return c.name == frame; });
      if (child == node->children.end()) {
        node->children.push_back(FlameNode{frame, 0, {}});
        child = node->children.end() - 1;
      }
      child->weight += row.bytes_per_step;
      node = &*child;
    }
  }
  if (!(root.weight > 0) || !std::isfinite(root.weight)) return "";
  root.name += " (" + FormatRate(root.weight, "bytes", true) + ")";
  const double height = kFlameTitle + FlameDepth(root) * kFlameRow;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"flame\" width=\"" +
                    std::to_string(width) + "\" height=\"" + Fixed1(height) +
                    "\" viewBox=\"0 0 " + std::to_string(width) + " " + Fixed1(height) +
                    "\" role=\"img\" aria-label=\"flame graph of what grows\">";
  svg += "<text x=\"0\" y=\"14\" font-size=\"12\" fill=\"" + std::string(kTextColour) +
         "\">What grows, by stack (outermost frame at the bottom; width: bytes per step)</text>";
  AppendFlameNode(root, root.weight, 0, width, 0, height, svg);
  svg += "</svg>";
  return svg;
}

}  // namespace leakbound::reports
