// Statistics adaptor: atomic counters on the hot path, a mutex only while scopes are open.
#include "leakbound/runtime/statistics_adaptor.h"

#include <algorithm>
#include <stdexcept>

namespace leakbound::runtime {

void StatisticsAdaptor::RaisePeak(std::int64_t live) {
  std::int64_t peak = peak_bytes_.load(std::memory_order_relaxed);
  while (live > peak && !peak_bytes_.compare_exchange_weak(peak, live, std::memory_order_release,
                                                           std::memory_order_relaxed)) {
  }
}

void* StatisticsAdaptor::DoAllocate(std::size_t bytes, const AllocationTag& tag) {
  void* p = upstream_->Allocate(bytes, tag);  // a failure leaves every counter untouched
  const auto n = static_cast<std::int64_t>(bytes);
  const std::int64_t live = live_bytes_.fetch_add(n, std::memory_order_relaxed) + n;
  live_allocations_.fetch_add(1, std::memory_order_relaxed);
  allocation_count_.fetch_add(1, std::memory_order_relaxed);
  total_bytes_.fetch_add(n, std::memory_order_relaxed);
  RaisePeak(live);
  if (has_scopes_.load(std::memory_order_acquire)) {
    std::lock_guard lock(scopes_mutex_);
    for (ScopeFrame& f : scopes_) f.peak_live = std::max(f.peak_live, live);
  }
  return p;
}

// Counters drop before the bytes go upstream: a concurrent allocation never sees blocks that are
// being freed as live (with a batch that would be up to 64 of them, raising the shared peak).
void StatisticsAdaptor::CountFrees(std::int64_t bytes, std::int64_t count) noexcept {
  live_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  live_allocations_.fetch_sub(count, std::memory_order_relaxed);
  free_count_.fetch_add(count, std::memory_order_relaxed);
}

void StatisticsAdaptor::DoDeallocate(void* ptr, std::size_t bytes) noexcept {
  CountFrees(static_cast<std::int64_t>(bytes), 1);
  upstream_->Deallocate(ptr, bytes);
}

void StatisticsAdaptor::DoDeallocateMany(std::span<const Block> blocks) noexcept {
  CountFrees(TotalBytes(blocks), static_cast<std::int64_t>(blocks.size()));
  upstream_->DeallocateMany(blocks);
}

MemoryStats StatisticsAdaptor::Snapshot() const {
  MemoryStats s;
  s.live_bytes = live_bytes_.load(std::memory_order_relaxed);
  s.live_allocations = live_allocations_.load(std::memory_order_relaxed);
  s.peak_bytes = peak_bytes_.load(std::memory_order_relaxed);
  s.allocation_count = allocation_count_.load(std::memory_order_relaxed);
  s.free_count = free_count_.load(std::memory_order_relaxed);
  s.total_bytes_allocated = total_bytes_.load(std::memory_order_relaxed);
  return s;
}

// A plain store of the live bytes could land after a concurrent allocation's RaisePeak and
// overwrite it with a live count read before that allocation (a lost peak). The CAS succeeds
// only if no raise happened since `peak` was read; a failed one reloads the live bytes, which
// (acquire on the peak, release in RaisePeak) include that raise's allocation.
void StatisticsAdaptor::ResetPeak() {
  std::int64_t peak = peak_bytes_.load(std::memory_order_acquire);
  while (!peak_bytes_.compare_exchange_weak(peak, live_bytes_.load(std::memory_order_relaxed),
                                            std::memory_order_acq_rel, std::memory_order_acquire)) {
  }
}

void StatisticsAdaptor::PushScope() {
  std::lock_guard lock(scopes_mutex_);
  ScopeFrame frame;
  frame.at_push = Snapshot();
  frame.peak_live = frame.at_push.live_bytes;
  scopes_.push_back(frame);
  has_scopes_.store(true, std::memory_order_release);
}

MemoryStats StatisticsAdaptor::PopScope() {
  std::lock_guard lock(scopes_mutex_);
  if (scopes_.empty()) {
    throw std::logic_error("StatisticsAdaptor::PopScope without a matching PushScope");
  }
  const ScopeFrame frame = scopes_.back();
  scopes_.pop_back();
  has_scopes_.store(!scopes_.empty(), std::memory_order_release);
  const MemoryStats now = Snapshot();
  MemoryStats delta;
  delta.live_bytes = now.live_bytes - frame.at_push.live_bytes;
  delta.live_allocations = now.live_allocations - frame.at_push.live_allocations;
  delta.peak_bytes = frame.peak_live - frame.at_push.live_bytes;
  delta.allocation_count = now.allocation_count - frame.at_push.allocation_count;
  delta.free_count = now.free_count - frame.at_push.free_count;
  delta.total_bytes_allocated = now.total_bytes_allocated - frame.at_push.total_bytes_allocated;
  return delta;
}

std::size_t StatisticsAdaptor::scope_depth() const {
  std::lock_guard lock(scopes_mutex_);
  return scopes_.size();
}

}  // namespace leakbound::runtime
