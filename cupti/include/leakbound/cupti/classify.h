// Classification of CUPTI ledger snapshots taken at block ends, as the leak zoo's GPU entries
// plant them: memory that bypasses the runtime allocator, library handles created every step,
// and pool fragmentation; plus reconciliation of the ledger against the runtime's live bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "leakbound/cupti/ledger.h"
#include "leakbound/reports/verdict_class.h"

namespace leakbound::cupti {

// Inputs that do not fit together (series of different lengths, warm-up past the end). The
// message says which input was wrong and what to pass instead.
class ClassificationError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Fewer block ends than this cannot tell steady growth from one late allocation.
inline constexpr std::size_t kMinBlockEnds = 3;

enum class FindingKind : std::uint8_t {
  // A bucket grows while the runtime allocator's live bytes stay flat (or were not given):
  // memory allocated around the allocator, e.g. a raw cudaMalloc every step.
  kAllocatorBypass,
  // A bucket grows and the runtime allocator's live bytes grow at least as fast: the runtime's own
  // leak, confirmed by the driver's view.
  kRuntimeGrowth,
  // Static or other memory grows (with small device allocations): a library handle (cuBLAS,
  // cuDNN, ...) created every step and never destroyed.
  kLibraryHandles,
  // Pool reserved bytes grow while utilised bytes (and runtime live bytes) stay flat.
  kPoolFragmentation,
};
std::string_view FindingKindName(FindingKind kind);  // "allocator-bypass", ...

struct Finding {
  FindingKind kind = FindingKind::kAllocatorBypass;
  reports::VerdictClass verdict = reports::kUnboundedGrowth;  // or reports::kPoolFragmentation
  std::string series;   // what grew: a bucket name ("device", "static", ...) or "pool_reserved"
  double bytes_per_block = 0;        // (last - first) / (block ends - 1)
  double allocations_per_block = 0;  // same, for live allocation counts (0 for pool_reserved)
  std::string evidence;              // one sentence naming the series, its rate and the cause
};

struct Classification {
  reports::VerdictClass verdict = reports::kPass;  // or kUnboundedGrowth (wins), kPoolFragmentation
  std::string evidence;  // the findings' sentences, or what was flat
  std::vector<Finding> findings;
  bool judged = false;  // false (and verdict kPass) with fewer than kMinBlockEnds snapshots
};

// `block_ends[i]` is the ledger at the end of measured block i (warm-up excluded).
// `runtime_live_bytes`, when not empty, holds the runtime allocator's live bytes at the same
// points and must have the same length. A series "grows" when its last value exceeds its first
// and it rose at more than half of the block transitions (so one late lazy initialisation does
// not count, a per-step leak does).
Classification ClassifyBlockEnds(std::span<const LedgerSnapshot> block_ends,
                                 std::span<const std::uint64_t> runtime_live_bytes = {});

struct Reconciliation {
  // Per snapshot: ledger device-resident bytes minus runtime live bytes, i.e. memory owned by
  // someone else (CUDA context, libraries, caches). Negative if the runtime counts memory the
  // ledger did not see (allocated before the observer started).
  std::vector<std::int64_t> owned_by_others_bytes;
  std::size_t warmup_snapshots = 0;
  bool flat_after_warmup = false;  // every value from warmup_snapshots on is equal
  std::int64_t drift_bytes = 0;    // last minus the first value after warm-up
  std::string evidence;
};

Reconciliation Reconcile(std::span<const LedgerSnapshot> snapshots,
                         std::span<const std::uint64_t> runtime_live_bytes,
                         std::size_t warmup_snapshots);

}  // namespace leakbound::cupti
