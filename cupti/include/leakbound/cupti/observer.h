// CuptiObserver: collects CUPTI memory activity (kinds MEMORY2 and MEMORY_POOL) into a
// MemoryLedger, a view of device memory independent of the runtime's allocator (counters.h
// names its figures; harness::CuptiProbe and watch's injection library sample them). Built
// with the real CUPTI plumbing when LEAKBOUND_HAVE_CUPTI; otherwise the observer only ever
// reports itself unavailable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "leakbound/cupti/ledger.h"

namespace leakbound::cupti {

enum class ObserverState : std::uint8_t {
  kDisabled,     // not started, or stopped
  kUnavailable,  // Start() failed; unavailable_reason() says why. Nothing was left enabled.
  kActive,       // collecting
};
std::string_view ObserverStateName(ObserverState state);  // "disabled", "unavailable", "active"

struct ObserverOptions {
  // CUPTI asks for a buffer per thread that records activity; buffers are recycled from this
  // fixed pool. When all are in use CUPTI drops records and the ledger counts them as dropped.
  std::size_t buffer_count = 8;
  std::size_t buffer_bytes = std::size_t{1} << 20;  // rounded up to a multiple of 8
  LedgerOptions ledger;
  // (optional) Where device memory is allocated: when set, called on the allocating thread (a
  // CUPTI runtime-API callback) after each cudaMalloc that succeeded, and before each cudaFree,
  // so that the caller can take the program's stack there. Defaults to none (no callback is
  // enabled). Not the driver API: a cudaMalloc runs cuMemAlloc too, and would be seen twice.
  void (*on_device_alloc)(std::uint64_t address, std::uint64_t bytes) = nullptr;
  void (*on_device_free)(std::uint64_t address) = nullptr;
};

struct ObserverStats {
  std::uint64_t buffers_requested = 0;  // CUPTI asked for an empty buffer
  std::uint64_t buffers_refused = 0;    // ... and every buffer was in use
  std::uint64_t buffers_completed = 0;  // CUPTI handed a filled buffer back
  std::uint64_t records_applied = 0;    // MEMORY2 / MEMORY_POOL records applied to the ledger
  std::uint64_t records_ignored = 0;    // other kinds, invalid operation types
  std::uint64_t flush_errors = 0;       // cuptiActivityFlushAll failed (collection then stops)
};

namespace detail {
struct ObserverCore;
class ObserverBackend;
}  // namespace detail

// One CUPTI activity client per process: CUPTI delivers buffers to process-wide callbacks, and
// only one subscriber may hold CUPTI. A second observer, or a process already traced by another
// CUPTI client (Nsight Systems, a framework profiler), gets kUnavailable and leaves it alone.
class CuptiObserver {
 public:
  explicit CuptiObserver(ObserverOptions options = {});
  ~CuptiObserver();  // Stop()
  CuptiObserver(const CuptiObserver&) = delete;
  CuptiObserver& operator=(const CuptiObserver&) = delete;

  // Call before the process's first CUDA call: allocations made earlier are invisible to the
  // ledger and their releases count as unmatched. Loads libcupti (the build's copy, or
  // $LEAKBOUND_CUPTI_LIBRARY if set), claims the CUPTI subscription, registers the buffer
  // callbacks and enables MEMORY2 and MEMORY_POOL. Any failure (no libcupti, no driver, another
  // subscriber, an old libcupti) gives kUnavailable with the reason; it never throws or aborts.
  // Returns the new state; a no-op when already active.
  ObserverState Start();
  // Disables collection, forces the remaining buffers out into the ledger and releases the
  // subscription. The ledger is kept. Safe to call in any state.
  void Stop();
  // Delivers every completed activity buffer to the ledger (cuptiActivityFlushAll(0)). It does
  // not synchronise the device: synchronise the streams whose allocations must be counted first.
  // A no-op unless active. If CUPTI fails here, collection stops and the state becomes
  // kUnavailable with CUPTI's reason; the ledger stays readable.
  void Flush();

  ObserverState state() const { return state_; }
  // "active", "disabled" or "unavailable: <reason>", as Probe::State() reports it.
  std::string StateString() const;
  const std::string& unavailable_reason() const { return reason_; }

  LedgerSnapshot Snapshot() const;
  void SnapshotInto(LedgerSnapshot& out) const;  // thread-safe against delivery
  ObserverStats stats() const;

 private:
  ObserverOptions options_;
  std::unique_ptr<detail::ObserverCore> core_;
  std::unique_ptr<detail::ObserverBackend> backend_;
  ObserverState state_ = ObserverState::kDisabled;
  std::string reason_;
};

}  // namespace leakbound::cupti
