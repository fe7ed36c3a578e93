// Self-contained HTML rendering of a Report (see html.h). Layout: metadata, summary table, one
// card per workload (charts left, tables right on wide screens, stacked on narrow ones).
// A Content-Security-Policy meta tag forbids scripts and remote loads as a second line of defence
// behind escaping.

#include "leakbound/reports/html.h"

#include <cmath>
#include <string>
#include <vector>

#include "leakbound/reports/chart.h"
#include "leakbound/reports/format.h"

namespace leakbound::reports {
namespace {

constexpr const char* kStyle = R"css(
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 48px; background: #f8fafc; color: #111827;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
h1 { font-size: 22px; margin: 0 0 12px; }
h2 { font-size: 17px; margin: 0; word-break: break-all; }
h3 { font-size: 13px; margin: 14px 0 6px; color: #374151; text-transform: uppercase; letter-spacing: .04em; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
table { border-collapse: collapse; background: #fff; }
th, td { padding: 4px 8px; border-bottom: 1px solid #e5e7eb; text-align: left; vertical-align: top; }
th { background: #f3f4f6; font-weight: 600; font-size: 12.5px; color: #374151; white-space: nowrap; }
td.num, th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.meta { margin-bottom: 16px; background: none; }
.meta th { background: none; border: none; padding: 2px 16px 2px 0; color: #6b7280; font-weight: 500; }
.meta td { border: none; padding: 2px 0; }
.result { margin: 0 0 18px; padding: 10px 14px; border-radius: 6px; font-weight: 600; }
.result.ok { background: #dcfce7; color: #14532d; }
.result.bad { background: #fee2e2; color: #7f1d1d; }
.summary { width: 100%; border: 1px solid #e5e7eb; }
.summary a { color: #1d4ed8; text-decoration: none; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px;
  font-weight: 600; white-space: nowrap; border: 1px solid transparent; }
.badge.pass { background: #dcfce7; color: #166534; border-color: #86efac; }
.badge.info { background: #f3f4f6; color: #4b5563; border-color: #d1d5db; }
.badge.expected { background: #fef3c7; color: #92400e; border-color: #fcd34d; }
.badge.missed { background: #fee2e2; color: #991b1b; border-color: #fca5a5; }
.chip { display: inline-block; padding: 0 7px; border-radius: 4px; background: #e5e7eb;
  color: #374151; font-size: 12px; }
.card { background: #fff; border: 1px solid #e5e7eb; border-left: 5px solid #22c55e;
  border-radius: 8px; padding: 16px 20px; margin: 0 0 20px; }
.card.expected { border-left-color: #f59e0b; }
.card.missed { border-left-color: #ef4444; }
.card header { display: flex; flex-wrap: wrap; align-items: center; gap: 10px; margin-bottom: 6px; }
.card .expect { color: #6b7280; font-size: 13px; }
.desc { color: #4b5563; margin: 4px 0; }
.evidence { margin: 8px 0; padding: 8px 12px; background: #f9fafb; border-left: 3px solid #d1d5db; }
.facts { display: flex; flex-wrap: wrap; gap: 2px 18px; color: #374151; font-size: 13px; margin: 8px 0 4px; }
.facts span { white-space: nowrap; }
.scroll { overflow-x: auto; margin-bottom: 28px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 440px), 1fr));
  gap: 4px 24px; }
.charts .legend { grid-column: 1 / -1; }
.tables { min-width: 0; overflow-x: auto; }
.result.interrupted { background: #fef3c7; color: #78350f; }
.caught { margin: 6px 0; font-size: 13.5px; }
.caught b { color: #7f1d1d; }
figure { margin: 10px 0 0; }
figcaption { font-size: 13px; margin-bottom: 2px; }
figcaption .unit { color: #6b7280; margin-left: 6px; }
svg.chart { max-width: 100%; height: auto; display: block; background: #fff; }
svg.flame { max-width: 100%; height: auto; display: block; }
.legend { color: #6b7280; font-size: 12px; margin-top: 4px; }
.tables table { width: 100%; }
.tables td:first-child:not(.evidence-row) { white-space: nowrap; }
.summary td { white-space: nowrap; }
.tables td.evidence-row { color: #6b7280; font-size: 12.5px; padding-top: 0; border-bottom: 1px solid #e5e7eb; }
.tables tr.has-evidence td { border-bottom: none; }
.none { color: #6b7280; font-style: italic; }
footer { margin-top: 32px; color: #9ca3af; font-size: 12px; }
)css";

std::string BadgeClass(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPassed:
      return "pass";
    case Outcome::kExpectedDetection:
      return "expected";
    case Outcome::kMissed:
      return "missed";
  }
  return "missed";
}

std::string Badge(const std::string& css_class, const std::string& text) {
  return "<span class=\"badge " + css_class + "\">" + EscapeHtml(text) + "</span>";
}

// A counter's own verdict: green when it passed; amber when the workload is an expected zoo
// detection (the flag is the point of the entry); red otherwise.
std::string CounterBadge(const WorkloadResult& workload, const CounterVerdict& counter) {
  if (!counter.judged) return Badge("info", "not judged");
  if (counter.verdict == kPass) return Badge("pass", ToString(counter.verdict));
  return Badge(WorkloadOutcome(workload) == Outcome::kExpectedDetection ? "expected" : "missed",
               ToString(counter.verdict));
}

std::string Cell(const std::string& escaped, bool numeric = false) {
  return numeric ? "<td class=\"num\">" + escaped + "</td>" : "<td>" + escaped + "</td>";
}

std::string HeaderRow(const std::vector<std::string>& titles,
                      const std::vector<bool>& numeric = {}) {
  std::string row = "<tr>";
  for (std::size_t i = 0; i < titles.size(); ++i) {
    const bool is_numeric = i < numeric.size() && numeric[i];
    row += is_numeric ? "<th class=\"num\">" : "<th>";
    row += titles[i] + "</th>";
  }
  return row + "</tr>";
}

void AppendMetadata(const Report& report, std::string& out) {
  const RunMetadata& meta = report.meta;
  const auto row = [&out](const char* title, const std::string& escaped_value) {
    out += "<tr><th>" + std::string(title) + "</th><td>" + escaped_value + "</td></tr>";
  };
  out += "<h1>leakbound report</h1><table class=\"meta\">";
  row("Device", EscapeHtml(meta.device) + " <span class=\"chip\">" + EscapeHtml(meta.device_class) +
                    "</span>");
  row("Commit", "<code>" + EscapeHtml(meta.commit) + "</code>");
  row("Compiler", EscapeHtml(meta.compiler));
  row("Build type", EscapeHtml(meta.build_type));
  row("Schedule", std::to_string(meta.blocks) + " blocks &times; " +
                      std::to_string(meta.steps_per_block) + " steps, warm-up " +
                      (meta.warmup_steps < 0 ? std::string("auto-detected")
                                             : std::to_string(meta.warmup_steps) + " steps"));
  if (const std::string settings = SettingsText(meta); !settings.empty()) {
    row("Settings", EscapeHtml(settings));
  }
  if (const std::string floors = NoiseFloorText(report); !floors.empty()) {
    row("Noise floors", EscapeHtml(floors) +
                            " <span class=\"chip\">one per noisy counter, "
                            "used by every workload</span>");
  }
  row("Host", EscapeHtml(meta.hostname));
  row("Started", EscapeHtml(meta.started_at) + " (wall " +
                     EscapeHtml(FormatDuration(meta.wall_seconds * 1e9)) + ")");
  row("leakbound",
      EscapeHtml(meta.tool_version) + ", report schema " + std::to_string(report.schema_version));
  out += "</table>";

  int missed = 0;
  for (const WorkloadResult& workload : report.workloads)
    missed += workload.met_expectation ? 0 : 1;
  const std::string total = std::to_string(report.workloads.size());
  if (meta.interrupted) {
    out += WatchedResult(report).empty()
               ? "<p class=\"result interrupted\">INTERRUPTED: the run was stopped by a signal; "
                 "only the " +
                     total +
                     (report.workloads.size() == 1 ? " workload that finished is"
                                                   : " workloads that finished are") +
                     " in this report, and the rest were not run.</p>"
               : std::string("<p class=\"result interrupted\">INTERRUPTED: watch was stopped by "
                             "a signal, which it forwarded to the program; the steps that "
                             "arrived before it are judged below.</p>");
  }
  if (const std::string watched = WatchedResult(report); !watched.empty()) {
    const bool ok = missed == 0;
    out += std::string("<p class=\"result ") + (ok ? "ok" : "bad") + "\">Result: " +
           EscapeHtml(watched) + ".</p>";
  } else if (missed == 0) {
    out += report.workloads.size() == 1
               ? std::string("<p class=\"result ok\">The workload met its expectation.</p>")
               : "<p class=\"result ok\">All " + total + " workloads met their expectation.</p>";
  } else {
    out += "<p class=\"result bad\">" + std::to_string(missed) + " of " + total +
           " workloads did not meet their expectation.</p>";
  }
}

// Leaks first: missed expectations, then expected detections, then passes; report order within.
std::vector<std::size_t> LeaksFirst(const Report& report) {
  std::vector<std::size_t> order;
  for (Outcome outcome : {Outcome::kMissed, Outcome::kExpectedDetection, Outcome::kPassed}) {
    for (std::size_t i = 0; i < report.workloads.size(); ++i) {
      if (WorkloadOutcome(report.workloads[i]) == outcome) order.push_back(i);
    }
  }
  return order;
}

// The counter a workload is summarised by: the one that caught it, else runtime live bytes.
struct SummaryFigures {
  std::string counter;  // empty: runtime live bytes (steady_live_bytes)
  std::string growth;   // "+16400 B/step", "-" for a PASS
  std::string steady;   // the counter's value at the last block end
};

SummaryFigures FiguresOf(const WorkloadResult& workload) {
  SummaryFigures figures{"", "-", FormatBytes(workload.steady_live_bytes)};
  const CounterVerdict* caught = CaughtBy(workload);
  if (caught == nullptr) return figures;
  const std::string unit = CounterUnit(workload, caught->counter);
  figures.counter = caught->counter;
  figures.growth = caught->verdict == kUnboundedGrowth
                       ? FormatRate(caught->slope_per_step, unit, true)
                       : GrowthText(workload).substr(caught->counter.size() + 1);
  // Above the counter's baseline at the last block end, like steady_live_bytes (which runtime
  // live bytes keep as their figure).
  const double steady = caught->counter == "runtime.live_bytes"
                            ? workload.steady_live_bytes
                            : SteadyValue(workload, caught->counter) - caught->baseline;
  if (std::isfinite(steady)) figures.steady = FormatInUnit(steady, unit);
  return figures;
}

void AppendSummary(const Report& report, std::string& out) {
  out += "<div class=\"scroll\"><table class=\"summary\">";
  out += HeaderRow({"Workload", "Kind", "Verdict", "Met?", "Caught by", "Growth",
                    "Steady above baseline", "Peak", "Allocs/step", "Step time"},
                   {false, false, false, false, false, true, true, true, true, true});
  for (std::size_t i : LeaksFirst(report)) {
    const WorkloadResult& workload = report.workloads[i];
    const SummaryFigures figures = FiguresOf(workload);
    out += "<tr>";
    out += Cell("<a href=\"#w" + std::to_string(i) + "\"><code>" + EscapeHtml(workload.name) +
                "</code></a>");
    out += Cell(EscapeHtml(workload.kind));
    out += Cell(Badge(BadgeClass(WorkloadOutcome(workload)), ToString(workload.verdict)));
    out += Cell(IsWatched(workload)     ? std::string("-")
                : workload.met_expectation ? std::string("yes")
                                           : "<strong>no</strong>, expected " +
                                                 EscapeHtml(ToString(workload.expectation)));
    out += Cell(figures.counter.empty() ? std::string("-")
                                        : "<code>" + EscapeHtml(figures.counter) + "</code>");
    out += Cell(EscapeHtml(figures.growth), true);
    out += Cell(EscapeHtml(figures.steady), true);
    out += Cell(EscapeHtml(FormatBytes(workload.peak_bytes)), true);
    out += Cell(EscapeHtml(FormatCount(workload.allocations_per_step)), true);
    out += Cell(EscapeHtml(FormatDuration(workload.step_time_ns)), true);
    out += "</tr>";
  }
  out += "</table></div>";
}

void AppendCounterTable(const WorkloadResult& workload, std::string& out) {
  out += "<h3>Counter verdicts</h3>";
  if (workload.counters.empty()) {
    out += "<p class=\"none\">No counter verdicts recorded.</p>";
    return;
  }
  out += "<table>";
  // Counter and verdict share a cell: the table must fit beside the charts.
  out += HeaderRow({"Counter / verdict", "Slope", "Noise floor", "Baseline", "Final", "Peak"},
                   {false, true, true, true, true, true});
  for (const CounterVerdict& counter : workload.counters) {
    const std::string unit = CounterUnit(workload, counter.counter);
    const bool has_evidence = !counter.evidence.empty();
    out += has_evidence ? "<tr class=\"has-evidence\">" : "<tr>";
    out += Cell("<code>" + EscapeHtml(counter.counter) + "</code><br>" +
                CounterBadge(workload, counter));
    out += Cell(EscapeHtml(FormatRate(counter.slope_per_step, unit)), true);
    out += Cell(counter.slope_bound > 0 ? EscapeHtml(FormatRate(counter.slope_bound, unit))
                                        : std::string("-"),
                true);
    // A watched program's counters have no baseline (judge: baseline = the last sample).
    out += Cell(IsWatched(workload) ? std::string("-")
                                    : EscapeHtml(FormatInUnit(counter.baseline, unit)),
                true);
    for (double value : {counter.final_value, counter.peak}) {
      out += Cell(EscapeHtml(FormatInUnit(value, unit)), true);
    }
    out += "</tr>";
    if (has_evidence) {
      out += "<tr><td class=\"evidence-row\" colspan=\"6\">" + EscapeHtml(counter.evidence) +
             "</td></tr>";
    }
  }
  out += "</table>";
}

void AppendAttributionTable(const WorkloadResult& workload, std::string& out) {
  if (const std::string flame = RenderGrowthFlameSvg(workload.attribution); !flame.empty()) {
    out += "<h3>What grows, by stack</h3>" + flame;
  }
  out += "<h3>Growing and outstanding at the last block end</h3>";
  if (workload.attribution.empty()) {
    out += "<p class=\"none\">Nothing attributed as outstanding.</p>";
    return;
  }
  out += "<table>";
  out += HeaderRow({"Op", "Role", "Scope", "Growth", "Rose at", "Census (survivors by block)",
                    "Bytes", "Allocations", "Age (steps)"},
                   {false, false, false, true, true, false, true, true, true});
  for (const Attribution& row : workload.attribution) {
    out += "<tr>";
    out += Cell("<code>" + EscapeHtml(row.op) + "</code>");
    out += Cell(EscapeHtml(row.role));
    out += Cell(EscapeHtml(row.scope));
    out += Cell(row.bytes_per_step > 0
                    ? EscapeHtml(FormatRate(row.bytes_per_step, "bytes", true))
                    : std::string("-"),
                true);
    out += Cell(EscapeHtml(FormatRoseAt(row)), true);
    out += Cell(EscapeHtml(FormatRowCensus(row)));
    out += Cell(EscapeHtml(FormatBytes(static_cast<double>(row.bytes))), true);
    out += Cell(EscapeHtml(FormatCount(static_cast<double>(row.allocations))), true);
    out += Cell(EscapeHtml(FormatAgeSteps(row)), true);
    out += "</tr>";
  }
  out += "</table>";
}

// A counter's census as a bar chart figure (chart.h); nothing for a counter without one.
void AppendSurvivors(const WorkloadResult& workload, const CounterVerdict& counter,
                     std::string& out) {
  if (counter.survivor_bytes.empty()) return;
  const std::size_t blocks = counter.survivor_bytes.size();
  out +=
      "<figure class=\"survivors\"><figcaption><code>" + EscapeHtml(counter.counter) +
      "</code>: survivors by birth block<span class=\"unit\">still live at the last block end, " +
      std::to_string(blocks) + (blocks == 1 ? " block" : " blocks") + "</span></figcaption>" +
      RenderSurvivorsSvg(counter.counter, counter.survivor_bytes,
                         CounterUnit(workload, counter.counter)) +
      "</figure>";
}

// One chart per series, each followed by the survivors of its counter; then the survivors of
// counters without a series.
void AppendCharts(const WorkloadResult& workload, std::string& out) {
  if (workload.series.empty()) out += "<p class=\"none\">No counter series recorded.</p>";
  for (const CounterSeries& series : workload.series) {
    ChartContext context;
    context.warmup_steps = workload.warmup_steps;
    context.block_ends = workload.block_ends;
    const CounterVerdict* verdict = nullptr;
    for (const CounterVerdict& counter : workload.counters) {
      if (counter.counter == series.name) verdict = &counter;
    }
    if (verdict != nullptr && !IsWatched(workload)) context.baseline = verdict->baseline;
    out += "<figure><figcaption><code>" + EscapeHtml(series.name) + "</code><span class=\"unit\">" +
           EscapeHtml(series.unit) + (series.exact ? ", exact" : ", noisy") + ", " +
           std::to_string(series.values.size()) +
           (series.values.size() == 1 ? " sample" : " samples") + "</span> ";
    if (verdict != nullptr) out += CounterBadge(workload, *verdict);
    out += "</figcaption>" + RenderSeriesSvg(series, context) + "</figure>";
    for (const CounterVerdict& counter : workload.counters) {
      if (counter.counter == series.name) AppendSurvivors(workload, counter, out);
    }
  }
  bool census = false;
  for (const CounterVerdict& counter : workload.counters) {
    census = census || !counter.survivor_bytes.empty();
    bool has_series = false;
    for (const CounterSeries& series : workload.series) {
      has_series = has_series || series.name == counter.counter;
    }
    if (!has_series) AppendSurvivors(workload, counter, out);
  }
  if (workload.series.empty() && !census) return;
  out += "<p class=\"legend\">";
  if (!workload.series.empty()) {
    out +=
        std::string("Shaded: warm-up. Dashed: block boundaries. ") +
        (IsWatched(workload) ? "No baseline: a watched program has no setup leakbound saw. "
                             : "Dotted: baseline before setup (named in a corner when outside the "
                               "plotted range). ") +
        "The y range is fitted to the samples; a narrow "
        "one is labelled as the change from the first sample. Series over 600 samples show each "
        "bucket's minimum and maximum.";
  }
  if (census) {
    out += std::string(workload.series.empty() ? "" : " ") +
           "Survivors by birth block: what each measured block allocated that is still live at "
           "the last block end (allocations for an allocation counter). The lighter, dashed last "
           "bar is the youngest block: at most one block old, not aged.";
  }
  out += "</p>";
}

void AppendCard(const WorkloadResult& workload, std::size_t index, std::string& out) {
  const Outcome outcome = WorkloadOutcome(workload);
  out += "<section class=\"card " + BadgeClass(outcome) + "\" id=\"w" + std::to_string(index) +
         "\"><header><h2><code>" + EscapeHtml(workload.name) + "</code></h2><span class=\"chip\">" +
         EscapeHtml(workload.kind) + "</span>" +
         Badge(BadgeClass(outcome), ToString(workload.verdict)) +
         (IsWatched(workload)
              ? std::string("<span class=\"expect\">a watched program</span>")
              : "<span class=\"expect\">expected " + EscapeHtml(ToString(workload.expectation)) +
                    " &middot; " + EscapeHtml(std::string(OutcomeLabel(outcome))) + "</span>") +
         "</header>";
  if (!workload.description.empty()) {
    out += "<p class=\"desc\">" + EscapeHtml(workload.description) + "</p>";
  }
  out +=
      "<p class=\"evidence\">" +
      (workload.evidence.empty() ? std::string("<span class=\"none\">No evidence recorded.</span>")
                                 : EscapeHtml(workload.evidence)) +
      "</p>";
  if (const std::string growth = GrowthText(workload); !growth.empty()) {
    out += "<p class=\"caught\">Caught by <b>" + EscapeHtml(growth) + "</b>";
    if (const std::string owner = TopOwnerText(workload); !owner.empty()) {
      out += " &middot; top " + std::string(TopOwnerKind(workload)) + ": " + EscapeHtml(owner);
    }
    out += "</p>";
  }
  out +=
      "<div class=\"facts\"><span>steady live <b>" +
      EscapeHtml(FormatBytes(workload.steady_live_bytes)) + "</b></span><span>peak <b>" +
      EscapeHtml(FormatBytes(workload.peak_bytes)) + "</b>" +
      (workload.peak_bound_bytes ? " (schedule-dependent; bound <b>" +
                                       EscapeHtml(FormatBytes(*workload.peak_bound_bytes)) + "</b>)"
                                 : std::string()) +
      // A watched program has no "before" and no probe leakbound timed: left out, not 0.
      (IsWatched(workload) ? std::string("</span>")
                           : "</span><span>baseline <b>" +
                                 EscapeHtml(FormatBytes(workload.baseline_live_bytes)) + "</b></span>") +
      "<span>final <b>" + EscapeHtml(FormatBytes(workload.final_live_bytes)) +
      "</b></span><span>allocs/step <b>" + EscapeHtml(FormatCount(workload.allocations_per_step)) +
      "</b></span><span>step <b>" + EscapeHtml(FormatDuration(workload.step_time_ns)) + "</b></span>" +
      (IsWatched(workload) ? std::string()
                           : "<span>probe <b>" + EscapeHtml(FormatDuration(workload.probe_time_ns)) +
                                 "</b></span>") +
      "<span>warm-up " + std::to_string(workload.warmup_steps) + " steps, " +
      std::to_string(workload.blocks) + " blocks &times; " +
      std::to_string(workload.steps_per_block) + " steps</span></div>";
  // Charts in a grid, tables below at full width: a table beside the charts was clipped.
  out += "<div class=\"charts\">";
  AppendCharts(workload, out);
  out += "</div><div class=\"tables\">";
  AppendCounterTable(workload, out);
  AppendAttributionTable(workload, out);
  out += "</div></section>";
}

void AppendBenchmarks(const Report& report, std::string& out) {
  if (report.benchmarks.empty()) return;
  out += "<h3>Benchmarks</h3><div class=\"scroll\"><table class=\"summary\">" +
         HeaderRow({"Figure", "Value"}, {false, true});
  for (const BenchmarkFigure& figure : report.benchmarks) {
    out += "<tr>" + Cell("<code>" + EscapeHtml(figure.name) + "</code>") +
           Cell(EscapeHtml(FormatFigure(figure)), true) + "</tr>";
  }
  out += "</table></div>";
}

}  // namespace

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderHtml(const Report& report) {
  std::string out;
  out.reserve(64 * 1024);
  out += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  out +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; img-src data:\">";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
  out += "<title>leakbound report: " + EscapeHtml(report.meta.device_class) + " " +
         EscapeHtml(report.meta.commit) + "</title><style>" + kStyle + "</style></head><body>\n";
  AppendMetadata(report, out);
  AppendSummary(report, out);
  for (std::size_t i : LeaksFirst(report)) {
    AppendCard(report.workloads[i], i, out);
    out += "\n";
  }
  AppendBenchmarks(report, out);
  out += "<footer>Generated by leakbound " + EscapeHtml(report.meta.tool_version) +
         ". Self-contained: no scripts, no network.</footer></body></html>\n";
  return out;
}

}  // namespace leakbound::reports
