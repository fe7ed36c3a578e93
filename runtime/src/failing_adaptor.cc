// Failing adaptor: countdown and byte-limit fault injection.
#include "leakbound/runtime/failing_adaptor.h"

#include <string>

namespace leakbound::runtime {

void FailingAdaptor::FailNthAllocation(std::uint64_t k) { countdown_.store(k); }

void FailingAdaptor::Disarm() {
  countdown_.store(0);
  byte_limit_.store(0);
}

void* FailingAdaptor::DoAllocate(std::size_t bytes, const AllocationTag& tag) {
  allocations_seen_.fetch_add(1);
  auto stats = [&] {
    MemoryStats s;
    s.live_bytes = live_bytes_.load();
    s.live_allocations = live_allocations_.load();
    return s;
  };
  std::uint64_t remaining = countdown_.load();
  while (remaining != 0 && !countdown_.compare_exchange_weak(remaining, remaining - 1)) {
  }
  if (remaining == 1) {
    failures_.fetch_add(1);
    throw OutOfMemoryError(bytes, stats(),
                           std::string("injected failure of this allocation (op ") + tag.op + ")");
  }
  const std::uint64_t limit = byte_limit_.load();
  if (limit != 0 && static_cast<std::uint64_t>(live_bytes_.load()) + bytes > limit) {
    failures_.fetch_add(1);
    throw OutOfMemoryError(bytes, stats(),
                           "byte limit " + std::to_string(limit) + " would be exceeded");
  }
  void* p = upstream_->Allocate(bytes, tag);
  live_bytes_.fetch_add(static_cast<std::int64_t>(bytes));
  live_allocations_.fetch_add(1);
  return p;
}

// As in the statistics adaptor, the counters drop before the bytes go upstream.
void FailingAdaptor::DoDeallocate(void* ptr, std::size_t bytes) noexcept {
  live_bytes_.fetch_sub(static_cast<std::int64_t>(bytes));
  live_allocations_.fetch_sub(1);
  upstream_->Deallocate(ptr, bytes);
}

void FailingAdaptor::DoDeallocateMany(std::span<const Block> blocks) noexcept {
  live_bytes_.fetch_sub(TotalBytes(blocks));
  live_allocations_.fetch_sub(static_cast<std::int64_t>(blocks.size()));
  upstream_->DeallocateMany(blocks);
}

}  // namespace leakbound::runtime
