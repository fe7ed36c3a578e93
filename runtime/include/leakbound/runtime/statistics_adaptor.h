// Statistics adaptor: exact, thread-safe counters of everything allocated through it.
// Counters are atomics (no lock on the hot path); nested counter scopes (PushScope/PopScope)
// measure a region, e.g. one step, without resetting the totals.
#pragma once

#include <atomic>
#include <mutex>
#include <vector>

#include "leakbound/runtime/memory_resource.h"

namespace leakbound::runtime {

class StatisticsAdaptor final : public MemoryResource {
 public:
  // Throws NullUpstreamError when `upstream` is null.
  explicit StatisticsAdaptor(MemoryResource* upstream)
      : upstream_(RequireUpstream(upstream, "StatisticsAdaptor")) {}

  MemoryStats Snapshot() const;
  // Sets the peak to the current live bytes (the start of a new peak window).
  void ResetPeak();

  // Nested counter scopes: PopScope returns the counters accumulated since the matching
  // PushScope (its peak is the peak above the live bytes at push time). Scopes are
  // per-adaptor, not per-thread: use one adaptor per thread of interest when nesting matters.
  void PushScope();
  MemoryStats PopScope();
  std::size_t scope_depth() const;

  MemoryResource* upstream() const { return upstream_; }

 private:
  void* DoAllocate(std::size_t bytes, const AllocationTag& tag) override;
  void DoDeallocate(void* ptr, std::size_t bytes) noexcept override;
  void DoDeallocateMany(std::span<const Block> blocks) noexcept override;
  DeviceKind DoDevice() const override { return upstream_->device(); }
  void RaisePeak(std::int64_t live);
  void CountFrees(std::int64_t bytes, std::int64_t count) noexcept;

  struct ScopeFrame {
    MemoryStats at_push;
    std::int64_t peak_live = 0;  // max live bytes seen while the frame was open
  };

  MemoryResource* upstream_;
  std::atomic<std::int64_t> live_bytes_{0};
  std::atomic<std::int64_t> live_allocations_{0};
  std::atomic<std::int64_t> peak_bytes_{0};
  std::atomic<std::int64_t> allocation_count_{0};
  std::atomic<std::int64_t> free_count_{0};
  std::atomic<std::int64_t> total_bytes_{0};
  std::atomic<bool> has_scopes_{false};
  mutable std::mutex scopes_mutex_;
  std::vector<ScopeFrame> scopes_;
};

}  // namespace leakbound::runtime
