// CuptiProbe: counter names, flags and order, exact values from a synthetic ledger, and a
// sample from an observer that is not collecting.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "leakbound/harness/cupti/observer.h"
#include "synthetic.h"

namespace leakbound::harness::cupti {
namespace {

using testing::Allocation;
using testing::kMiB;
using testing::PoolRecordFor;
using testing::Release;

TEST(CuptiProbe, Counters_AreExactWithUnmatchedAndDroppedNotJudged) {
  CuptiObserver observer;
  CuptiProbe probe(observer);
  EXPECT_EQ(probe.Name(), "cupti");
  std::vector<std::string> names;
  for (const CounterInfo& counter : probe.Counters()) {
    names.push_back(counter.name);
    EXPECT_TRUE(counter.exact) << counter.name;
    const bool informational =
        counter.name == "cupti.unmatched_releases" || counter.name == "cupti.dropped_records";
    EXPECT_EQ(counter.judged, !informational) << counter.name;
    EXPECT_EQ(counter.unit, counter.name.ends_with("_bytes") ? "bytes" : "count") << counter.name;
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "cupti.device_bytes", "cupti.pool_bytes", "cupti.pool_reserved_bytes",
                "cupti.static_bytes", "cupti.managed_bytes", "cupti.pinned_bytes",
                "cupti.live_allocations", "cupti.unmatched_releases", "cupti.dropped_records"}));
}

TEST(CuptiProbe, AppendCounters_ReadsEveryValueFromTheSnapshot) {
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
  CuptiProbe::AppendCounters(ledger.Snapshot(), out);
  EXPECT_EQ(out, (std::vector<double>{-1.0, 1008, 2000, 2 * kMiB, 300, 400, 500, 7, 1, 5}));
}

TEST(CuptiProbe, SampleFromAnObserverNotCollecting_AppendsZerosAndSaysWhy) {
  CuptiObserver observer;
  CuptiProbe probe(observer);
  std::vector<double> out;
  probe.Sample(out);
  EXPECT_EQ(out, std::vector<double>(probe.Counters().size(), 0.0));
  EXPECT_EQ(probe.State(), "disabled");
}

}  // namespace
}  // namespace leakbound::harness::cupti
