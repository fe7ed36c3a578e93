// The CUPTI ledger as counters: their names, in the order AppendLedgerCounters writes them.
// harness::CuptiProbe samples them in-process; watch's injection library sends them on the
// channel (DEVICE records) in the same order. Every one is exact (the ledger counts records, it
// does not estimate); unmatched releases and dropped records say how far to trust the ledger,
// not whether anything leaks, so the harness reports them without judging them.
#pragma once

#include <vector>

#include "leakbound/cupti/ledger.h"

namespace leakbound::cupti {

inline constexpr const char* kDeviceBytesCounter = "cupti.device_bytes";
inline constexpr const char* kPoolBytesCounter = "cupti.pool_bytes";  // live from pools
inline constexpr const char* kPoolReservedBytesCounter = "cupti.pool_reserved_bytes";
inline constexpr const char* kStaticBytesCounter = "cupti.static_bytes";
inline constexpr const char* kManagedBytesCounter = "cupti.managed_bytes";
inline constexpr const char* kPinnedBytesCounter = "cupti.pinned_bytes";
inline constexpr const char* kLiveAllocationsCounter = "cupti.live_allocations";
inline constexpr const char* kUnmatchedReleasesCounter = "cupti.unmatched_releases";
inline constexpr const char* kDroppedRecordsCounter = "cupti.dropped_records";

// Every counter, in order; the last two are the informational ones.
inline constexpr const char* kLedgerCounters[] = {
    kDeviceBytesCounter,     kPoolBytesCounter,         kPoolReservedBytesCounter,
    kStaticBytesCounter,     kManagedBytesCounter,      kPinnedBytesCounter,
    kLiveAllocationsCounter, kUnmatchedReleasesCounter, kDroppedRecordsCounter};

// Appends one snapshot's values, in kLedgerCounters order, to `out` (what is there stays).
void AppendLedgerCounters(const LedgerSnapshot& snapshot, std::vector<double>& out);

}  // namespace leakbound::cupti
