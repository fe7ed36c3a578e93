// Private to leakbound_cupti: what CuptiObserver shares with its backend (the CUPTI plumbing in
// observer_cupti.cc, or the stand-in in observer_unavailable.cc when built without CUPTI).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "leakbound/cupti/ledger.h"
#include "leakbound/cupti/observer.h"

namespace leakbound::cupti::detail {

// Everything the delivery callbacks touch, guarded by `mutex`.
struct ObserverCore {
  explicit ObserverCore(const LedgerOptions& options) : ledger(options) {}
  std::mutex mutex;
  MemoryLedger ledger;
  ObserverStats stats;
};

class ObserverBackend {
 public:
  virtual ~ObserverBackend() = default;
  // nullopt when collection started; otherwise why not, with nothing left enabled.
  virtual std::optional<std::string> Start() = 0;
  virtual void Stop() = 0;
  // nullopt when the flush worked; otherwise why it failed (the observer then stops collecting).
  virtual std::optional<std::string> Flush() = 0;
};

std::unique_ptr<ObserverBackend> MakeObserverBackend(const ObserverOptions& options,
                                                     ObserverCore& core);

}  // namespace leakbound::cupti::detail
