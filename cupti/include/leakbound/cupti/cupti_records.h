// Adapter from CUPTI activity records (CUDA 13: CUpti_ActivityMemory4 for MEMORY2,
// CUpti_ActivityMemoryPool3 for MEMORY_POOL) to the ledger's normalised records. Header-only use
// of CUPTI: no libcupti call, so tests fill the structs by hand on a machine without a GPU.
// Built only when LEAKBOUND_HAVE_CUPTI.
#pragma once

#include <cupti_activity.h>

#include <optional>

#include "leakbound/cupti/ledger.h"
#include "leakbound/cupti/records.h"

namespace leakbound::cupti {

// Bucket for a MEMORY2 record: a stream-ordered record (isAsync set, or memoryPoolType local or
// imported) is kPool whatever its memory kind; otherwise device, static (device or managed
// static), managed, pinned host, or other (pageable, array, unknown).
MemoryBucket BucketFor(CUpti_ActivityMemoryKind kind, CUpti_ActivityMemoryPoolType pool_type,
                       bool is_async);

// nullopt when memoryOperationType is neither allocation nor release. Pool size, utilised size
// and release threshold are taken only from local pools (CUPTI leaves them undefined otherwise;
// for imported pools the size field holds the exporting process id).
std::optional<MemoryRecord> FromCupti(const CUpti_ActivityMemory4& record);

// nullopt when memoryPoolOperationType is not created, destroyed or trimmed.
std::optional<PoolRecord> FromCupti(const CUpti_ActivityMemoryPool3& record);

enum class ActivityOutcome {
  kApplied,    // a MEMORY2 or MEMORY_POOL record, applied to the ledger
  kOtherKind,  // a kind the ledger does not use; ignored
  kInvalid,    // a memory record with an invalid operation type; ignored
};

// Dispatches on the record's kind. `activity` points at a whole record, as a buffer walk with
// cuptiActivityGetNextRecord yields it (or at a hand-filled CUpti_ActivityMemory4 / Pool3).
ActivityOutcome ApplyActivity(const CUpti_Activity* activity, MemoryLedger& ledger);

}  // namespace leakbound::cupti
