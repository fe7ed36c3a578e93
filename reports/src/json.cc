// JSON writing of a Report (see json.h; reading is in json_read.cc, loading and atomic writes in
// files.cc): the report's document, and the text writers that spell it out, nlohmann's text byte
// for byte but faster (whole numbers, packed series).

#include "leakbound/reports/json.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
namespace leakbound::reports {
namespace {

// ---------------------------------------------------------------------------------------------
// Writing

// Non-finite numbers are "not measured": JSON has no NaN or infinity, so they are written as null.
template <typename Json>
Json Number(double value) {
  if (!std::isfinite(value)) return Json(nullptr);
  return Json(value);
}

// A series as one value of the document: the doubles' bytes in a binary value of subtype
// kPackedNumbers, which the writers below spell out as the array of numbers NumberArray's would
// be. A 20,000-step trace's series were 180,000 values to build, walk and destroy one by one
// (most of the watcher's time after the program ended).
constexpr std::uint64_t kPackedNumbers = 0x6c62;  // "lb"

template <typename Json>
Json PackedNumberArray(const std::vector<double>& values) {
  // One pass over the bytes (a buffer made to size was zeroed first, then copied over).
  const auto* first = reinterpret_cast<const std::uint8_t*>(values.data());
  typename Json::binary_t::container_type bytes(first, first + values.size() * sizeof(double));
  return Json::binary(std::move(bytes), kPackedNumbers);
}

template <typename Json>
bool IsPackedNumbers(const Json& value) {
  return value.is_binary() && value.get_binary().has_subtype() &&
         value.get_binary().subtype() == kPackedNumbers &&
         value.get_binary().size() % sizeof(double) == 0;
}

template <typename Json>
Json NumberArray(const std::vector<double>& values) {
  Json array = Json::array();
  array.template get_ref<typename Json::array_t&>().reserve(values.size());
  for (double value : values) array.push_back(Number<Json>(value));
  return array;
}

template <typename Json>
Json MetaToJson(const RunMetadata& meta) {
  Json json = Json::object();
  json["tool_version"] = meta.tool_version;
  json["commit"] = meta.commit;
  json["compiler"] = meta.compiler;
  json["build_type"] = meta.build_type;
  json["device"] = meta.device;
  json["device_class"] = meta.device_class;
  json["hostname"] = meta.hostname;
  json["started_at"] = meta.started_at;
  json["wall_seconds"] = Number<Json>(meta.wall_seconds);
  json["blocks"] = meta.blocks;
  json["steps_per_block"] = meta.steps_per_block;
  json["warmup_steps"] = meta.warmup_steps;
  if (meta.seed) json["seed"] = *meta.seed;
  if (meta.blas_threads) json["blas_threads"] = *meta.blas_threads;
  if (meta.calibrated) json["calibrated"] = *meta.calibrated;
  if (meta.interrupted) json["interrupted"] = true;  // absent means false
  return json;
}

// packed_series: each series as PackedNumberArray's one value, for the writers here only.
template <typename Json>
Json WorkloadToJson(const WorkloadResult& workload, bool packed_series) {
  Json json = Json::object();
  json["name"] = workload.name;
  json["description"] = workload.description;
  json["kind"] = workload.kind;
  json["expectation"] = ToString(workload.expectation);
  json["verdict"] = ToString(workload.verdict);
  json["met_expectation"] = workload.met_expectation;
  json["evidence"] = workload.evidence;
  json["warmup_steps"] = workload.warmup_steps;
  json["blocks"] = workload.blocks;
  json["steps_per_block"] = workload.steps_per_block;
  json["block_ends"] = workload.block_ends;
  json["baseline_live_bytes"] = Number<Json>(workload.baseline_live_bytes);
  json["steady_live_bytes"] = Number<Json>(workload.steady_live_bytes);
  json["final_live_bytes"] = Number<Json>(workload.final_live_bytes);
  json["peak_bytes"] = Number<Json>(workload.peak_bytes);
  if (workload.peak_bound_bytes)
    json["peak_bound_bytes"] = Number<Json>(*workload.peak_bound_bytes);
  json["allocations_per_step"] = Number<Json>(workload.allocations_per_step);
  json["step_time_ns"] = Number<Json>(workload.step_time_ns);
  json["probe_time_ns"] = Number<Json>(workload.probe_time_ns);
  Json counters = Json::array();
  for (const CounterVerdict& counter : workload.counters) {
    Json entry = Json::object();
    entry["counter"] = counter.counter;
    entry["verdict"] = ToString(counter.verdict);
    entry["slope_per_step"] = Number<Json>(counter.slope_per_step);
    entry["slope_bound"] = Number<Json>(counter.slope_bound);
    entry["baseline"] = Number<Json>(counter.baseline);
    entry["final_value"] = Number<Json>(counter.final_value);
    entry["peak"] = Number<Json>(counter.peak);
    entry["evidence"] = counter.evidence;
    if (!counter.judged) entry["judged"] = false;
    if (!counter.survivor_bytes.empty()) {
      entry["survivor_bytes"] = NumberArray<Json>(counter.survivor_bytes);
    }
    counters.push_back(std::move(entry));
  }
  json["counters"] = std::move(counters);
  Json attribution = Json::array();
  for (const Attribution& row : workload.attribution) {
    Json entry = Json::object();
    entry["op"] = row.op;
    entry["role"] = row.role;
    entry["scope"] = row.scope;
    entry["bytes"] = row.bytes;
    entry["allocations"] = row.allocations;
    entry["oldest_age_steps"] = row.oldest_age_steps;
    entry["newest_age_steps"] = row.newest_age_steps;
    entry["bytes_per_step"] = row.bytes_per_step;
    entry["rose_at"] = row.rose_at;
    entry["transitions"] = row.transitions;
    if (!row.stack.empty()) entry["stack"] = row.stack;
    if (!row.census.empty()) {
      entry["census"] = row.census;
      entry["survivor_bytes"] = NumberArray<Json>(row.survivor_bytes);
      entry["census_from_block"] = row.census_from_block;
    }
    attribution.push_back(std::move(entry));
  }
  json["attribution"] = std::move(attribution);
  // Series last: they are by far the largest part of a report.
  Json series = Json::array();
  for (const CounterSeries& one : workload.series) {
    Json entry = Json::object();
    entry["name"] = one.name;
    entry["unit"] = one.unit;
    entry["exact"] = one.exact;
    entry["values"] =
        packed_series ? PackedNumberArray<Json>(one.values) : NumberArray<Json>(one.values);
    series.push_back(std::move(entry));
  }
  json["series"] = std::move(series);
  return json;
}

template <typename Json>
Json BuildJson(const Report& report, bool packed_series) {
  Json json = Json::object();
  json["schema_version"] = report.schema_version;
  json["meta"] = MetaToJson<Json>(report.meta);
  Json workloads = Json::array();
  for (const WorkloadResult& workload : report.workloads) {
    workloads.push_back(WorkloadToJson<Json>(workload, packed_series));
  }
  json["workloads"] = std::move(workloads);
  Json benchmarks = Json::array();
  for (const BenchmarkFigure& figure : report.benchmarks) {
    Json entry = Json::object();
    entry["name"] = figure.name;
    entry["value"] = Number<Json>(figure.value);
    entry["unit"] = figure.unit;
    benchmarks.push_back(std::move(entry));
  }
  json["benchmarks"] = std::move(benchmarks);
  return json;
}

// Text that is not valid UTF-8 (a program's argument "caf\xe9", a note cut mid-character) is
// written with U+FFFD in place of the bad bytes: a report is never lost to one byte.
constexpr auto kReplaceInvalid = nlohmann::ordered_json::error_handler_t::replace;

// A scalar as nlohmann's dump writes it. Whole numbers are written here: nlohmann formats every
// double with grisu2, whose text for a whole number below 10^15 in magnitude is its digits and
// ".0"; a watched program's series are thousands of such values a counter (a 20,000-step trace:
// two thirds of the watcher's time after the program exits went to formatting them).
constexpr std::size_t kMostDoubleChars = 26;  // nlohmann's longest: "-1.7976931348623157e+308"

// Writes `v` at `next` (room for kMostDoubleChars) as nlohmann's dump would; returns the end.
char* WriteDouble(double v, char* next) {
  // A whole number below 10^15 (a conversion and a compare: std::trunc was a call into libm,
  // for every number of a trace).
  if (std::fabs(v) < 1e15) {  // false for NaN
    const auto whole = static_cast<std::int64_t>(v);
    if (static_cast<double>(whole) == v && !(whole == 0 && std::signbit(v))) {
      next = std::to_chars(next, next + kMostDoubleChars, whole).ptr;
      *next++ = '.';
      *next++ = '0';
      return next;
    }
  }
  // Fractions, -0, NaN and infinities (null): nlohmann's own text.
  const std::string text = nlohmann::json(v).dump(-1, ' ', false, kReplaceInvalid);
  assert(text.size() <= kMostDoubleChars);
  return std::copy(text.begin(), text.end(), next);
}

void AppendDouble(double v, std::string& out) {
  char text[kMostDoubleChars];
  out.append(text, WriteDouble(v, text));
}

// The numbers of a packed series, each after `separator` but the first, written in place.
template <typename Json>
void AppendPackedNumbers(const Json& value, std::string_view separator, std::string& out) {
  const auto& bytes = value.get_binary();
  const std::size_t count = bytes.size() / sizeof(double);
  // Written into a buffer on the stack and appended a few KiB at a time: `out` grows by what is
  // written, never zero-filled ahead for the longest numbers (a resize to the worst case wrote
  // 34 bytes a value twice, and faulted in pages the text never used).
  const std::size_t likely = out.size() + count * (separator.size() + 12);  // room, not filled
  if (likely > out.capacity()) out.reserve(std::max(likely, 2 * out.capacity()));  // amortised
  //
  // A value with the bits of the one before it is its text again, copied: a counter's series
  // holds long runs of one value (a flat heap, a count that does not move), and formatting each
  // was most of the text's cost (a 20,000-step trace: ~80 instructions a value, a copy ~10).
  char buffer[8192];
  char* next = buffer;
  const std::size_t most = separator.size() + kMostDoubleChars;
  // The copies are of a fixed length (inlined, where one of the text's own length was a call);
  // the room checked for below covers them.
  char last_text[kMostDoubleChars] = {};
  std::size_t last_length = 0;
  std::uint64_t last_bits = 0;
  const bool one_char = separator.size() == 1;
  for (std::size_t i = 0; i < count; ++i) {
    if (static_cast<std::size_t>(buffer + sizeof buffer - next) < most) {
      out.append(buffer, static_cast<std::size_t>(next - buffer));
      next = buffer;
    }
    std::uint64_t bits = 0;
    std::memcpy(&bits, bytes.data() + i * sizeof(double), sizeof bits);
    if (i > 0) {
      if (one_char) {
        *next++ = separator.front();
      } else {
        next = std::copy(separator.begin(), separator.end(), next);
      }
      if (bits == last_bits) {
        std::memcpy(next, last_text, kMostDoubleChars);
        next += last_length;
        continue;
      }
    }
    char* const end = WriteDouble(std::bit_cast<double>(bits), next);
    last_length = static_cast<std::size_t>(end - next);
    std::memcpy(last_text, next, kMostDoubleChars);
    last_bits = bits;
    next = end;
  }
  out.append(buffer, static_cast<std::size_t>(next - buffer));
}

template <typename Json>
void AppendScalar(const Json& value, std::string& out) {
  char digits[24];
  std::to_chars_result written{};
  if (value.is_number_float()) {
    AppendDouble(value.template get<double>(), out);
    return;
  }
  if (value.is_number_unsigned()) {
    written = std::to_chars(digits, digits + sizeof digits, value.template get<std::uint64_t>());
  } else if (value.is_number_integer()) {
    written = std::to_chars(digits, digits + sizeof digits, value.template get<std::int64_t>());
  } else {
    out += value.dump(-1, ' ', false, kReplaceInvalid);
    return;
  }
  out.append(digits, written.ptr);
}

template <typename Json>
void AppendKey(const std::string& key, std::string_view after, std::string& out) {
  out += Json(key).dump(-1, ' ', false, kReplaceInvalid);
  out += after;
}

// Pretty printer that keeps arrays of scalars on one line (nlohmann's dump(2) would give every
// sample of a series its own line).
void AppendCompactPretty(const nlohmann::ordered_json& json, int depth, std::string& out) {
  const std::string indent(static_cast<std::size_t>(depth + 1) * 2, ' ');
  const std::string closing_indent(static_cast<std::size_t>(depth) * 2, ' ');
  if (json.is_object()) {
    if (json.empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    bool first = true;
    for (const auto& [key, value] : json.items()) {
      if (!first) out += ",\n";
      first = false;
      out += indent;
      AppendKey<nlohmann::ordered_json>(key, ": ", out);
      AppendCompactPretty(value, depth + 1, out);
    }
    out += "\n" + closing_indent + "}";
    return;
  }
  if (IsPackedNumbers(json)) {  // compact, as an array of scalars below
    out += '[';
    AppendPackedNumbers(json, ",", out);
    out += ']';
    return;
  }
  if (json.is_array()) {
    bool all_scalars = true;
    for (const auto& element : json) {
      if (element.is_structured() || IsPackedNumbers(element)) {
        all_scalars = false;
        break;
      }
    }
    if (all_scalars) {  // compact: "[1.5,2,3]"
      out += '[';
      bool first = true;
      for (const auto& element : json) {
        if (!first) out += ',';
        first = false;
        AppendScalar(element, out);
      }
      out += ']';
      return;
    }
    out += "[\n";
    bool first = true;
    for (const auto& element : json) {
      if (!first) out += ",\n";
      first = false;
      out += indent;
      AppendCompactPretty(element, depth + 1, out);
    }
    out += "\n" + closing_indent + "]";
    return;
  }
  AppendScalar(json, out);
}

// nlohmann's dump(indent) (error handler: replace), with AppendScalar's numbers.
// With a negative indent, dump(-1)'s one line: "," between elements, ":" after keys.
// series_inline: a packed series on one line, "[1.0,2.0]", whatever the indent.
void AppendPretty(const nlohmann::json& json, int indent, int depth, bool series_inline,
                  std::string& out) {
  const bool object = json.is_object();
  const bool packed = IsPackedNumbers(json);
  if (packed && series_inline) {
    out += '[';
    AppendPackedNumbers(json, ",", out);
    out += ']';
    return;
  }
  if (!object && !json.is_array() && !packed) {
    AppendScalar(json, out);
    return;
  }
  if (packed ? json.get_binary().empty() : json.empty()) {
    out += object ? "{}" : "[]";
    return;
  }
  const bool lines = indent >= 0;
  out += object ? '{' : '[';
  if (lines) out += '\n';
  const std::size_t inner =
      lines ? static_cast<std::size_t>(depth + 1) * static_cast<std::size_t>(indent) : 0;
  if (packed) {
    const std::string separator = lines ? ",\n" + std::string(inner, ' ') : ",";
    out.append(inner, ' ');
    AppendPackedNumbers(json, separator, out);
  } else {
    bool first = true;
    for (auto it = json.cbegin(); it != json.cend(); ++it) {
      if (!first) out += lines ? ",\n" : ",";
      first = false;
      out.append(inner, ' ');
      if (object) AppendKey<nlohmann::json>(it.key(), lines ? ": " : ":", out);
      AppendPretty(it.value(), indent, depth + 1, series_inline, out);
    }
  }
  if (lines) {
    out += '\n';
    out.append(static_cast<std::size_t>(depth) * static_cast<std::size_t>(indent), ' ');
  }
  out += object ? '}' : ']';
}

}  // namespace

nlohmann::json ToJson(const Report& report) {
  return BuildJson<nlohmann::json>(report, /*packed_series=*/false);
}

nlohmann::json PackedNumbers(const std::vector<double>& values) {
  return PackedNumberArray<nlohmann::json>(values);
}

namespace {
// Room for json's text, from its packed series (~13 characters and a separator a number; 24
// allowed) and a little for the rest: reserved once, the text is not copied as it grows (a
// 20,000-step trace, 2.4 MB, was copied ~4 times into new pages; room never written is never
// faulted in).
template <typename Json>
std::size_t LikelyText(const Json& json, int indent, int depth) {
  if (IsPackedNumbers(json)) {
    return (json.get_binary().size() / sizeof(double)) *
           (24 + static_cast<std::size_t>(std::max(indent, 0)) * static_cast<std::size_t>(depth + 1));
  }
  if (json.is_string()) return json.template get_ref<const std::string&>().size() + 8;
  std::size_t total = 16;
  if (json.is_structured()) {
    for (const auto& item : json.items()) total += item.key().size() + LikelyText(item.value(), indent, depth + 1);
  }
  return total;
}
}  // namespace

std::string DumpJson(const nlohmann::json& json, int indent) {
  std::string out;
  out.reserve(LikelyText(json, indent, 0));
  AppendPretty(json, indent, 0, /*series_inline=*/false, out);
  return out;
}

std::string DumpJsonSeriesInline(const nlohmann::json& json, int indent) {
  std::string out;
  out.reserve(LikelyText(json, -1, 0));  // room for the series; the rest grows if it must
  AppendPretty(json, indent, 0, /*series_inline=*/true, out);
  return out;
}

std::string ReportToText(const Report& report) {
  std::string out;
  const auto json = BuildJson<nlohmann::ordered_json>(report, /*packed_series=*/true);
  out.reserve(LikelyText(json, 2, 0));
  AppendCompactPretty(json, 0, out);
  out += '\n';
  return out;
}

}  // namespace leakbound::reports
