// The probes of the CPU stub: runtime allocator statistics (exact), tracking adaptor
// (outstanding allocations, exact) and the host process (RSS and malloc heap, noisy).
// Device probes (cudaMemGetInfo, pool attributes, the CUPTI ledger) implement the same Probe
// interface and live beside the CUDA code.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "leakbound/harness/probe.h"
#include "leakbound/runtime/device.h"
#include "leakbound/runtime/session.h"

namespace leakbound::harness {

// runtime.live_bytes, runtime.live_allocations (judged); runtime.peak_bytes and
// runtime.allocation_count (informational: a high-water mark and a cumulative count).
// Reads the process-wide statistics of one device, so it sees sessions created and destroyed
// by the workload, and its baseline exists before any session does.
class RuntimeAllocatorProbe final : public Probe {
 public:
  explicit RuntimeAllocatorProbe(runtime::Device device);
  const std::vector<CounterInfo>& Counters() const override { return counters_; }
  void Sample(std::vector<double>& out) override;
  std::string Name() const override { return "runtime"; }

 private:
  runtime::Device device_;
  std::vector<CounterInfo> counters_;
};

// tracking.outstanding_allocations, tracking.unknown_frees (frees of pointers the adaptor never
// handed out) and tracking.size_mismatches (frees with another size than allocated), summed over
// the sessions a callback returns (the workload's sessions; none before setup and after
// teardown). The last two are 0 in a correct program; growth of either is a bug in the runtime.
class TrackingProbe final : public Probe {
 public:
  using SessionsFn = std::function<std::vector<runtime::EagerSession*>()>;
  explicit TrackingProbe(SessionsFn sessions);
  const std::vector<CounterInfo>& Counters() const override { return counters_; }
  void Sample(std::vector<double>& out) override;
  std::string Name() const override { return "tracking"; }

 private:
  SessionsFn sessions_;
  std::vector<CounterInfo> counters_;
};

// With the exact heap interposer (watch/heap.h) active: host.heap_bytes and
// host.heap_allocations (exact, judged: requested bytes and blocks the process holds, minus what
// the harness allocates for itself), host.heap_peak_bytes (its high-water mark),
// host.malloc_arena_bytes (mallinfo2: noisy cross-check) and host.rss_bytes (/proc/self/statm:
// informational, the allocator keeps freed pages). Without it, host.heap_bytes is mallinfo2's
// noisy figure, judged only against a calibrated floor. No heap allocation per sample.
class HostProcessProbe final : public Probe {
 public:
  HostProcessProbe();
  ~HostProcessProbe() override;
  const std::vector<CounterInfo>& Counters() const override { return counters_; }
  void Sample(std::vector<double>& out) override;
  std::string Name() const override { return "host"; }
  std::string State() const override;

 private:
  int statm_fd_ = -1;
  long page_size_ = 4096;
  bool heap_active_ = false;
  std::vector<CounterInfo> counters_;
};

// The probes the CPU stub uses, in a fixed order.
std::vector<std::unique_ptr<Probe>> DefaultProbes(runtime::Device device,
                                                  TrackingProbe::SessionsFn sessions);

}  // namespace leakbound::harness
