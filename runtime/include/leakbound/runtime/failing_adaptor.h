// Failing adaptor: fault injection for the error paths. Fails the k-th allocation after arming,
// or any allocation that would take the bytes live through it past a limit, by throwing
// OutOfMemoryError carrying the request and the counters at failure. Disarmed it is a pass-through.
#pragma once

#include <atomic>
#include <cstdint>

#include "leakbound/runtime/memory_resource.h"

namespace leakbound::runtime {

class FailingAdaptor final : public MemoryResource {
 public:
  // Throws NullUpstreamError when `upstream` is null.
  explicit FailingAdaptor(MemoryResource* upstream)
      : upstream_(RequireUpstream(upstream, "FailingAdaptor")) {}

  // The k-th allocation from now (1-based) fails, once. k == 0 disarms.
  void FailNthAllocation(std::uint64_t k);
  // Allocations that would take live bytes through this adaptor past `limit` fail (0 = no limit).
  void SetByteLimit(std::uint64_t limit) { byte_limit_.store(limit); }
  void Disarm();

  std::uint64_t allocations_seen() const { return allocations_seen_.load(); }
  std::uint64_t failures_injected() const { return failures_.load(); }
  std::int64_t live_bytes() const { return live_bytes_.load(); }

 private:
  void* DoAllocate(std::size_t bytes, const AllocationTag& tag) override;
  void DoDeallocate(void* ptr, std::size_t bytes) noexcept override;
  void DoDeallocateMany(std::span<const Block> blocks) noexcept override;
  DeviceKind DoDevice() const override { return upstream_->device(); }

  MemoryResource* upstream_;
  std::atomic<std::uint64_t> countdown_{0};  // 0 = disarmed
  std::atomic<std::uint64_t> byte_limit_{0};
  std::atomic<std::int64_t> live_bytes_{0};
  std::atomic<std::int64_t> live_allocations_{0};
  std::atomic<std::uint64_t> allocations_seen_{0};
  std::atomic<std::uint64_t> failures_{0};
};

}  // namespace leakbound::runtime
