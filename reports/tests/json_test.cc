// Tests of JSON (de)serialisation: exact round trips, compact series, and a clear ReportError
// (right kind, file name, JSON path) for every kind of broken input.

#include "leakbound/reports/json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "leakbound/reports/format.h"
#include "sample_report.h"

namespace leakbound::reports {
namespace {

using testing::MakeSampleReport;

// Runs `parse` and returns the ReportError it throws; fails the test if it does not throw one.
template <typename Parse>
ReportError CatchReportError(Parse parse) {
  try {
    parse();
  } catch (const ReportError& error) {
    return error;
  }
  ADD_FAILURE() << "expected a ReportError";
  return ReportError(ReportErrorKind::kIo, "", "", "no error thrown");
}

std::string SampleText() { return ReportToText(MakeSampleReport()); }

TEST(ReportJsonTest, RoundTrip_TextThenParse_GivesEqualReport) {
  Report report = MakeSampleReport();
  // Strings that need JSON escaping, extreme integers and awkward doubles.
  report.workloads[0].evidence = "quote \" backslash \\ newline \n tab \t unicode µ ✓";
  report.workloads[1].attribution[0].bytes = std::numeric_limits<std::uint64_t>::max();
  report.workloads[1].attribution[0].oldest_age_steps = std::numeric_limits<std::int64_t>::min();
  report.workloads[1].attribution[0].newest_age_steps = std::numeric_limits<std::int64_t>::max();
  report.workloads[0].series[0].values.push_back(0.1 + 0.2);  // needs 17 significant digits
  report.workloads[0].series[0].values.push_back(-1e-300);
  report.workloads[0].series[0].values.push_back(1.7976931348623157e308);

  const Report parsed = ParseReport(ReportToText(report), "roundtrip.json");

  EXPECT_EQ(parsed, report);
  EXPECT_EQ(parsed.workloads[0].series[0].values.back(), 1.7976931348623157e308);
  EXPECT_EQ(parsed.workloads[1].attribution[0].bytes, std::numeric_limits<std::uint64_t>::max());
}

// Found by the fuzzer (reports/fuzz/regressions/parse_number_overflow_1e400.json): nlohmann
// reports an out-of-range number as out_of_range, which used to escape ParseReport.
TEST(ReportJsonTest, NumberBeyondDoubleRange_IsMalformedNotACrash) {
  EXPECT_EQ(CatchReportError([] { ParseReport("1e400", "big.json"); }).kind(),
            ReportErrorKind::kMalformed);
  std::string text = ReportToText(MakeSampleReport());
  const auto at = text.find("\"wall_seconds\":");
  ASSERT_NE(at, std::string::npos);
  const auto end = text.find_first_of(",}", at);
  text.replace(at, end - at, "\"wall_seconds\": 1e400");
  EXPECT_EQ(CatchReportError([&] { ParseReport(text, "big.json"); }).kind(),
            ReportErrorKind::kMalformed);
}

// Found by the fuzzer (regressions/diff_self_duplicate_workload_name.json): diff pairs workloads
// by name, so a report with one name twice is refused when read.
TEST(ReportJsonTest, DuplicateWorkloadNames_AreRefusedWithThePath) {
  Report report = MakeSampleReport();
  report.workloads[1].name = report.workloads[0].name;
  const ReportError error =
      CatchReportError([&] { ParseReport(ReportToText(report), "dup.json"); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kMalformed);
  EXPECT_EQ(error.json_path(), "$.workloads[1].name");
}

TEST(ReportJsonTest, RoundTrip_ToJsonThenReportFromJson_GivesEqualReport) {
  const Report report = MakeSampleReport();
  EXPECT_EQ(ReportFromJson(ToJson(report)), report);
}

TEST(ReportJsonTest, RoundTrip_EmptyReport_GivesEqualReport) {
  const Report empty;
  EXPECT_EQ(ParseReport(ReportToText(empty), "empty.json"), empty);
}

TEST(ReportJsonTest, ReportToText_LongSeries_IsOneCompactArrayPerSeries) {
  const Report report = MakeSampleReport();  // includes two series of 5,000 samples
  const std::string text = ReportToText(report);
  std::size_t series_count = 0;
  std::size_t samples = 0;
  for (const WorkloadResult& workload : report.workloads) {
    series_count += workload.series.size();
    for (const CounterSeries& series : workload.series) samples += series.values.size();
  }
  ASSERT_GT(samples, 10000u);
  // One line per "values" array: far fewer lines than samples.
  std::size_t values_lines = 0;
  std::size_t position = 0;
  while ((position = text.find("\"values\": [", position)) != std::string::npos) {
    const std::size_t line_end = text.find('\n', position);
    const std::string line = text.substr(position, line_end - position);
    EXPECT_EQ(line.back(), ']') << "a values array spans more than one line";
    ++values_lines;
    position = line_end;
  }
  EXPECT_EQ(values_lines, series_count);
  EXPECT_LT(std::count(text.begin(), text.end(), '\n'), 600);
  // The exact one-line form of a short series.
  EXPECT_NE(text.find("\"values\": [4194304.0]"), std::string::npos);
}

// Whole numbers are written without nlohmann's float formatting (DumpJson, ReportToText): the
// text must be nlohmann's own, byte for byte, for every kind of number and around the bounds of
// the fast path (10^15, -0.0, fractions, non-finite values).
nlohmann::json AwkwardValues() {
  nlohmann::json values = nlohmann::json::array();
  for (double v : {0.0, -0.0, 1.0, -1.0, 100.0, 4194304.0, 0.5, -2.25, 1e-7, 123.456,
                   999999999999999.0, -999999999999999.0, 1e15, -1e15, 1e15 + 2, 1e16, 1e300,
                   9007199254740992.0, 5e-324, std::numeric_limits<double>::quiet_NaN(),
                   std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest()}) {
    values.push_back(v);
  }
  values.push_back(std::numeric_limits<std::int64_t>::min());
  values.push_back(std::numeric_limits<std::uint64_t>::max());
  values.push_back(-7);
  values.push_back(0u);
  values.push_back(true);
  values.push_back(nullptr);
  values.push_back("caf\xe9 \"quoted\"\n\x01");
  return values;
}

TEST(ReportJsonTest, DumpJson_IsNlohmannsDumpByteForByte) {
  const auto dump = [](const nlohmann::json& j, int indent) {
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  nlohmann::json document = {{"values", AwkwardValues()},
                             {"empty_array", nlohmann::json::array()},
                             {"empty_object", nlohmann::json::object()},
                             {"nested", {{"b", {1.0, {{"c", -0.0}}, nlohmann::json::array()}},
                                         {"caf\xe9", "key with a bad byte"}}}};
  for (int indent : {-1, 0, 1, 2, 4}) EXPECT_EQ(DumpJson(document, indent), dump(document, indent));
  // Seeded whole numbers and fractions of every magnitude.
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  nlohmann::json many = nlohmann::json::array();
  for (int i = 0; i < 20000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int digits = static_cast<int>(state >> 59);  // 0..31
    double v = std::ldexp(static_cast<double>(state >> 11), -53) * std::pow(10.0, digits - 8);
    if (i % 2 == 0) v = std::trunc(v);
    many.push_back(i % 3 == 0 ? -v : v);
  }
  EXPECT_EQ(DumpJson(many, 1), dump(many, 1));
  EXPECT_EQ(DumpJson(nlohmann::json(2.0), 1), "2.0");
}

// A series packed as one value (PackedNumbers) is written as nlohmann writes the array of its
// values, byte for byte, at every indent: under object keys, at the top and directly inside an
// array, empty or not, with the awkward values above among seeded ones, and in runs of one value
// (whose text the writer copies: -0.0 after 0.0 and a long text after a short one must not be).
// In a report's text the series is nlohmann's compact array; ToJson (the document other code
// reads) still holds arrays.
TEST(ReportJsonTest, PackedNumbers_AreWrittenAsNlohmannWritesTheirArray) {
  const auto dump = [](const nlohmann::json& j, int indent) {
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  std::vector<double> values;
  for (const nlohmann::json& v : AwkwardValues()) {
    if (v.is_number()) values.push_back(v.get<double>());
  }
  std::uint64_t state = 0x2545F4914F6CDD1Dull;
  for (int i = 0; i < 5000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double v = std::ldexp(static_cast<double>(state >> 11), -53) *
                     std::pow(10.0, static_cast<int>(state >> 59) - 8);
    values.push_back(i % 2 == 0 ? std::trunc(v) : -v);
  }
  for (const nlohmann::json& v : AwkwardValues()) {
    if (!v.is_number()) continue;
    for (int run = 0; run < 3; ++run) values.push_back(v.get<double>());
  }
  for (double v : {0.0, -0.0, -0.0, 0.0, 1e300, 1e300, 7.0, 7.0, 0.1, 0.1, 7.0}) values.push_back(v);
  for (const std::vector<double>& series :
       {values, std::vector<double>{}, std::vector<double>{3.0}}) {
    const nlohmann::json packed = {{"a", PackedNumbers(series)},
                                   {"b", {{"c", PackedNumbers(series)}}},
                                   {"d", nlohmann::json::array({PackedNumbers(series), 1.5})}};
    const nlohmann::json spelled = {{"a", series},
                                    {"b", {{"c", series}}},
                                    {"d", nlohmann::json::array({series, 1.5})}};
    for (int indent : {-1, 0, 1, 2, 4}) {
      EXPECT_EQ(DumpJson(packed, indent), dump(spelled, indent)) << "indent " << indent;
      EXPECT_EQ(DumpJson(PackedNumbers(series), indent), dump(nlohmann::json(series), indent));
    }
  }
  Report report = MakeSampleReport();
  ASSERT_FALSE(report.workloads.empty());
  ASSERT_FALSE(report.workloads[0].series.empty());
  report.workloads[0].series[0].values = values;
  const nlohmann::json array = ToJson(report)["workloads"][0]["series"][0]["values"];
  ASSERT_TRUE(array.is_array());
  EXPECT_NE(ReportToText(report).find("\"values\": " + dump(array, -1) + "\n"), std::string::npos);
}

// trace.json's writer: each packed series is nlohmann's one-line array of its values, in place,
// and the rest of the document is DumpJson's, so the text parses to the spelled-out document.
TEST(ReportJsonTest, DumpJsonSeriesInline_WritesEachSeriesOnOneLine_AndTheSameDocument) {
  std::vector<double> values;
  for (const nlohmann::json& v : AwkwardValues()) {
    if (v.is_number()) values.push_back(v.get<double>());
  }
  for (int i = 0; i < 1000; ++i) values.push_back(static_cast<double>(i * 4096));
  for (const std::vector<double>& series :
       {values, std::vector<double>{}, std::vector<double>{3.0}}) {
    const nlohmann::json packed = {{"a", PackedNumbers(series)},
                                   {"b", {{"c", PackedNumbers(series)}, {"n", "x"}}},
                                   {"d", nlohmann::json::array({PackedNumbers(series), 1.5})}};
    nlohmann::json spelled_series = nlohmann::json::array();
    for (double v : series) spelled_series.push_back(std::isfinite(v) ? nlohmann::json(v) : nullptr);
    const nlohmann::json spelled = {{"a", spelled_series},
                                    {"b", {{"c", spelled_series}, {"n", "x"}}},
                                    {"d", nlohmann::json::array({spelled_series, 1.5})}};
    const std::string one_line =
        spelled_series.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    for (int indent : {-1, 1, 2}) {
      const std::string text = DumpJsonSeriesInline(packed, indent);
      EXPECT_EQ(nlohmann::json::parse(text), spelled) << "indent " << indent;
      EXPECT_NE(text.find("\"a\":" + std::string(indent >= 0 ? " " : "") + one_line),
                std::string::npos)
          << "indent " << indent;
    }
    EXPECT_EQ(DumpJsonSeriesInline(PackedNumbers(series), 1), one_line);
  }
}

TEST(ReportJsonTest, ReportToText_SeriesValues_AreNlohmannsCompactText) {
  Report report = MakeSampleReport();
  ASSERT_FALSE(report.workloads.empty());
  std::vector<double> values;
  for (const nlohmann::json& v : AwkwardValues()) {
    if (v.is_number()) values.push_back(v.get<double>());
  }
  report.workloads[0].series.push_back({"awkward", "bytes", true, values});
  nlohmann::json expected = nlohmann::json::array();
  for (double v : values) {
    if (std::isfinite(v)) {
      expected.push_back(v);
    } else {
      expected.push_back(nullptr);
    }
  }
  EXPECT_NE(ReportToText(report).find("\"values\": " + expected.dump()), std::string::npos)
      << expected.dump();
}

TEST(ReportJsonTest, ReportToText_StartsWithSchemaVersionAndEndsWithNewline) {
  const std::string text = SampleText();
  EXPECT_EQ(
      text.rfind("{\n  \"schema_version\": 1,\n  \"meta\": {\n    \"tool_version\": \"0.1.0\",", 0),
      0u);
  EXPECT_EQ(text.back(), '\n');
}

TEST(ReportJsonTest, NonFiniteNumbers_AreWrittenAsNull_AndReadBackAsNaN) {
  Report report = MakeSampleReport();
  report.workloads[0].step_time_ns = std::numeric_limits<double>::quiet_NaN();
  report.workloads[0].series[0].values = {1, std::numeric_limits<double>::infinity(), 3};
  const std::string text = ReportToText(report);
  EXPECT_NE(text.find("\"step_time_ns\": null"), std::string::npos);
  EXPECT_NE(text.find("\"values\": [1.0,null,3.0]"), std::string::npos);

  const Report parsed = ParseReport(text, "nan.json");
  EXPECT_TRUE(std::isnan(parsed.workloads[0].step_time_ns));
  ASSERT_EQ(parsed.workloads[0].series[0].values.size(), 3u);
  EXPECT_EQ(parsed.workloads[0].series[0].values[0], 1);
  EXPECT_TRUE(std::isnan(parsed.workloads[0].series[0].values[1]));
}

// peak_bound_bytes is optional: written only when set, read back as set; a report without it
// (every deterministic workload, and reports written before the field existed) reads as none.
TEST(ReportJsonTest, PeakBound_WrittenOnlyWhenSet_AndReadBackExactly) {
  Report report = MakeSampleReport();
  report.workloads[0].peak_bound_bytes = 773200;
  const std::string text = ReportToText(report);
  EXPECT_EQ(text.find("\"peak_bound_bytes\""), text.rfind("\"peak_bound_bytes\""))
      << "written once";
  EXPECT_NE(text.find("\"peak_bound_bytes\": 773200"), std::string::npos) << text.substr(0, 2000);

  const Report parsed = ParseReport(text, "bound.json");
  EXPECT_EQ(parsed, report);
  ASSERT_TRUE(parsed.workloads[0].peak_bound_bytes.has_value());
  EXPECT_EQ(*parsed.workloads[0].peak_bound_bytes, 773200);
  for (std::size_t i = 1; i < parsed.workloads.size(); ++i)
    EXPECT_FALSE(parsed.workloads[i].peak_bound_bytes.has_value()) << i;
}

TEST(ReportJsonTest, RunSettings_RoundTripWhenRecorded_AndOlderReportsReadWithout) {
  Report report = MakeSampleReport();
  report.meta.seed = std::numeric_limits<std::uint64_t>::max();
  report.meta.blas_threads = 2;
  report.meta.calibrated = false;
  const Report parsed = ParseReport(ReportToText(report), "settings.json");
  EXPECT_EQ(parsed, report);
  EXPECT_EQ(SettingsText(parsed.meta),
            "seed 18446744073709551615, BLAS threads 2, noise floors not calibrated (noisy "
            "counters reported, not judged)");

  const Report older = ParseReport(ReportToText(MakeSampleReport()), "older.json");
  EXPECT_FALSE(older.meta.seed.has_value());
  EXPECT_FALSE(older.meta.calibrated.has_value());
  EXPECT_EQ(SettingsText(older.meta), "");
}

TEST(ReportJsonTest, Interrupted_WrittenOnlyWhenTrue_AndReadBack_AbsentMeansFalse) {
  Report report = MakeSampleReport();
  EXPECT_EQ(ReportToText(report).find("\"interrupted\""), std::string::npos);
  EXPECT_FALSE(ParseReport(ReportToText(report), "whole.json").meta.interrupted);
  report.meta.interrupted = true;
  const std::string text = ReportToText(report);
  EXPECT_NE(text.find("\"interrupted\": true"), std::string::npos);
  const Report parsed = ParseReport(text, "stopped.json");
  EXPECT_TRUE(parsed.meta.interrupted);
  EXPECT_EQ(parsed, report);
}

TEST(ReportJsonTest, NegativeSteadyLiveBytes_IsRefusedNamingTheFieldAndTheValue) {
  Report report = MakeSampleReport();
  report.workloads[0].steady_live_bytes = -4096;
  const ReportError error =
      CatchReportError([&] { ParseReport(ReportToText(report), "neg.json"); });
  EXPECT_EQ(error.json_path(), "$.workloads[0].steady_live_bytes");
  EXPECT_EQ(
      std::string(error.what())
          .rfind("neg.json: field `$.workloads[0].steady_live_bytes` is out of range, expected a "
                 "non-negative number (or null for not measured), got -4096.000000; fix the file",
                 0),
      0u)
      << error.what();
}

TEST(ReportJsonTest, OtherImpossibleValues_AreRefusedWithTheirPath) {
  const auto path_of_error = [](auto edit) {
    Report report = MakeSampleReport();
    edit(report);
    return CatchReportError([&] { ParseReport(ReportToText(report), "bad.json"); }).json_path();
  };
  EXPECT_EQ(path_of_error([](Report& r) { r.workloads[1].peak_bytes = -1; }),
            "$.workloads[1].peak_bytes");
  EXPECT_EQ(path_of_error([](Report& r) { r.workloads[0].step_time_ns = -5; }),
            "$.workloads[0].step_time_ns");
  EXPECT_EQ(path_of_error([](Report& r) { r.workloads[0].peak_bound_bytes = -2; }),
            "$.workloads[0].peak_bound_bytes");
  EXPECT_EQ(path_of_error([](Report& r) { r.workloads[0].blocks = -3; }), "$.workloads[0].blocks");
  EXPECT_EQ(path_of_error([](Report& r) { r.meta.warmup_steps = -2; }), "$.meta.warmup_steps");
  EXPECT_EQ(path_of_error([](Report& r) { r.meta.wall_seconds = -1; }), "$.meta.wall_seconds");
  EXPECT_EQ(path_of_error([](Report& r) {
              r.workloads[1].attribution[0].transitions = 3;
              r.workloads[1].attribution[0].rose_at = 4;
            }),
            "$.workloads[1].attribution[0].rose_at");
  EXPECT_EQ(path_of_error([](Report& r) { r.workloads[1].attribution[0].transitions = -1; }),
            "$.workloads[1].attribution[0].transitions");
}

TEST(ReportJsonTest, AttributionStack_RoundTrips_AndANonStringFrameIsRefusedWithItsPath) {
  Report report = MakeSampleReport();
  report.workloads[1].attribution[0].stack = {"train_step torch_mlp.py:34", "libc.so.6+0x1f"};
  EXPECT_EQ(ParseReport(ReportToText(report), "stack.json"), report);
  nlohmann::json json = nlohmann::json::parse(ReportToText(report));
  json["workloads"][1]["attribution"][0]["stack"][1] = 7;
  EXPECT_EQ(CatchReportError([&] { ParseReport(json.dump(), "bad.json"); }).json_path(),
            "$.workloads[1].attribution[0].stack[1]");
  json["workloads"][1]["attribution"][0]["stack"] = std::vector<std::string>(257, "f");
  EXPECT_EQ(CatchReportError([&] { ParseReport(json.dump(), "deep.json"); }).json_path(),
            "$.workloads[1].attribution[0].stack");
}

TEST(ReportJsonTest, AttributionCensus_RoundTrips_AndACensusWithoutSurvivorsIsRefusedWithItsPath) {
  Report report = MakeSampleReport();
  Attribution& row = report.workloads[1].attribution[0];
  row.census = "growth";
  row.survivor_bytes = {1024, 1024, 2048};
  row.census_from_block = 2;
  EXPECT_EQ(ParseReport(ReportToText(report), "census.json"), report);
  nlohmann::json json = nlohmann::json::parse(ReportToText(report));
  json["workloads"][1]["attribution"][0]["survivor_bytes"] = nlohmann::json::array();
  EXPECT_EQ(CatchReportError([&] { ParseReport(json.dump(), "empty.json"); }).json_path(),
            "$.workloads[1].attribution[0].survivor_bytes");
  json["workloads"][1]["attribution"][0]["survivor_bytes"] = {1.0};
  json["workloads"][1]["attribution"][0]["census"] = "too few blocks";
  EXPECT_EQ(CatchReportError([&] { ParseReport(json.dump(), "outcome.json"); }).json_path(),
            "$.workloads[1].attribution[0].census");
}

TEST(ReportJsonTest, AttributionWithoutGrowthFields_AnOlderReport_ReadsAsNoGrowth) {
  Report report = MakeSampleReport();
  nlohmann::json json = nlohmann::json::parse(ReportToText(report));
  for (nlohmann::json& workload : json["workloads"]) {
    for (nlohmann::json& row : workload["attribution"]) {
      row.erase("bytes_per_step");
      row.erase("rose_at");
      row.erase("transitions");
    }
  }
  const Report parsed = ParseReport(json.dump(), "older.json");
  for (const WorkloadResult& workload : parsed.workloads) {
    for (const Attribution& row : workload.attribution) {
      EXPECT_EQ(row.bytes_per_step, 0);
      EXPECT_EQ(row.transitions, 0);
      EXPECT_EQ(row.rose_at, 0);
    }
  }
}

TEST(ReportJsonTest, PeakBound_NullReadsAsNone_AndAStringIsAWrongTypeNamingThePath) {
  const std::string text = ReportToText(MakeSampleReport());
  const std::string key = "\"peak_bytes\": ";
  const std::size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  std::string with_null = text;
  with_null.insert(at, "\"peak_bound_bytes\": null, ");
  EXPECT_FALSE(ParseReport(with_null, "null.json").workloads[0].peak_bound_bytes.has_value());

  std::string with_string = text;
  with_string.insert(at, "\"peak_bound_bytes\": \"big\", ");
  try {
    ParseReport(with_string, "string.json");
    FAIL() << "a string bound was accepted";
  } catch (const ReportError& e) {
    EXPECT_EQ(e.kind(), ReportErrorKind::kMissingField);
    EXPECT_EQ(e.json_path(), "$.workloads[0].peak_bound_bytes");
  }
}

// met_expectation is derived from verdict and expectation; a file that says "met" for another
// verdict was edited by hand or written by a broken tool, and diff must not trust it.
TEST(ReportJsonTest, MetExpectationContradictingTheVerdict_IsRefusedWithThePath) {
  Report report = MakeSampleReport();
  WorkloadResult* zoo = nullptr;
  for (WorkloadResult& w : report.workloads)
    if (w.kind == "zoo" && w.met_expectation) zoo = &w;
  ASSERT_NE(zoo, nullptr);
  zoo->verdict = kPass;  // still "met"
  try {
    ParseReport(ReportToText(report), "edited.json");
    FAIL() << "a met expectation with another verdict was accepted";
  } catch (const ReportError& e) {
    EXPECT_EQ(e.kind(), ReportErrorKind::kMissingField);
    EXPECT_NE(std::string(e.what()).find("met_expectation"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is not the expectation"), std::string::npos) << e.what();
  }
  zoo->met_expectation = false;  // consistent again: a missed detection
  EXPECT_NO_THROW(ParseReport(ReportToText(report), "missed.json"));
}

TEST(ReportJsonTest, UnjudgedCounter_RoundTrips_AndCannotCarryAFlag) {
  Report report = MakeSampleReport();
  ASSERT_FALSE(report.workloads[0].counters.empty());
  CounterVerdict& counter = report.workloads[0].counters[0];
  counter.verdict = kPass;
  counter.judged = false;
  EXPECT_EQ(ParseReport(ReportToText(report), "info.json"), report);
  counter.verdict = kUnboundedGrowth;  // flagged, yet "not judged": contradictory
  try {
    ParseReport(ReportToText(report), "flagged.json");
    FAIL() << "an unjudged counter with a leak verdict was accepted";
  } catch (const ReportError& e) {
    EXPECT_EQ(e.json_path(), "$.workloads[0].counters[0].judged");
  }
}

TEST(ReportJsonTest, Parse_CutInHalf_ThrowsTruncatedNamingFile) {
  const std::string text = SampleText();
  const ReportError error = CatchReportError(
      [&] { ParseReport(text.substr(0, text.size() / 2), "baselines/cpu/mlp_sgd.json"); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kTruncated);
  EXPECT_EQ(error.source(), "baselines/cpu/mlp_sgd.json");
  EXPECT_EQ(std::string(error.what())
                .rfind("baselines/cpu/mlp_sgd.json: truncated: the JSON ends at line ", 0),
            0u)
      << error.what();
  EXPECT_NE(std::string(error.what()).find("regenerate it with `leakbound run`"),
            std::string::npos);
}

TEST(ReportJsonTest, Parse_CutAtAnyPoint_IsTruncatedNeverMalformedOrCrash) {
  // Every prefix of a valid report (object, array, string, number, literal cut anywhere) is an
  // interrupted write, never "malformed". A small report keeps this quick.
  Report report;
  report.meta = testing::MakeCpuMetadata();
  report.workloads = {testing::MakeTrapWorkload("trap")};
  report.workloads[0].series.resize(1);
  report.workloads[0].series[0].values.resize(3);
  report.workloads[0].met_expectation = false;  // a "false" literal to cut too
  const std::string text = ReportToText(report);
  for (std::size_t length = 0; length + 2 < text.size(); ++length) {
    const ReportError error =
        CatchReportError([&] { ParseReport(text.substr(0, length), "cut.json"); });
    ASSERT_EQ(error.kind(), ReportErrorKind::kTruncated)
        << "cut at " << length << ": " << error.what();
  }
}

TEST(ReportJsonTest, Parse_Empty_ThrowsTruncated) {
  const ReportError error = CatchReportError([] { ParseReport(" \n", "empty.json"); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kTruncated);
  EXPECT_EQ(std::string(error.what()),
            "empty.json: the file is empty (truncated to 0 bytes of JSON, likely an interrupted "
            "write); regenerate it with `leakbound run`");
}

TEST(ReportJsonTest, Parse_SyntaxError_ThrowsMalformedWithLineAndColumn) {
  const ReportError error = CatchReportError(
      [] { ParseReport("{\n  \"schema_version\": 1,\n  \"meta\": nope\n}", "bad.json"); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kMalformed);
  EXPECT_EQ(std::string(error.what()).rfind("bad.json: malformed JSON at line 3, column ", 0), 0u)
      << error.what();
}

TEST(ReportJsonTest, Parse_TrailingGarbage_ThrowsMalformed) {
  const ReportError error = CatchReportError([] { ParseReport(SampleText() + "}", "extra.json"); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kMalformed);
}

TEST(ReportJsonTest, Parse_NewerSchemaVersion_ThrowsSchemaVersionWithExactMessage) {
  nlohmann::json json = ToJson(MakeSampleReport());
  json["schema_version"] = 7;
  const ReportError error =
      CatchReportError([&] { ParseReport(json.dump(), "baselines/cpu/mlp_sgd.json"); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kSchemaVersion);
  EXPECT_EQ(error.json_path(), "$.schema_version");
  EXPECT_EQ(std::string(error.what()),
            "baselines/cpu/mlp_sgd.json: schema_version 7 is not supported by this leakbound "
            "(reads 1); use a newer leakbound to read it, or regenerate the baseline with "
            "`leakbound run`");
}

TEST(ReportJsonTest, Parse_OlderSchemaVersion_SaysRegenerate) {
  nlohmann::json json = ToJson(MakeSampleReport());
  json["schema_version"] = 0;
  const ReportError error = CatchReportError([&] { ReportFromJson(json, "old.json"); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kSchemaVersion);
  EXPECT_EQ(std::string(error.what()),
            "old.json: schema_version 0 is not supported by this leakbound (reads 1); "
            "regenerate the baseline with `leakbound run`");
}

TEST(ReportJsonTest, Parse_MissingSchemaVersion_ThrowsMissingField) {
  nlohmann::json json = ToJson(MakeSampleReport());
  json.erase("schema_version");
  const ReportError error = CatchReportError([&] { ReportFromJson(json, "r.json"); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kMissingField);
  EXPECT_EQ(error.json_path(), "$.schema_version");
}

TEST(ReportJsonTest, Parse_MissingNestedField_NamesItsJsonPath) {
  nlohmann::json json = ToJson(MakeSampleReport());
  json["workloads"][1].erase("verdict");
  const ReportError error = CatchReportError([&] { ParseReport(json.dump(), "runs/today.json"); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kMissingField);
  EXPECT_EQ(error.json_path(), "$.workloads[1].verdict");
  EXPECT_EQ(std::string(error.what()),
            "runs/today.json: missing required field `$.workloads[1].verdict`; the report is "
            "incomplete or was written by another tool, regenerate it with `leakbound run`");
}

TEST(ReportJsonTest, Parse_IllTypedSeriesSample_NamesPathAndTypes) {
  nlohmann::json json = ToJson(MakeSampleReport());
  json["workloads"][0]["series"][1]["values"][3] = "12";
  const ReportError error = CatchReportError([&] { ReportFromJson(json, "r.json"); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kMissingField);
  EXPECT_EQ(error.json_path(), "$.workloads[0].series[1].values[3]");
  EXPECT_NE(std::string(error.what()).find("is a string, expected a number (or null)"),
            std::string::npos)
      << error.what();
}

TEST(ReportJsonTest, Parse_IllTypedScalars_AreRejectedWithPath) {
  struct Case {
    const char* pointer;  // JSON pointer to overwrite
    nlohmann::json value;
    const char* path;
  };
  const Case cases[] = {
      {"/meta/blocks", 4.5, "$.meta.blocks"},
      {"/meta/blocks", 1e10, "$.meta.blocks"},          // float: not an integer
      {"/meta/blocks", 5000000000LL, "$.meta.blocks"},  // out of int range
      {"/meta", nlohmann::json::array(), "$.meta"},
      {"/workloads", nlohmann::json::object(), "$.workloads"},
      {"/workloads/0/met_expectation", 1, "$.workloads[0].met_expectation"},
      {"/workloads/1/attribution/0/bytes", -1, "$.workloads[1].attribution[0].bytes"},
      {"/workloads/1/attribution/0/oldest_age_steps", 18446744073709551615ULL,
       "$.workloads[1].attribution[0].oldest_age_steps"},
      {"/workloads/0/block_ends/0", "59", "$.workloads[0].block_ends[0]"},
      {"/workloads/2", 17, "$.workloads[2]"},
      {"/benchmarks/0/name", nullptr, "$.benchmarks[0].name"},
  };
  for (const Case& one : cases) {
    nlohmann::json json = ToJson(MakeSampleReport());
    json[nlohmann::json::json_pointer(one.pointer)] = one.value;
    const ReportError error = CatchReportError([&] { ReportFromJson(json, "r.json"); });
    EXPECT_EQ(error.kind(), ReportErrorKind::kMissingField) << one.pointer;
    EXPECT_EQ(error.json_path(), one.path) << error.what();
  }
}

TEST(ReportJsonTest, Parse_DocumentNotAnObject_ThrowsMissingFieldAtRoot) {
  const ReportError error = CatchReportError([] { ParseReport("[1, 2]", "list.json"); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kMissingField);
  EXPECT_EQ(error.json_path(), "$");
}

TEST(ReportJsonTest, Parse_DeeplyNested_IsAnErrorNotAStackOverflow) {
  const std::string open(200000, '[');
  EXPECT_EQ(CatchReportError([&] { ParseReport(open, "deep.json"); }).kind(),
            ReportErrorKind::kTruncated);
  EXPECT_EQ(
      CatchReportError([&] { ParseReport(open + std::string(200000, ']'), "deep.json"); }).kind(),
      ReportErrorKind::kMissingField);
}

TEST(ReportJsonTest, Parse_UnknownFields_AreIgnored) {
  nlohmann::json json = ToJson(MakeSampleReport());
  json["future_field"] = {{"x", 1}};
  json["workloads"][0]["another"] = "value";
  EXPECT_EQ(ReportFromJson(json), MakeSampleReport());
}

class ReportFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("report_file_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ReportFileTest, LoadReport_FileNotFound_ThrowsIoNamingThePath) {
  const std::filesystem::path missing = dir_ / "nope.json";
  const ReportError error = CatchReportError([&] { LoadReport(missing); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kIo);
  EXPECT_EQ(std::string(error.what()),
            missing.string() +
                ": cannot open report (No such file or directory); check the "
                "path, or create the report with `leakbound run`");
}

TEST_F(ReportFileTest, LoadReport_Directory_ThrowsIo) {
  const ReportError error = CatchReportError([&] { LoadReport(dir_); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kIo);
  EXPECT_NE(std::string(error.what()).find("Is a directory"), std::string::npos) << error.what();
}

TEST_F(ReportFileTest, LoadReport_AfterWriteReportAtomically_GivesEqualReport) {
  const Report report = MakeSampleReport();
  WriteReportAtomically(report, dir_ / "report.json");
  EXPECT_EQ(LoadReport(dir_ / "report.json"), report);
}

TEST_F(ReportFileTest, LoadReport_TruncatedFile_NamesTheFile) {
  const std::string text = SampleText();
  const std::filesystem::path path = dir_ / "cut.json";
  std::ofstream(path, std::ios::binary) << text.substr(0, text.size() / 2);
  const ReportError error = CatchReportError([&] { LoadReport(path); });
  EXPECT_EQ(error.kind(), ReportErrorKind::kTruncated);
  EXPECT_EQ(error.source(), path.string());
  EXPECT_EQ(std::string(error.what()).rfind(path.string() + ": truncated", 0), 0u);
}

}  // namespace
}  // namespace leakbound::reports
