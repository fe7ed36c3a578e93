// Metric-by-metric comparison of a fresh report against a baseline, with tolerances, for CI:
// `leakbound diff` prints DiffResult::markdown and exits non-zero when DiffResult::regression.
// Memory figures are exact counters, so their tolerance is tight; step time is noisy, so its
// tolerance is loose and it never fails a run on small jitter.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "leakbound/reports/report.h"
#include "leakbound/reports/report_error.h"

namespace leakbound::reports {

// A metric change counts only when it is larger than max(relative * |base|, absolute): the
// relative part scales with the workload, the absolute part ignores changes too small to matter.
struct DiffTolerance {
  // Steady live bytes, peak bytes and allocations per step: exact allocator figures, so any
  // change past 5% is a real change in what the runtime keeps or allocates.
  double relative = 0.05;
  // Byte floor for steady live and peak. 0: with exact counters, growth from 0 B is a change
  // worth seeing (e.g. a workload that now keeps something alive across steps).
  double absolute_bytes = 0;
  // Floor for allocations per step (a count).
  double absolute_allocations = 0;
  // Step time (median over measured steps) is wall-clock and noisy on shared CI machines: only
  // a slowdown past +50% and past 1 us counts.
  double step_time_relative = 0.5;
  double step_time_absolute_ns = 1000;
  // False: step time is shown but never judged (check against baselines recorded on another
  // machine, where a timing comparison means nothing).
  bool compare_step_time = true;
  // False: a watched program's step time (a workload of kind "watched" on both sides) is shown
  // but not judged. Its steps are the program's own, timed with watch's markers on a machine
  // the diff knows nothing of: one allocation more a step moves a microsecond step past +50%
  // (`leakbound diff` sets this unless --time-tolerance is given).
  bool compare_watched_step_time = true;
};

enum class DiffStatus {
  kUnchanged,    // equal or within tolerance
  kRegression,   // worse past tolerance, a verdict that got worse, or a workload gone missing
  kImprovement,  // better past tolerance, or a verdict that got better
  kNote,         // worth reading but not a regression: new workload, a changed schedule, ...
  kNotMeasured,  // a side is null ("not measured"): nothing to compare
};

// One line of the diff table.
struct DiffRow {
  std::string workload;
  std::string metric;  // "steady live", "peak", "allocs/step", "step time", "verdict", ...
  std::optional<double> base_value;  // numeric metrics only
  std::optional<double> new_value;
  std::string base_text;  // as printed ("1.50 MiB", "PASS (met)")
  std::string new_text;
  std::string delta_text;    // "+102.40 KiB", "-" for non-numeric rows
  std::string percent_text;  // "+10.0%", "n/a" when the base is 0
  DiffStatus status = DiffStatus::kUnchanged;
  std::string reason;  // why the status, for regression/improvement/note rows
  // For a verdict row whose new verdict is not PASS: what caught it (counter, rate, noise floor)
  // and the top outstanding owner, e.g. "host.heap_bytes +16400 B/step (noise floor
  // 1365.3 B/step); top outstanding: param (parameter, scope none): 37.54 KiB in 4
  // allocations". Empty otherwise. Not Markdown-escaped.
  std::string evidence;
  // With that evidence, when the top owner grows and its stack is known (a watched program's
  // call site): the stack, outermost frame first. The Markdown lists it under the evidence.
  std::vector<std::string> stack;
};

struct DiffResult {
  std::string markdown;  // verdict line, list of regressions, full table
  bool regression = false;
  int regressions = 0;   // rows with DiffStatus::kRegression
  int improvements = 0;  // rows with DiffStatus::kImprovement
  int notes = 0;         // rows with DiffStatus::kNote
  int unchecked = 0;     // clean workloads without a baseline (DiffAgainstBaselines only)
  // The new report (or a baseline) was interrupted: workloads it lacks were not run, and count
  // as regressions ("not run"), never as OK.
  bool fresh_interrupted = false;
  bool base_interrupted = false;
  std::vector<DiffRow> rows;
};

// Compares workloads by name. Rules:
//   - steady live bytes, peak bytes, allocations per step: worse past `relative`/`absolute_*`
//     is a regression, better past it an improvement;
//   - step time: same, with `step_time_relative`/`step_time_absolute_ns`;
//   - verdicts, first rule that applies: a met expectation that became unmet is a regression and
//     the reverse an improvement (a zoo entry going from PASS to its planted class is fixed
//     detection); PASS that became anything else is a regression; any other change is a note;
//   - a workload in `base` but not in `fresh` is a regression; one only in `fresh` is a note.
//   - an interrupted new report (meta.interrupted) lacks the workloads it did not reach: each is
//     a regression row saying "not run (the new report was interrupted)".
// The Markdown's first line is the overall verdict: "**REGRESSION**: 2 regressions in
// mlp_adam (steady live, peak), 0 improvements, 1 note (base ... -> new ..., device class cpu)."
// Throws ReportError kDeviceClassMismatch when meta.device_class differs: figures from different
// devices are not comparable.
DiffResult DiffReports(const Report& base, const Report& fresh,
                       const DiffTolerance& tolerance = DiffTolerance{});

// `leakbound check`: diffs `fresh` against every baseline report (each holds some workloads;
// only those are compared from `fresh`) and merges the results into ONE document whose first
// line is the overall verdict over all of them: regressions counted and their workloads named,
// plus every clean workload of `fresh` that no baseline holds (a row with metric "baseline",
// status kRegression, counted in `unchecked` and not in `regressions`: it fails the check, since
// nothing guards it). `baselines_folder` is named in the hint to add one. Throws like
// DiffReports.
DiffResult DiffAgainstBaselines(const std::vector<Report>& baselines, const Report& fresh,
                                const DiffTolerance& tolerance, std::string_view baselines_folder);

}  // namespace leakbound::reports
