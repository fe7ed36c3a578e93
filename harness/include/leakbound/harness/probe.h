// A Probe samples named counters at a quiesce point (after a scope exits; on CUDA after a stream
// sync). Each counter says whether it is exact (allocator, CUPTI ledger: equality is meaningful)
// or noisy (RSS, cudaMemGetInfo: judged by a robust slope against a calibrated noise floor).
#pragma once

#include <string>
#include <vector>

namespace leakbound::harness {

struct CounterInfo {
  std::string name;  // dotted, probe-prefixed: "runtime.live_bytes", "cupti.device_bytes"
  std::string unit;  // "bytes" or "count"
  bool exact = true;
  // Whether a growing value of this counter is a leak verdict on its own (false for purely
  // informational counters such as cumulative allocation counts or peaks).
  bool judged = true;
  // Set by the runner on a noisy counter it would judge but has no calibrated noise floor for
  // (calibration off): reported, not judged, and the evidence says why.
  bool missing_noise_floor = false;
  // Non-empty when this counter is the high-water mark of another (runtime.peak_bytes of
  // runtime.live_bytes): Judge takes it as the peak observed between samples.
  std::string peak_of{};
};

class Probe {
 public:
  virtual ~Probe() = default;
  // Stable for the probe's lifetime; Sample() writes values in this order.
  virtual const std::vector<CounterInfo>& Counters() const = 0;
  // Appends exactly Counters().size() values to `out`. Must not allocate through the runtime's
  // memory resources, and should not allocate on the heap in steady state (it runs every step).
  virtual void Sample(std::vector<double>& out) = 0;
  // "active", or "unavailable: <reason>" / "disabled"; shown in reports.
  virtual std::string State() const { return "active"; }
  virtual std::string Name() const = 0;
};

}  // namespace leakbound::harness
