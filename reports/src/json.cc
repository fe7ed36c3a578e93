// JSON (de)serialisation of a Report (see json.h; loading and atomic writes are in files.cc).
// The reader walks the document with a FieldReader that knows the JSON path of every value, so
// every error says where it is; it checks each type before it reads, so no input can throw
// nlohmann's own exceptions or reach undefined behaviour.

#include "leakbound/reports/json.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <utility>

namespace leakbound::reports {
namespace {

constexpr std::string_view kRegenerateHint = "regenerate it with `leakbound run`";

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
  typename Json::binary_t::container_type bytes(values.size() * sizeof(double));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
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
  if (!(std::fabs(v) < 1e15) || v != std::trunc(v) || (v == 0 && std::signbit(v))) {
    // Fractions, -0, NaN and infinities (null): nlohmann's own text.
    const std::string text = nlohmann::json(v).dump(-1, ' ', false, kReplaceInvalid);
    assert(text.size() <= kMostDoubleChars);
    return std::copy(text.begin(), text.end(), next);
  }
  next = std::to_chars(next, next + kMostDoubleChars, static_cast<std::int64_t>(v)).ptr;
  *next++ = '.';
  *next++ = '0';
  return next;
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
  const std::size_t start = out.size();
  const std::size_t most = start + count * (separator.size() + kMostDoubleChars);
  if (most > out.capacity()) out.reserve(std::max(most, 2 * out.capacity()));  // amortised
  out.resize(most);
  char* next = out.data() + start;
  for (std::size_t i = 0; i < count; ++i) {
    double v = 0;
    std::memcpy(&v, bytes.data() + i * sizeof(double), sizeof v);
    if (i > 0) next = std::copy(separator.begin(), separator.end(), next);
    next = WriteDouble(v, next);
  }
  out.resize(static_cast<std::size_t>(next - out.data()));
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
void AppendPretty(const nlohmann::json& json, int indent, int depth, std::string& out) {
  const bool object = json.is_object();
  const bool packed = IsPackedNumbers(json);
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
      AppendPretty(it.value(), indent, depth + 1, out);
    }
  }
  if (lines) {
    out += '\n';
    out.append(static_cast<std::size_t>(depth) * static_cast<std::size_t>(indent), ' ');
  }
  out += object ? '}' : ']';
}

// ---------------------------------------------------------------------------------------------
// Reading

std::string_view JsonTypeName(const nlohmann::json& json) {
  if (json.is_null()) return "null";
  if (json.is_boolean()) return "a boolean";
  if (json.is_number_integer()) return "an integer";
  if (json.is_number()) return "a number";
  if (json.is_string()) return "a string";
  if (json.is_array()) return "an array";
  if (json.is_object()) return "an object";
  return "an unsupported JSON value";
}

// Reads fields of one JSON object, knowing its own JSON path for error messages.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& json, std::string path, std::string_view source)
      : json_(json), path_(std::move(path)), source_(source) {
    if (!json_.is_object()) ThrowWrongType(json_, path_, "an object");
  }

  const std::string& path() const { return path_; }

  // A field whose value contradicts another field of the same object.
  [[noreturn]] void ThrowInconsistent(const char* key, const std::string& why) const {
    const std::string path = Child(key);
    throw ReportError(ReportErrorKind::kMissingField, std::string(source_), path,
                      std::string(source_) + ": field `" + path + "` contradicts the report: " +
                          why + "; fix the file or " + std::string(kRegenerateHint));
  }

  std::string String(const char* key) const {
    const nlohmann::json& value = Require(key);
    if (!value.is_string()) ThrowWrongType(value, Child(key), "a string");
    return value.get<std::string>();
  }

  // A verdict class, spelled as VerdictName writes it.
  VerdictClass Verdict(const char* key) const {
    const std::string text = String(key);
    const std::optional<VerdictClass> verdict = ParseVerdictClass(text);
    if (!verdict) {
      ThrowOutOfRange(Child(key), "one of " + std::string(kVerdictNames) + " (got '" + text + "')");
    }
    return *verdict;
  }

  bool Bool(const char* key) const {
    const nlohmann::json& value = Require(key);
    if (!value.is_boolean()) ThrowWrongType(value, Child(key), "a boolean");
    return value.get<bool>();
  }

  // Any JSON number; null reads as NaN ("not measured").
  double Double(const char* key) const { return ToDouble(Require(key), Child(key)); }

  // A byte figure, count or duration that cannot be negative; null reads as NaN.
  double NonNegativeDouble(const char* key) const {
    const double value = Double(key);
    if (value < 0) {
      ThrowOutOfRange(Child(key), "a non-negative number (or null for not measured), got " +
                                      std::to_string(value));
    }
    return value;
  }

  // An int no smaller than `minimum`.
  int IntAtLeast(const char* key, int minimum) const {
    const int value = Int(key);
    if (value < minimum) {
      ThrowOutOfRange(Child(key), "an integer >= " + std::to_string(minimum) + ", got " +
                                      std::to_string(value));
    }
    return value;
  }

  // Fails on `key` with "want ..." (a value that breaks a rule between fields).
  [[noreturn]] void OutOfRange(const char* key, const std::string& want) const {
    ThrowOutOfRange(Child(key), want);
  }

  // Whether an optional field is present (and not null).
  bool Has(const char* key) const {
    const auto found = json_.find(key);
    return found != json_.end() && !found->is_null();
  }

  // An optional number: absent or null reads as "none".
  std::optional<double> OptionalDouble(const char* key) const {
    return Has(key) ? std::optional<double>(Double(key)) : std::nullopt;
  }

  int Int(const char* key) const {
    const std::int64_t value = Int64(key);
    if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
      ThrowOutOfRange(Child(key), "a 32-bit integer");
    }
    return static_cast<int>(value);
  }

  std::int64_t Int64(const char* key) const { return ToInt64(Require(key), Child(key)); }

  std::uint64_t UInt64(const char* key) const {
    const nlohmann::json& value = Require(key);
    if (value.is_number_unsigned()) return value.get<std::uint64_t>();
    if (value.is_number_integer()) {  // signed storage: reject negatives
      const auto signed_value = value.get<std::int64_t>();
      if (signed_value < 0) ThrowOutOfRange(Child(key), "a non-negative integer");
      return static_cast<std::uint64_t>(signed_value);
    }
    ThrowWrongType(value, Child(key), "a non-negative integer");
  }

  std::vector<std::string> StringArray(const char* key) const {
    const nlohmann::json& array = Array(key);
    std::vector<std::string> values;
    values.reserve(array.size());
    for (std::size_t i = 0; i < array.size(); ++i) {
      if (!array[i].is_string()) {
        ThrowWrongType(array[i], Child(key) + "[" + std::to_string(i) + "]", "a string");
      }
      values.push_back(array[i].get<std::string>());
    }
    return values;
  }

  std::vector<double> DoubleArray(const char* key) const {
    const nlohmann::json& array = Array(key);
    std::vector<double> values;
    values.reserve(array.size());
    for (std::size_t i = 0; i < array.size(); ++i) {
      values.push_back(ToDouble(array[i], Child(key) + "[" + std::to_string(i) + "]"));
    }
    return values;
  }

  std::vector<int> IntArray(const char* key) const {
    const nlohmann::json& array = Array(key);
    std::vector<int> values;
    values.reserve(array.size());
    for (std::size_t i = 0; i < array.size(); ++i) {
      const std::string element_path = Child(key) + "[" + std::to_string(i) + "]";
      const std::int64_t value = ToInt64(array[i], element_path);
      if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
        ThrowOutOfRange(element_path, "a 32-bit integer");
      }
      values.push_back(static_cast<int>(value));
    }
    return values;
  }

  // Calls read(FieldReader) for every element (each must be an object) of array `key`.
  template <typename T, typename ReadOne>
  std::vector<T> ObjectArray(const char* key, ReadOne read_one) const {
    const nlohmann::json& array = Array(key);
    std::vector<T> result;
    result.reserve(array.size());
    for (std::size_t i = 0; i < array.size(); ++i) {
      result.push_back(
          read_one(FieldReader(array[i], Child(key) + "[" + std::to_string(i) + "]", source_)));
    }
    return result;
  }

  FieldReader Object(const char* key) const {
    return FieldReader(Require(key), Child(key), source_);
  }

  const nlohmann::json& Require(const char* key) const {
    const auto it = json_.find(key);
    if (it == json_.end()) {
      const std::string path = Child(key);
      throw ReportError(ReportErrorKind::kMissingField, std::string(source_), path,
                        std::string(source_) + ": missing required field `" + path +
                            "`; the report is incomplete or was written by another tool, " +
                            std::string(kRegenerateHint));
    }
    return *it;
  }

  [[noreturn]] void ThrowWrongType(const nlohmann::json& value, const std::string& path,
                                   std::string_view expected) const {
    throw ReportError(ReportErrorKind::kMissingField, std::string(source_), path,
                      std::string(source_) + ": field `" + path + "` is " +
                          std::string(JsonTypeName(value)) + ", expected " + std::string(expected) +
                          "; fix the file or " + std::string(kRegenerateHint));
  }

 private:
  std::string Child(const char* key) const { return path_ + "." + key; }

  const nlohmann::json& Array(const char* key) const {
    const nlohmann::json& value = Require(key);
    if (!value.is_array()) ThrowWrongType(value, Child(key), "an array");
    return value;
  }

  double ToDouble(const nlohmann::json& value, const std::string& path) const {
    if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (!value.is_number()) ThrowWrongType(value, path, "a number (or null)");
    return value.get<double>();
  }

  std::int64_t ToInt64(const nlohmann::json& value, const std::string& path) const {
    if (value.is_number_unsigned()) {
      const auto unsigned_value = value.get<std::uint64_t>();
      if (unsigned_value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        ThrowOutOfRange(path, "a 64-bit signed integer");
      }
      return static_cast<std::int64_t>(unsigned_value);
    }
    if (value.is_number_integer()) return value.get<std::int64_t>();
    ThrowWrongType(value, path, "an integer");
  }

  [[noreturn]] void ThrowOutOfRange(const std::string& path, std::string_view expected) const {
    throw ReportError(ReportErrorKind::kMissingField, std::string(source_), path,
                      std::string(source_) + ": field `" + path + "` is out of range, expected " +
                          std::string(expected) + "; fix the file or " +
                          std::string(kRegenerateHint));
  }

  const nlohmann::json& json_;
  std::string path_;
  std::string_view source_;
};

RunMetadata ReadMeta(const FieldReader& in) {
  RunMetadata meta;
  meta.tool_version = in.String("tool_version");
  meta.commit = in.String("commit");
  meta.compiler = in.String("compiler");
  meta.build_type = in.String("build_type");
  meta.device = in.String("device");
  meta.device_class = in.String("device_class");
  meta.hostname = in.String("hostname");
  meta.started_at = in.String("started_at");
  meta.wall_seconds = in.NonNegativeDouble("wall_seconds");
  meta.blocks = in.IntAtLeast("blocks", 0);
  meta.steps_per_block = in.IntAtLeast("steps_per_block", 0);
  meta.warmup_steps = in.IntAtLeast("warmup_steps", -1);  // -1: auto
  if (in.Has("seed")) meta.seed = in.UInt64("seed");
  if (in.Has("blas_threads")) meta.blas_threads = in.Int("blas_threads");
  if (in.Has("calibrated")) meta.calibrated = in.Bool("calibrated");
  if (in.Has("interrupted")) meta.interrupted = in.Bool("interrupted");
  return meta;
}

CounterVerdict ReadCounterVerdict(const FieldReader& in) {
  CounterVerdict counter;
  counter.counter = in.String("counter");
  counter.verdict = in.Verdict("verdict");
  counter.slope_per_step = in.Double("slope_per_step");
  counter.slope_bound = in.Double("slope_bound");
  counter.baseline = in.Double("baseline");
  counter.final_value = in.Double("final_value");
  counter.peak = in.Double("peak");
  counter.evidence = in.String("evidence");
  if (in.Has("judged")) counter.judged = in.Bool("judged");
  if (in.Has("survivor_bytes")) counter.survivor_bytes = in.DoubleArray("survivor_bytes");
  if (!counter.judged && counter.verdict != kPass) {
    in.ThrowInconsistent("judged", "it is false but the counter's verdict is '" +
                                       ToString(counter.verdict) +
                                       "'; an unjudged counter is never flagged");
  }
  return counter;
}

constexpr std::size_t kMostStackFrames = 256;

Attribution ReadAttribution(const FieldReader& in) {
  Attribution row;
  row.op = in.String("op");
  row.role = in.String("role");
  row.scope = in.String("scope");
  row.bytes = in.UInt64("bytes");
  row.allocations = in.UInt64("allocations");
  row.oldest_age_steps = in.Int64("oldest_age_steps");
  row.newest_age_steps = in.Int64("newest_age_steps");
  // Growth fields arrived with the "Growing" table; a report written before them has none.
  if (in.Has("bytes_per_step")) row.bytes_per_step = in.Double("bytes_per_step");
  if (in.Has("transitions")) {
    row.transitions = in.IntAtLeast("transitions", 0);
    row.rose_at = in.IntAtLeast("rose_at", 0);
    if (row.rose_at > row.transitions) {
      in.OutOfRange("rose_at", "at most transitions (" + std::to_string(row.transitions) +
                                   "), got " + std::to_string(row.rose_at));
    }
  }
  if (in.Has("census")) {
    row.census = in.String("census");
    static const std::set<std::string> kOutcomes = {"growth",   "recurring", "bounded",
                                                    "one-time", "settling",  "thinning"};
    if (!kOutcomes.contains(row.census)) {
      in.OutOfRange("census", "one of growth, recurring, bounded, one-time, settling, thinning, "
                              "got \"" + row.census + "\"");
    }
    row.survivor_bytes = in.DoubleArray("survivor_bytes");
    if (row.survivor_bytes.empty()) {
      in.OutOfRange("survivor_bytes", "a row with a census has its survivors of at least one block");
    }
    row.census_from_block = in.IntAtLeast("census_from_block", 1);
  }
  if (in.Has("stack")) {
    row.stack = in.StringArray("stack");
    // The watcher writes at most a dozen frames; a deeper stack is not one it wrote.
    if (row.stack.size() > kMostStackFrames) {
      in.OutOfRange("stack", "at most " + std::to_string(kMostStackFrames) + " frames, got " +
                                 std::to_string(row.stack.size()));
    }
  }
  return row;
}

CounterSeries ReadSeries(const FieldReader& in) {
  CounterSeries series;
  series.name = in.String("name");
  series.unit = in.String("unit");
  series.exact = in.Bool("exact");
  series.values = in.DoubleArray("values");
  return series;
}

WorkloadResult ReadWorkload(const FieldReader& in) {
  WorkloadResult workload;
  workload.name = in.String("name");
  workload.description = in.String("description");
  workload.kind = in.String("kind");
  workload.expectation = in.Verdict("expectation");
  workload.verdict = in.Verdict("verdict");
  workload.met_expectation = in.Bool("met_expectation");
  // A met expectation is the expected verdict (the harness may still call a matching verdict
  // unmet, when a zoo entry was flagged on another counter than the one it names).
  if (workload.met_expectation && workload.verdict != workload.expectation) {
    in.ThrowInconsistent("met_expectation",
                         "it is true but verdict '" + ToString(workload.verdict) +
                             "' is not the expectation '" + ToString(workload.expectation) + "'");
  }
  workload.evidence = in.String("evidence");
  workload.warmup_steps = in.IntAtLeast("warmup_steps", 0);
  workload.blocks = in.IntAtLeast("blocks", 0);
  workload.steps_per_block = in.IntAtLeast("steps_per_block", 0);
  workload.block_ends = in.IntArray("block_ends");
  workload.baseline_live_bytes = in.NonNegativeDouble("baseline_live_bytes");
  workload.steady_live_bytes = in.NonNegativeDouble("steady_live_bytes");
  workload.final_live_bytes = in.NonNegativeDouble("final_live_bytes");
  workload.peak_bytes = in.NonNegativeDouble("peak_bytes");
  workload.peak_bound_bytes = in.OptionalDouble("peak_bound_bytes");
  if (workload.peak_bound_bytes && *workload.peak_bound_bytes < 0) {
    in.NonNegativeDouble("peak_bound_bytes");  // throws, naming the field
  }
  workload.allocations_per_step = in.NonNegativeDouble("allocations_per_step");
  workload.step_time_ns = in.NonNegativeDouble("step_time_ns");
  workload.probe_time_ns = in.NonNegativeDouble("probe_time_ns");
  workload.counters = in.ObjectArray<CounterVerdict>("counters", ReadCounterVerdict);
  workload.attribution = in.ObjectArray<Attribution>("attribution", ReadAttribution);
  workload.series = in.ObjectArray<CounterSeries>("series", ReadSeries);
  return workload;
}

BenchmarkFigure ReadBenchmark(const FieldReader& in) {
  BenchmarkFigure figure;
  figure.name = in.String("name");
  figure.value = in.Double("value");
  figure.unit = in.String("unit");
  return figure;
}

// 1-based line and column of byte offset `offset` in `text`.
std::pair<std::size_t, std::size_t> LineAndColumn(std::string_view text, std::size_t offset) {
  std::size_t line = 1;
  std::size_t column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// nlohmann's what() without its "[json.exception.parse_error.101] parse error at line 1,
// column 7: " prefix: the part that says what it saw.
std::string ParseErrorDetail(const nlohmann::json::parse_error& error) {
  std::string detail = error.what();
  const std::size_t colon = detail.find(": ");
  if (detail.rfind("[json.exception", 0) == 0 && colon != std::string::npos) {
    detail = detail.substr(colon + 2);
  }
  return detail;
}

}  // namespace

nlohmann::json ToJson(const Report& report) {
  return BuildJson<nlohmann::json>(report, /*packed_series=*/false);
}

nlohmann::json PackedNumbers(const std::vector<double>& values) {
  return PackedNumberArray<nlohmann::json>(values);
}

std::string DumpJson(const nlohmann::json& json, int indent) {
  std::string out;
  AppendPretty(json, indent, 0, out);
  return out;
}

std::string ReportToText(const Report& report) {
  std::string out;
  AppendCompactPretty(BuildJson<nlohmann::ordered_json>(report, /*packed_series=*/true), 0, out);
  out += '\n';
  return out;
}

Report ReportFromJson(const nlohmann::json& json, std::string_view source_name) {
  const std::string source(source_name);
  if (!json.is_object()) {
    throw ReportError(ReportErrorKind::kMissingField, source, "$",
                      source + ": the document is " + std::string(JsonTypeName(json)) +
                          ", expected a report object; check that this is a leakbound report or " +
                          std::string(kRegenerateHint));
  }
  const FieldReader root(json, "$", source);
  // The version decides how everything else is read, so it is checked first.
  const std::int64_t version = root.Int64("schema_version");
  if (version != kSchemaVersion) {
    const std::string remedy =
        version > kSchemaVersion
            ? "use a newer leakbound to read it, or regenerate the baseline with `leakbound run`"
            : "regenerate the baseline with `leakbound run`";
    throw ReportError(ReportErrorKind::kSchemaVersion, source, "$.schema_version",
                      source + ": schema_version " + std::to_string(version) +
                          " is not supported by this leakbound (reads " +
                          std::to_string(kSchemaVersion) + "); " + remedy);
  }
  Report report;
  report.schema_version = static_cast<int>(version);
  report.meta = ReadMeta(root.Object("meta"));
  report.workloads = root.ObjectArray<WorkloadResult>("workloads", ReadWorkload);
  // Workloads are keyed by name (diff pairs them by name): a name may appear once.
  std::set<std::string> names;
  for (std::size_t i = 0; i < report.workloads.size(); ++i) {
    if (!names.insert(report.workloads[i].name).second) {
      const std::string path = "$.workloads[" + std::to_string(i) + "].name";
      throw ReportError(ReportErrorKind::kMalformed, source, path,
                        source + ": " + path + ": workload '" + report.workloads[i].name +
                            "' appears twice; workload names must be unique in a report");
    }
  }
  report.benchmarks = root.ObjectArray<BenchmarkFigure>("benchmarks", ReadBenchmark);
  return report;
}

Report ParseReport(std::string_view text, std::string_view source_name) {
  const std::string source(source_name);
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    throw ReportError(ReportErrorKind::kTruncated, source, "",
                      source +
                          ": the file is empty (truncated to 0 bytes of JSON, likely an "
                          "interrupted write); " +
                          std::string(kRegenerateHint));
  }
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::out_of_range& error) {
    // e.g. a number literal beyond the range of a double (1e400): not a parse_error in nlohmann.
    throw ReportError(ReportErrorKind::kMalformed, source, "",
                      source + ": malformed JSON: a number is out of the range of a double (" +
                          std::string(error.what()) + "); fix the file or " +
                          std::string(kRegenerateHint));
  } catch (const nlohmann::json::parse_error& error) {
    const auto [line, column] = LineAndColumn(text, error.byte == 0 ? 0 : error.byte - 1);
    const std::string where = "line " + std::to_string(line) + ", column " + std::to_string(column);
    // nlohmann reports the byte after the last one read: past the end means "ran out of input".
    if (error.byte > text.size()) {
      throw ReportError(ReportErrorKind::kTruncated, source, "",
                        source + ": truncated: the JSON ends at " + where + " (byte " +
                            std::to_string(text.size()) +
                            ") before the document is complete, likely an interrupted write or "
                            "copy; " +
                            std::string(kRegenerateHint));
    }
    throw ReportError(ReportErrorKind::kMalformed, source, "",
                      source + ": malformed JSON at " + where + ": " + ParseErrorDetail(error) +
                          "; fix the file or " + std::string(kRegenerateHint));
  }
  return ReportFromJson(json, source_name);
}

}  // namespace leakbound::reports
