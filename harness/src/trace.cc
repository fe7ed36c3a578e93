// Trace files: JSON in and out (docs/trace-schema.md). Reading is strict: every field typed,
// every series as long as the schedule says, so a re-judged trace cannot silently mean something
// else than what was recorded.
#include "leakbound/harness/trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "leakbound/reports/json.h"
#include "leakbound/reports/report_error.h"

namespace leakbound::harness {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "leakbound-trace";

// Reads fields of one JSON object, naming the path on every failure.
class Reader {
 public:
  Reader(const json& j, std::string path, const std::string& source)
      : j_(j), path_(std::move(path)), source_(source) {
    if (!j_.is_object()) Fail(path_, "must be an object");
  }
  [[noreturn]] void Fail(const std::string& path, const std::string& why) const {
    throw TraceError(source_ + ": `" + path + "` " + why +
                     "; re-record the trace with `leakbound run --trace` (or `leakbound watch`)");
  }
  const json& At(const char* key) const {
    auto it = j_.find(key);
    if (it == j_.end()) Fail(Child(key), "is missing");
    return *it;
  }
  bool Has(const char* key) const { return j_.contains(key); }
  std::string Child(const char* key) const { return path_ + "." + key; }
  std::string String(const char* key) const {
    const json& v = At(key);
    if (!v.is_string()) Fail(Child(key), "must be a string");
    return v.get<std::string>();
  }
  bool Bool(const char* key) const {
    const json& v = At(key);
    if (!v.is_boolean()) Fail(Child(key), "must be true or false");
    return v.get<bool>();
  }
  int Int(const char* key, int lo, int hi) const {
    const json& v = At(key);
    if (!v.is_number_integer()) Fail(Child(key), "must be an integer");
    const auto x = v.get<std::int64_t>();
    if (x < lo || x > hi) {
      Fail(Child(key), "is " + std::to_string(x) + ", outside [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
    }
    return static_cast<int>(x);
  }
  std::int64_t Int64(const char* key) const {
    const json& v = At(key);
    if (!v.is_number_integer()) Fail(Child(key), "must be an integer");
    return v.get<std::int64_t>();
  }
  std::uint64_t UInt64(const char* key) const {
    const json& v = At(key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
      Fail(Child(key), "must be a non-negative integer");
    }
    return v.get<std::uint64_t>();
  }
  double Double(const char* key) const {
    const json& v = At(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      Fail(Child(key), "must be a finite number");
    return v.get<double>();
  }
  std::vector<double> Doubles(const char* key) const {
    const json& v = At(key);
    if (!v.is_array()) Fail(Child(key), "must be an array of numbers");
    std::vector<double> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number() || !std::isfinite(v[i].get<double>())) {
        Fail(Child(key) + "[" + std::to_string(i) + "]", "must be a finite number");
      }
      out.push_back(v[i].get<double>());
    }
    return out;
  }
  const json& Array(const char* key) const {
    const json& v = At(key);
    if (!v.is_array()) Fail(Child(key), "must be an array");
    return v;
  }
  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }

 private:
  const json& j_;
  std::string path_;
  const std::string& source_;
};

json SubjectToJson(const TraceSubject& s) {
  json j{{"name", s.name},
         {"description", s.description},
         {"kind", s.kind},
         {"expectation", reports::ToString(s.expectation)},
         {"detected_by", s.detected_by},
         {"period_steps", s.period_steps}};
  if (s.peak_budget_bytes) j["peak_budget_bytes"] = *s.peak_budget_bytes;
  return j;
}

TraceSubject SubjectFromJson(const Reader& in) {
  TraceSubject s;
  s.name = in.String("name");
  s.description = in.String("description");
  s.kind = in.String("kind");
  if (s.kind != "clean" && s.kind != "zoo" && s.kind != "trap" && s.kind != "watched") {
    in.Fail(in.Child("kind"), "is '" + s.kind + "', not one of clean, zoo, trap, watched");
  }
  const std::string expectation = in.String("expectation");
  const auto parsed = reports::ParseVerdictClass(expectation);
  if (!parsed) {
    in.Fail(in.Child("expectation"),
            "is '" + expectation + "', not one of " + std::string(reports::kVerdictNames));
  }
  s.expectation = *parsed;
  s.detected_by = in.String("detected_by");
  s.period_steps = in.Int("period_steps", 1, 1000000);
  if (in.Has("peak_budget_bytes")) s.peak_budget_bytes = in.Double("peak_budget_bytes");
  return s;
}

json CohortsToJson(const std::vector<CensusCohort>& cohorts) {
  json out = json::array();
  for (const CensusCohort& c : cohorts) {
    out.push_back({{"born_step", c.born_step}, {"bytes", c.bytes}, {"blocks", c.blocks}});
  }
  return out;
}

// For TraceFileToJson only: the series are reports::PackedNumbers, which only DumpJson spells out.
// They are moved into their objects, not listed in braces: an initializer list copies what it
// holds (each series twice more, ~1.4 MB of a 20,000-step trace, into fresh pages).
json TraceToJson(const Trace& t) {
  json counters = json::array();
  for (const TraceCounter& c : t.counters) {
    json counter{{"name", c.name},
                 {"unit", c.unit},
                 {"exact", c.exact},
                 {"judged", c.judged},
                 {"probe", c.probe},
                 {"peak_of", c.peak_of},
                 {"baseline", c.baseline},
                 {"final_value", c.final_value}};
    counter["values"] = reports::PackedNumbers(c.values);
    counters.push_back(std::move(counter));
  }
  json probes = json::array();
  for (const ProbeState& p : t.probes) probes.push_back({{"name", p.name}, {"state", p.state}});
  json outstanding = json::array();
  for (const OutstandingSnapshot& snap : t.outstanding) {
    json rows = json::array();
    for (const OutstandingRow& r : snap.rows) {
      json row{{"op", r.op},
               {"role", r.role},
               {"scope", r.scope},
               {"bytes", r.bytes},
               {"allocations", r.allocations},
               {"oldest_step", r.oldest_step},
               {"newest_step", r.newest_step}};
      if (!r.census.empty()) row["census"] = CohortsToJson(r.census);
      rows.push_back(std::move(row));
    }
    outstanding.push_back({{"step", snap.step}, {"rows", std::move(rows)}});
  }
  json census = json::array();
  for (const CensusSnapshot& snap : t.census) {
    census.push_back(
        {{"counter", snap.counter}, {"step", snap.step}, {"cohorts", CohortsToJson(snap.cohorts)}});
  }
  json j{{"subject", SubjectToJson(t.subject)},
         {"warmup_steps", t.warmup_steps},
         {"warmup_detected", t.warmup_detected},
         {"blocks", t.blocks},
         {"steps_per_block", t.steps_per_block},
         {"confirmation_blocks", t.confirmation_blocks},
         {"tail_steps", t.tail_steps},
         {"error", t.error},
         {"ended_early", t.ended_early}};
  j["probes"] = std::move(probes);
  j["counters"] = std::move(counters);
  j["step_ns"] = reports::PackedNumbers(t.step_ns);
  j["probe_ns"] = reports::PackedNumbers(t.probe_ns);
  j["outstanding"] = std::move(outstanding);
  j["census"] = std::move(census);
  if (t.peak_bound_bytes) j["peak_bound_bytes"] = *t.peak_bound_bytes;
  return j;
}

// Cohorts born in increasing steps from -1 up to the census's step (`field` of `o`).
std::vector<CensusCohort> CohortsFromJson(const Reader& o, const char* field, int census_step) {
  std::vector<CensusCohort> out;
  const json& cohorts = o.Array(field);
  for (std::size_t k = 0; k < cohorts.size(); ++k) {
    const Reader c(cohorts[k], o.Child(field) + "[" + std::to_string(k) + "]", o.source());
    CensusCohort cohort{c.Int64("born_step"), c.UInt64("bytes"), c.UInt64("blocks")};
    if (cohort.born_step < -1 || cohort.born_step > census_step ||
        (!out.empty() && cohort.born_step <= out.back().born_step)) {
      c.Fail(c.Child("born_step"),
             "is " + std::to_string(cohort.born_step) +
                 "; cohorts are born in increasing steps from -1 up to the census's step");
    }
    out.push_back(cohort);
  }
  return out;
}

Trace TraceFromJson(const Reader& in, int schema_version) {
  Trace t;
  t.schema_version = schema_version;
  t.subject = SubjectFromJson(Reader(in.At("subject"), in.Child("subject"), in.source()));
  t.warmup_steps = in.Int("warmup_steps", 0, 100000000);
  t.warmup_detected = in.Bool("warmup_detected");
  t.blocks = in.Int("blocks", 0, 100000);
  // A recording that ended before its first block (an inconclusive watch) has no block length.
  t.steps_per_block = in.Int("steps_per_block", t.blocks == 0 ? 0 : 1, 100000);
  t.confirmation_blocks = in.Int("confirmation_blocks", 0, std::max(0, t.blocks - 2));
  t.error = in.String("error");
  t.ended_early = in.String("ended_early");
  if (schema_version >= 2) t.tail_steps = in.Int("tail_steps", 0, 100000000);
  const std::int64_t total = std::int64_t{t.warmup_steps} +
                             std::int64_t{t.blocks} * t.steps_per_block + t.tail_steps;
  // A failed recording keeps what it sampled: series may be shorter than the schedule, never
  // longer.
  const bool partial = !t.error.empty() || !t.ended_early.empty();
  auto check_length = [&](const std::string& path, std::size_t n) {
    const bool ok =
        partial ? static_cast<std::int64_t>(n) <= total : static_cast<std::int64_t>(n) == total;
    if (!ok) {
      in.Fail(path, "has " + std::to_string(n) + " samples but the schedule (" +
                        std::to_string(t.warmup_steps) + " + " + std::to_string(t.blocks) + " x " +
                        std::to_string(t.steps_per_block) + " + a tail of " +
                        std::to_string(t.tail_steps) + ") has " + std::to_string(total) +
                        " steps");
    }
  };
  const json& probes = in.Array("probes");
  for (std::size_t i = 0; i < probes.size(); ++i) {
    const Reader p(probes[i], in.Child("probes") + "[" + std::to_string(i) + "]", in.source());
    t.probes.push_back({p.String("name"), p.String("state")});
  }
  const json& counters = in.Array("counters");
  for (std::size_t i = 0; i < counters.size(); ++i) {
    const Reader c(counters[i], in.Child("counters") + "[" + std::to_string(i) + "]", in.source());
    TraceCounter tc;
    tc.name = c.String("name");
    tc.unit = c.String("unit");
    tc.exact = c.Bool("exact");
    tc.judged = c.Bool("judged");
    tc.probe = c.String("probe");
    tc.peak_of = c.String("peak_of");
    tc.baseline = c.Double("baseline");
    tc.final_value = c.Double("final_value");
    tc.values = c.Doubles("values");
    check_length(c.Child("values"), tc.values.size());
    if (t.Find(tc.name) != nullptr) c.Fail(c.Child("name"), "'" + tc.name + "' appears twice");
    if (!tc.probe.empty() && std::none_of(t.probes.begin(), t.probes.end(),
                                          [&](const ProbeState& p) { return p.name == tc.probe; })) {
      c.Fail(c.Child("probe"), "names '" + tc.probe + "', which is not in `probes`");
    }
    t.counters.push_back(std::move(tc));
  }
  t.step_ns = in.Doubles("step_ns");
  check_length(in.Child("step_ns"), t.step_ns.size());
  t.probe_ns = in.Doubles("probe_ns");
  check_length(in.Child("probe_ns"), t.probe_ns.size());
  const json& outstanding = in.Array("outstanding");
  for (std::size_t i = 0; i < outstanding.size(); ++i) {
    const Reader o(outstanding[i], in.Child("outstanding") + "[" + std::to_string(i) + "]",
                   in.source());
    OutstandingSnapshot snap;
    snap.step =
        o.Int("step", 0, static_cast<int>(std::min<std::int64_t>(total - 1, 2147483647)));
    if (!t.outstanding.empty() && snap.step <= t.outstanding.back().step) {
      o.Fail(o.Child("step"), "is " + std::to_string(snap.step) +
                                  ", not after the previous snapshot's; snapshots are in step order");
    }
    const json& rows = o.Array("rows");
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const Reader r(rows[k], o.Child("rows") + "[" + std::to_string(k) + "]", in.source());
      OutstandingRow row{r.String("op"),          r.String("role"),        r.String("scope"),
                         r.UInt64("bytes"),       r.UInt64("allocations"), r.Int64("oldest_step"),
                         r.Int64("newest_step")};
      if (r.Has("census")) row.census = CohortsFromJson(r, "census", snap.step);
      snap.rows.push_back(std::move(row));
    }
    t.outstanding.push_back(std::move(snap));
  }
  if (schema_version >= 2) {
    const json& census = in.Array("census");
    for (std::size_t i = 0; i < census.size(); ++i) {
      const Reader o(census[i], in.Child("census") + "[" + std::to_string(i) + "]", in.source());
      CensusSnapshot snap;
      snap.counter = o.String("counter");
      if (t.Find(snap.counter) == nullptr) {
        o.Fail(o.Child("counter"), "names '" + snap.counter + "', which is not in `counters`");
      }
      snap.step = o.Int("step", 0, static_cast<int>(std::min<std::int64_t>(
                                       std::max<std::int64_t>(total - 1, 0), 2147483647)));
      for (const CensusSnapshot& before : t.census) {
        if (before.counter == snap.counter && before.step >= snap.step) {
          o.Fail(o.Child("step"), "is " + std::to_string(snap.step) +
                                      ", not after the previous census of " + snap.counter +
                                      "; censuses are in step order");
        }
      }
      snap.cohorts = CohortsFromJson(o, "cohorts", snap.step);
      t.census.push_back(std::move(snap));
    }
  }
  if (in.Has("peak_bound_bytes")) t.peak_bound_bytes = in.Double("peak_bound_bytes");
  return t;
}

}  // namespace

const TraceCounter* Trace::Find(const std::string& counter_name) const {
  for (const TraceCounter& c : counters)
    if (c.name == counter_name) return &c;
  return nullptr;
}

std::string TraceFileToJson(const TraceFile& file) {
  reports::Report run;
  run.meta = file.meta;
  json floors = json::object();
  for (const auto& [name, floor] : file.noise_floors) {
    floors[name] = {{"slope_per_step", floor.slope_per_step}, {"total_growth", floor.total_growth}};
  }
  json traces = json::array();
  for (const Trace& t : file.traces) traces.push_back(TraceToJson(t));
  json j{{"format", kFormat}, {"schema_version", file.schema_version}, {"run", reports::ToJson(run)}};
  j["noise_floors"] = std::move(floors);
  j["traces"] = std::move(traces);
  // Invalid UTF-8 (a program's argument, a note) becomes U+FFFD rather than an exception.
  std::string text = reports::DumpJsonSeriesInline(j, 1);
  text += '\n';
  return text;
}

TraceFile TraceFileFromJson(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw TraceError(source + ": not a JSON trace (" + e.what() +
                     "); pass the trace.json that `leakbound run` wrote beside report.json");
  }
  const Reader in(j, "$", source);
  if (!j.contains("format") || j["format"] != kFormat) {
    in.Fail("$.format", std::string("must be \"") + kFormat +
                            "\" (is this a report.json? `leakbound judge` reads trace.json)");
  }
  TraceFile file;
  file.schema_version = in.Int("schema_version", 0, 1000000);
  if (file.schema_version < kOldestTraceSchemaVersion ||
      file.schema_version > kTraceSchemaVersion) {
    in.Fail("$.schema_version", "is " + std::to_string(file.schema_version) +
                                    "; this build reads " +
                                    std::to_string(kOldestTraceSchemaVersion) + " to " +
                                    std::to_string(kTraceSchemaVersion));
  }
  try {
    file.meta = reports::ReportFromJson(in.At("run"), source).meta;
  } catch (const reports::ReportError& e) {
    throw TraceError(std::string(e.what()));
  }
  const json& floors = in.At("noise_floors");
  if (!floors.is_object()) in.Fail("$.noise_floors", "must be an object");
  for (const auto& [name, value] : floors.items()) {
    const Reader f(value, "$.noise_floors." + name, source);
    file.noise_floors[name] = {f.Double("slope_per_step"), f.Double("total_growth")};
  }
  const json& traces = in.Array("traces");
  for (std::size_t i = 0; i < traces.size(); ++i) {
    file.traces.push_back(
        TraceFromJson(Reader(traces[i], "$.traces[" + std::to_string(i) + "]", source),
                      file.schema_version));
  }
  return file;
}

TraceFile LoadTraceFile(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw TraceError(path.string() + " is a folder; pass the trace.json inside it");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TraceError("cannot open trace " + path.string() + ": check the path");
  std::ostringstream text;
  text << in.rdbuf();
  return TraceFileFromJson(text.str(), path.string());
}

void WriteTraceFileAtomically(const TraceFile& file, const std::filesystem::path& path) {
  reports::WriteFileAtomically(path, TraceFileToJson(file));
}

}  // namespace leakbound::harness
