// Human-readable numbers (see format.h).

#include "leakbound/reports/format.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

namespace leakbound::reports {
namespace {

constexpr std::array<const char*, 7> kByteUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

std::string Printf(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

// "%.3g"-like but never in exponent form and without trailing zeros: 1.50 -> "1.5", 2.0 -> "2".
std::string Trimmed(double value, int decimals) {
  std::string text = Printf(("%." + std::to_string(decimals) + "f").c_str(), value);
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  if (text == "-0") text = "0";
  return text;
}

std::string WithSign(double value, const std::string& formatted) {
  if (value > 0) return "+" + formatted;
  return formatted;  // negative values carry their own '-'; zero stays unsigned
}

std::string GroupThousands(long long value) {
  const bool negative = value < 0;
  // Two's complement magnitude: correct for LLONG_MIN too.
  const unsigned long long magnitude = negative ? 0ULL - static_cast<unsigned long long>(value)
                                                : static_cast<unsigned long long>(value);
  const std::string digits = std::to_string(magnitude);
  std::string grouped;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return negative ? "-" + grouped : grouped;
}

}  // namespace

std::string FormatBytes(double bytes) {
  if (!std::isfinite(bytes)) return "n/a";
  const double magnitude = std::fabs(bytes);
  if (magnitude < 1024) {
    if (bytes == std::floor(bytes)) return Printf("%.0f B", bytes);
    return Printf("%.1f B", bytes);
  }
  std::size_t unit = 0;
  double scaled = bytes;
  while (std::fabs(scaled) >= 1024 && unit + 1 < kByteUnits.size()) {
    scaled /= 1024;
    ++unit;
  }
  // 1023.999 KiB would print as "1024.00 KiB": move to the next unit instead.
  if (std::fabs(scaled) >= 1023.995 && unit + 1 < kByteUnits.size()) {
    scaled /= 1024;
    ++unit;
  }
  return Printf("%.2f", scaled) + " " + kByteUnits[unit];
}

std::string FormatSignedBytes(double bytes) { return WithSign(bytes, FormatBytes(bytes)); }

std::string FormatCount(double count) {
  if (!std::isfinite(count)) return "n/a";
  if (count == std::floor(count) && std::fabs(count) < 9.0e18) {
    return GroupThousands(static_cast<long long>(count));
  }
  return Printf("%.2f", count);
}

std::string FormatSignedCount(double count) { return WithSign(count, FormatCount(count)); }

std::string FormatDuration(double nanoseconds) {
  if (!std::isfinite(nanoseconds)) return "n/a";
  const double magnitude = std::fabs(nanoseconds);
  struct Scale {
    double divisor;
    const char* unit;
  };
  static constexpr std::array<Scale, 4> kScales = {Scale{1e9, "s"}, Scale{1e6, "ms"},
                                                   Scale{1e3, "us"}, Scale{1, "ns"}};
  for (const Scale& scale : kScales) {
    if (magnitude >= scale.divisor * 0.9995 || scale.divisor == 1) {
      const double scaled = nanoseconds / scale.divisor;
      const double scaled_magnitude = std::fabs(scaled);
      const char* format = scale.divisor == 1          ? "%.0f"
                           : scaled_magnitude >= 99.95 ? "%.0f"
                           : scaled_magnitude >= 9.995 ? "%.1f"
                                                       : "%.2f";
      return Printf(format, scaled) + " " + scale.unit;
    }
  }
  return "n/a";  // unreachable: the last scale always matches
}

std::string FormatSignedDuration(double nanoseconds) {
  return WithSign(nanoseconds, FormatDuration(nanoseconds));
}

std::string FormatSignedPercent(double ratio) {
  if (!std::isfinite(ratio)) return "n/a";
  std::string text = Printf("%.1f", ratio * 100);
  if (text == "-0.0") text = "0.0";
  return (ratio * 100 >= 0.05 ? "+" : "") + text + "%";
}

const char* ByteUnitFor(double largest_magnitude) {
  std::size_t unit = 0;
  double scaled = std::fabs(largest_magnitude);
  while (std::isfinite(scaled) && scaled >= 1024 && unit + 1 < kByteUnits.size()) {
    scaled /= 1024;
    ++unit;
  }
  return kByteUnits[unit];
}

std::string FormatBytesInUnit(double bytes, const char* unit) {
  if (!std::isfinite(bytes)) return "n/a";
  double scaled = bytes;
  for (const char* candidate : kByteUnits) {
    if (std::strcmp(candidate, unit) == 0) break;
    scaled /= 1024;
  }
  return Trimmed(scaled, 3) + " " + unit;
}

std::string FormatCountCompact(double count) {
  if (!std::isfinite(count)) return "n/a";
  const double magnitude = std::fabs(count);
  if (magnitude >= 1e9) return Trimmed(count / 1e9, 2) + "G";
  if (magnitude >= 1e6) return Trimmed(count / 1e6, 2) + "M";
  if (magnitude >= 1e4) return Trimmed(count / 1e3, 2) + "k";
  return Trimmed(count, 3);
}

std::string FormatInUnit(double value, std::string_view unit) {
  if (unit == "bytes") return FormatBytes(value);
  if (unit == "ns") return FormatDuration(value);
  return FormatCount(value);
}

std::string SettingsText(const RunMetadata& meta) {
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (meta.seed) add("seed " + std::to_string(*meta.seed));
  if (meta.blas_threads) {
    add(*meta.blas_threads == 0 ? std::string("BLAS threads: OpenBLAS default")
                                : "BLAS threads " + std::to_string(*meta.blas_threads));
  }
  if (meta.calibrated) {
    add(*meta.calibrated ? "noise floors calibrated"
                         : "noise floors not calibrated (noisy counters reported, not judged)");
  }
  return text;
}

std::string FormatFigure(const BenchmarkFigure& figure) {
  const std::string_view unit = figure.unit;
  if (unit == "bytes" || unit == "ns") return FormatInUnit(figure.value, unit);
  if (unit == "bytes/step") return FormatBytes(figure.value) + "/step";
  char buffer[64];
  if (unit == "%") {
    std::snprintf(buffer, sizeof buffer, "%.3g%%", figure.value);
    return buffer;
  }
  const std::string value = FormatCount(figure.value);
  return unit.empty() ? value : value + " " + std::string(unit);
}

std::string CounterUnit(const WorkloadResult& workload, std::string_view counter) {
  for (const CounterSeries& series : workload.series) {
    if (series.name == counter) return series.unit;
  }
  constexpr std::string_view kBytesSuffix = "bytes";
  if (counter.size() >= kBytesSuffix.size() &&
      counter.substr(counter.size() - kBytesSuffix.size()) == kBytesSuffix) {
    return "bytes";
  }
  return "count";
}

std::string FormatRate(double per_step, std::string_view unit, bool sign) {
  if (!std::isfinite(per_step)) return "n/a";
  if (unit == "ns") return (sign && per_step > 0 ? "+" : "") + FormatDuration(per_step) + "/step";
  std::string text = Printf("%.1f", per_step);
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) text.resize(text.size() - 2);
  if (text == "-0") text = "0";
  if (sign && per_step > 0) text = "+" + text;
  return text + (unit == "bytes" ? " B/step" : "/step");
}

const CounterVerdict* CaughtBy(const WorkloadResult& workload) {
  if (workload.verdict == kPass) return nullptr;
  for (const CounterVerdict& counter : workload.counters) {
    if (counter.judged && counter.verdict == workload.verdict) return &counter;
  }
  for (const CounterVerdict& counter : workload.counters) {
    if (counter.judged && counter.verdict != kPass) return &counter;
  }
  return nullptr;
}

double SteadyValue(const WorkloadResult& workload, std::string_view counter) {
  if (workload.block_ends.empty()) return std::numeric_limits<double>::quiet_NaN();
  const int index = workload.block_ends.back();
  for (const CounterSeries& series : workload.series) {
    if (series.name != counter) continue;
    if (index < 0 || static_cast<std::size_t>(index) >= series.values.size()) break;
    return series.values[static_cast<std::size_t>(index)];
  }
  return std::numeric_limits<double>::quiet_NaN();
}

std::string GrowthText(const WorkloadResult& workload) {
  const CounterVerdict* counter = CaughtBy(workload);
  if (counter == nullptr) return "";
  const std::string unit = CounterUnit(workload, counter->counter);
  std::string text = counter->counter + " " + FormatRate(counter->slope_per_step, unit, true);
  if (counter->slope_bound > 0) {
    text += " (noise floor " + FormatRate(counter->slope_bound, unit) + ")";
  }
  if (counter->verdict == kNotReturnedToBaseline) {
    const double residue = counter->final_value - counter->baseline;
    text = counter->counter + " residue " +
           (unit == "bytes" ? FormatSignedBytes(residue) : FormatSignedCount(residue)) +
           " after teardown";
  } else if (counter->verdict == kPeakOverBudget) {
    text = counter->counter + " peak " + FormatInUnit(counter->peak, unit);
  }
  return text;
}

bool Grows(const Attribution& row) {
  if (!row.census.empty()) {  // its own census decides
    return (row.census == "growth" || row.census == "recurring") && row.bytes_per_step > 0;
  }
  return row.transitions > 0 && row.rose_at == row.transitions && row.bytes_per_step > 0;
}

std::string FormatRowCensus(const Attribution& row) {
  if (row.census.empty()) return "-";
  return row.census + ": " + FormatRowSurvivors(row);
}

std::string FormatRowSurvivors(const Attribution& row) {
  std::string text;
  for (const double bytes : row.survivor_bytes) text += (text.empty() ? "" : ", ") + FormatBytes(bytes);
  if (row.census_from_block > 1) text += " (blocks " + std::to_string(row.census_from_block) + "-)";
  return text;
}

std::string TopOwnerText(const WorkloadResult& workload) {
  if (workload.attribution.empty()) return "";
  const Attribution& row = workload.attribution.front();
  std::string text = row.op + " (" + row.role + ", scope " + row.scope + "): ";
  if (Grows(row) && !row.census.empty()) {
    text += FormatRate(row.bytes_per_step, "bytes", true) + ", survivors by block " +
            FormatRowSurvivors(row) + "; ";
  } else if (Grows(row)) {
    text += FormatRate(row.bytes_per_step, "bytes", true) + ", rose at " + FormatRoseAt(row) +
            " block ends; ";
  }
  return text + FormatBytes(static_cast<double>(row.bytes)) + " in " +
         FormatCount(static_cast<double>(row.allocations)) +
         (row.allocations == 1 ? " allocation" : " allocations");
}

std::string_view TopOwnerKind(const WorkloadResult& workload) {
  return !workload.attribution.empty() && Grows(workload.attribution.front()) ? "growing"
                                                                              : "outstanding";
}

std::string FormatRoseAt(const Attribution& row) {
  if (row.transitions <= 0) return "-";
  return std::to_string(row.rose_at) + " of " + std::to_string(row.transitions);
}

std::string NoiseFloorText(const Report& report) {
  std::vector<std::pair<std::string, std::string>> floors;  // counter, formatted floor
  for (const WorkloadResult& workload : report.workloads) {
    for (const CounterVerdict& counter : workload.counters) {
      if (!(counter.slope_bound > 0)) continue;
      const bool known = std::any_of(floors.begin(), floors.end(),
                                     [&](const auto& f) { return f.first == counter.counter; });
      if (known) continue;
      floors.emplace_back(counter.counter,
                          FormatRate(counter.slope_bound, CounterUnit(workload, counter.counter)));
    }
  }
  std::string text;
  for (const auto& [counter, floor] : floors) {
    text += (text.empty() ? "" : ", ") + counter + " " + floor;
  }
  return text;
}

Outcome WorkloadOutcome(const WorkloadResult& workload) {
  if (!workload.met_expectation) return Outcome::kMissed;
  if (workload.verdict == kPass) return Outcome::kPassed;
  return Outcome::kExpectedDetection;
}

std::string_view OutcomeLabel(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPassed:
      return "passed";
    case Outcome::kExpectedDetection:
      return "detected as planted";
    case Outcome::kMissed:
      return "MISSED";
  }
  return "unknown";
}

bool IsWatched(const WorkloadResult& workload) { return workload.kind == "watched"; }

bool IsMemoryFinding(VerdictClass verdict) {
  return verdict != kPass && verdict != kInconclusive && verdict != kError;
}

std::string WatchedResult(const Report& report) {
  if (report.workloads.empty()) return "";
  int leaks = 0, unjudged = 0;
  for (const WorkloadResult& workload : report.workloads) {
    if (!IsWatched(workload)) return "";
    if (IsMemoryFinding(workload.verdict)) {
      ++leaks;
    } else if (workload.verdict != kPass) {
      ++unjudged;
    }
  }
  const std::size_t total = report.workloads.size();
  if (leaks > 0) {
    return total == 1 ? "a leak was found (" + std::string(ToString(report.workloads[0].verdict)) + ")"
                      : "a leak was found in " + std::to_string(leaks) + " of " +
                            std::to_string(total) + " watched programs";
  }
  if (unjudged > 0) {
    return total == 1 ? "no verdict on memory (" +
                            std::string(ToString(report.workloads[0].verdict)) +
                            "): see the evidence"
                      : "no leak was found; " + std::to_string(unjudged) + " of " +
                            std::to_string(total) + " watched programs have no verdict";
  }
  return total == 1 ? "no leak was found" : "no leak was found in the watched programs";
}

int FalsePositives(const WorkloadResult& workload) {
  if (workload.kind == "zoo" || IsWatched(workload)) return 0;
  int flagged = 0;
  for (const CounterVerdict& counter : workload.counters) {
    if (counter.verdict != kPass) ++flagged;
  }
  if (flagged == 0 && workload.verdict != kPass) flagged = 1;
  return flagged;
}

std::string FormatAgeSteps(const Attribution& row) {
  if (row.oldest_age_steps == row.newest_age_steps) return std::to_string(row.oldest_age_steps);
  return std::to_string(row.newest_age_steps) + "-" + std::to_string(row.oldest_age_steps);
}

}  // namespace leakbound::reports
