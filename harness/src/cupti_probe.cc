// CuptiProbe: flush, snapshot, append. The snapshot buffer is a member so Sample() allocates
// nothing once the pool list has reached its size.
#include "leakbound/harness/cupti_probe.h"

#include <string_view>

namespace leakbound::harness {

std::vector<CounterInfo> CuptiProbe::LedgerCounters() {
  std::vector<CounterInfo> counters;
  for (const char* name : cupti::kLedgerCounters) {
    const std::string_view n = name;
    const bool informational =
        n == cupti::kUnmatchedReleasesCounter || n == cupti::kDroppedRecordsCounter;
    CounterInfo info;
    info.name = name;
    info.unit = n.ends_with("_bytes") ? "bytes" : "count";
    info.exact = true;
    info.judged = !informational;
    counters.push_back(std::move(info));
  }
  return counters;
}

CuptiProbe::CuptiProbe(cupti::CuptiObserver& observer)
    : observer_(observer), counters_(LedgerCounters()) {}

void CuptiProbe::Sample(std::vector<double>& out) {
  observer_.Flush();  // a no-op unless active; a stopped observer's ledger stays readable
  observer_.SnapshotInto(snapshot_);
  cupti::AppendLedgerCounters(snapshot_, out);
}

}  // namespace leakbound::harness
