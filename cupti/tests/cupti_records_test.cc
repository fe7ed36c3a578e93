// The CUPTI adapter, fed hand-filled CUpti_ActivityMemory4 / CUpti_ActivityMemoryPool3 records
// (as CUDA 13's cupti_activity.h defines them): no libcupti call, no driver, no device.
#include "leakbound/cupti/cupti_records.h"

#include <gtest/gtest.h>

#include <cstring>

namespace leakbound::cupti {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

CUpti_ActivityMemory4 MemoryActivity(CUpti_ActivityMemoryOperationType operation,
                                     CUpti_ActivityMemoryKind kind) {
  CUpti_ActivityMemory4 record;
  std::memset(&record, 0, sizeof(record));
  record.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  record.memoryOperationType = operation;
  record.memoryKind = kind;
  record.correlationId = 42;
  record.address = 0x7f00'0000'0000;
  record.bytes = 3 * kMiB;
  record.timestamp = 123'456'789;
  record.PC = 0xdead'beef;
  record.processId = 1234;
  record.deviceId = 1;
  record.contextId = 3;
  record.streamId = CUPTI_INVALID_STREAM_ID;
  record.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
  return record;
}

CUpti_ActivityMemoryPool3 PoolActivity(CUpti_ActivityMemoryPoolOperationType operation,
                                       CUpti_ActivityMemoryPoolType type) {
  CUpti_ActivityMemoryPool3 record;
  std::memset(&record, 0, sizeof(record));
  record.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  record.memoryPoolOperationType = operation;
  record.memoryPoolType = type;
  record.correlationId = 9;
  record.deviceId = 2;
  record.address = 0x7000'0000'0000;
  record.size = 32 * kMiB;
  record.releaseThreshold = 64 * kMiB;
  record.timestamp = 555;
  record.utilizedSize = 4 * kMiB;
  return record;
}

TEST(FromCupti, SynchronousDeviceAllocation_CopiesEveryField) {
  const auto record = FromCupti(MemoryActivity(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                                               CUPTI_ACTIVITY_MEMORY_KIND_DEVICE));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->operation, MemoryOperation::kAllocation);
  EXPECT_EQ(record->bucket, MemoryBucket::kDevice);
  EXPECT_EQ(record->device_id, 1u);
  EXPECT_EQ(record->context_id, 3u);
  EXPECT_EQ(record->address, 0x7f00'0000'0000u);
  EXPECT_EQ(record->bytes, 3 * kMiB);
  EXPECT_EQ(record->timestamp_ns, 123'456'789u);
  EXPECT_EQ(record->correlation_id, 42u);
  EXPECT_EQ(record->pc, std::optional<std::uint64_t>(0xdead'beef));
  EXPECT_FALSE(record->stream_id.has_value());
  EXPECT_EQ(record->pool_address, 0u);
  EXPECT_FALSE(record->pool_size.has_value());
}

TEST(FromCupti, Release_IsARelease) {
  const auto record = FromCupti(MemoryActivity(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
                                               CUPTI_ACTIVITY_MEMORY_KIND_DEVICE));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->operation, MemoryOperation::kRelease);
}

TEST(FromCupti, StreamOrderedAllocationFromALocalPool_CarriesThePoolState) {
  CUpti_ActivityMemory4 activity = MemoryActivity(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                                                  CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  activity.isAsync = 1;
  activity.streamId = 7;
  activity.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  activity.memoryPoolConfig.address = 0x7000'0000'0000;
  activity.memoryPoolConfig.releaseThreshold = 64 * kMiB;
  activity.memoryPoolConfig.pool.size = 32 * kMiB;
  activity.memoryPoolConfig.utilizedSize = 5 * kMiB;

  const auto record = FromCupti(activity);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->bucket, MemoryBucket::kPool);
  EXPECT_EQ(record->stream_id, std::optional<std::uint32_t>(7));
  EXPECT_EQ(record->pool_address, 0x7000'0000'0000u);
  EXPECT_EQ(record->pool_type, PoolType::kLocal);
  EXPECT_EQ(record->pool_release_threshold, std::optional<std::uint64_t>(64 * kMiB));
  EXPECT_EQ(record->pool_size, std::optional<std::uint64_t>(32 * kMiB));
  EXPECT_EQ(record->pool_utilized_bytes, std::optional<std::uint64_t>(5 * kMiB));
}

TEST(FromCupti, ImportedPool_HasNoSizesBecauseTheUnionHoldsAProcessId) {
  CUpti_ActivityMemory4 activity = MemoryActivity(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                                                  CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  activity.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED;
  activity.memoryPoolConfig.address = 0x7100'0000'0000;
  activity.memoryPoolConfig.pool.processId = 4321;
  const auto record = FromCupti(activity);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->bucket, MemoryBucket::kPool);
  EXPECT_EQ(record->pool_type, PoolType::kImported);
  EXPECT_EQ(record->pool_address, 0x7100'0000'0000u);
  EXPECT_FALSE(record->pool_size.has_value());
  EXPECT_FALSE(record->pool_utilized_bytes.has_value());
  EXPECT_FALSE(record->pool_release_threshold.has_value());
}

TEST(FromCupti, AsyncAllocationWithoutPoolConfig_IsStillPoolMemory) {
  CUpti_ActivityMemory4 activity = MemoryActivity(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                                                  CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  activity.isAsync = 1;
  const auto record = FromCupti(activity);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->bucket, MemoryBucket::kPool);
  EXPECT_EQ(record->pool_address, 0u);
}

TEST(FromCupti, MemoryKinds_MapToBuckets) {
  const std::pair<CUpti_ActivityMemoryKind, MemoryBucket> table[] = {
      {CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, MemoryBucket::kDevice},
      {CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC, MemoryBucket::kStatic},
      {CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC, MemoryBucket::kStatic},
      {CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, MemoryBucket::kManaged},
      {CUPTI_ACTIVITY_MEMORY_KIND_PINNED, MemoryBucket::kPinnedHost},
      {CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, MemoryBucket::kOther},
      {CUPTI_ACTIVITY_MEMORY_KIND_ARRAY, MemoryBucket::kOther},
      {CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN, MemoryBucket::kOther},
  };
  for (const auto& [kind, bucket] : table) {
    const auto record =
        FromCupti(MemoryActivity(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, kind));
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->bucket, bucket) << "memory kind " << static_cast<int>(kind);
  }
}

TEST(FromCupti, InvalidMemoryOperation_IsRejected) {
  EXPECT_FALSE(FromCupti(MemoryActivity(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID,
                                        CUPTI_ACTIVITY_MEMORY_KIND_DEVICE))
                   .has_value());
}

TEST(FromCupti, PoolOperations_CopyEveryField) {
  const std::pair<CUpti_ActivityMemoryPoolOperationType, PoolOperation> table[] = {
      {CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, PoolOperation::kCreated},
      {CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED, PoolOperation::kDestroyed},
      {CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED, PoolOperation::kTrimmed},
  };
  for (const auto& [cupti_operation, operation] : table) {
    const auto record =
        FromCupti(PoolActivity(cupti_operation, CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL));
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->operation, operation);
    EXPECT_EQ(record->pool_address, 0x7000'0000'0000u);
    EXPECT_EQ(record->device_id, 2u);
    EXPECT_EQ(record->type, PoolType::kLocal);
    EXPECT_EQ(record->release_threshold, 64 * kMiB);
    EXPECT_EQ(record->size, 32 * kMiB);
    EXPECT_EQ(record->utilized_bytes, 4 * kMiB);
    EXPECT_EQ(record->timestamp_ns, 555u);
    EXPECT_EQ(record->correlation_id, 9u);
  }
  EXPECT_FALSE(FromCupti(PoolActivity(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_INVALID,
                                      CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL))
                   .has_value());
}

TEST(FromCupti, ImportedPoolRecord_HasNoSizes) {
  const auto record = FromCupti(PoolActivity(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED,
                                             CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->type, PoolType::kImported);
  EXPECT_EQ(record->size, 0u);
  EXPECT_EQ(record->utilized_bytes, 0u);
  EXPECT_EQ(record->release_threshold, 0u);
}

TEST(ApplyActivity, DispatchesOnKindAndFeedsTheLedger) {
  MemoryLedger ledger;
  CUpti_ActivityMemoryPool3 created = PoolActivity(
      CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL);
  EXPECT_EQ(ApplyActivity(reinterpret_cast<const CUpti_Activity*>(&created), ledger),
            ActivityOutcome::kApplied);
  CUpti_ActivityMemory4 allocation = MemoryActivity(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                                                    CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(ApplyActivity(reinterpret_cast<const CUpti_Activity*>(&allocation), ledger),
            ActivityOutcome::kApplied);
  CUpti_ActivityMemory4 invalid = MemoryActivity(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID,
                                                 CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(ApplyActivity(reinterpret_cast<const CUpti_Activity*>(&invalid), ledger),
            ActivityOutcome::kInvalid);
  CUpti_ActivityMemory4 other = allocation;
  other.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  EXPECT_EQ(ApplyActivity(reinterpret_cast<const CUpti_Activity*>(&other), ledger),
            ActivityOutcome::kOtherKind);

  const LedgerSnapshot snapshot = ledger.Snapshot();
  EXPECT_EQ(snapshot.bucket(MemoryBucket::kDevice), (BucketTotals{3 * kMiB, 1}));
  ASSERT_EQ(snapshot.pools.size(), 1u);
  EXPECT_EQ(snapshot.pools[0].size, 32 * kMiB);
}

}  // namespace
}  // namespace leakbound::cupti
