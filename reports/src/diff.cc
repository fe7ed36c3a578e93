// Metric-by-metric comparison of two reports (see diff.h). Builds DiffRows first, then renders
// them, so the counts and the Markdown can never disagree.

#include "leakbound/reports/diff.h"

#include <algorithm>
#include <cmath>
#include <array>
#include <cstdio>
#include <map>
#include <string>

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

std::string VerdictText(const WorkloadResult& workload) {
  return ToString(workload.verdict) + (workload.met_expectation ? " (met)" : " (expectation missed)");
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

std::string RenderDiffMarkdown(const Report& base, const Report& fresh,
                               const DiffTolerance& tolerance, const DiffResult& result) {
  std::string out;
  const std::string counts = std::to_string(result.regressions) + " regression" +
                             (result.regressions == 1 ? "" : "s") + ", " +
                             std::to_string(result.improvements) + " improvement" +
                             (result.improvements == 1 ? "" : "s") + ", " +
                             std::to_string(result.notes) + " note" +
                             (result.notes == 1 ? "" : "s");
  out += result.regression ? "**REGRESSION**: " : "**OK**: ";
  out += counts + " (base " + MarkdownEscape(base.meta.commit) + " -> new " +
         MarkdownEscape(fresh.meta.commit) + ", device class " +
         MarkdownEscape(base.meta.device_class) + ").\n\n";
  out += "Tolerances: live/peak bytes and allocations/step " +
         TolerancePercent(tolerance.relative) + " (floors " +
         FormatBytes(tolerance.absolute_bytes) + ", " + FormatCount(tolerance.absolute_allocations) +
         " allocations); step time " +
         (tolerance.compare_step_time
              ? TolerancePercent(tolerance.step_time_relative) + " (floor " +
                    FormatDuration(tolerance.step_time_absolute_ns) + ")"
              : std::string("shown, not compared")) +
         ".\n\n";
  bool listed = false;
  for (const DiffRow& row : result.rows) {
    if (row.status != DiffStatus::kRegression) continue;
    if (!listed) out += "Regressions:\n\n";
    listed = true;
    out += "- " + MarkdownEscape(row.workload) + ": " + MarkdownEscape(row.metric) + " " +
           MarkdownEscape(row.base_text) + " -> " + MarkdownEscape(row.new_text) +
           (row.percent_text.empty() || row.percent_text == "-" ? "" : " (" + row.percent_text + ")") +
           ", " + MarkdownEscape(row.reason) + "\n";
  }
  if (listed) out += "\n";
  out += "| Workload | Metric | Base | New | Delta | Delta % | Status |\n";
  out += "|---|---|---:|---:|---:|---:|---|\n";
  for (const DiffRow& row : result.rows) {
    std::string status(StatusText(row.status));
    if (row.status != DiffStatus::kUnchanged && !row.reason.empty()) {
      status += " (" + MarkdownEscape(row.reason) + ")";
    }
    out += "| " + MarkdownEscape(row.workload) + " | " + MarkdownEscape(row.metric) + " | " +
           MarkdownEscape(row.base_text) + " | " + MarkdownEscape(row.new_text) + " | " +
           row.delta_text + " | " + row.percent_text + " | " + status + " |\n";
  }
  return out;
}

}  // namespace

DiffResult DiffReports(const Report& base, const Report& fresh, const DiffTolerance& tolerance) {
  if (base.meta.device_class != fresh.meta.device_class) {
    throw ReportError(
        ReportErrorKind::kDeviceClassMismatch, "diff", "$.meta.device_class",
        "diff: cannot compare reports from different device classes: base is \"" +
            base.meta.device_class + "\" (" + base.meta.device + "), new is \"" +
            fresh.meta.device_class + "\" (" + fresh.meta.device +
            "); diff against the baseline under baselines/" + fresh.meta.device_class +
            "/ or rerun on a " + base.meta.device_class + " machine");
  }
  const std::array<MetricRule, 4> rules = {
      MetricRule{"steady live", &WorkloadResult::steady_live_bytes, FormatBytes,
                 FormatSignedBytes, tolerance.relative, tolerance.absolute_bytes, FormatBytes},
      MetricRule{"peak", &WorkloadResult::peak_bytes, FormatBytes, FormatSignedBytes,
                 tolerance.relative, tolerance.absolute_bytes, FormatBytes},
      MetricRule{"allocs/step", &WorkloadResult::allocations_per_step, FormatCount,
                 FormatSignedCount, tolerance.relative, tolerance.absolute_allocations,
                 FormatCount},
      MetricRule{"step time", &WorkloadResult::step_time_ns, FormatDuration,
                 FormatSignedDuration, tolerance.step_time_relative,
                 tolerance.step_time_absolute_ns, FormatDuration}};

  DiffResult result;
  std::map<std::string, const WorkloadResult*> fresh_by_name;
  for (const WorkloadResult& workload : fresh.workloads) fresh_by_name[workload.name] = &workload;

  for (const WorkloadResult& base_workload : base.workloads) {
    const auto found = fresh_by_name.find(base_workload.name);
    if (found == fresh_by_name.end()) {
      DiffRow row;
      row.workload = base_workload.name;
      row.metric = "workload";
      row.base_text = VerdictText(base_workload);
      row.new_text = "missing";
      row.delta_text = "-";
      row.percent_text = "-";
      row.status = DiffStatus::kRegression;
      row.reason = "in the baseline but not in the new report";
      result.rows.push_back(std::move(row));
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
      if (!tolerance.compare_step_time && rule.field == &WorkloadResult::step_time_ns) {
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
    DiffRow row;
    row.workload = workload.name;
    row.metric = "workload";
    row.base_text = "absent";
    row.new_text = VerdictText(workload);
    row.delta_text = "-";
    row.percent_text = "-";
    row.status = DiffStatus::kNote;
    row.reason = "new workload, not in the baseline";
    result.rows.push_back(std::move(row));
  }

  for (const DiffRow& row : result.rows) {
    result.regressions += row.status == DiffStatus::kRegression ? 1 : 0;
    result.improvements += row.status == DiffStatus::kImprovement ? 1 : 0;
    result.notes += row.status == DiffStatus::kNote ? 1 : 0;
  }
  result.regression = result.regressions > 0;
  result.markdown = RenderDiffMarkdown(base, fresh, tolerance, result);
  return result;
}

}  // namespace leakbound::reports
