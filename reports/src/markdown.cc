// Markdown rendering of a Report (see markdown.h). Tables are GitHub-flavoured; numbers go
// through format.h so the Markdown, HTML and diff views print them the same way.

#include "leakbound/reports/markdown.h"

#include <string>
#include <vector>

namespace leakbound::reports {
namespace {

// Appends one table row; cells are already escaped/formatted.
void AppendRow(std::string& out, const std::vector<std::string>& cells) {
  out += "|";
  for (const std::string& cell : cells) {
    out += " ";
    out += cell.empty() ? std::string("-") : cell;
    out += " |";
  }
  out += "\n";
}

void AppendHeader(std::string& out, const std::vector<std::string>& titles,
                  const std::vector<bool>& right_aligned) {
  AppendRow(out, titles);
  out += "|";
  for (std::size_t i = 0; i < titles.size(); ++i) {
    out += i < right_aligned.size() && right_aligned[i] ? "---:|" : "---|";
  }
  out += "\n";
}

std::string ScheduleText(const RunMetadata& meta) {
  std::string text = std::to_string(meta.blocks) + " blocks x " +
                     std::to_string(meta.steps_per_block) + " steps, warm-up ";
  text += meta.warmup_steps < 0 ? std::string("auto-detected")
                                : std::to_string(meta.warmup_steps) + " steps";
  return text;
}

void AppendMetadata(const Report& report, std::string& out) {
  const RunMetadata& meta = report.meta;
  out += "# leakbound report\n\n";
  AppendHeader(out, {"Run", "Value"}, {});
  AppendRow(out, {"Device", MarkdownEscape(meta.device) + " (class " +
                                MarkdownEscape(meta.device_class) + ")"});
  AppendRow(out, {"Commit", MarkdownEscape(meta.commit)});
  AppendRow(out, {"Compiler", MarkdownEscape(meta.compiler)});
  AppendRow(out, {"Build type", MarkdownEscape(meta.build_type)});
  AppendRow(out, {"Schedule", ScheduleText(meta)});
  if (const std::string settings = SettingsText(meta); !settings.empty()) {
    AppendRow(out, {"Settings", MarkdownEscape(settings)});
  }
  if (const std::string floors = NoiseFloorText(report); !floors.empty()) {
    AppendRow(out, {"Noise floors", MarkdownEscape(floors)});
  }
  AppendRow(out, {"Host", MarkdownEscape(meta.hostname)});
  AppendRow(out, {"Started", MarkdownEscape(meta.started_at) + " (wall " +
                                 FormatDuration(meta.wall_seconds * 1e9) + ")"});
  AppendRow(out, {"leakbound", MarkdownEscape(meta.tool_version) + ", report schema " +
                                   std::to_string(report.schema_version)});
  out += "\n";
}

void AppendResultLine(const Report& report, std::string& out) {
  int missed = 0;
  for (const WorkloadResult& workload : report.workloads) {
    if (!workload.met_expectation) ++missed;
  }
  const std::string total = std::to_string(report.workloads.size());
  if (report.meta.interrupted) {
    out += WatchedResult(report).empty()
               ? "**INTERRUPTED**: the run was stopped by a signal; only the " + total +
                     (report.workloads.size() == 1 ? " workload that finished is"
                                                   : " workloads that finished are") +
                     " in this report, and the rest were not run.\n\n"
               : std::string("**INTERRUPTED**: watch was stopped by a signal, which it forwarded "
                             "to the program; the steps that arrived before it are judged "
                             "below.\n\n");
  }
  if (const std::string watched = WatchedResult(report); !watched.empty()) {
    out += "**Result: " + watched + ".**\n\n";
  } else if (missed == 0) {
    out += report.workloads.size() == 1
               ? std::string("**Result: the workload met its expectation.**\n\n")
               : "**Result: all " + total + " workloads met their expectation.**\n\n";
  } else {
    out += "**Result: " + std::to_string(missed) + " of " + total +
           " workloads did not meet their expectation.**\n\n";
  }
}

void AppendSummary(const Report& report, std::string& out) {
  out += "## Summary\n\n";
  AppendHeader(out,
               {"Workload", "Kind", "Expectation", "Verdict", "Met?", "Steady live", "Peak",
                "Allocs/step", "Step time"},
               {false, false, false, false, false, true, true, true, true});
  for (const WorkloadResult& workload : report.workloads) {
    AppendRow(
        out,
        {MarkdownEscape(workload.name), MarkdownEscape(workload.kind),
         IsWatched(workload) ? std::string("-") : MarkdownEscape(ToString(workload.expectation)),
         MarkdownEscape(ToString(workload.verdict)),
         IsWatched(workload) ? std::string("-") : workload.met_expectation ? "yes" : "**NO**",
         FormatBytes(workload.steady_live_bytes),
         FormatBytes(workload.peak_bytes), FormatCount(workload.allocations_per_step),
         FormatDuration(workload.step_time_ns)});
  }
  out += "\n";
}

void AppendDetection(const Report& report, std::string& out) {
  out += "## Detection\n\n";
  AppendHeader(out, {"Workload", "Kind", "Planted", "Detected", "Result"}, {});
  int zoo_total = 0;
  int zoo_detected = 0;
  int others = 0;
  int watched = 0;
  int false_positives = 0;
  for (const WorkloadResult& workload : report.workloads) {
    std::string planted;
    std::string result;
    if (workload.kind == "zoo") {
      ++zoo_total;
      planted = MarkdownEscape(ToString(workload.expectation));
      if (workload.met_expectation) {
        ++zoo_detected;
        result = "detected";
      } else if (workload.verdict == kPass) {
        result = "**missed** (no leak found)";
      } else {
        result = "**misclassified**";
      }
    } else if (IsWatched(workload)) {
      ++watched;
      planted = "- (a watched program)";
      result = IsMemoryFinding(workload.verdict) ? "**leak found**"
               : workload.verdict == kPass        ? "no leak found"
                                                  : "no verdict";
    } else {
      ++others;
      planted = "none";
      const int count = FalsePositives(workload);
      false_positives += count;
      result = count == 0 ? "0 false positives"
                          : "**" + std::to_string(count) +
                                (count == 1 ? " false positive**" : " false positives**");
    }
    AppendRow(out, {MarkdownEscape(workload.name), MarkdownEscape(workload.kind), planted,
                    MarkdownEscape(ToString(workload.verdict)), result});
  }
  if (zoo_total + others > 0) {
    out += "\nZoo: " + std::to_string(zoo_detected) + " of " + std::to_string(zoo_total) +
           " planted leaks detected with their class. Clean and trap workloads: " +
           std::to_string(false_positives) + " false positive" + (false_positives == 1 ? "" : "s") +
           " in " + std::to_string(others) + " workload" + (others == 1 ? "" : "s") + ".";
  }
  if (watched > 0) {
    out += std::string(zoo_total + others > 0 ? " " : "\n") + "Watched programs: " +
           std::to_string(watched) + " (a program leaks or it does not: a leak found is a finding).";
  }
  out += "\n\n";
}

void AppendWorkloadDetail(const WorkloadResult& workload, std::string& out) {
  out += "### " + MarkdownEscape(workload.name) + ": " + MarkdownEscape(ToString(workload.verdict)) +
         (IsWatched(workload) ? std::string()
                              : " (expected " + MarkdownEscape(ToString(workload.expectation)) +
                                    ", " + std::string(OutcomeLabel(WorkloadOutcome(workload))) +
                                    ")") +
         "\n\n";
  if (!workload.description.empty()) out += MarkdownEscape(workload.description) + "\n\n";
  out += "> " +
         (workload.evidence.empty() ? std::string("(no evidence recorded)")
                                    : MarkdownEscape(workload.evidence)) +
         "\n\n";
  if (const std::string growth = GrowthText(workload); !growth.empty()) {
    out += "Caught by: " + MarkdownEscape(growth) + "\n\n";
  }
  if (const std::string owner = TopOwnerText(workload);
      !owner.empty() && workload.verdict != kPass) {
    out += "Top " + std::string(TopOwnerKind(workload)) + ": " + MarkdownEscape(owner) + "\n\n";
  }
  if (workload.peak_bound_bytes) {
    out += "Peak " + FormatBytes(workload.peak_bytes) +
           " depends on how the sessions' threads interleave; its schedule-independent bound "
           "(the sum of each session's own peak) is " +
           FormatBytes(*workload.peak_bound_bytes) + ", and diff judges the peak on the bound.\n\n";
  }
  if (!workload.counters.empty()) {
    out += "Counter verdicts:\n\n";
    AppendHeader(
        out, {"Counter", "Verdict", "Slope/step", "Bound", "Baseline", "Final", "Peak", "Evidence"},
        {false, false, true, true, true, true, true, false});
    for (const CounterVerdict& counter : workload.counters) {
      const std::string unit = CounterUnit(workload, counter.counter);
      AppendRow(
          out,
          {MarkdownEscape(counter.counter),
           counter.judged ? MarkdownEscape(ToString(counter.verdict)) : std::string("not judged"),
           FormatRate(counter.slope_per_step, unit),
           counter.slope_bound > 0 ? FormatRate(counter.slope_bound, unit) : std::string("-"),
           IsWatched(workload) ? std::string("-") : FormatInUnit(counter.baseline, unit),
           FormatInUnit(counter.final_value, unit),
           FormatInUnit(counter.peak, unit), MarkdownEscape(counter.evidence)});
    }
    out += "\n";
  }
  if (workload.attribution.empty()) {
    out += "Nothing attributed as outstanding at the last block end.\n\n";
    return;
  }
  out += "Growing and outstanding at the last block end (growing: survivors from every block in "
         "the row's own census where it has one, else live bytes rose at every block end; "
         "fastest first):\n\n";
  AppendHeader(out,
               {"Op", "Role", "Scope", "Growth", "Rose at", "Census (survivors by block)", "Bytes",
                "Allocations", "Age (steps)"},
               {false, false, false, true, true, false, true, true, true});
  for (const Attribution& row : workload.attribution) {
    AppendRow(out, {MarkdownEscape(row.op), MarkdownEscape(row.role), MarkdownEscape(row.scope),
                    row.bytes_per_step > 0 ? FormatRate(row.bytes_per_step, "bytes", true)
                                           : std::string("-"),
                    FormatRoseAt(row), MarkdownEscape(FormatRowCensus(row)),
                    FormatBytes(static_cast<double>(row.bytes)),
                    FormatCount(static_cast<double>(row.allocations)), FormatAgeSteps(row)});
  }
  out += "\n";
}

void AppendBenchmarks(const Report& report, std::string& out) {
  if (report.benchmarks.empty()) return;
  out += "## Benchmarks\n\n";
  AppendHeader(out, {"Figure", "Value"}, {false, true});
  for (const BenchmarkFigure& figure : report.benchmarks) {
    AppendRow(out, {MarkdownEscape(figure.name), MarkdownEscape(FormatFigure(figure))});
  }
  out += "\n";
}

}  // namespace

std::string MarkdownEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    switch (c) {
      case '|':
      case '\\':
      case '`':
      case '*':
      case '[':
      case ']':
      case '<':
      case '>':
        out += '\\';
        out += c;
        break;
      case '\r':
        if (i + 1 < text.size() && text[i + 1] == '\n') break;  // CRLF -> one space
        out += ' ';
        break;
      case '\n':
        out += ' ';
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderMarkdown(const Report& report) {
  std::string out;
  AppendMetadata(report, out);
  AppendResultLine(report, out);
  AppendSummary(report, out);
  AppendDetection(report, out);
  bool any_detail = false;
  for (const WorkloadResult& workload : report.workloads) {
    if (workload.verdict == kPass && workload.met_expectation) continue;
    if (!any_detail) out += "## Details\n\n";
    any_detail = true;
    AppendWorkloadDetail(workload, out);
  }
  AppendBenchmarks(report, out);
  return out;
}

}  // namespace leakbound::reports
