// libFuzzer target for the report reader and everything downstream of it. json.h promises that
// any input yields a Report or a ReportError; this target holds the reader to that and, for every
// report it accepts, checks the writer, the renderers and diff against it. Build and run:
// ci/fuzz.sh (docs in reports/fuzz/README.md).
//
// A finding is anything other than a clean return: an exception that is not ReportError (it
// escapes with no handler, so std::terminate runs at the throw site and the stack names it), a
// failed invariant (Fail() prints it and aborts), or a sanitizer report (ASan, UBSan, LeakSanitizer
// at exit of each input, libFuzzer's -timeout and -rss_limit_mb).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "leakbound/reports/diff.h"
#include "leakbound/reports/html.h"
#include "leakbound/reports/json.h"
#include "leakbound/reports/markdown.h"
#include "leakbound/reports/report.h"
#include "leakbound/reports/report_error.h"

namespace leakbound::reports {
namespace {

constexpr std::string_view kSource = "fuzz-input";

[[noreturn]] void Fail(std::string_view invariant, std::string_view detail = {}) {
  std::fprintf(stderr, "report_fuzz: invariant violated: %.*s\n",
               static_cast<int>(invariant.size()), invariant.data());
  if (!detail.empty()) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(detail.size()), detail.data());
  }
  std::abort();
}

// Calls visit(double&) for every double in the report, in a fixed order. The NaN-aware
// comparison below relies on it reaching every double: one it misses stays in operator== and, when
// it is NaN, makes two equal reports compare unequal (a loud failure, not a silent gap).
template <typename ReportT, typename Visit>
void ForEachDouble(ReportT& report, Visit visit) {
  visit(report.meta.wall_seconds);
  for (auto& workload : report.workloads) {
    visit(workload.baseline_live_bytes);
    visit(workload.steady_live_bytes);
    visit(workload.final_live_bytes);
    visit(workload.peak_bytes);
    visit(workload.allocations_per_step);
    visit(workload.step_time_ns);
    visit(workload.probe_time_ns);
    for (auto& counter : workload.counters) {
      visit(counter.slope_per_step);
      visit(counter.slope_bound);
      visit(counter.baseline);
      visit(counter.final_value);
      visit(counter.peak);
    }
    for (auto& series : workload.series) {
      for (auto& value : series.values) visit(value);
    }
  }
  for (auto& figure : report.benchmarks) visit(figure.value);
}

// Whether `reread` is what a reader must get back from writing `original`: every field equal,
// except that a non-finite double ("not measured") is written as null and so reads back as NaN
// (docs/report-schema.md: infinity does not survive a round trip). operator== alone cannot say
// this, since NaN != NaN: the doubles are compared here, then zeroed, then the rest by operator==.
bool SameAfterRoundTrip(const Report& original, const Report& reread) {
  std::vector<double> original_doubles;
  std::vector<double> reread_doubles;
  ForEachDouble(original, [&](double value) { original_doubles.push_back(value); });
  ForEachDouble(reread, [&](double value) { reread_doubles.push_back(value); });
  if (original_doubles.size() != reread_doubles.size()) return false;
  for (std::size_t i = 0; i < original_doubles.size(); ++i) {
    const double expected = original_doubles[i];
    const double got = reread_doubles[i];
    if (std::isfinite(expected) ? !(got == expected) : !std::isnan(got)) return false;
  }
  Report original_rest = original;
  Report reread_rest = reread;
  ForEachDouble(original_rest, [](double& value) { value = 0; });
  ForEachDouble(reread_rest, [](double& value) { value = 0; });
  return original_rest == reread_rest;
}

// A fixed report of device class "cpu" to diff every accepted input against, in both directions.
// Its workload names are those of the seed corpus, so fuzzed reports share names with it and diff
// compares metrics rather than only listing missing and new workloads.
Report MakeDiffSeed() {
  Report report;
  report.meta.tool_version = "0.1.0";
  report.meta.commit = "fuzzseed";
  report.meta.compiler = "Clang 14.0.6";
  report.meta.build_type = "Release";
  report.meta.device = "cpu (CPU stub)";
  report.meta.device_class = "cpu";
  report.meta.hostname = "fuzz";
  report.meta.started_at = "2025-01-15T03:12:44Z";
  report.meta.wall_seconds = 1.5;
  report.meta.blocks = 4;
  report.meta.steps_per_block = 8;
  report.meta.warmup_steps = -1;

  WorkloadResult clean;
  clean.name = "mlp_sgd";
  clean.kind = "clean";
  clean.expectation = kPass;
  clean.verdict = kPass;
  clean.met_expectation = true;
  clean.evidence = "Flat at every block end.";
  clean.warmup_steps = 2;
  clean.blocks = 4;
  clean.steps_per_block = 8;
  clean.block_ends = {9, 17, 25, 33};
  clean.steady_live_bytes = 1536 * 1024;
  clean.peak_bytes = 2048 * 1024;
  clean.allocations_per_step = 12;
  clean.step_time_ns = 1.2e6;
  clean.probe_time_ns = 850;
  clean.counters = {CounterVerdict{"runtime.live_bytes", kPass, 0, 0, 0, 0, 2048 * 1024, "Flat."}};
  clean.series = {
      CounterSeries{"runtime.live_bytes", "bytes", true, std::vector<double>(34, 1536 * 1024)}};

  WorkloadResult zoo;
  zoo.name = "zoo_loss_history";
  zoo.kind = "zoo";
  zoo.expectation = kUnboundedGrowth;
  zoo.verdict = kUnboundedGrowth;
  zoo.met_expectation = true;
  zoo.evidence = "Grows 64.00 KiB/step.";
  zoo.warmup_steps = 0;
  zoo.blocks = 2;
  zoo.steps_per_block = 4;
  zoo.block_ends = {3, 7};
  zoo.steady_live_bytes = 512 * 1024;
  zoo.final_live_bytes = 512 * 1024;
  zoo.peak_bytes = 512 * 1024;
  zoo.allocations_per_step = 9;
  zoo.step_time_ns = 310e3;
  zoo.probe_time_ns = 640;
  zoo.attribution = {Attribution{"matmul", "value", "manual", 512 * 1024, 8, 8, 1}};

  report.workloads = {clean, zoo};
  report.benchmarks = {BenchmarkFigure{"probe_overhead_ns", 850, "ns"}};
  return report;
}

const Report& DiffSeed() {
  static const Report* const seed = new Report(MakeDiffSeed());  // never destroyed: no exit order
  return *seed;
}

// DiffReports between two reports that may differ: it either compares them or refuses with
// kDeviceClassMismatch, and refuses exactly when the device classes differ.
void CheckDiffAgainst(const Report& base, const Report& fresh) {
  const bool same_class = base.meta.device_class == fresh.meta.device_class;
  try {
    const DiffResult result = DiffReports(base, fresh);
    if (!same_class) Fail("DiffReports compared reports of different device classes");
    if (result.regression != (result.regressions > 0)) {
      Fail("DiffResult::regression disagrees with DiffResult::regressions");
    }
  } catch (const ReportError& error) {
    if (error.kind() != ReportErrorKind::kDeviceClassMismatch || same_class) {
      Fail("DiffReports threw a ReportError other than kDeviceClassMismatch for different classes",
           error.what());
    }
  }
}

// The checks on a report the reader accepted.
void CheckAcceptedReport(const Report& report) {
  // Writer: the text form reads back to the same report, and writing that again gives the same
  // text byte for byte (the text form is a fixed point after one round trip).
  const std::string text = ReportToText(report);
  const Report reread = ParseReport(text, "ReportToText output");  // a ReportError here is a bug
  if (!SameAfterRoundTrip(report, reread)) {
    Fail("ParseReport(ReportToText(report)) differs from report", text);
  }
  const std::string text_again = ReportToText(reread);
  if (text_again != text) Fail("ReportToText is not stable across a round trip", text_again);

  // The JSON-value path (ToJson, then its compact text, as other tools would write it).
  const std::string compact = ToJson(report).dump();
  const Report from_compact = ParseReport(compact, "ToJson output");
  if (!SameAfterRoundTrip(report, from_compact)) {
    Fail("ParseReport(ToJson(report).dump()) differs from report", compact);
  }

  // Renderers: total on any report the reader accepts, and no report string reaches the page as
  // markup (html.h: "a report cannot inject markup"; the page itself has no scripts).
  const std::string markdown = RenderMarkdown(report);
  const std::string html = RenderHtml(report);
  if (markdown.empty() || html.empty()) Fail("a renderer returned nothing");
  if (html.find("<script") != std::string::npos) Fail("RenderHtml output contains <script");

  // Diff of a report with itself: nothing changed, so nothing regressed or improved.
  const DiffResult self = DiffReports(report, report);
  if (self.regression || self.regressions != 0 || self.improvements != 0) {
    Fail("DiffReports(report, report) reports a change", self.markdown);
  }
  CheckDiffAgainst(DiffSeed(), report);
  CheckDiffAgainst(report, DiffSeed());
}

}  // namespace
}  // namespace leakbound::reports

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace leakbound::reports;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Report report;
  try {
    report = ParseReport(text, kSource);
  } catch (const ReportError& error) {
    // The expected way to reject input: a reading kind, a message that names the source.
    switch (error.kind()) {
      case ReportErrorKind::kMalformed:
      case ReportErrorKind::kTruncated:
      case ReportErrorKind::kSchemaVersion:
      case ReportErrorKind::kMissingField:
        break;
      default:
        Fail("ParseReport threw a ReportError of a non-reading kind", error.what());
    }
    if (std::string_view(error.what()).find(kSource) == std::string_view::npos) {
      Fail("ParseReport's error message does not name the source", error.what());
    }
    // Rejected inputs stay eligible for the corpus: one that fails deeper in the document is the
    // stepping stone to a valid report.
    return 0;
  }
  CheckAcceptedReport(report);
  return 0;
}
