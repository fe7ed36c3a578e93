// MemoryLedger with hand-built records: pairing, reordering, reuse, unmatched and dropped
// records, per-bucket totals, peak, and pool bookkeeping. Every quantity is exact.
#include "leakbound/cupti/ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <vector>

#include "synthetic.h"

namespace leakbound::cupti {
namespace {

using testing::Allocation;
using testing::kMiB;
using testing::PoolEvent;
using testing::PoolRecordFor;
using testing::Release;

constexpr std::uint64_t kAddress = 0x7f00'0000'1000;
constexpr std::uint64_t kPoolAddress = 0x7000'0000'0000;

TEST(MemoryLedger, AllocationThenRelease_ReturnsToZeroWithPeakKept) {
  MemoryLedger ledger;
  ledger.Apply(Allocation(kAddress, 4096, 100));
  LedgerSnapshot live = ledger.Snapshot();
  EXPECT_EQ(live.live_bytes, 4096u);
  EXPECT_EQ(live.live_allocations, 1u);
  EXPECT_EQ(live.bucket(MemoryBucket::kDevice).live_bytes, 4096u);

  ledger.Apply(Release(kAddress, 4096, 200));
  LedgerSnapshot done = ledger.Snapshot();
  EXPECT_EQ(done.live_bytes, 0u);
  EXPECT_EQ(done.live_allocations, 0u);
  EXPECT_EQ(done.peak_live_bytes, 4096u);
  EXPECT_EQ(done.unmatched_releases, 0u);
  EXPECT_EQ(done.pending_releases, 0u);
  EXPECT_EQ(done.newest_timestamp_ns, 200u);
}

TEST(MemoryLedger, Snapshot_CountsEveryBucketSeparately) {
  MemoryLedger ledger;
  ledger.Apply(Allocation(0x1000, 1000, 1, MemoryBucket::kDevice));
  ledger.Apply(PoolRecordFor(Allocation(0x2000, 2000, 2), kPoolAddress, 2 * kMiB, 2000));
  ledger.Apply(Allocation(0x3000, 300, 3, MemoryBucket::kStatic));
  ledger.Apply(Allocation(0x4000, 400, 4, MemoryBucket::kManaged));
  ledger.Apply(Allocation(0x5000, 500, 5, MemoryBucket::kPinnedHost));
  ledger.Apply(Allocation(0x6000, 60, 6, MemoryBucket::kOther));
  ledger.Apply(Allocation(0x7000, 7, 7, MemoryBucket::kDevice));

  const LedgerSnapshot snapshot = ledger.Snapshot();
  EXPECT_EQ(snapshot.bucket(MemoryBucket::kDevice), (BucketTotals{1007, 2}));
  EXPECT_EQ(snapshot.bucket(MemoryBucket::kPool), (BucketTotals{2000, 1}));
  EXPECT_EQ(snapshot.bucket(MemoryBucket::kStatic), (BucketTotals{300, 1}));
  EXPECT_EQ(snapshot.bucket(MemoryBucket::kManaged), (BucketTotals{400, 1}));
  EXPECT_EQ(snapshot.bucket(MemoryBucket::kPinnedHost), (BucketTotals{500, 1}));
  EXPECT_EQ(snapshot.bucket(MemoryBucket::kOther), (BucketTotals{60, 1}));
  EXPECT_EQ(snapshot.live_bytes, 4267u);
  EXPECT_EQ(snapshot.live_allocations, 7u);
  EXPECT_EQ(snapshot.DeviceResidentBytes(), 1007u + 2000u + 300u + 400u);
}

TEST(MemoryLedger, SameAddressOnOtherDeviceOrContext_IsADifferentAllocation) {
  MemoryLedger ledger;
  MemoryRecord on_device_1 = Allocation(kAddress, 100, 1);
  on_device_1.device_id = 1;
  MemoryRecord on_context_2 = Allocation(kAddress, 200, 2);
  on_context_2.context_id = 2;
  ledger.Apply(Allocation(kAddress, 50, 3));
  ledger.Apply(on_device_1);
  ledger.Apply(on_context_2);
  MemoryRecord release_context_2 = Release(kAddress, 200, 4);
  release_context_2.context_id = 2;
  ledger.Apply(release_context_2);

  const LedgerSnapshot snapshot = ledger.Snapshot();
  EXPECT_EQ(snapshot.live_bytes, 150u);
  EXPECT_EQ(snapshot.live_allocations, 2u);
}

TEST(MemoryLedger, ReleaseArrivingBeforeItsAllocation_IsPendingThenMatched) {
  MemoryLedger ledger;
  ledger.Apply(Release(kAddress, 4096, 200));
  LedgerSnapshot waiting = ledger.Snapshot();
  EXPECT_EQ(waiting.pending_releases, 1u);
  EXPECT_EQ(waiting.pending_release_bytes, 4096u);
  EXPECT_EQ(waiting.unmatched_releases, 0u);
  EXPECT_EQ(waiting.live_bytes, 0u);

  ledger.Apply(Allocation(kAddress, 4096, 100));
  LedgerSnapshot matched = ledger.Snapshot();
  EXPECT_EQ(matched.pending_releases, 0u);
  EXPECT_EQ(matched.unmatched_releases, 0u);
  EXPECT_EQ(matched.live_bytes, 0u);
  EXPECT_EQ(matched.live_allocations, 0u);
}

TEST(MemoryLedger, ReleaseOlderThanTheOnlyAllocation_DoesNotMatchIt) {
  MemoryLedger ledger(LedgerOptions{.reorder_grace_ns = 1000});
  ledger.Apply(Allocation(kAddress, 4096, 300));
  ledger.Apply(Release(kAddress, 512, 200));  // frees an earlier allocation we never saw
  LedgerSnapshot snapshot = ledger.Snapshot();
  EXPECT_EQ(snapshot.live_bytes, 4096u);
  EXPECT_EQ(snapshot.pending_releases, 1u);

  ledger.Apply(Allocation(0x1000, 8, 1300));  // moves the clock past the grace
  snapshot = ledger.Snapshot();
  EXPECT_EQ(snapshot.pending_releases, 0u);
  EXPECT_EQ(snapshot.unmatched_releases, 1u);
  EXPECT_EQ(snapshot.unmatched_release_bytes, 512u);
  EXPECT_EQ(snapshot.live_bytes, 4104u);
}

TEST(MemoryLedger, PendingRelease_BecomesUnmatchedOnlyAfterTheGrace) {
  MemoryLedger ledger(LedgerOptions{.reorder_grace_ns = 1000});
  ledger.Apply(Release(kAddress, 64, 100));
  ledger.Apply(Allocation(0x1000, 8, 1100));  // exactly 1000 ns newer: still within the grace
  LedgerSnapshot snapshot = ledger.Snapshot();
  EXPECT_EQ(snapshot.pending_releases, 1u);
  EXPECT_EQ(snapshot.unmatched_releases, 0u);

  ledger.Apply(Allocation(0x2000, 8, 1101));
  snapshot = ledger.Snapshot();
  EXPECT_EQ(snapshot.pending_releases, 0u);
  EXPECT_EQ(snapshot.unmatched_releases, 1u);
  EXPECT_EQ(snapshot.unmatched_release_bytes, 64u);
  EXPECT_EQ(snapshot.live_bytes, 16u);
}

TEST(MemoryLedger, UnmatchedReleases_NeverReduceLiveBytes) {
  MemoryLedger ledger(LedgerOptions{.reorder_grace_ns = 0});
  ledger.Apply(Allocation(0x1000, 100, 10));
  ledger.Apply(Release(0x2000, 50, 20));  // allocated before the observer started
  ledger.Apply(Release(0x3000, 70, 30));
  ledger.Apply(Allocation(0x4000, 1, 40));
  const LedgerSnapshot snapshot = ledger.Snapshot();
  EXPECT_EQ(snapshot.live_bytes, 101u);
  EXPECT_EQ(snapshot.unmatched_releases, 2u);
  EXPECT_EQ(snapshot.unmatched_release_bytes, 120u);
}

TEST(MemoryLedger, AddressReusedAfterRelease_TracksEachLifetime) {
  MemoryLedger ledger;
  ledger.Apply(Allocation(kAddress, 1000, 100));
  ledger.Apply(Release(kAddress, 1000, 200));
  ledger.Apply(Allocation(kAddress, 2000, 300));
  LedgerSnapshot snapshot = ledger.Snapshot();
  EXPECT_EQ(snapshot.live_bytes, 2000u);
  EXPECT_EQ(snapshot.live_allocations, 1u);
  EXPECT_EQ(snapshot.peak_live_bytes, 2000u);

  ledger.Apply(Release(kAddress, 2000, 400));
  snapshot = ledger.Snapshot();
  EXPECT_EQ(snapshot.live_bytes, 0u);
  EXPECT_EQ(snapshot.unmatched_releases, 0u);
  EXPECT_EQ(snapshot.pending_releases, 0u);
}

TEST(MemoryLedger, AddressReuseArrivingScrambled_RepairsThePairingAsRecordsArrive) {
  MemoryLedger ledger;
  ledger.Apply(Allocation(kAddress, 1000, 100));
  ledger.Apply(Release(kAddress, 2000, 400));  // really frees the second lifetime
  ledger.Apply(Allocation(kAddress, 2000, 300));
  LedgerSnapshot partial = ledger.Snapshot();
  EXPECT_EQ(partial.live_bytes, 1000u);  // the first lifetime's release has not arrived
  EXPECT_EQ(partial.pending_releases, 0u);

  ledger.Apply(Release(kAddress, 1000, 200));
  const LedgerSnapshot complete = ledger.Snapshot();
  EXPECT_EQ(complete.live_bytes, 0u);
  EXPECT_EQ(complete.live_allocations, 0u);
  EXPECT_EQ(complete.pending_releases, 0u);
  EXPECT_EQ(complete.unmatched_releases, 0u);
}

TEST(MemoryLedger, EveryArrivalOrderOfThreeLifetimes_EndsBalanced) {
  // Three lifetimes at one address: A(100) R(200) A(300) R(400) A(500) R(600), sizes differ.
  const std::vector<MemoryRecord> history = {
      Allocation(kAddress, 10, 100), Release(kAddress, 10, 200),    Allocation(kAddress, 20, 300),
      Release(kAddress, 20, 400),    Allocation(kAddress, 30, 500), Release(kAddress, 30, 600)};
  std::array<int, 6> order = {0, 1, 2, 3, 4, 5};
  int permutations = 0;
  do {
    MemoryLedger ledger;
    for (int index : order) ledger.Apply(history[index]);
    const LedgerSnapshot snapshot = ledger.Snapshot();
    ASSERT_EQ(snapshot.live_bytes, 0u) << "permutation " << permutations;
    ASSERT_EQ(snapshot.live_allocations, 0u) << "permutation " << permutations;
    ASSERT_EQ(snapshot.pending_releases, 0u) << "permutation " << permutations;
    ASSERT_EQ(snapshot.unmatched_releases, 0u) << "permutation " << permutations;
    ++permutations;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(permutations, 720);
}

TEST(MemoryLedger, EveryArrivalOrderWithOneLifetimeStillLive_LeavesExactlyIt) {
  const std::vector<MemoryRecord> history = {
      Allocation(kAddress, 10, 100), Release(kAddress, 10, 200), Allocation(kAddress, 20, 300),
      Release(kAddress, 20, 400), Allocation(kAddress, 30, 500)};
  std::array<int, 5> order = {0, 1, 2, 3, 4};
  do {
    MemoryLedger ledger;
    for (int index : order) ledger.Apply(history[index]);
    const LedgerSnapshot snapshot = ledger.Snapshot();
    ASSERT_EQ(snapshot.live_bytes, 30u);
    ASSERT_EQ(snapshot.live_allocations, 1u);
    ASSERT_EQ(snapshot.pending_releases, 0u);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(MemoryLedger, ManyLifetimesBeyondTheGrace_StayExactAcrossSweeps) {
  MemoryLedger ledger(LedgerOptions{.reorder_grace_ns = 10});
  std::uint64_t clock = 0;
  ledger.Apply(Allocation(0x8000, 32, ++clock));  // lives through every sweep
  ledger.Apply(Release(0xa000, 16, ++clock));     // never matched: pruned into unmatched
  for (int i = 0; i < 5000; ++i) {
    const std::uint64_t address = 0x1000 + static_cast<std::uint64_t>(i % 7) * 0x100;
    ledger.Apply(Allocation(address, 128, ++clock));
    ledger.Apply(Release(address, 128, ++clock));
  }
  ledger.Apply(Allocation(0x9000, 64, ++clock));
  const LedgerSnapshot snapshot = ledger.Snapshot();
  EXPECT_EQ(snapshot.live_bytes, 96u);
  EXPECT_EQ(snapshot.live_allocations, 2u);
  EXPECT_EQ(snapshot.unmatched_releases, 1u);
  EXPECT_EQ(snapshot.unmatched_release_bytes, 16u);
  EXPECT_EQ(snapshot.pending_releases, 0u);
  EXPECT_EQ(snapshot.peak_live_bytes, 160u);
}

TEST(MemoryLedger, NoteDropped_Accumulates) {
  MemoryLedger ledger;
  ledger.NoteDropped(3);
  ledger.NoteDropped(4);
  EXPECT_EQ(ledger.Snapshot().dropped_records, 7u);
}

TEST(MemoryLedger, Peak_IsTheHighestLiveTotalEverReached) {
  MemoryLedger ledger;
  ledger.Apply(Allocation(0x1000, 100, 1));
  ledger.Apply(Allocation(0x2000, 200, 2));
  ledger.Apply(Release(0x1000, 100, 3));
  ledger.Apply(Allocation(0x3000, 50, 4));
  const LedgerSnapshot snapshot = ledger.Snapshot();
  EXPECT_EQ(snapshot.live_bytes, 250u);
  EXPECT_EQ(snapshot.peak_live_bytes, 300u);
}

TEST(MemoryLedger, PoolCreatedThenUsed_ReportsSizeUtilisedAndLiveAllocations) {
  MemoryLedger ledger;
  ledger.Apply(PoolEvent(PoolOperation::kCreated, kPoolAddress, 0, 0, 10));
  ledger.Apply(PoolRecordFor(Allocation(0x1000, 4096, 20), kPoolAddress, 2 * kMiB, 4096));
  ledger.Apply(PoolRecordFor(Allocation(0x2000, 8192, 30), kPoolAddress, 2 * kMiB, 12288));

  const LedgerSnapshot snapshot = ledger.Snapshot();
  ASSERT_EQ(snapshot.pools.size(), 1u);
  const PoolState& pool = snapshot.pools[0];
  EXPECT_EQ(pool.address, kPoolAddress);
  EXPECT_EQ(pool.type, PoolType::kLocal);
  EXPECT_EQ(pool.release_threshold, 64 * kMiB);
  EXPECT_EQ(pool.size, 2 * kMiB);
  EXPECT_EQ(pool.utilized_bytes, 12288u);
  EXPECT_EQ(pool.live_allocations, 2u);
  EXPECT_EQ(pool.live_bytes, 12288u);
  EXPECT_EQ(snapshot.pool_reserved_bytes, 2 * kMiB);
  EXPECT_EQ(snapshot.pool_utilized_bytes, 12288u);
  EXPECT_EQ(snapshot.bucket(MemoryBucket::kPool), (BucketTotals{12288, 2}));
}

TEST(MemoryLedger, PoolTrimmed_ShrinksReservedBytes) {
  MemoryLedger ledger;
  ledger.Apply(PoolEvent(PoolOperation::kCreated, kPoolAddress, 0, 0, 10));
  ledger.Apply(PoolRecordFor(Allocation(0x1000, 4096, 20), kPoolAddress, 4 * kMiB, 4096));
  ledger.Apply(PoolRecordFor(Release(0x1000, 4096, 30), kPoolAddress, 4 * kMiB, 0));
  EXPECT_EQ(ledger.Snapshot().pool_reserved_bytes, 4 * kMiB);

  ledger.Apply(PoolEvent(PoolOperation::kTrimmed, kPoolAddress, 0, 0, 40));
  const LedgerSnapshot snapshot = ledger.Snapshot();
  ASSERT_EQ(snapshot.pools.size(), 1u);
  EXPECT_EQ(snapshot.pools[0].size, 0u);
  EXPECT_EQ(snapshot.pools[0].utilized_bytes, 0u);
  EXPECT_EQ(snapshot.pools[0].live_allocations, 0u);
  EXPECT_EQ(snapshot.pool_reserved_bytes, 0u);
}

TEST(MemoryLedger, PoolStateFromAnOlderRecord_DoesNotOverwriteNewerState) {
  MemoryLedger ledger;
  ledger.Apply(PoolEvent(PoolOperation::kTrimmed, kPoolAddress, kMiB, 0, 50));
  ledger.Apply(PoolRecordFor(Allocation(0x1000, 4096, 20), kPoolAddress, 8 * kMiB, 4096));
  const LedgerSnapshot snapshot = ledger.Snapshot();
  ASSERT_EQ(snapshot.pools.size(), 1u);
  EXPECT_EQ(snapshot.pools[0].size, kMiB);
  EXPECT_EQ(snapshot.pools[0].utilized_bytes, 0u);
  EXPECT_EQ(snapshot.pools[0].live_allocations, 1u);  // the allocation itself still counts
}

TEST(MemoryLedger, PoolSeenInAllocationsBeforeItsCreateRecord_IsKnownImplicitly) {
  MemoryLedger ledger;
  ledger.Apply(PoolRecordFor(Allocation(0x1000, 4096, 20), kPoolAddress, 2 * kMiB, 4096));
  ASSERT_EQ(ledger.Snapshot().pools.size(), 1u);
  ledger.Apply(PoolEvent(PoolOperation::kCreated, kPoolAddress, 0, 0, 10));  // arrives late
  const LedgerSnapshot snapshot = ledger.Snapshot();
  ASSERT_EQ(snapshot.pools.size(), 1u);
  EXPECT_EQ(snapshot.pools[0].size, 2 * kMiB);  // the newer state wins
  EXPECT_EQ(snapshot.pools[0].release_threshold, 64 * kMiB);
  EXPECT_EQ(snapshot.pools[0].live_allocations, 1u);
}

TEST(MemoryLedger, PoolDestroyedWithLiveAllocations_DropsBookkeepingAndReportsThem) {
  MemoryLedger ledger;
  ledger.Apply(PoolEvent(PoolOperation::kCreated, kPoolAddress, 0, 0, 10));
  ledger.Apply(PoolRecordFor(Allocation(0x1000, 4096, 20), kPoolAddress, 2 * kMiB, 4096));
  ledger.Apply(PoolRecordFor(Allocation(0x2000, 1024, 25), kPoolAddress, 2 * kMiB, 5120));
  ledger.Apply(PoolRecordFor(Release(0x2000, 1024, 27), kPoolAddress, 2 * kMiB, 4096));
  ledger.Apply(PoolEvent(PoolOperation::kDestroyed, kPoolAddress, 0, 0, 30));
  // A record from before the destruction, delivered late, must not bring the pool back.
  ledger.Apply(PoolRecordFor(Allocation(0x3000, 512, 28), kPoolAddress, 2 * kMiB, 4608));

  const LedgerSnapshot snapshot = ledger.Snapshot();
  EXPECT_TRUE(snapshot.pools.empty());
  EXPECT_EQ(snapshot.pool_reserved_bytes, 0u);
  EXPECT_EQ(snapshot.destroyed_pool_live_allocations, 2u);
  EXPECT_EQ(snapshot.destroyed_pool_live_bytes, 4608u);
  EXPECT_EQ(snapshot.bucket(MemoryBucket::kPool), (BucketTotals{4608, 2}));
}

TEST(MemoryLedger, PoolAddressReusedAfterDestroy_IsANewPool) {
  MemoryLedger ledger;
  ledger.Apply(PoolEvent(PoolOperation::kCreated, kPoolAddress, kMiB, 0, 10));
  ledger.Apply(PoolEvent(PoolOperation::kDestroyed, kPoolAddress, 0, 0, 20));
  EXPECT_TRUE(ledger.Snapshot().pools.empty());
  ledger.Apply(PoolEvent(PoolOperation::kCreated, kPoolAddress, 3 * kMiB, 0, 30));
  const LedgerSnapshot snapshot = ledger.Snapshot();
  ASSERT_EQ(snapshot.pools.size(), 1u);
  EXPECT_EQ(snapshot.pools[0].size, 3 * kMiB);
  EXPECT_EQ(snapshot.destroyed_pool_live_allocations, 0u);
}

TEST(MemoryLedger, StaleCreateOfADestroyedPool_IsIgnored) {
  MemoryLedger ledger;
  ledger.Apply(PoolEvent(PoolOperation::kDestroyed, kPoolAddress, 0, 0, 20));
  ledger.Apply(PoolEvent(PoolOperation::kCreated, kPoolAddress, kMiB, 0, 10));
  EXPECT_TRUE(ledger.Snapshot().pools.empty());
}

TEST(MemoryLedger, SnapshotInto_ReusesTheCallersStorage) {
  MemoryLedger ledger;
  ledger.Apply(PoolEvent(PoolOperation::kCreated, kPoolAddress, kMiB, 0, 10));
  LedgerSnapshot out;
  ledger.SnapshotInto(out);
  ledger.SnapshotInto(out);
  EXPECT_EQ(out.pools.size(), 1u);
  EXPECT_EQ(out, ledger.Snapshot());
}

}  // namespace
}  // namespace leakbound::cupti
