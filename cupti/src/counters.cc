// AppendLedgerCounters: one snapshot's values in kLedgerCounters order.
#include "leakbound/cupti/counters.h"

namespace leakbound::cupti {

void AppendLedgerCounters(const LedgerSnapshot& snapshot, std::vector<double>& out) {
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

}  // namespace leakbound::cupti
