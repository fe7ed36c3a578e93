// CuptiProbe: the CUPTI ledger (cupti/) as a harness Probe, with the counters of
// leakbound/cupti/counters.h. Every counter is exact; cupti.unmatched_releases and
// cupti.dropped_records are reported but not judged.
#pragma once

#include <string>
#include <vector>

#include "leakbound/cupti/counters.h"
#include "leakbound/cupti/observer.h"
#include "leakbound/harness/probe.h"

namespace leakbound::harness {

class CuptiProbe final : public Probe {
 public:
  // The observer must outlive the probe; the probe never starts or stops it.
  explicit CuptiProbe(cupti::CuptiObserver& observer);

  const std::vector<CounterInfo>& Counters() const override { return counters_; }
  // Flushes the observer (the caller has synchronised the device), then appends the ledger's
  // counters. An observer that never started has an empty ledger: zeros, and State() says why.
  void Sample(std::vector<double>& out) override;
  std::string State() const override { return observer_.StateString(); }
  std::string Name() const override { return "cupti"; }

  // The counter list alone (names, units, flags), for traces built from recorded ledgers.
  static std::vector<CounterInfo> LedgerCounters();

 private:
  cupti::CuptiObserver& observer_;
  std::vector<CounterInfo> counters_;
  cupti::LedgerSnapshot snapshot_;  // reused so that steady-state sampling does not allocate
};

}  // namespace leakbound::harness
