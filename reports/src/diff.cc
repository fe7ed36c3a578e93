// Metric-by-metric comparison of two reports (see diff.h). Builds DiffRows first, then renders
// them, so the counts and the Markdown can never disagree.

#include "leakbound/reports/diff.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "leakbound/reports/format.h"
#include "leakbound/reports/markdown.h"

namespace leakbound::reports {
namespace {

// "5%" / "50%" / "0%": a tolerance as the user configured it.
std::string TolerancePercent(double ratio) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g%%", ratio * 100);
  return buffer;
}

struct MetricRule {
  const char* metric;
  double WorkloadResult::*field;
  std::string (*format)(double);
  std::string (*format_signed)(double);
  double relative;
  double absolute;
  std::string (*format_allowance)(double);
};

DiffRow CompareMetric(const std::string& workload, const MetricRule& rule, double base_value,
                      double new_value) {
  DiffRow row;
  row.workload = workload;
  row.metric = rule.metric;
  row.base_value = base_value;
  row.new_value = new_value;
  row.base_text = rule.format(base_value);
  row.new_text = rule.format(new_value);
  if (!std::isfinite(base_value) || !std::isfinite(new_value)) {
    row.delta_text = "n/a";
    row.percent_text = "n/a";
    row.status = DiffStatus::kNotMeasured;
    row.reason = "not measured in one of the reports";
    return row;
  }
  const double delta = new_value - base_value;
  row.delta_text = delta == 0 ? rule.format(0) : rule.format_signed(delta);
  row.percent_text = base_value != 0 ? FormatSignedPercent(delta / std::fabs(base_value))
                     : delta == 0    ? "0.0%"
                                     : "n/a";
  // Strictly past the allowance: a change exactly at the tolerance is accepted.
  const double allowed = std::max(rule.relative * std::fabs(base_value), rule.absolute);
  const std::string tolerance_text =
      "tolerance " + TolerancePercent(rule.relative) +
      (rule.absolute > 0 ? " or " + rule.format_allowance(rule.absolute) : std::string());
  if (delta > allowed) {
    row.status = DiffStatus::kRegression;
    row.reason = "grew past " + tolerance_text;
  } else if (-delta > allowed) {
    row.status = DiffStatus::kImprovement;
    row.reason = "shrank past " + tolerance_text;
  }
  return row;
}

// What caught a leak and who holds the memory: the line a reviewer reads first.
std::string LeakEvidence(const WorkloadResult& workload) {
  std::string evidence = GrowthText(workload);
  const std::string owner = TopOwnerText(workload);
  if (!owner.empty()) {
    evidence += (evidence.empty() ? "" : "; ") + ("top " + std::string(TopOwnerKind(workload)) +
                                                  ": " + owner);
  }
  return evidence;
}

std::string VerdictText(const WorkloadResult& workload) {
  return ToString(workload.verdict) +
         (workload.met_expectation ? " (met)" : " (expectation missed)");
}

DiffRow CompareVerdicts(const WorkloadResult& base, const WorkloadResult& fresh) {
  DiffRow row;
  row.workload = base.name;
  row.metric = "verdict";
  row.base_text = VerdictText(base);
  row.new_text = VerdictText(fresh);
  row.delta_text = "-";
  row.percent_text = "-";
  if (base.met_expectation && !fresh.met_expectation) {
    row.status = DiffStatus::kRegression;
    row.reason = "met its expectation (" + ToString(base.expectation) + ") before, misses it now";
  } else if (!base.met_expectation && fresh.met_expectation) {
    row.status = DiffStatus::kImprovement;
    row.reason = "meets its expectation (" + ToString(fresh.expectation) + ") now";
  } else if (base.verdict == kPass && fresh.verdict != kPass) {
    row.status = DiffStatus::kRegression;
    row.reason = "was PASS, now " + ToString(fresh.verdict);
  } else if (base.verdict != fresh.verdict) {
    row.status = DiffStatus::kNote;
    row.reason = "verdict changed";
  }
  if (row.status != DiffStatus::kUnchanged && fresh.verdict != kPass) {
    row.evidence = LeakEvidence(fresh);
    if (!fresh.attribution.empty() && Grows(fresh.attribution.front())) {
      row.stack = fresh.attribution.front().stack;
    }
  }
  return row;
}

// A row without numbers: a workload gone, new, not run or not baselined.
DiffRow TextRow(const std::string& workload, std::string metric, std::string base_text,
                std::string new_text, DiffStatus status, std::string reason) {
  DiffRow row;
  row.workload = workload;
  row.metric = std::move(metric);
  row.base_text = std::move(base_text);
  row.new_text = std::move(new_text);
  row.delta_text = "-";
  row.percent_text = "-";
  row.status = status;
  row.reason = std::move(reason);
  return row;
}

std::string ScheduleText(const WorkloadResult& workload) {
  return std::to_string(workload.warmup_steps) + " warm-up + " + std::to_string(workload.blocks) +
         " x " + std::to_string(workload.steps_per_block) + " steps";
}

std::string_view StatusText(DiffStatus status) {
  switch (status) {
    case DiffStatus::kUnchanged:
      return "ok";
    case DiffStatus::kRegression:
      return "**REGRESSION**";
    case DiffStatus::kImprovement:
      return "improved";
    case DiffStatus::kNote:
      return "note";
    case DiffStatus::kNotMeasured:
      return "not measured";
  }
  return "unknown";
}

// What the first lines say about the reports compared.
struct DiffHeader {
  std::string base_commits;  // "4598ec4", or "4598ec4, 1b2c3d4" for several baselines
  std::string fresh_commit;
  std::string device_class;
};

std::string Plural(int count, const char* noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

// "mlp_adam (steady live, peak), mlp_sgd (verdict)": the workloads of rows with `status`, in
// row order, each with its metrics; past six workloads the rest are counted.
std::string WorkloadsWith(const std::vector<DiffRow>& rows, bool unchecked_rows) {
  std::vector<std::pair<std::string, std::vector<std::string>>> workloads;
  for (const DiffRow& row : rows) {
    if (row.status != DiffStatus::kRegression) continue;
    if ((row.metric == "baseline") != unchecked_rows) continue;
    auto found = std::find_if(workloads.begin(), workloads.end(),
                              [&](const auto& w) { return w.first == row.workload; });
    if (found == workloads.end()) {
      workloads.push_back({row.workload, {}});
      found = workloads.end() - 1;
    }
    found->second.push_back(row.metric);
  }
  // A workload whose verdict regressed (a new leak) is named before those whose figures only
  // moved past a tolerance (a noisy step time), so that the first name is the one to look at.
  std::stable_partition(workloads.begin(), workloads.end(), [](const auto& w) {
    return std::find(w.second.begin(), w.second.end(), "verdict") != w.second.end();
  });
  constexpr std::size_t kNamed = 6;
  std::string text;
  for (std::size_t i = 0; i < workloads.size() && i < kNamed; ++i) {
    if (i > 0) text += ", ";
    text += MarkdownEscape(workloads[i].first);
    if (unchecked_rows) continue;
    text += " (";
    for (std::size_t m = 0; m < workloads[i].second.size(); ++m) {
      text += (m > 0 ? ", " : "") + MarkdownEscape(workloads[i].second[m]);
    }
    text += ")";
  }
  if (workloads.size() > kNamed)
    text += " and " + std::to_string(workloads.size() - kNamed) + " more";
  return text;
}

// The first line: the overall verdict, with the workloads that decided it.
std::string VerdictLine(const DiffHeader& header, const DiffResult& result) {
  std::string line = result.regressions > 0 ? "**REGRESSION**: "
                     : result.unchecked > 0 ? "**FAIL**: "
                                            : "**OK**: ";
  line += Plural(result.regressions, "regression");
  if (result.regressions > 0) line += " in " + WorkloadsWith(result.rows, false);
  line += ", ";
  if (result.unchecked > 0) {
    line += Plural(result.unchecked, "clean workload") + " without a baseline (" +
            WorkloadsWith(result.rows, true) + "), ";
  }
  line += Plural(result.improvements, "improvement") + ", " + Plural(result.notes, "note") +
          " (base " + MarkdownEscape(header.base_commits) + " -> new " +
          MarkdownEscape(header.fresh_commit) + ", device class " +
          MarkdownEscape(header.device_class) + ").\n\n";
  return line;
}

std::string RenderDiffMarkdown(const DiffHeader& header, const DiffTolerance& tolerance,
                               const DiffResult& result) {
  std::string out = VerdictLine(header, result);
  if (result.fresh_interrupted) {
    out +=
        "**Interrupted**: the new report was stopped by a signal before it finished; the "
        "workloads it did not reach are listed as \"not run\" and count as regressions. Rerun "
        "to completion before trusting this diff.\n\n";
  }
  if (result.base_interrupted) {
    out +=
        "**Interrupted baseline**: a baseline report was stopped by a signal before it "
        "finished; workloads it lacks are compared as new. Record the baseline again.\n\n";
  }
  out +=
      "Tolerances: live/peak bytes and allocations/step " + TolerancePercent(tolerance.relative) +
      " (floors " + FormatBytes(tolerance.absolute_bytes) + ", " +
      FormatCount(tolerance.absolute_allocations) + " allocations); step time " +
      (tolerance.compare_step_time ? TolerancePercent(tolerance.step_time_relative) + " (floor " +
                                         FormatDuration(tolerance.step_time_absolute_ns) + ")"
                                   : std::string("shown, not compared")) +
      (tolerance.compare_step_time && !tolerance.compare_watched_step_time
           ? " (a watched program's: shown, not compared)"
           : "") +
      ".\n\n";
  bool listed = false;
  for (const DiffRow& row : result.rows) {
    if (row.status != DiffStatus::kRegression) continue;
    if (!listed) out += "Regressions:\n\n";
    listed = true;
    out +=
        "- " + MarkdownEscape(row.workload) + ": " + MarkdownEscape(row.metric) + " " +
        MarkdownEscape(row.base_text) + " -> " + MarkdownEscape(row.new_text) +
        (row.percent_text.empty() || row.percent_text == "-" ? "" : " (" + row.percent_text + ")") +
        ", " + MarkdownEscape(row.reason) + "\n";
    if (!row.evidence.empty()) out += "  - evidence: " + MarkdownEscape(row.evidence) + "\n";
    if (!row.stack.empty()) {
      std::string stack;
      for (const std::string& frame : row.stack) {
        stack += (stack.empty() ? "" : " > ") + MarkdownEscape(frame);
      }
      out += "  - growing stack (outermost first): " + stack + "\n";
    }
  }
  if (listed) out += "\n";
  out += "| Workload | Metric | Base | New | Delta | Delta % | Status |\n";
  out += "|---|---|---:|---:|---:|---:|---|\n";
  for (const DiffRow& row : result.rows) {
    std::string status(StatusText(row.status));
    if (row.status != DiffStatus::kUnchanged && !row.reason.empty()) {
      status += " (" + MarkdownEscape(row.reason) + ")";
    }
    if (!row.evidence.empty()) status += "; " + MarkdownEscape(row.evidence);
    out += "| " + MarkdownEscape(row.workload) + " | " + MarkdownEscape(row.metric) + " | " +
           MarkdownEscape(row.base_text) + " | " + MarkdownEscape(row.new_text) + " | " +
           row.delta_text + " | " + row.percent_text + " | " + status + " |\n";
  }
  return out;
}

void CheckDeviceClasses(const Report& base, const Report& fresh) {
  if (base.meta.device_class == fresh.meta.device_class) return;
  throw ReportError(ReportErrorKind::kDeviceClassMismatch, "diff", "$.meta.device_class",
                    "diff: cannot compare reports from different device classes: base is \"" +
                        base.meta.device_class + "\" (" + base.meta.device + "), new is \"" +
                        fresh.meta.device_class + "\" (" + fresh.meta.device +
                        "); diff against the baseline under baselines/" + fresh.meta.device_class +
                        "/ or rerun on a " + base.meta.device_class + " machine");
}

void CountRows(DiffResult& result) {
  result.regressions = result.improvements = result.notes = result.unchecked = 0;
  for (const DiffRow& row : result.rows) {
    const bool regression = row.status == DiffStatus::kRegression;
    const bool unchecked = regression && row.metric == "baseline";
    result.unchecked += unchecked ? 1 : 0;
    result.regressions += regression && !unchecked ? 1 : 0;
    result.improvements += row.status == DiffStatus::kImprovement ? 1 : 0;
    result.notes += row.status == DiffStatus::kNote ? 1 : 0;
  }
  result.regression = result.regressions > 0 || result.unchecked > 0;
}

void AppendRows(const Report& base, const Report& fresh, const DiffTolerance& tolerance,
                DiffResult& result) {
  CheckDeviceClasses(base, fresh);
  result.fresh_interrupted = result.fresh_interrupted || fresh.meta.interrupted;
  result.base_interrupted = result.base_interrupted || base.meta.interrupted;
  const std::array<MetricRule, 4> rules = {
      MetricRule{"steady live", &WorkloadResult::steady_live_bytes, FormatBytes, FormatSignedBytes,
                 tolerance.relative, tolerance.absolute_bytes, FormatBytes},
      MetricRule{"peak", &WorkloadResult::peak_bytes, FormatBytes, FormatSignedBytes,
                 tolerance.relative, tolerance.absolute_bytes, FormatBytes},
      MetricRule{"allocs/step", &WorkloadResult::allocations_per_step, FormatCount,
                 FormatSignedCount, tolerance.relative, tolerance.absolute_allocations,
                 FormatCount},
      MetricRule{"step time", &WorkloadResult::step_time_ns, FormatDuration, FormatSignedDuration,
                 tolerance.step_time_relative, tolerance.step_time_absolute_ns, FormatDuration}};

  std::map<std::string, const WorkloadResult*> fresh_by_name;
  for (const WorkloadResult& workload : fresh.workloads) fresh_by_name[workload.name] = &workload;

  for (const WorkloadResult& base_workload : base.workloads) {
    const auto found = fresh_by_name.find(base_workload.name);
    if (found == fresh_by_name.end()) {
      const bool not_run = fresh.meta.interrupted;
      result.rows.push_back(
          TextRow(base_workload.name, "workload", VerdictText(base_workload),
                  not_run ? "not run" : "missing", DiffStatus::kRegression,
                  not_run ? "not run: the new report was interrupted before this workload finished"
                          : "in the baseline but not in the new report"));
      continue;
    }
    const WorkloadResult& fresh_workload = *found->second;
    fresh_by_name.erase(found);  // what is left at the end is new
    result.rows.push_back(CompareVerdicts(base_workload, fresh_workload));
    const bool peak_on_bound =
        base_workload.peak_bound_bytes.has_value() && fresh_workload.peak_bound_bytes.has_value();
    for (const MetricRule& rule : rules) {
      DiffRow row = CompareMetric(base_workload.name, rule, base_workload.*rule.field,
                                  fresh_workload.*rule.field);
      const bool watched = IsWatched(base_workload) && IsWatched(fresh_workload);
      if ((!tolerance.compare_step_time || (watched && !tolerance.compare_watched_step_time)) &&
          rule.field == &WorkloadResult::step_time_ns) {
        row.status = DiffStatus::kUnchanged;  // informational: timings of different machines
        result.rows.push_back(std::move(row));
        continue;
      }
      if (peak_on_bound && rule.field == &WorkloadResult::peak_bytes) {
        // Threads interleave differently from run to run, so the measured peak of a concurrent
        // workload moves without any change in the code: report its move, judge the bound.
        if (row.status == DiffStatus::kRegression || row.status == DiffStatus::kImprovement) {
          row.status = DiffStatus::kNote;
          row.reason = "schedule-dependent peak (threads interleave); judged on its bound";
        }
        result.rows.push_back(std::move(row));
        MetricRule bound_rule = rule;
        bound_rule.metric = "peak bound";
        result.rows.push_back(CompareMetric(base_workload.name, bound_rule,
                                            *base_workload.peak_bound_bytes,
                                            *fresh_workload.peak_bound_bytes));
        continue;
      }
      result.rows.push_back(std::move(row));
    }
    if (ScheduleText(base_workload) != ScheduleText(fresh_workload)) {
      DiffRow row;
      row.workload = base_workload.name;
      row.metric = "schedule";
      row.base_text = ScheduleText(base_workload);
      row.new_text = ScheduleText(fresh_workload);
      row.delta_text = "-";
      row.percent_text = "-";
      row.status = DiffStatus::kNote;
      row.reason = "different schedule: peak and step time may not be comparable";
      result.rows.push_back(std::move(row));
    }
  }
  // New workloads, in the fresh report's order.
  for (const WorkloadResult& workload : fresh.workloads) {
    if (fresh_by_name.count(workload.name) == 0) continue;
    fresh_by_name.erase(workload.name);  // a duplicated name is reported once
    DiffRow row = TextRow(workload.name, "workload", "absent", VerdictText(workload),
                          DiffStatus::kNote, "new workload, not in the baseline");
    result.rows.push_back(std::move(row));
  }
}

}  // namespace

DiffResult DiffReports(const Report& base, const Report& fresh, const DiffTolerance& tolerance) {
  DiffResult result;
  AppendRows(base, fresh, tolerance, result);
  CountRows(result);
  result.markdown = RenderDiffMarkdown(
      DiffHeader{base.meta.commit, fresh.meta.commit, base.meta.device_class}, tolerance, result);
  return result;
}

DiffResult DiffAgainstBaselines(const std::vector<Report>& baselines, const Report& fresh,
                                const DiffTolerance& tolerance, std::string_view baselines_folder) {
  DiffResult result;
  std::vector<std::string> base_commits;
  std::set<std::string> baselined;
  for (const Report& base : baselines) {
    if (std::find(base_commits.begin(), base_commits.end(), base.meta.commit) ==
        base_commits.end()) {
      base_commits.push_back(base.meta.commit);
    }
    Report fresh_part;
    fresh_part.meta = fresh.meta;
    for (const WorkloadResult& workload : fresh.workloads) {
      for (const WorkloadResult& base_workload : base.workloads) {
        if (workload.name == base_workload.name) fresh_part.workloads.push_back(workload);
      }
    }
    for (const WorkloadResult& base_workload : base.workloads) baselined.insert(base_workload.name);
    AppendRows(base, fresh_part, tolerance, result);
  }
  // A clean workload nobody baselined would pass CI unguarded: it fails the check.
  for (const WorkloadResult& workload : fresh.workloads) {
    if (workload.kind != "clean" || baselined.count(workload.name) > 0) continue;
    const std::string folder(baselines_folder);
    DiffRow row =
        TextRow(workload.name, "baseline", "none", VerdictText(workload), DiffStatus::kRegression,
                "Not checked (fails the check): clean workload without a baseline in " + folder +
                    "; add one with `leakbound check --baselines " + folder +
                    " --update` (rewrites all) after review");
    result.rows.push_back(std::move(row));
  }
  CountRows(result);
  std::string commits;
  constexpr std::size_t kNamedCommits = 3;
  for (std::size_t i = 0; i < base_commits.size() && i < kNamedCommits; ++i) {
    commits += (i > 0 ? ", " : "") + base_commits[i];
  }
  if (base_commits.size() > kNamedCommits) {
    commits += " and " + std::to_string(base_commits.size() - kNamedCommits) + " more";
  }
  if (commits.empty()) commits = "none";
  result.markdown = RenderDiffMarkdown(
      DiffHeader{commits, fresh.meta.commit, fresh.meta.device_class}, tolerance, result);
  return result;
}

}  // namespace leakbound::reports
