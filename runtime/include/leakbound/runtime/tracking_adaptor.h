// Tracking adaptor: lists outstanding allocations with their tag (session, step, op, role, scope)
// so that memory still live at a quiesce point can be attributed: what, where, and how old.
#pragma once

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
  explicit TrackingAdaptor(MemoryResource* upstream) : upstream_(upstream) {}

  std::size_t outstanding_count() const;
  std::vector<OutstandingAllocation> Outstanding() const;
  // Grouped, largest bytes first.
  std::vector<OutstandingGroup> OutstandingByTag() const;

 private:
  void* DoAllocate(std::size_t bytes, const AllocationTag& tag) override;
  void DoDeallocate(void* ptr, std::size_t bytes) noexcept override;
  void DoDeallocateMany(std::span<const Block> blocks) noexcept override;
  DeviceKind DoDevice() const override { return upstream_->device(); }

  using Map = std::unordered_map<const void*, OutstandingAllocation>;
  // Moves the record of `ptr` (if any) to spare_. Under mutex_.
  void Forget(const void* ptr) noexcept;

  MemoryResource* upstream_;
  mutable std::mutex mutex_;
  Map outstanding_;
  // Map nodes of freed allocations, reused by the next allocations: at most the peak number of
  // outstanding allocations, so bounded, and never counted by the statistics adaptors.
  std::vector<Map::node_type> spare_;
  std::uint64_t sequence_ = 0;
};

}  // namespace leakbound::runtime
