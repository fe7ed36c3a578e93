// CuptiProbe: flush, snapshot, append. The snapshot buffer is a member so Sample() allocates
// nothing once the pool list has reached its size.
#include "leakbound/harness/cupti/observer.h"

namespace leakbound::harness::cupti {

CuptiProbe::CuptiProbe(CuptiObserver& observer)
    : observer_(observer),
      counters_{
          {kDeviceBytesCounter, "bytes", true, true},
          {kPoolBytesCounter, "bytes", true, true},
          {kPoolReservedBytesCounter, "bytes", true, true},
          {kStaticBytesCounter, "bytes", true, true},
          {kManagedBytesCounter, "bytes", true, true},
          {kPinnedBytesCounter, "bytes", true, true},
          {kLiveAllocationsCounter, "count", true, true},
          {kUnmatchedReleasesCounter, "count", true, false},
          {kDroppedRecordsCounter, "count", true, false},
      } {}

void CuptiProbe::AppendCounters(const LedgerSnapshot& snapshot, std::vector<double>& out) {
  auto bytes = [&](MemoryBucket bucket) {
    return static_cast<double>(snapshot.bucket(bucket).live_bytes);
  };
  out.push_back(bytes(MemoryBucket::kDevice));
  out.push_back(bytes(MemoryBucket::kPool));
  out.push_back(static_cast<double>(snapshot.pool_reserved_bytes));
  out.push_back(bytes(MemoryBucket::kStatic));
  out.push_back(bytes(MemoryBucket::kManaged));
  out.push_back(bytes(MemoryBucket::kPinnedHost));
  out.push_back(static_cast<double>(snapshot.live_allocations));
  out.push_back(static_cast<double>(snapshot.unmatched_releases));
  out.push_back(static_cast<double>(snapshot.dropped_records));
}

void CuptiProbe::Sample(std::vector<double>& out) {
  observer_.Flush();  // a no-op unless active; a stopped observer's ledger stays readable
  observer_.SnapshotInto(snapshot_);
  AppendCounters(snapshot_, out);
}

}  // namespace leakbound::harness::cupti
