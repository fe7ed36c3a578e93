// Test helpers: hand-built normalised records and a tiny simulated process that drives a
// MemoryLedger step by step, so the zoo's GPU leak shapes can be produced without a GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "leakbound/cupti/ledger.h"
#include "leakbound/cupti/records.h"

namespace leakbound::cupti::testing {

inline constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

inline MemoryRecord Allocation(std::uint64_t address, std::uint64_t bytes,
                               std::uint64_t timestamp_ns,
                               MemoryBucket bucket = MemoryBucket::kDevice) {
  MemoryRecord record;
  record.operation = MemoryOperation::kAllocation;
  record.bucket = bucket;
  record.address = address;
  record.bytes = bytes;
  record.timestamp_ns = timestamp_ns;
  return record;
}

inline MemoryRecord Release(std::uint64_t address, std::uint64_t bytes, std::uint64_t timestamp_ns,
                            MemoryBucket bucket = MemoryBucket::kDevice) {
  MemoryRecord record = Allocation(address, bytes, timestamp_ns, bucket);
  record.operation = MemoryOperation::kRelease;
  return record;
}

// A stream-ordered record from `pool`, carrying the pool's size and utilised bytes after it.
inline MemoryRecord PoolRecordFor(MemoryRecord record, std::uint64_t pool, std::uint64_t pool_size,
                                  std::uint64_t utilized) {
  record.bucket = MemoryBucket::kPool;
  record.pool_address = pool;
  record.pool_type = PoolType::kLocal;
  record.pool_size = pool_size;
  record.pool_utilized_bytes = utilized;
  record.stream_id = 7;
  return record;
}

inline PoolRecord PoolEvent(PoolOperation operation, std::uint64_t pool, std::uint64_t size,
                            std::uint64_t utilized, std::uint64_t timestamp_ns) {
  PoolRecord record;
  record.operation = operation;
  record.pool_address = pool;
  record.device_id = 0;
  record.type = PoolType::kLocal;
  record.release_threshold = 64 * kMiB;
  record.size = size;
  record.utilized_bytes = utilized;
  record.timestamp_ns = timestamp_ns;
  return record;
}

// A process whose allocations the ledger sees in order, one clock tick per record.
class SyntheticProcess {
 public:
  std::uint64_t Allocate(MemoryBucket bucket, std::uint64_t bytes) {
    const std::uint64_t address = next_address_;
    next_address_ += bytes + 256;
    ledger_.Apply(Allocation(address, bytes, ++clock_, bucket));
    return address;
  }
  void Free(std::uint64_t address, std::uint64_t bytes, MemoryBucket bucket) {
    ledger_.Apply(Release(address, bytes, ++clock_, bucket));
  }
  // Stream-ordered allocation from `pool_` after which the pool has `pool_size` reserved bytes.
  std::uint64_t PoolAllocate(std::uint64_t bytes, std::uint64_t pool_size) {
    pool_utilized_ += bytes;
    const std::uint64_t address = next_address_;
    next_address_ += bytes + 256;
    ledger_.Apply(
        PoolRecordFor(Allocation(address, bytes, ++clock_), kPool, pool_size, pool_utilized_));
    return address;
  }
  void PoolFree(std::uint64_t address, std::uint64_t bytes, std::uint64_t pool_size) {
    pool_utilized_ -= bytes;
    ledger_.Apply(
        PoolRecordFor(Release(address, bytes, ++clock_), kPool, pool_size, pool_utilized_));
  }
  LedgerSnapshot Snapshot() const { return ledger_.Snapshot(); }
  MemoryLedger& ledger() { return ledger_; }

  // Runs `warmup` steps, then `blocks` blocks of `steps` steps, and returns the snapshots at the
  // block ends (warm-up excluded). `step(i)` is called with the global step index.
  std::vector<LedgerSnapshot> Run(int warmup, int blocks, int steps,
                                  const std::function<void(int)>& step) {
    int index = 0;
    for (; index < warmup; ++index) step(index);
    std::vector<LedgerSnapshot> block_ends;
    for (int block = 0; block < blocks; ++block) {
      for (int i = 0; i < steps; ++i) step(index++);
      block_ends.push_back(Snapshot());
    }
    return block_ends;
  }

  static constexpr std::uint64_t kPool = 0x7000'0000'0000;

 private:
  MemoryLedger ledger_;
  std::uint64_t clock_ = 0;
  std::uint64_t next_address_ = 0x7f00'0000'0000;
  std::uint64_t pool_utilized_ = 0;
};

}  // namespace leakbound::cupti::testing
