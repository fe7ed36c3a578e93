// JSON reading of a Report (see json.h; writing is in json.cc). The reader walks the document
// with a FieldReader that knows the JSON path of every value, so every error says where it is; it
// checks each type before it reads, so no input can throw nlohmann's own exceptions or reach
// undefined behaviour.

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "leakbound/reports/json.h"

namespace leakbound::reports {
namespace {

constexpr std::string_view kRegenerateHint = "regenerate it with `leakbound run`";

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
