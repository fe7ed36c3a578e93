// CUPTI activity record -> normalised record. Field meanings checked against CUDA 13.0's
// cupti_activity.h: which fields are valid for which pool type is documented there per field.
#include "leakbound/cupti/cupti_records.h"

#include <cstring>

namespace leakbound::cupti {
namespace {

PoolType PoolTypeFor(CUpti_ActivityMemoryPoolType type) {
  switch (type) {
    case CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL:
      return PoolType::kLocal;
    case CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED:
      return PoolType::kImported;
    default:
      return PoolType::kUnknown;
  }
}

bool IsPool(CUpti_ActivityMemoryPoolType type) {
  return type == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL ||
         type == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED;
}

}  // namespace

MemoryBucket BucketFor(CUpti_ActivityMemoryKind kind, CUpti_ActivityMemoryPoolType pool_type,
                       bool is_async) {
  if (is_async || IsPool(pool_type)) return MemoryBucket::kPool;
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
      return MemoryBucket::kDevice;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return MemoryBucket::kStatic;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
      return MemoryBucket::kManaged;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return MemoryBucket::kPinnedHost;
    default:
      return MemoryBucket::kOther;
  }
}

std::optional<MemoryRecord> FromCupti(const CUpti_ActivityMemory4& record) {
  MemoryRecord out;
  switch (record.memoryOperationType) {
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION:
      out.operation = MemoryOperation::kAllocation;
      break;
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE:
      out.operation = MemoryOperation::kRelease;
      break;
    default:
      return std::nullopt;
  }
  const auto& pool = record.memoryPoolConfig;
  out.bucket = BucketFor(record.memoryKind, pool.memoryPoolType, record.isAsync != 0);
  out.device_id = record.deviceId;
  out.context_id = record.contextId;
  out.address = record.address;
  out.bytes = record.bytes;
  out.timestamp_ns = record.timestamp;
  out.correlation_id = record.correlationId;
  if (record.PC != 0) out.pc = record.PC;
  if (record.streamId != CUPTI_INVALID_STREAM_ID) out.stream_id = record.streamId;
  if (IsPool(pool.memoryPoolType)) {
    out.pool_address = pool.address;
    out.pool_type = PoolTypeFor(pool.memoryPoolType);
    if (pool.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) {
      out.pool_release_threshold = pool.releaseThreshold;
      out.pool_size = pool.pool.size;
      out.pool_utilized_bytes = pool.utilizedSize;
    }
  }
  return out;
}

std::optional<PoolRecord> FromCupti(const CUpti_ActivityMemoryPool3& record) {
  PoolRecord out;
  switch (record.memoryPoolOperationType) {
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED:
      out.operation = PoolOperation::kCreated;
      break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED:
      out.operation = PoolOperation::kDestroyed;
      break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED:
      out.operation = PoolOperation::kTrimmed;
      break;
    default:
      return std::nullopt;
  }
  out.pool_address = record.address;
  out.device_id = record.deviceId;
  out.type = PoolTypeFor(record.memoryPoolType);
  if (record.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) {
    out.release_threshold = record.releaseThreshold;
    out.size = record.size;
    out.utilized_bytes = record.utilizedSize;
  }
  out.timestamp_ns = record.timestamp;
  out.correlation_id = record.correlationId;
  return out;
}

ActivityOutcome ApplyActivity(const CUpti_Activity* activity, MemoryLedger& ledger) {
  // The kind field leads every record and names its struct. Records are copied out with memcpy
  // rather than cast in place: that is CUPTI's idiom without the strict-aliasing hazard.
  CUpti_ActivityKind kind;
  std::memcpy(&kind, activity, sizeof(kind));
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      CUpti_ActivityMemory4 memory;
      std::memcpy(&memory, activity, sizeof(memory));
      auto record = FromCupti(memory);
      if (!record) return ActivityOutcome::kInvalid;
      ledger.Apply(*record);
      return ActivityOutcome::kApplied;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL: {
      CUpti_ActivityMemoryPool3 pool;
      std::memcpy(&pool, activity, sizeof(pool));
      auto record = FromCupti(pool);
      if (!record) return ActivityOutcome::kInvalid;
      ledger.Apply(*record);
      return ActivityOutcome::kApplied;
    }
    default:
      return ActivityOutcome::kOtherKind;
  }
}

}  // namespace leakbound::cupti
