// Inline SVG line charts of counter series (see chart.h). Coordinates are written with one
// decimal; every text that comes from a report goes through EscapeHtml.

#include "leakbound/reports/chart.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

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

// Chart margins in SVG units: room for y labels on the left and x labels below.
constexpr double kMarginLeft = 74;
constexpr double kMarginRight = 14;
constexpr double kMarginTop = 14;
constexpr double kMarginBottom = 34;

std::string Fixed1(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", value);
  return buffer;
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
  const double plot_left = kMarginLeft;
  const double plot_right = width - kMarginRight;
  const double plot_top = kMarginTop;
  const double plot_bottom = height - kMarginBottom;

  std::string svg = "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
                    Fixed1(width) + " " + Fixed1(height) + "\" width=\"" + Fixed1(width) +
                    "\" height=\"" + Fixed1(height) + "\" role=\"img\" aria-label=\"" +
                    EscapeHtml(series.name) + " over steps\">";
  svg += "<title>" + EscapeHtml(series.name) + " (" + EscapeHtml(series.unit) + ")</title>";

  const std::vector<ChartPoint> points = DownsampleMinMax(series.values);
  if (points.empty()) {
    svg += "<text x=\"" + Fixed1(width / 2) + "\" y=\"" + Fixed1(height / 2) +
           "\" text-anchor=\"middle\" fill=\"" + kTextColour + "\" font-size=\"13\">" +
           (series.values.empty() ? "no samples" : "not measured (all samples null)") +
           "</text></svg>";
    return svg;
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
    return plot_left +
           (clamped - x_axis.low) / (x_axis.high - x_axis.low) * (plot_right - plot_left);
  };
  const auto y_of = [&](double value) {
    return plot_bottom -
           (value - y_axis.low) / (y_axis.high - y_axis.low) * (plot_bottom - plot_top);
  };

  // Warm-up band first, so that grid and data draw over it.
  if (context.warmup_steps > 0) {
    const double band_right = x_of(context.warmup_steps - 0.5);
    svg += "<rect x=\"" + Fixed1(plot_left) + "\" y=\"" + Fixed1(plot_top) + "\" width=\"" +
           Fixed1(std::max(band_right - plot_left, 0.0)) + "\" height=\"" +
           Fixed1(plot_bottom - plot_top) + "\" fill=\"" + kWarmupFill + "\"/>";
    if (band_right - plot_left > 44) {
      svg += "<text x=\"" + Fixed1(plot_left + 4) + "\" y=\"" + Fixed1(plot_top + 12) +
             "\" font-size=\"10\" fill=\"" + kTextColour + "\">warm-up</text>";
    }
  }
  // Horizontal grid and y labels.
  for (std::size_t i = 0; i < y_axis.ticks.size(); ++i) {
    const double y = y_of(y_axis.ticks[i]);
    svg += "<line x1=\"" + Fixed1(plot_left) + "\" x2=\"" + Fixed1(plot_right) + "\" y1=\"" +
           Fixed1(y) + "\" y2=\"" + Fixed1(y) + "\" stroke=\"" + kGridColour + "\"/>";
    svg += "<text x=\"" + Fixed1(plot_left - 6) + "\" y=\"" + Fixed1(y + 4) +
           "\" text-anchor=\"end\" font-size=\"11\" fill=\"" + kTextColour + "\">" +
           EscapeHtml(y_axis.labels[i]) + "</text>";
  }
  // X ticks and labels.
  for (std::size_t i = 0; i < x_axis.ticks.size(); ++i) {
    const double x = x_of(x_axis.ticks[i]);
    svg += "<line x1=\"" + Fixed1(x) + "\" x2=\"" + Fixed1(x) + "\" y1=\"" + Fixed1(plot_bottom) +
           "\" y2=\"" + Fixed1(plot_bottom + 4) + "\" stroke=\"" + kAxisColour + "\"/>";
    svg += "<text x=\"" + Fixed1(x) + "\" y=\"" + Fixed1(plot_bottom + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\" fill=\"" + kTextColour + "\">" +
           x_axis.labels[i] + "</text>";
  }
  svg += "<text x=\"" + Fixed1(plot_right) + "\" y=\"" + Fixed1(height - 4) +
         "\" text-anchor=\"end\" font-size=\"11\" fill=\"" + kTextColour + "\">step</text>";
  // Block boundaries: between the last step of a block and the first of the next.
  for (int block_end : context.block_ends) {
    if (block_end < 0 || block_end > last_step) continue;
    const double x = x_of(block_end + 0.5);
    svg += "<line x1=\"" + Fixed1(x) + "\" x2=\"" + Fixed1(x) + "\" y1=\"" + Fixed1(plot_top) +
           "\" y2=\"" + Fixed1(plot_bottom) + "\" stroke=\"" + kBlockColour +
           "\" stroke-dasharray=\"4 3\"/>";
  }
  if (show_baseline) {
    const double y = y_of(*context.baseline);
    svg += "<line x1=\"" + Fixed1(plot_left) + "\" x2=\"" + Fixed1(plot_right) + "\" y1=\"" +
           Fixed1(y) + "\" y2=\"" + Fixed1(y) + "\" stroke=\"" + kBaselineColour +
           "\" stroke-width=\"1.5\" stroke-dasharray=\"1.5 3\"/>";
    svg += "<text x=\"" + Fixed1(plot_right - 2) + "\" y=\"" + Fixed1(y - 4) +
           "\" text-anchor=\"end\" font-size=\"10\" fill=\"" + kBaselineColour +
           "\">baseline</text>";
  }
  const auto value_text = [&](double value) {
    return series.unit == "bytes" ? FormatBytes(value) : FormatCount(value);
  };
  if (offsets) {
    svg += "<text x=\"" + Fixed1(plot_left + 4) + "\" y=\"" + Fixed1(plot_top + 24) +
           "\" font-size=\"10\" fill=\"" + kTextColour + "\">change from first sample, " +
           EscapeHtml(value_text(anchor)) + "</text>";
  }
  if (has_baseline && !show_baseline) {
    svg += "<text x=\"" + Fixed1(plot_right - 2) + "\" y=\"" +
           Fixed1(*context.baseline < y_axis.low ? plot_bottom - 4 : plot_top + 10) +
           "\" text-anchor=\"end\" font-size=\"10\" fill=\"" + kBaselineColour + "\">baseline " +
           EscapeHtml(value_text(*context.baseline)) +
           (*context.baseline < y_axis.low ? " (below)" : " (above)") + "</text>";
  }
  // Axes on top of the grid.
  svg += "<polyline points=\"" + Fixed1(plot_left) + "," + Fixed1(plot_top) + " " +
         Fixed1(plot_left) + "," + Fixed1(plot_bottom) + " " + Fixed1(plot_right) + "," +
         Fixed1(plot_bottom) + "\" fill=\"none\" stroke=\"" + kAxisColour + "\"/>";
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

}  // namespace leakbound::reports
