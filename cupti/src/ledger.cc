// MemoryLedger: pairs allocations with releases per (device, context, address), tolerating
// out-of-order arrival, and keeps per-bucket and per-pool live totals incrementally so that a
// snapshot costs O(pools + pending releases), not O(live allocations).
#include "leakbound/cupti/ledger.h"

#include <algorithm>
#include <functional>
#include <iterator>

namespace leakbound::cupti {
namespace {

// Full sweeps bound the memory held by settled pairs at keys that are never touched again.
constexpr std::uint64_t kSweepInterval = 1024;

}  // namespace

std::uint64_t LedgerSnapshot::DeviceResidentBytes() const {
  return bucket(MemoryBucket::kDevice).live_bytes + bucket(MemoryBucket::kPool).live_bytes +
         bucket(MemoryBucket::kStatic).live_bytes + bucket(MemoryBucket::kManaged).live_bytes;
}

std::size_t MemoryLedger::SlotKeyHash::operator()(const SlotKey& key) const {
  std::uint64_t ids = (static_cast<std::uint64_t>(key.device_id) << 32) | key.context_id;
  return std::hash<std::uint64_t>{}(key.address) ^ (std::hash<std::uint64_t>{}(ids)*31);
}

MemoryLedger::MemoryLedger(LedgerOptions options) : options_(options) {}

std::uint64_t MemoryLedger::Cutoff() const {
  return newest_timestamp_ns_ > options_.reorder_grace_ns
             ? newest_timestamp_ns_ - options_.reorder_grace_ns
             : 0;
}

// A release frees the most recent unpaired allocation at or before it. The true history at one
// address alternates allocation, release, allocation, ...; whatever subset has arrived, every
// true pair whose two records are both present is adjacent in it and is therefore paired right.
void MemoryLedger::Pair(Slot& slot) const {
  slot.live.clear();
  slot.pending.clear();
  for (std::size_t i = 0; i < slot.events.size(); ++i) {
    if (slot.events[i].operation == MemoryOperation::kAllocation) {
      slot.live.push_back(i);
    } else if (!slot.live.empty()) {
      slot.live.pop_back();
    } else {
      slot.pending.push_back(i);
    }
  }
}

void MemoryLedger::AddContribution(const Slot& slot) {
  for (std::size_t index : slot.live) {
    const Event& event = slot.events[index];
    BucketTotals& totals = buckets_[static_cast<std::size_t>(event.bucket)];
    totals.live_bytes += event.bytes;
    totals.live_allocations += 1;
    live_bytes_ += event.bytes;
    live_allocations_ += 1;
    if (event.pool_address != 0) {
      PoolUse& use = pool_use_[event.pool_address];
      use.live_allocations += 1;
      use.live_bytes += event.bytes;
    }
  }
  for (std::size_t index : slot.pending) {
    pending_.emplace(slot.events[index].timestamp_ns, slot.events[index].bytes);
  }
}

void MemoryLedger::RemoveContribution(const Slot& slot) {
  for (std::size_t index : slot.live) {
    const Event& event = slot.events[index];
    BucketTotals& totals = buckets_[static_cast<std::size_t>(event.bucket)];
    totals.live_bytes -= event.bytes;
    totals.live_allocations -= 1;
    live_bytes_ -= event.bytes;
    live_allocations_ -= 1;
    if (event.pool_address != 0) {
      auto use = pool_use_.find(event.pool_address);
      use->second.live_allocations -= 1;
      use->second.live_bytes -= event.bytes;
      if (use->second.live_allocations == 0) pool_use_.erase(use);
    }
  }
  for (std::size_t index : slot.pending) {
    auto [first, last] = pending_.equal_range(slot.events[index].timestamp_ns);
    for (auto it = first; it != last; ++it) {
      if (it->second == slot.events[index].bytes) {
        pending_.erase(it);
        break;
      }
    }
  }
}

bool MemoryLedger::HasPrunable(const Slot& slot) const {
  // Only settled pairs and pending releases are dropped: a slot of live allocations has neither.
  if (slot.pending.empty() && slot.live.size() == slot.events.size()) return false;
  // Events are sorted by timestamp: nothing to do unless the oldest one is past the grace.
  return slot.events.front().timestamp_ns < Cutoff();
}

void MemoryLedger::Prune(Slot& slot) {
  if (!HasPrunable(slot)) return;
  const std::uint64_t cutoff = Cutoff();
  std::vector<bool> drop(slot.events.size(), false);
  bool any = false;
  // Re-walk to recover which allocation each settled release closed.
  std::vector<std::size_t> open;
  for (std::size_t i = 0; i < slot.events.size(); ++i) {
    const Event& event = slot.events[i];
    if (event.operation == MemoryOperation::kAllocation) {
      open.push_back(i);
    } else if (!open.empty()) {
      if (event.timestamp_ns < cutoff) {
        drop[open.back()] = drop[i] = any = true;
      }
      open.pop_back();
    } else if (event.timestamp_ns < cutoff) {
      unmatched_releases_ += 1;
      unmatched_release_bytes_ += event.bytes;
      drop[i] = any = true;
    }
  }
  if (!any) return;
  std::vector<Event> kept;
  kept.reserve(slot.events.size());
  for (std::size_t i = 0; i < slot.events.size(); ++i) {
    if (!drop[i]) kept.push_back(slot.events[i]);
  }
  slot.events.swap(kept);
  Pair(slot);
}

void MemoryLedger::SweepAll() {
  applies_since_sweep_ = 0;
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (!HasPrunable(it->second)) {
      ++it;
      continue;
    }
    RemoveContribution(it->second);
    Prune(it->second);
    AddContribution(it->second);
    it = it->second.events.empty() ? slots_.erase(it) : std::next(it);
  }
}

void MemoryLedger::Apply(const MemoryRecord& record) {
  newest_timestamp_ns_ = std::max(newest_timestamp_ns_, record.timestamp_ns);
  const SlotKey key{record.device_id, record.context_id, record.address};
  Slot& slot = slots_[key];
  RemoveContribution(slot);
  const Event event{record.timestamp_ns, next_sequence_++, record.operation,
                    record.bucket,       record.bytes,     record.pool_address};
  auto order = [](const Event& a, const Event& b) {
    if (a.timestamp_ns != b.timestamp_ns) return a.timestamp_ns < b.timestamp_ns;
    if (a.operation != b.operation) return a.operation == MemoryOperation::kAllocation;
    return a.sequence < b.sequence;
  };
  slot.events.insert(std::upper_bound(slot.events.begin(), slot.events.end(), event, order), event);
  Pair(slot);
  Prune(slot);
  AddContribution(slot);
  if (slot.events.empty()) slots_.erase(key);
  peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);

  if (record.bucket == MemoryBucket::kPool && record.pool_address != 0) NotePoolState(record);
  if (++applies_since_sweep_ >= kSweepInterval) SweepAll();
}

MemoryLedger::PoolEntry* MemoryLedger::LivePool(std::uint64_t address, std::uint64_t timestamp_ns) {
  auto pool = pools_.find(address);
  if (pool != pools_.end()) return &pool->second;
  auto destroyed = destroyed_pools_.find(address);
  if (destroyed != destroyed_pools_.end()) {
    // A late record about the pool that was destroyed: it must not bring it back.
    if (timestamp_ns <= destroyed->second) return nullptr;
    destroyed_pools_.erase(destroyed);  // a new pool at a reused address
  }
  PoolEntry& entry = pools_[address];
  entry.state.address = address;
  return &entry;
}

void MemoryLedger::NotePoolState(const MemoryRecord& record) {
  PoolEntry* pool = LivePool(record.pool_address, record.timestamp_ns);
  if (pool == nullptr) return;
  if (pool->updated_at_ns == 0) pool->state.device_id = record.device_id;
  if (record.pool_type != PoolType::kUnknown) pool->state.type = record.pool_type;
  if (record.pool_release_threshold) pool->state.release_threshold = *record.pool_release_threshold;
  if (record.timestamp_ns < pool->updated_at_ns) return;  // older than what the pool shows
  if (record.pool_size) pool->state.size = *record.pool_size;
  if (record.pool_utilized_bytes) pool->state.utilized_bytes = *record.pool_utilized_bytes;
  pool->updated_at_ns = record.timestamp_ns;
}

void MemoryLedger::Apply(const PoolRecord& record) {
  newest_timestamp_ns_ = std::max(newest_timestamp_ns_, record.timestamp_ns);
  if (record.operation == PoolOperation::kDestroyed) {
    pools_.erase(record.pool_address);
    std::uint64_t& destroyed_at = destroyed_pools_[record.pool_address];
    destroyed_at = std::max(destroyed_at, record.timestamp_ns);
    return;
  }
  PoolEntry* pool = LivePool(record.pool_address, record.timestamp_ns);
  if (pool == nullptr) return;
  pool->state.device_id = record.device_id;
  pool->state.type = record.type;
  pool->state.release_threshold = record.release_threshold;
  if (record.timestamp_ns < pool->updated_at_ns) return;
  pool->state.size = record.size;
  pool->state.utilized_bytes = record.utilized_bytes;
  pool->updated_at_ns = record.timestamp_ns;
}

void MemoryLedger::NoteDropped(std::uint64_t count) { dropped_records_ += count; }

LedgerSnapshot MemoryLedger::Snapshot() const {
  LedgerSnapshot snapshot;
  SnapshotInto(snapshot);
  return snapshot;
}

void MemoryLedger::SnapshotInto(LedgerSnapshot& out) const {
  out.buckets = buckets_;
  out.live_bytes = live_bytes_;
  out.live_allocations = live_allocations_;
  out.peak_live_bytes = peak_live_bytes_;
  out.dropped_records = dropped_records_;
  out.newest_timestamp_ns = newest_timestamp_ns_;

  out.unmatched_releases = unmatched_releases_;
  out.unmatched_release_bytes = unmatched_release_bytes_;
  out.pending_releases = 0;
  out.pending_release_bytes = 0;
  const auto first_pending = pending_.lower_bound(Cutoff());
  for (auto it = pending_.begin(); it != first_pending; ++it) {
    out.unmatched_releases += 1;
    out.unmatched_release_bytes += it->second;
  }
  for (auto it = first_pending; it != pending_.end(); ++it) {
    out.pending_releases += 1;
    out.pending_release_bytes += it->second;
  }

  out.pools.clear();
  out.pool_reserved_bytes = 0;
  out.pool_utilized_bytes = 0;
  for (const auto& [address, entry] : pools_) {
    PoolState state = entry.state;
    if (auto use = pool_use_.find(address); use != pool_use_.end()) {
      state.live_allocations = use->second.live_allocations;
      state.live_bytes = use->second.live_bytes;
    }
    out.pool_reserved_bytes += state.size;
    out.pool_utilized_bytes += state.utilized_bytes;
    out.pools.push_back(state);
  }
  out.destroyed_pool_live_allocations = 0;
  out.destroyed_pool_live_bytes = 0;
  for (const auto& [address, use] : pool_use_) {
    if (pools_.count(address) == 0) {
      out.destroyed_pool_live_allocations += use.live_allocations;
      out.destroyed_pool_live_bytes += use.live_bytes;
    }
  }
}

}  // namespace leakbound::cupti
