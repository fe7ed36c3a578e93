// Judge: Trace -> WorkloadResult, a pure function (no clocks, no probes, no I/O). Every rule is
// in docs/verdicts.md: exact counters flat across blocks (a rise must recur to be growth; a
// one-time rise is reported and the run judged on return to baseline), noisy counters by
// Theil-Sen against a floor, return to baseline, peak within budget, derived counters
// (reconciliation, pool fragmentation) only from active probes, attribution of what grew.
#pragma once

#include <map>
#include <string>

#include "leakbound/harness/trace.h"
#include "leakbound/harness/verdict.h"
#include "leakbound/reports/report.h"

namespace leakbound::harness {

struct JudgeSettings {
  // Noise floors of noisy counters by name; a noisy counter without one is reported, not judged.
  std::map<std::string, NoiseFloor> noise_floors;
};

reports::WorkloadResult Judge(const Trace& trace, const JudgeSettings& settings = {});

// Every trace of a file judged with the file's own floors, as one report (meta from the file).
reports::Report JudgeTraceFile(const TraceFile& file);

}  // namespace leakbound::harness
