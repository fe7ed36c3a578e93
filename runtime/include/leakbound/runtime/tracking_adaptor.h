// Tracking adaptor: lists outstanding allocations with their tag (session, step, op, role, scope)
// so that memory still live at a quiesce point can be attributed: what, where, and how old.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "leakbound/runtime/memory_resource.h"

namespace leakbound::runtime {

struct OutstandingAllocation {
  const void* address = nullptr;
  std::size_t bytes = 0;
  AllocationTag tag;
  std::uint64_t sequence = 0;  // allocation order through this adaptor
};

// Outstanding allocations grouped by (op, role, scope).
struct OutstandingGroup {
  std::string op;
  Role role = Role::kUser;
  ScopeKind scope = ScopeKind::kNone;
  std::uint64_t bytes = 0;
  std::uint64_t allocations = 0;
  std::uint64_t oldest_step = 0;  // smallest tag.step in the group
  std::uint64_t newest_step = 0;
};

class TrackingAdaptor final : public MemoryResource {
 public:
  // Throws NullUpstreamError when `upstream` is null.
  explicit TrackingAdaptor(MemoryResource* upstream)
      : upstream_(RequireUpstream(upstream, "TrackingAdaptor")) {}

  std::size_t outstanding_count() const;
  // The sequence number the next allocation will get (allocations made so far): a recorder notes
  // it at a point in time to tell, later, which outstanding allocations were made after it.
  std::uint64_t next_sequence() const;
  std::vector<OutstandingAllocation> Outstanding() const;
  // Grouped, largest bytes first.
  std::vector<OutstandingGroup> OutstandingByTag() const;

  // Frees this adaptor could not match, counted since construction (exact, never reset). Both
  // are bugs of the caller (or of a resource stack assembled wrongly), and both frees still go
  // upstream unchanged: the adaptor observes, it does not repair. Zero in a correct program; a
  // probe should report any other value.
  //   unknown_frees: a pointer this adaptor never handed out, or one already freed (a double
  //     free, or memory allocated around the adaptor and freed through it).
  //   size_mismatches: a known pointer freed with a byte count other than its allocation's
  //     (the upstream statistics then drift by the difference).
  std::uint64_t unknown_frees() const { return unknown_frees_.load(std::memory_order_relaxed); }
  std::uint64_t size_mismatches() const { return size_mismatches_.load(std::memory_order_relaxed); }

 private:
  void* DoAllocate(std::size_t bytes, const AllocationTag& tag) override;
  void DoDeallocate(void* ptr, std::size_t bytes) noexcept override;
  void DoDeallocateMany(std::span<const Block> blocks) noexcept override;
  DeviceKind DoDevice() const override { return upstream_->device(); }

  using Map = std::unordered_map<const void*, OutstandingAllocation>;
  // Moves the record of `ptr` to spare_, counting a free of an unknown pointer or of another
  // size than the allocation's. Under mutex_.
  void Forget(const void* ptr, std::size_t bytes) noexcept;

  MemoryResource* upstream_;
  mutable std::mutex mutex_;
  Map outstanding_;
  // Map nodes of freed allocations, reused by the next allocations: at most the peak number of
  // outstanding allocations, so bounded, and never counted by the statistics adaptors.
  std::vector<Map::node_type> spare_;
  std::uint64_t sequence_ = 0;
  std::atomic<std::uint64_t> unknown_frees_{0};
  std::atomic<std::uint64_t> size_mismatches_{0};
};

}  // namespace leakbound::runtime
