// Tests of the hook core alone (watch/heap/src/heap_core.c, compiled into this binary without a
// front end, so malloc is glibc's and every record is made by the test): call-site ids in the
// record, the one-step free that returns the record, stale records, neighbouring granules,
// per-thread peaks. Addresses are fake (never dereferenced): the core only keys records by them.
#include "heap_core.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "leakbound/watch/heap.h"

namespace {

leakbound_heap_stats Read() {
  leakbound_heap_stats stats;
  leakbound_heap_read(&stats);
  return stats;
}

// An offset that stays inside the first block's granule (32 bytes, 16 under the sanitizers).
#if defined(LEAKBOUND_HEAP_GRANULE_SHIFT) && LEAKBOUND_HEAP_GRANULE_SHIFT == 4
constexpr uintptr_t kSameGranule = 8;
constexpr int kGranuleShift = 4;
#else
constexpr uintptr_t kSameGranule = 16;
constexpr int kGranuleShift = 5;
#endif

// A fresh 128 MiB region per test, so records of one test never meet another's.
const void *Address(int test, uintptr_t offset) {
  return reinterpret_cast<const void *>((uintptr_t(0x100 + test) << 27) + 0x1000 + offset);
}

TEST(HeapCoreTest, OnAllocAt_StoresTheSite_OnFreeTakenReturnsItAndDecrements) {
  const leakbound_heap_stats start = Read();
  const void *block = Address(1, 0);
  // The thread's own counter slot + 1 (slot 0 is the shared one): the preload keeps per-thread
  // call-site books by it.
  const int slot = LeakboundHeapOnAllocAt(block, 40, 1234);
  EXPECT_GE(slot, 2);
  EXPECT_LT(slot, LeakboundHeapSlotsUsed() + 1);
  EXPECT_EQ(Read().live_bytes - start.live_bytes, 40u);
  LeakboundHeapTaken taken = LeakboundHeapOnFreeTaken(block);
  EXPECT_EQ(taken.found, 1);
  EXPECT_EQ(taken.slot, static_cast<uint32_t>(slot));  // freed by the same thread
  EXPECT_EQ(taken.size, 40u);
  EXPECT_EQ(taken.site, 1234u);
  const leakbound_heap_stats after = Read();
  EXPECT_EQ(after.live_bytes, start.live_bytes);
  EXPECT_EQ(after.live_allocations, start.live_allocations);
  EXPECT_EQ(after.total_allocations - start.total_allocations, 1u);
  EXPECT_EQ(LeakboundHeapOnFreeTaken(block).found,
            0);  // already freed: not found, no change
  EXPECT_EQ(Read().live_bytes, start.live_bytes);
}

TEST(HeapCoreTest, OnAllocAt_SiteAboveSixteenBits_IsStoredAsZero) {
  const void *block = Address(2, 0);
  ASSERT_NE(LeakboundHeapOnAllocAt(block, 8, 1u << 16), 0);
  EXPECT_EQ(LeakboundHeapOnFreeTaken(block).site, 0u);
}

TEST(HeapCoreTest, OnAllocAt_Excluded_ReturnsZeroAndRecordsNothing) {
  const leakbound_heap_stats start = Read();
  leakbound_heap_exclude_begin();
  EXPECT_EQ(LeakboundHeapOnAllocAt(Address(3, 0), 8, 7), 0);
  leakbound_heap_exclude_end();
  EXPECT_EQ(LeakboundHeapOnFreeTaken(Address(3, 0)).found, 0);
  EXPECT_EQ(Read().total_allocations, start.total_allocations);
}

TEST(HeapCoreTest, TakeAndPutBack_KeepTheSite) {
  const void *block = Address(4, 0);
  ASSERT_NE(LeakboundHeapOnAllocAt(block, 100, 9), 0);
  LeakboundHeapTaken taken = LeakboundHeapTake(block);
  ASSERT_EQ(taken.found, 1);
  LeakboundHeapPutBack(block, taken);
  taken = LeakboundHeapOnFreeTaken(block);
  EXPECT_EQ(taken.found, 1);
  EXPECT_EQ(taken.size, 100u);
  EXPECT_EQ(taken.site, 9u);
}

TEST(HeapCoreTest, NeighbouringGranules_AreSeparateRecords) {
  const leakbound_heap_stats start = Read();
  const void *first = Address(5, 0);
  const void *second = Address(5, 32);  // glibc's closest possible neighbour
  LeakboundHeapOnAlloc(first, 10);
  LeakboundHeapOnAlloc(second, 20);
  EXPECT_EQ(Read().live_bytes - start.live_bytes, 30u);
  EXPECT_EQ(LeakboundHeapOnFreeTaken(first).size, 10u);
  EXPECT_EQ(LeakboundHeapOnFreeTaken(second).size, 20u);
  EXPECT_EQ(Read().live_bytes, start.live_bytes);
}

TEST(HeapCoreTest, StaleRecord_ReplacedByTheNextBlockInItsGranule_LeavesTheBooks) {
  const leakbound_heap_stats start = Read();
  LeakboundHeapOnAlloc(Address(6, 0), 64);  // its free bypasses the hooks
  LeakboundHeapOnAlloc(Address(6, kSameGranule),
                       8);  // same granule: the first is gone
  const leakbound_heap_stats after = Read();
  EXPECT_EQ(after.live_bytes - start.live_bytes, 8u);
  EXPECT_EQ(after.live_allocations - start.live_allocations, 1u);
  LeakboundHeapOnFree(Address(6, kSameGranule));
  EXPECT_EQ(Read().live_bytes, start.live_bytes);
}

TEST(HeapCoreTest, AddressOutsideTheTable_IsUntracked) {
  const leakbound_heap_stats start = Read();
  LeakboundHeapOnAlloc(reinterpret_cast<const void *>(uintptr_t(1) << 50), 8);
  const leakbound_heap_stats after = Read();
  EXPECT_EQ(after.untracked_allocations - start.untracked_allocations, 1u);
  EXPECT_EQ(after.live_bytes, start.live_bytes);
}

// A record keeps 13 bits of size; a block of 8,176 bytes or more keeps its size in a table of
// large blocks beside the records, exact to the byte whatever its size.
TEST(HeapCoreTest, LargeBlocks_KeepTheirExactSize_ThroughFreeTakeAndPutBack) {
  const leakbound_heap_stats start = Read();
  const void *edge = Address(30, 0);
  const void *huge = Address(30, 4096);
  const uint64_t kEdge = 8175;  // the largest size a record holds itself
  const uint64_t kHuge = (uint64_t(3) << 40) + 7;  // past 40 bits too
  ASSERT_NE(LeakboundHeapOnAllocAt(edge, kEdge + 1, 11), 0);
  ASSERT_NE(LeakboundHeapOnAllocAt(huge, kHuge, 12), 0);
  EXPECT_EQ(Read().live_bytes - start.live_bytes, kEdge + 1 + kHuge);
  LeakboundHeapTaken taken = LeakboundHeapTake(huge);  // realloc's path
  ASSERT_EQ(taken.found, 1);
  EXPECT_EQ(taken.size, kHuge);
  LeakboundHeapPutBack(huge, taken);
  taken = LeakboundHeapOnFreeTaken(huge);
  EXPECT_EQ(taken.size, kHuge);
  EXPECT_EQ(taken.site, 12u);
  taken = LeakboundHeapOnFreeTaken(edge);
  EXPECT_EQ(taken.size, kEdge + 1);
  EXPECT_EQ(taken.site, 11u);
  EXPECT_EQ(Read().live_bytes, start.live_bytes);
  EXPECT_EQ(LeakboundHeapOnFreeTaken(huge).found, 0);
}

// Freed entries of the large tables are taken again: far more large blocks than the first
// table's 4,096 slots come and go, every one exact (none of them live at once: all in table 0).
TEST(HeapCoreTest, LargeBlocks_ManyMoreThanTheTableHolds_ComeAndGoExactly) {
  const leakbound_heap_stats start = Read();
  for (uintptr_t i = 0; i < 200000; ++i) {
    const void *block = Address(31, i * 32);
    ASSERT_NE(LeakboundHeapOnAllocAt(block, (uint64_t(4) << 20) + i, 0), 0) << i;
    ASSERT_EQ(LeakboundHeapOnFreeTaken(block).size, (uint64_t(4) << 20) + i) << i;
  }
  const leakbound_heap_stats after = Read();
  EXPECT_EQ(after.live_bytes, start.live_bytes);
  EXPECT_EQ(after.untracked_allocations, start.untracked_allocations);
}

// More large blocks live at once than the first table's half: they go on into the next tables
// (each twice the one before), every one exact, and each table's entries leave with their blocks.
TEST(HeapCoreTest, LargeBlocks_LiveAtOnceBeyondTheFirstTable_StayExact) {
  const leakbound_heap_stats start = Read();
  constexpr uintptr_t kBlocks = 20000;  // past tables 0 (2,048), 1 (4,096), 2 (8,192)
  uint64_t total = 0;
  for (uintptr_t i = 0; i < kBlocks; ++i) {
    ASSERT_NE(LeakboundHeapOnAllocAt(Address(34, i * 4096), 8176 + i, 7), 0) << i;
    total += 8176 + i;
  }
  EXPECT_EQ(Read().live_bytes - start.live_bytes, total);
  for (uintptr_t i = 0; i < kBlocks; ++i) {
    const LeakboundHeapTaken taken = LeakboundHeapOnFreeTaken(Address(34, i * 4096));
    ASSERT_EQ(taken.size, 8176 + i) << i;
    ASSERT_EQ(taken.site, 7u) << i;
  }
  EXPECT_EQ(Read().live_bytes, start.live_bytes);
  EXPECT_EQ(Read().untracked_allocations, start.untracked_allocations);
}

// A record's call site lives only as long as its block: the next block in the granule, recorded
// without a site (a freed one, or one whose free bypassed the hooks), reads none.
TEST(HeapCoreTest, CallSite_LeavesWithItsBlock) {
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(35, 0), 24, 4321), 0);
  EXPECT_EQ(LeakboundHeapOnFreeTaken(Address(35, 0)).site, 4321u);
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(35, 0), 24, 0), 0);
  EXPECT_EQ(LeakboundHeapOnFreeTaken(Address(35, 0)).site, 0u);
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(35, 0), 24, 4322), 0);
  LeakboundHeapOnFree(Address(35, 0));  // the free path without sites clears it too
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(35, 0), 24, 0), 0);
  EXPECT_EQ(LeakboundHeapOnFreeTaken(Address(35, 0)).site, 0u);
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(35, 64), 24, 99), 0);  // its free bypasses the hooks
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(35, 64 + kSameGranule), 8, 0), 0);
  const LeakboundHeapTaken taken = LeakboundHeapOnFreeTaken(Address(35, 64 + kSameGranule));
  EXPECT_EQ(taken.size, 8u);
  EXPECT_EQ(taken.site, 0u);
}

// A large block whose free bypassed the hooks: the next block in its granule drops its bytes
// (read from the large table, whose entry goes too).
TEST(HeapCoreTest, StaleLargeRecord_LeavesTheBooksWithItsSize) {
  const leakbound_heap_stats start = Read();
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(32, 0), uint64_t(5) << 20, 0), 0);
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(32, kSameGranule), 24, 0), 0);
  EXPECT_EQ(Read().live_bytes - start.live_bytes, 24u);
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(32, 64), uint64_t(6) << 20, 0), 0);
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(32, 64), uint64_t(7) << 20, 0), 0);  // same address
  EXPECT_EQ(Read().live_bytes - start.live_bytes, 24u + (uint64_t(7) << 20));
  EXPECT_EQ(LeakboundHeapOnFreeTaken(Address(32, 64)).size, uint64_t(7) << 20);
  EXPECT_EQ(LeakboundHeapOnFreeTaken(Address(32, kSameGranule)).size, 24u);
  EXPECT_EQ(Read().live_bytes, start.live_bytes);
}

// A record names its block by its offset in the granule: a free of another address in the
// granule (never returned by malloc, or not 8-byte aligned) finds nothing.
TEST(HeapCoreTest, FreeOfAnotherAddressInTheGranule_FindsNothing) {
  const leakbound_heap_stats start = Read();
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(33, 8), 40, 0), 0);
  EXPECT_EQ(LeakboundHeapOnFreeTaken(Address(33, 0)).found, 0);
  EXPECT_EQ(LeakboundHeapOnFreeTaken(Address(33, 9)).found, 0);
  EXPECT_EQ(LeakboundHeapOnFreeTaken(Address(33, 8)).size, 40u);
  EXPECT_EQ(Read().live_bytes, start.live_bytes);
}

TEST(HeapCoreTest, Peak_SumsEachThreadsHighWaterMark_AndResetRestartsIt) {
  leakbound_heap_reset_peak();
  const leakbound_heap_stats start = Read();
  EXPECT_EQ(start.peak_bytes, start.live_bytes);
  LeakboundHeapOnAlloc(Address(7, 0), 1000);
  LeakboundHeapOnFree(Address(7, 0));
  EXPECT_EQ(Read().peak_bytes,
            start.live_bytes + 1000);  // one thread: the exact peak
  std::thread other([] {
    LeakboundHeapOnAlloc(Address(7, 64), 500);
    LeakboundHeapOnFree(Address(7, 64));
  });
  other.join();
  // Two threads whose highs never overlapped: the sum is an upper bound (1000 + 500).
  EXPECT_EQ(Read().peak_bytes, start.live_bytes + 1500);
  leakbound_heap_reset_peak();
  const leakbound_heap_stats reset = Read();
  EXPECT_EQ(reset.peak_bytes, reset.live_bytes);
  LeakboundHeapOnAlloc(Address(7, 128), 10);
  EXPECT_EQ(Read().peak_bytes, reset.live_bytes + 10);
  LeakboundHeapOnFree(Address(7, 128));
}

TEST(HeapCoreTest, BlockFreedOnAnotherThread_LeavesTheSumExact) {
  const leakbound_heap_stats start = Read();
  LeakboundHeapOnAllocAt(Address(8, 0), 77, 3);
  LeakboundHeapTaken taken{};
  std::thread other([&] { taken = LeakboundHeapOnFreeTaken(Address(8, 0)); });
  other.join();
  EXPECT_EQ(taken.site, 3u);
  const leakbound_heap_stats after = Read();
  EXPECT_EQ(after.live_bytes, start.live_bytes);
  EXPECT_EQ(after.live_allocations, start.live_allocations);
}

// The front end's common paths (the watch preload with call sites): all or nothing, and what
// they do is what the general paths do.
TEST(HeapCoreTest, FastPaths_DoWhatTheGeneralPathsDo_OrNothing) {
  const leakbound_heap_stats start = Read();
  const void *block = Address(30, 0);
  unsigned stamp = 0;
  int slot = 0;
  LeakboundHeapSitesStored();  // before OnAllocFast stores a site, as its callers do
  // A stamp of neither generation 0 nor cohort 0, so that the records' stamps are checked.
  leakbound_heap_census_start();
  ASSERT_EQ(leakbound_heap_next_cohort(), 1);
  // A thread's first allocation claims its slot on the general path.
  ASSERT_GE(LeakboundHeapOnAllocAt(Address(30, 0x100), 8, 0), 2);
  ASSERT_EQ(LeakboundHeapOnAllocFast(block, 40, 77, &stamp, &slot), 1);
  ASSERT_GE(slot, 2);
  EXPECT_EQ(stamp, LeakboundHeapEpochNow());
  EXPECT_EQ(stamp & 0xff, 1u);
  EXPECT_NE(stamp >> 8, 0u);
  EXPECT_EQ(Read().live_bytes - start.live_bytes, 48u);
  // The record is taken: the general path takes it as the fast one made it.
  LeakboundHeapTaken taken = LeakboundHeapOnFreeTaken(block);
  EXPECT_EQ(taken.found, 1);
  EXPECT_EQ(taken.size, 40u);
  EXPECT_EQ(taken.site, 77u);
  EXPECT_EQ(taken.slot, static_cast<uint32_t>(slot));
  // And the reverse; a second free finds nothing (0: done, nothing to take).
  ASSERT_EQ(LeakboundHeapOnAllocAt(block, 24, 78), slot);
  LeakboundHeapTaken fast{};
  EXPECT_EQ(LeakboundHeapOnFreeFast(block, &fast), 1);
  EXPECT_EQ(fast.size, 24u);
  EXPECT_EQ(fast.site, 78u);
  EXPECT_EQ(fast.slot, static_cast<uint32_t>(slot));
  EXPECT_EQ(LeakboundHeapOnFreeFast(block, &fast), 0);
  // A block at each 8-byte offset inside its granule: its record keeps the offset, so only that
  // address frees it, with the size and stamp it was recorded with (no other byte of the granule,
  // aligned or not, finds it).
  for (uintptr_t offset = 8; offset < (uintptr_t{1} << kGranuleShift); offset += 8) {
    SCOPED_TRACE(offset);
    const uintptr_t granule = 0x300 + 4 * offset * 8;  // one granule per offset, none shared
    ASSERT_EQ(LeakboundHeapOnAllocFast(Address(30, granule + offset), 50 + offset, 0, &stamp,
                                       &slot), 1);
    for (uintptr_t other = 0; other < (uintptr_t{1} << kGranuleShift); ++other) {
      if (other == offset) continue;
      EXPECT_EQ(LeakboundHeapOnFreeFast(Address(30, granule + other), &fast), 0) << other;
      EXPECT_EQ(LeakboundHeapTake(Address(30, granule + other)).found, 0) << other;
    }
    EXPECT_EQ(LeakboundHeapOnFreeFast(Address(30, granule + offset), &fast), 1);
    EXPECT_EQ(fast.size, 50 + offset);
    EXPECT_EQ(fast.epoch, stamp);
  }
  // A record still set (a free that bypassed the hooks) and a large block: nothing done.
  ASSERT_NE(LeakboundHeapOnAllocAt(block, 16, 0), 0);
  EXPECT_EQ(LeakboundHeapOnAllocFast(block, 16, 0, &stamp, &slot), 0);
  EXPECT_EQ(LeakboundHeapOnAllocFast(Address(30, 0x200), 100000, 0, &stamp, &slot), 0);
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(30, 0x200), 100000, 0), 0);
  EXPECT_EQ(LeakboundHeapOnFreeFast(Address(30, 0x200), &fast), -1);
  EXPECT_EQ(LeakboundHeapOnFreeTaken(Address(30, 0x200)).size, 100000u);
  LeakboundHeapOnFree(block);
  LeakboundHeapOnFree(Address(30, 0x100));
  const leakbound_heap_stats after = Read();
  EXPECT_EQ(after.live_bytes, start.live_bytes);
  EXPECT_EQ(after.live_allocations, start.live_allocations);
}

// While a front end holds the fast paths (the watch preload, while it samples at the job's clock),
// every allocation takes the general path, which still records it; a pause of counting and its
// end leave the hold as it was; let go, the fast path records again.
TEST(HeapCoreTest, HeldFastPaths_LeaveEveryAllocationToTheGeneralPath) {
  const leakbound_heap_stats start = Read();
  unsigned stamp = 0;
  int slot = 0;
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(37, 0x100), 8, 0), 0);  // the slot, a mapped chunk
  LeakboundHeapHoldFastPath(1);
  EXPECT_EQ(LeakboundHeapOnAllocFast(Address(37, 0), 40, 0, &stamp, &slot), 0);
  EXPECT_EQ(Read().live_bytes - start.live_bytes, 8u);
  EXPECT_NE(LeakboundHeapOnAllocAt(Address(37, 0), 40, 0), 0);
  EXPECT_EQ(leakbound_heap_counting(), 1);
  leakbound_heap_set_counting(0);
  EXPECT_EQ(LeakboundHeapOnAllocAt(Address(37, 128), 40, 0), 0);
  leakbound_heap_set_counting(1);
  EXPECT_EQ(LeakboundHeapOnAllocFast(Address(37, 64), 40, 0, &stamp, &slot), 0);
  // The front end's general path takes the common one past the hold.
  EXPECT_EQ(LeakboundHeapOnAllocFastInHold(Address(37, 96), 24, 0, &stamp, &slot), 1);
  LeakboundHeapHoldFastPath(0);
  EXPECT_EQ(LeakboundHeapOnAllocFast(Address(37, 64), 40, 0, &stamp, &slot), 1);
  EXPECT_EQ(Read().live_bytes - start.live_bytes, 112u);
  leakbound_heap_set_counting(0);  // a pause stops both
  EXPECT_EQ(LeakboundHeapOnAllocFastInHold(Address(37, 160), 24, 0, &stamp, &slot), 0);
  leakbound_heap_set_counting(1);
  LeakboundHeapOnFree(Address(37, 0));
  LeakboundHeapOnFree(Address(37, 64));
  LeakboundHeapOnFree(Address(37, 96));
  LeakboundHeapOnFree(Address(37, 0x100));
  EXPECT_EQ(Read().live_bytes, start.live_bytes);
}

// The free path for blocks that hold no call site (the watch preload's, while call sites are off)
// frees as OnFree does, large blocks too, and a second free finds nothing.
TEST(HeapCoreTest, OnFreeSiteless_FreesAsOnFreeDoes) {
  const leakbound_heap_stats start = Read();
  LeakboundHeapOnAlloc(Address(36, 0), 300);
  LeakboundHeapOnAlloc(Address(36, 64), 20000);  // above a record's size field: a large table's
  EXPECT_EQ(Read().live_bytes - start.live_bytes, 20300u);
  LeakboundHeapOnFreeSiteless(Address(36, 0));
  LeakboundHeapOnFreeSiteless(Address(36, 64));
  LeakboundHeapOnFreeSiteless(Address(36, 0));
  const leakbound_heap_stats after = Read();
  EXPECT_EQ(after.live_bytes, start.live_bytes);
  EXPECT_EQ(after.live_allocations, start.live_allocations);
}

// The free hook's common path without call sites: all or nothing, as OnFreeSiteless books it.
TEST(HeapCoreTest, OnFreeFastSiteless_FreesAsOnFreeSitelessDoes_OrNothing) {
  const leakbound_heap_stats start = Read();
  LeakboundHeapOnAlloc(Address(37, 0), 300);
  LeakboundHeapOnAlloc(Address(37, 64), 20000);  // a large table's: not the common path's
  ASSERT_EQ(Read().live_bytes - start.live_bytes, 20300u);
  EXPECT_EQ(LeakboundHeapOnFreeFastSiteless(Address(37, 0)), 1);
  EXPECT_EQ(Read().live_bytes - start.live_bytes, 20000u);
  EXPECT_EQ(Read().live_allocations - start.live_allocations, 1u);
  EXPECT_EQ(LeakboundHeapOnFreeFastSiteless(Address(37, 0)), 1);  // no record: nothing to do
  EXPECT_EQ(LeakboundHeapOnFreeFastSiteless(Address(37, 8)), 1);  // another address: the same
  EXPECT_EQ(LeakboundHeapOnFreeFastSiteless(Address(37, 64)), 0);  // large: nothing done
  EXPECT_EQ(Read().live_bytes - start.live_bytes, 20000u);
  // A thread with no slot of its own yet (its first call): nothing done either.
  LeakboundHeapOnAlloc(Address(37, 128), 40);
  int fresh = -1;
  std::thread other([&] { fresh = LeakboundHeapOnFreeFastSiteless(Address(37, 128)); });
  other.join();
  EXPECT_EQ(fresh, 0);
  EXPECT_EQ(Read().live_bytes - start.live_bytes, 20040u);
  LeakboundHeapOnFreeSiteless(Address(37, 64));
  LeakboundHeapOnFreeSiteless(Address(37, 128));
  const leakbound_heap_stats after = Read();
  EXPECT_EQ(after.live_bytes, start.live_bytes);
  EXPECT_EQ(after.live_allocations, start.live_allocations);
}

// Past 1,023 live threads, the rest share slot 0 (locked adds): the fast paths leave those to the
// general ones, and the sums stay exact.
TEST(HeapCoreTest, ThreadsPastTheSlots_ShareSlotZero_AndTheSumsStayExact) {
  const leakbound_heap_stats start = Read();
  constexpr int kThreads = LEAKBOUND_HEAP_SLOTS + 16;
  std::atomic<int> started{0}, shared{0}, fast_refused{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      const void *block = Address(31, static_cast<uintptr_t>(i) * 64);
      const int slot = LeakboundHeapOnAllocAt(block, 8, 5);
      ++started;
      while (!go.load()) std::this_thread::yield();  // every slot is held at once
      if (slot == 1) {
        ++shared;
        unsigned stamp;
        LeakboundHeapTaken taken{};
        int fast_slot = 0;
        if (LeakboundHeapOnAllocFast(Address(32, static_cast<uintptr_t>(i) * 64), 8, 5, &stamp,
                                     &fast_slot) == 0 &&
            LeakboundHeapOnFreeFast(block, &taken) == -1) {
          ++fast_refused;
        }
      }
      const LeakboundHeapTaken taken = LeakboundHeapOnFreeTaken(block);
      EXPECT_EQ(taken.found, 1);
      EXPECT_EQ(taken.size, 8u);
      EXPECT_EQ(taken.slot, slot == 1 ? 0u : static_cast<uint32_t>(slot));
    });
  }
  while (started.load() < kThreads) std::this_thread::yield();
  go = true;
  for (std::thread &t : threads) t.join();
  EXPECT_GE(shared.load(), 16);
  EXPECT_EQ(fast_refused.load(), shared.load());
  const leakbound_heap_stats after = Read();
  EXPECT_EQ(after.live_bytes, start.live_bytes);
  EXPECT_EQ(after.live_allocations, start.live_allocations);
  EXPECT_EQ(after.total_allocations - start.total_allocations, static_cast<uint64_t>(kThreads));
}

}  // namespace

// ---- the census of survivors by birth ----------------------------------------------------

std::vector<leakbound_heap_cohort> Census() {
  std::vector<leakbound_heap_cohort> out(LEAKBOUND_HEAP_COHORTS);
  out.resize(static_cast<std::size_t>(leakbound_heap_census(out.data(), LEAKBOUND_HEAP_COHORTS)));
  return out;
}

TEST(HeapCoreCensusTest, SurvivorsAreCountedInTheCohortTheyWereBornIn) {
  leakbound_heap_census_start();
  ASSERT_EQ(leakbound_heap_cohort_now(), 0);
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(20, 0), 100, 0), 0);
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(20, 64), 7, 0), 0);
  EXPECT_EQ(leakbound_heap_next_cohort(), 1);
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(20, 128), 30, 0), 0);
  LeakboundHeapOnFree(Address(20, 64));  // born in cohort 0, freed in cohort 1
  EXPECT_EQ(leakbound_heap_next_cohort(), 2);
  std::vector<leakbound_heap_cohort> census = Census();
  ASSERT_EQ(census.size(), 3u);
  EXPECT_EQ(census[0].bytes, 100);
  EXPECT_EQ(census[0].blocks, 1);
  EXPECT_EQ(census[1].bytes, 30);
  EXPECT_EQ(census[1].blocks, 1);
  EXPECT_EQ(census[2].bytes, 0);
  LeakboundHeapOnFree(Address(20, 0));
  LeakboundHeapOnFree(Address(20, 128));
  census = Census();
  EXPECT_EQ(census[0].bytes, 0);
  EXPECT_EQ(census[1].bytes, 0);
}

TEST(HeapCoreCensusTest, ANewCensus_LeavesBlocksOfTheLastOneOutEvenWhenTheyAreFreedLater) {
  leakbound_heap_census_start();
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(21, 0), 500, 0), 0);  // an earlier census's survivor
  leakbound_heap_next_cohort();
  leakbound_heap_census_start();
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(21, 64), 40, 0), 0);
  LeakboundHeapOnFree(Address(21, 0));  // freed now: must not reduce cohort 0 of this census
  std::vector<leakbound_heap_cohort> census = Census();
  ASSERT_EQ(census.size(), 1u);
  EXPECT_EQ(census[0].bytes, 40);
  EXPECT_EQ(census[0].blocks, 1);
  LeakboundHeapOnFree(Address(21, 64));
  EXPECT_EQ(Census()[0].bytes, 0);
}

TEST(HeapCoreCensusTest, ReallocPutBack_KeepsTheBirthCohort) {
  leakbound_heap_census_start();
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(22, 0), 64, 3), 0);
  leakbound_heap_next_cohort();
  LeakboundHeapTaken taken = LeakboundHeapTake(Address(22, 0));
  ASSERT_EQ(taken.found, 1);
  LeakboundHeapPutBack(Address(22, 0), taken);  // a failed realloc: still born in cohort 0
  std::vector<leakbound_heap_cohort> census = Census();
  EXPECT_EQ(census[0].bytes, 64);
  EXPECT_EQ(census[1].bytes, 0);
  LeakboundHeapForgetTaken(LeakboundHeapTake(Address(22, 0)));
  EXPECT_EQ(Census()[0].bytes, 0);
}

TEST(HeapCoreCensusTest, StaleRecord_LeavesItsBirthCohort) {
  leakbound_heap_census_start();
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(23, 0), 24, 0), 0);
  leakbound_heap_next_cohort();
  // Its free bypassed the hooks; the allocator hands the granule out again.
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(23, kSameGranule), 8, 0), 0);
  std::vector<leakbound_heap_cohort> census = Census();
  EXPECT_EQ(census[0].bytes, 0);
  EXPECT_EQ(census[1].bytes, 8);
  LeakboundHeapOnFree(Address(23, kSameGranule));
}

TEST(HeapCoreCensusTest, CohortsSaturateAtTheLast) {
  leakbound_heap_census_start();
  for (int i = 0; i < LEAKBOUND_HEAP_COHORTS + 10; ++i) leakbound_heap_next_cohort();
  EXPECT_EQ(leakbound_heap_cohort_now(), LEAKBOUND_HEAP_COHORTS - 1);
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(24, 0), 16, 0), 0);
  std::vector<leakbound_heap_cohort> census = Census();
  ASSERT_EQ(census.size(), static_cast<std::size_t>(LEAKBOUND_HEAP_COHORTS));
  EXPECT_EQ(census.back().bytes, 16);
  LeakboundHeapOnFree(Address(24, 0));
  EXPECT_EQ(Census().back().bytes, 0);
  leakbound_heap_census_start();
}

TEST(HeapCoreCensusTest, BlockFreedOnAnotherThread_LeavesItsCohortExact) {
  leakbound_heap_census_start();
  ASSERT_NE(LeakboundHeapOnAllocAt(Address(25, 0), 1000, 0), 0);
  leakbound_heap_next_cohort();
  std::thread([] { LeakboundHeapOnFree(Address(25, 0)); }).join();
  EXPECT_EQ(Census()[0].bytes, 0);
  EXPECT_EQ(Census()[0].blocks, 0);
}

TEST(HeapCoreCensusTest, FastSitelessFree_LeavesItsBirthCohort) {
  leakbound_heap_census_start();
  LeakboundHeapOnAlloc(Address(38, 0), 100);
  ASSERT_EQ(leakbound_heap_next_cohort(), 1);
  LeakboundHeapOnAlloc(Address(38, 64), 30);
  ASSERT_EQ(LeakboundHeapOnFreeFastSiteless(Address(38, 0)), 1);  // born in 0, freed in 1
  std::vector<leakbound_heap_cohort> census = Census();
  ASSERT_EQ(census.size(), 2u);
  EXPECT_EQ(census[0].bytes, 0);
  EXPECT_EQ(census[0].blocks, 0);
  EXPECT_EQ(census[1].bytes, 30);
  EXPECT_EQ(census[1].blocks, 1);
  leakbound_heap_census_start();  // a block of an earlier census leaves the older cohort
  ASSERT_EQ(LeakboundHeapOnFreeFastSiteless(Address(38, 64)), 1);
  census = Census();
  ASSERT_EQ(census.size(), 1u);
  EXPECT_EQ(census[0].bytes, 0);
}
