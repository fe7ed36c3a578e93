// Human-readable numbers and labels for the Markdown, HTML and diff renderers: bytes with binary
// units, counts, durations, deltas, percentages, and how a workload's outcome is named. One place,
// so every view of a report agrees on how "1.50 MiB" is written and what "missed" means.
#pragma once

#include <string>
#include <string_view>

#include "leakbound/reports/report.h"

namespace leakbound::reports {

// Binary units, two decimals from KiB up, whole bytes below: "4 B", "1.50 KiB", "1.50 MiB",
// "-2.00 GiB". Fractional values under 1 KiB keep one decimal ("12.5 B"). NaN/inf -> "n/a".
std::string FormatBytes(double bytes);

// "+1.50 MiB" / "-4 B" / "0 B": FormatBytes with an explicit sign, for deltas.
std::string FormatSignedBytes(double bytes);

// Whole numbers with thousands separators ("1,234,567"), others with two decimals ("12.50").
std::string FormatCount(double count);

// "+12" / "-0.50" / "0": FormatCount with an explicit sign.
std::string FormatSignedCount(double count);

// Nanoseconds as "850 ns", "12.3 us", "4.56 ms", "1.23 s" (three significant digits).
std::string FormatDuration(double nanoseconds);

// Signed nanoseconds: "+1.20 ms".
std::string FormatSignedDuration(double nanoseconds);

// A ratio as a signed percentage with one decimal: 0.1 -> "+10.0%", -0.023 -> "-2.3%".
std::string FormatSignedPercent(double ratio);

// Axis labels: the unit a set of byte values should share ("B", "KiB", "MiB", ...) chosen from the
// largest magnitude, and a value written in that unit with at most 3 significant decimals and no
// trailing zeros: FormatBytesInUnit(1572864, "MiB") -> "1.5 MiB".
const char* ByteUnitFor(double largest_magnitude);
std::string FormatBytesInUnit(double bytes, const char* unit);

// Compact count for axis labels: 950 -> "950", 12500 -> "12.5k", 3000000 -> "3M".
std::string FormatCountCompact(double count);

// A value in a series unit: "bytes" -> FormatBytes, "ns" -> FormatDuration, else FormatCount.
std::string FormatInUnit(double value, std::string_view unit);
// "seed 1, BLAS threads 1, noise floors calibrated"; empty when the report records none of them.
std::string SettingsText(const RunMetadata& meta);

// A benchmark figure's value with its unit: "24.5 ms", "2.1 KiB/step", "0.0109%", "3.2 ratio".
std::string FormatFigure(const BenchmarkFigure& figure);

// The unit of counter `counter` in `workload`: its series' unit when there is one, else "bytes"
// for names ending in "bytes", else "count".
std::string CounterUnit(const WorkloadResult& workload, std::string_view counter);

// A per-step rate in a series unit, the way the judge writes it in evidence sentences, so a
// noise floor reads the same in every section: bytes as whole or one-decimal bytes
// ("1365.3 B/step", "32 B/step", "+16400 B/step" with `sign`), counts likewise ("1/step").
std::string FormatRate(double per_step, std::string_view unit, bool sign = false);

// The counter whose verdict decided the workload's: the first judged counter whose verdict is
// the workload's verdict, else the first judged counter that is not PASS; null for a PASS.
const CounterVerdict* CaughtBy(const WorkloadResult& workload);

// The value of `counter` at the last measured block end (its series sample there), or NaN when
// the workload has no such series or block end.
double SteadyValue(const WorkloadResult& workload, std::string_view counter);

// "host.heap_bytes +16400 B/step (noise floor 1365.3 B/step)" for the counter that caught the
// workload; empty for a PASS.
std::string GrowthText(const WorkloadResult& workload);

// Whether a row grows: its own census says growth or recurring (Attribution::census), or,
// without one, its live bytes rose at every measured block end (Attribution::rose_at).
bool Grows(const Attribution& row);
// "growth: 2.3 KiB, 2.3 KiB, 2.4 KiB" (a row's census outcome and survivors by block), or "-".
std::string FormatRowCensus(const Attribution& row);
// Its survivors alone: "2.3 KiB, 2.3 KiB, 2.4 KiB (blocks 2-)"; empty when it has none.
std::string FormatRowSurvivors(const Attribution& row);

// The first attribution row, the top owner: "smallest_leak_flag (user, scope none): 112 B in 112
// allocations", and for a growing one "... scope none): +24 B/step, rose at 2 of 2 block ends;
// 4.69 KiB in 200 allocations"; empty when nothing is attributed. Not Markdown-escaped.
std::string TopOwnerText(const WorkloadResult& workload);
// "growing" when the first attribution row grows, else "outstanding" (for "Top growing: ...").
std::string_view TopOwnerKind(const WorkloadResult& workload);

// Rose-at cell: "2 of 2" (block ends at which a row's live bytes rose), "-" with one block end.
std::string FormatRoseAt(const Attribution& row);

// The noise floors of a report, one per noisy counter that has one (the suite calibrates one
// floor per counter for the whole run): "host.heap_bytes 1365.3 B/step, host.rss_bytes ...";
// empty when none was calibrated.
std::string NoiseFloorText(const Report& report);

// How a workload's verdict relates to its expectation; decides badge colours and which workloads
// get a detail section.
enum class Outcome {
  kPassed,             // verdict PASS, as expected (clean and trap workloads)
  kExpectedDetection,  // a zoo entry whose planted leak was found: the harness works
  kMissed,             // the expectation was not met: a real leak, a false positive or a miss
};
Outcome WorkloadOutcome(const WorkloadResult& workload);
std::string_view OutcomeLabel(Outcome outcome);  // "passed", "expected detection", "MISSED"

// Counters flagged on a workload that should have passed (clean/trap): the number of counter
// verdicts that are not PASS, at least 1 when the workload verdict itself is not PASS. 0 for zoo.
int FalsePositives(const WorkloadResult& workload);

// A program `leakbound watch` ran: it has no expectation (it leaks or it does not), so the
// renderers show no "expected", "met?" or false-positive count for it.
bool IsWatched(const WorkloadResult& workload);
// A verdict about memory (a leak or a budget overrun): neither PASS nor "no verdict"
// (inconclusive, error). The one test of "a leak was found" for exit codes and result lines.
bool IsMemoryFinding(VerdictClass verdict);
// The result line of a report whose workloads are all watched programs: "a leak was found",
// "no leak was found", "no verdict: ..."; empty when some workload is not watched.
std::string WatchedResult(const Report& report);

// Age range of outstanding allocations: "7" or "3-12" (newest-oldest, in steps).
std::string FormatAgeSteps(const Attribution& row);

}  // namespace leakbound::reports
