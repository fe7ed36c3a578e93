// AppendLedgerCounters: exact values from a synthetic ledger, in kLedgerCounters order.
#include <gtest/gtest.h>

#include <vector>

#include "leakbound/cupti/counters.h"
#include "synthetic.h"

namespace leakbound::cupti {
namespace {

using testing::Allocation;
using testing::kMiB;
using testing::PoolRecordFor;
using testing::Release;

TEST(LedgerCounters, Append_ReadsEveryValueFromTheSnapshot) {
  MemoryLedger ledger(LedgerOptions{.reorder_grace_ns = 0});
  ledger.Apply(Allocation(0x1000, 1000, 1, MemoryBucket::kDevice));
  ledger.Apply(PoolRecordFor(Allocation(0x2000, 2000, 2), 0x9000, 2 * kMiB, 2000));
  ledger.Apply(Allocation(0x3000, 300, 3, MemoryBucket::kStatic));
  ledger.Apply(Allocation(0x4000, 400, 4, MemoryBucket::kManaged));
  ledger.Apply(Allocation(0x5000, 500, 5, MemoryBucket::kPinnedHost));
  ledger.Apply(Allocation(0x6000, 60, 6, MemoryBucket::kOther));
  ledger.Apply(Release(0x7000, 70, 7));  // freed before observation began
  ledger.Apply(Allocation(0x8000, 8, 8));
  ledger.NoteDropped(5);

  std::vector<double> out = {-1.0};  // Sample appends; what was there stays
  AppendLedgerCounters(ledger.Snapshot(), out);
  EXPECT_EQ(out, (std::vector<double>{-1.0, 1008, 2000, 2 * kMiB, 300, 400, 500, 7, 1, 5}));
}

}  // namespace
}  // namespace leakbound::cupti
