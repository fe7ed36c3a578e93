// CuptiObserver's state machine and ledger access; the CUPTI calls live in the backend.
#include "leakbound/cupti/observer.h"

#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "observer_internal.h"

namespace leakbound::cupti {

std::string_view ObserverStateName(ObserverState state) {
  switch (state) {
    case ObserverState::kDisabled:
      return "disabled";
    case ObserverState::kUnavailable:
      return "unavailable";
    case ObserverState::kActive:
      return "active";
  }
  return "disabled";
}

CuptiObserver::CuptiObserver(ObserverOptions options)
    : options_(options), core_(std::make_unique<detail::ObserverCore>(options_.ledger)) {}

CuptiObserver::~CuptiObserver() { Stop(); }

ObserverState CuptiObserver::Start() {
  if (state_ == ObserverState::kActive) return state_;
  if (!backend_) backend_ = detail::MakeObserverBackend(options_, *core_);
  if (std::optional<std::string> failure = backend_->Start()) {
    state_ = ObserverState::kUnavailable;
    reason_ = std::move(*failure);
  } else {
    state_ = ObserverState::kActive;
    reason_.clear();
  }
  return state_;
}

void CuptiObserver::Stop() {
  if (state_ != ObserverState::kActive) return;
  backend_->Stop();
  state_ = ObserverState::kDisabled;
}

// CUPTI can accept the configuration and fail only later (the driver goes away, a device is
// lost): a failed flush ends collection rather than leaving an "active" observer that sees nothing.
void CuptiObserver::Flush() {
  if (state_ != ObserverState::kActive) return;
  if (std::optional<std::string> failure = backend_->Flush()) {
    backend_->Stop();
    state_ = ObserverState::kUnavailable;
    reason_ = *failure + " (collection stopped; the ledger keeps what arrived before)";
  }
}

std::string CuptiObserver::StateString() const {
  if (state_ == ObserverState::kUnavailable) return "unavailable: " + reason_;
  return std::string(ObserverStateName(state_));
}

LedgerSnapshot CuptiObserver::Snapshot() const {
  LedgerSnapshot snapshot;
  SnapshotInto(snapshot);
  return snapshot;
}

void CuptiObserver::SnapshotInto(LedgerSnapshot& out) const {
  std::lock_guard lock(core_->mutex);
  core_->ledger.SnapshotInto(out);
}

ObserverStats CuptiObserver::stats() const {
  std::lock_guard lock(core_->mutex);
  return core_->stats;
}

}  // namespace leakbound::cupti
