// Normalised memory records: what the MemoryLedger consumes. The CUPTI adapter
// (cupti_records.h) fills them from CUpti_ActivityMemory4 / CUpti_ActivityMemoryPool3; tests fill
// them by hand, so the ledger needs no CUDA headers, no driver and no device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace leakbound::cupti {

enum class MemoryOperation : std::uint8_t { kAllocation, kRelease };

// Where a live allocation is counted. Every record lands in exactly one bucket.
enum class MemoryBucket : std::uint8_t {
  kDevice,      // synchronous device allocations (cudaMalloc, cuMemAlloc, library workspaces)
  kPool,        // stream-ordered allocations from a memory pool (cudaMallocAsync, any location)
  kStatic,      // module globals (__device__ / __managed__ variables), loaded with a module
  kManaged,     // unified memory (cudaMallocManaged)
  kPinnedHost,  // page-locked host memory (cudaMallocHost, cudaHostAlloc)
  kOther,       // pageable, arrays and kinds CUPTI does not name
};
inline constexpr std::size_t kMemoryBucketCount = 6;

enum class PoolOperation : std::uint8_t { kCreated, kDestroyed, kTrimmed };

enum class PoolType : std::uint8_t {
  kUnknown,
  kLocal,     // created by this process: size, utilised size and threshold are valid
  kImported,  // imported from another process: CUPTI reports no sizes for it
};

// Stable lowercase names used in counters and evidence: "device", "pool", "static", "managed",
// "pinned_host", "other"; "allocation"/"release"; "created"/"destroyed"/"trimmed".
std::string_view BucketName(MemoryBucket bucket);
std::string_view OperationName(MemoryOperation operation);
std::string_view PoolOperationName(PoolOperation operation);
std::string_view PoolTypeName(PoolType type);

// One allocation or release of memory. Allocations and releases are matched by
// (device_id, context_id, address); `bytes` of a release is what the driver reported for it.
struct MemoryRecord {
  MemoryOperation operation = MemoryOperation::kAllocation;
  MemoryBucket bucket = MemoryBucket::kDevice;
  std::uint32_t device_id = 0;
  std::uint32_t context_id = 0;
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  std::uint64_t timestamp_ns = 0;
  std::uint32_t correlation_id = 0;
  std::optional<std::uint64_t> pc;
  std::optional<std::uint32_t> stream_id;  // set for stream-ordered operations
  // Pool state at the time of the operation, for kPool records. The pool address is always set
  // for them; size and utilised size only when the driver reports them (local pools).
  std::uint64_t pool_address = 0;
  PoolType pool_type = PoolType::kUnknown;
  std::optional<std::uint64_t> pool_release_threshold;
  std::optional<std::uint64_t> pool_size;
  std::optional<std::uint64_t> pool_utilized_bytes;
};

// A memory pool was created, destroyed or trimmed.
struct PoolRecord {
  PoolOperation operation = PoolOperation::kCreated;
  std::uint64_t pool_address = 0;
  std::uint32_t device_id = 0;
  PoolType type = PoolType::kLocal;
  std::uint64_t release_threshold = 0;
  std::uint64_t size = 0;            // reserved bytes after the operation
  std::uint64_t utilized_bytes = 0;  // bytes handed out to live allocations after the operation
  std::uint64_t timestamp_ns = 0;
  std::uint32_t correlation_id = 0;
};

}  // namespace leakbound::cupti
