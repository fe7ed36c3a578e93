// Names of the normalised record enums, shared by counters, evidence strings and tests.
#include "leakbound/cupti/records.h"

namespace leakbound::cupti {

std::string_view BucketName(MemoryBucket bucket) {
  switch (bucket) {
    case MemoryBucket::kDevice:
      return "device";
    case MemoryBucket::kPool:
      return "pool";
    case MemoryBucket::kStatic:
      return "static";
    case MemoryBucket::kManaged:
      return "managed";
    case MemoryBucket::kPinnedHost:
      return "pinned_host";
    case MemoryBucket::kOther:
      return "other";
  }
  return "other";
}

std::string_view OperationName(MemoryOperation operation) {
  return operation == MemoryOperation::kAllocation ? "allocation" : "release";
}

std::string_view PoolOperationName(PoolOperation operation) {
  switch (operation) {
    case PoolOperation::kCreated:
      return "created";
    case PoolOperation::kDestroyed:
      return "destroyed";
    case PoolOperation::kTrimmed:
      return "trimmed";
  }
  return "created";
}

std::string_view PoolTypeName(PoolType type) {
  switch (type) {
    case PoolType::kUnknown:
      return "unknown";
    case PoolType::kLocal:
      return "local";
    case PoolType::kImported:
      return "imported";
  }
  return "unknown";
}

}  // namespace leakbound::cupti
