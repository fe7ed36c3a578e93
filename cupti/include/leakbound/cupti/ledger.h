// MemoryLedger: the live device allocations of a process, rebuilt from normalised memory records
// (records.h), independent of the runtime's own allocator. Pure bookkeeping: no CUDA calls, so it
// is tested on any machine with synthetic records; CuptiObserver feeds it real ones.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "leakbound/cupti/records.h"

namespace leakbound::cupti {

struct LedgerOptions {
  // CUPTI fills one activity buffer per thread, so records do not arrive in timestamp order: a
  // release can be processed before the allocation it frees. Such a release waits as "pending"
  // until this much newer activity (by record timestamp) has been seen, then counts as unmatched.
  // Settled allocation/release pairs are remembered for as long, so a record that arrives late
  // but within the grace is still paired correctly. Records later than that can be mispaired.
  std::uint64_t reorder_grace_ns = 1'000'000'000;
};

struct BucketTotals {
  std::uint64_t live_bytes = 0;
  std::uint64_t live_allocations = 0;
  bool operator==(const BucketTotals&) const = default;
};

// One memory pool that has not been destroyed.
struct PoolState {
  std::uint64_t address = 0;
  std::uint32_t device_id = 0;
  PoolType type = PoolType::kUnknown;
  std::uint64_t release_threshold = 0;
  std::uint64_t size = 0;              // reserved bytes, as the driver last reported them
  std::uint64_t utilized_bytes = 0;    // handed-out bytes, as the driver last reported them
  std::uint64_t live_allocations = 0;  // the ledger's own count of live allocations from it
  std::uint64_t live_bytes = 0;
  bool operator==(const PoolState&) const = default;
};

struct LedgerSnapshot {
  std::array<BucketTotals, kMemoryBucketCount> buckets{};
  std::uint64_t live_bytes = 0;  // all buckets
  std::uint64_t live_allocations = 0;
  std::uint64_t peak_live_bytes = 0;  // in processing order: an upper bound when records reorder
  // Releases with no allocation at their key (freed memory allocated before the observer started,
  // or whose allocation record was dropped), counted once they are older than the grace.
  std::uint64_t unmatched_releases = 0;
  std::uint64_t unmatched_release_bytes = 0;
  std::uint64_t pending_releases = 0;  // still within the grace, waiting for their allocation
  std::uint64_t pending_release_bytes = 0;
  std::uint64_t dropped_records = 0;      // reported lost by the producer: the ledger may be wrong
  std::vector<PoolState> pools;           // live pools, sorted by address
  std::uint64_t pool_reserved_bytes = 0;  // sum of PoolState::size
  std::uint64_t pool_utilized_bytes = 0;  // sum of PoolState::utilized_bytes
  // Allocations still live although their pool was destroyed (its bookkeeping is gone).
  std::uint64_t destroyed_pool_live_allocations = 0;
  std::uint64_t destroyed_pool_live_bytes = 0;
  std::uint64_t newest_timestamp_ns = 0;

  const BucketTotals& bucket(MemoryBucket b) const { return buckets[static_cast<std::size_t>(b)]; }
  // Bytes resident in GPU memory: device + pool + static + managed (not pinned host, not other).
  std::uint64_t DeviceResidentBytes() const;
  bool operator==(const LedgerSnapshot&) const = default;
};

// Not thread-safe: one producer at a time (CuptiObserver serialises with a mutex).
class MemoryLedger {
 public:
  explicit MemoryLedger(LedgerOptions options = {});

  void Apply(const MemoryRecord& record);
  void Apply(const PoolRecord& record);
  // The producer lost `count` records (CUPTI had no buffer for them).
  void NoteDropped(std::uint64_t count);

  LedgerSnapshot Snapshot() const;
  // Same, reusing `out`'s storage (no heap allocation once `out.pools` has grown).
  void SnapshotInto(LedgerSnapshot& out) const;

  const LedgerOptions& options() const { return options_; }

 private:
  struct SlotKey {
    std::uint32_t device_id;
    std::uint32_t context_id;
    std::uint64_t address;
    bool operator==(const SlotKey&) const = default;
  };
  struct SlotKeyHash {
    std::size_t operator()(const SlotKey& key) const;
  };
  struct Event {
    std::uint64_t timestamp_ns;
    std::uint64_t sequence;  // arrival order, breaks timestamp ties
    MemoryOperation operation;
    MemoryBucket bucket;
    std::uint64_t bytes;
    std::uint64_t pool_address;
  };
  // All recent events at one key, sorted by (timestamp, allocations first, sequence). Pairing is
  // recomputed from them whenever one arrives, so a late record repairs earlier guesses.
  struct Slot {
    std::vector<Event> events;
    std::vector<std::size_t> live;     // indices of unpaired allocations
    std::vector<std::size_t> pending;  // indices of unpaired releases
  };
  struct PoolEntry {
    PoolState state;
    std::uint64_t updated_at_ns = 0;
  };
  struct PoolUse {
    std::uint64_t live_allocations = 0;
    std::uint64_t live_bytes = 0;
  };

  std::uint64_t Cutoff() const;
  void Pair(Slot& slot) const;
  void AddContribution(const Slot& slot);
  void RemoveContribution(const Slot& slot);
  bool HasPrunable(const Slot& slot) const;  // `slot` is paired and not empty
  // Drops pairs settled before the cutoff; moves pending releases older than it to unmatched.
  void Prune(Slot& slot);
  void SweepAll();
  void NotePoolState(const MemoryRecord& record);
  PoolEntry* LivePool(std::uint64_t address, std::uint64_t timestamp_ns);

  LedgerOptions options_;
  std::unordered_map<SlotKey, Slot, SlotKeyHash> slots_;
  std::array<BucketTotals, kMemoryBucketCount> buckets_{};
  std::uint64_t live_bytes_ = 0;
  std::uint64_t live_allocations_ = 0;
  std::uint64_t peak_live_bytes_ = 0;
  std::multimap<std::uint64_t, std::uint64_t> pending_;  // timestamp -> bytes, all slots
  std::uint64_t unmatched_releases_ = 0;                 // pruned pending releases
  std::uint64_t unmatched_release_bytes_ = 0;
  std::uint64_t dropped_records_ = 0;
  std::uint64_t newest_timestamp_ns_ = 0;
  std::uint64_t next_sequence_ = 0;
  std::uint64_t applies_since_sweep_ = 0;
  std::map<std::uint64_t, PoolEntry> pools_;                          // by pool address
  std::unordered_map<std::uint64_t, std::uint64_t> destroyed_pools_;  // address -> destroyed at
  std::unordered_map<std::uint64_t, PoolUse> pool_use_;  // by pool address, live > 0 only
};

}  // namespace leakbound::cupti
