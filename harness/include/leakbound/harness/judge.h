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
#include "leakbound/workloads/workload.h"

namespace leakbound::harness {

struct JudgeSettings {
  // Noise floors of noisy counters by name; a noisy counter without one is reported, not judged.
  std::map<std::string, NoiseFloor> noise_floors;
};

reports::WorkloadResult Judge(const Trace& trace, const JudgeSettings& settings = {});

// The overall verdict from counter verdicts (precedence: reports::Severity), and whether it met
// the subject's expectation (a zoo entry must show its class on the counter it names).
void CombineVerdicts(const TraceSubject& subject, reports::WorkloadResult& result);

// Renames a growth verdict on a pool's reserved bytes to kPoolFragmentation when the pool's
// used bytes are flat and judged (cuda.pool_* from the runtime's pool, cupti.pool_* from the
// ledger).
void ClassifyPoolFragmentation(std::vector<reports::CounterVerdict>& verdicts);

// The subject of a registered workload.
TraceSubject SubjectOf(const workloads::WorkloadInfo& info);
inline void CombineVerdicts(const workloads::WorkloadInfo& info, reports::WorkloadResult& result) {
  CombineVerdicts(SubjectOf(info), result);
}

// Every trace of a file judged with the file's own floors, as one report (meta from the file).
reports::Report JudgeTraceFile(const TraceFile& file);

}  // namespace leakbound::harness
