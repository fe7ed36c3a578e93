// Tracking adaptor: a map of outstanding allocations under one mutex; frees it cannot match
// (unknown pointers, other sizes) are counted, not ignored.
#include "leakbound/runtime/tracking_adaptor.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace leakbound::runtime {

void* TrackingAdaptor::DoAllocate(std::size_t bytes, const AllocationTag& tag) {
  void* p = upstream_->Allocate(bytes, tag);
  try {
    std::lock_guard lock(mutex_);
    const OutstandingAllocation record{p, bytes, tag, sequence_++};
    if (spare_.empty()) {
      outstanding_.emplace(p, record);
    } else {  // reuse a map node freed earlier: no heap traffic per allocation in steady state
      Map::node_type node = std::move(spare_.back());
      spare_.pop_back();
      node.key() = p;
      node.mapped() = record;
      outstanding_.insert(std::move(node));
    }
  } catch (...) {  // the map could not grow: do not leak the upstream allocation
    upstream_->Deallocate(p, bytes);
    throw;
  }
  return p;
}

void TrackingAdaptor::Forget(const void* ptr, std::size_t bytes) noexcept {
  Map::node_type node = outstanding_.extract(ptr);
  if (node.empty()) {
    unknown_frees_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (node.mapped().bytes != bytes) size_mismatches_.fetch_add(1, std::memory_order_relaxed);
  // A spare record must not hold the freed address (LeakSanitizer would count a later block
  // there as reachable through it).
  node.key() = nullptr;
  node.mapped() = OutstandingAllocation{};
  try {
    spare_.push_back(std::move(node));
  } catch (...) {  // no room to keep it: the node is simply freed
  }
}

void TrackingAdaptor::DoDeallocate(void* ptr, std::size_t bytes) noexcept {
  {
    std::lock_guard lock(mutex_);
    Forget(ptr, bytes);
  }
  upstream_->Deallocate(ptr, bytes);
}

void TrackingAdaptor::DoDeallocateMany(std::span<const Block> blocks) noexcept {
  {
    std::lock_guard lock(mutex_);
    for (const Block& b : blocks) Forget(b.ptr, b.bytes);
  }
  upstream_->DeallocateMany(blocks);
}

std::uint64_t TrackingAdaptor::next_sequence() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sequence_;
}

std::size_t TrackingAdaptor::outstanding_count() const {
  std::lock_guard lock(mutex_);
  return outstanding_.size();
}

std::vector<OutstandingAllocation> TrackingAdaptor::Outstanding() const {
  std::vector<OutstandingAllocation> out;
  {
    std::lock_guard lock(mutex_);
    out.reserve(outstanding_.size());
    for (const auto& [ptr, record] : outstanding_) out.push_back(record);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.sequence < b.sequence; });
  return out;
}

std::vector<OutstandingGroup> TrackingAdaptor::OutstandingByTag() const {
  std::map<std::tuple<std::string, Role, ScopeKind>, OutstandingGroup> groups;
  for (const OutstandingAllocation& a : Outstanding()) {
    auto key = std::make_tuple(std::string(a.tag.op), a.tag.role, a.tag.scope);
    auto [it, inserted] = groups.try_emplace(key);
    OutstandingGroup& g = it->second;
    if (inserted) {
      g.op = a.tag.op;
      g.role = a.tag.role;
      g.scope = a.tag.scope;
      g.oldest_step = g.newest_step = a.tag.step;
    }
    g.bytes += a.bytes;
    g.allocations += 1;
    g.oldest_step = std::min(g.oldest_step, a.tag.step);
    g.newest_step = std::max(g.newest_step, a.tag.step);
  }
  std::vector<OutstandingGroup> out;
  for (auto& [key, g] : groups) out.push_back(std::move(g));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return out;
}

}  // namespace leakbound::runtime
