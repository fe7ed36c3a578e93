// Buffer: a move-only owner of one allocation from a MemoryResource. The runtime holds tensor
// bytes only through Buffers, so ownership (and therefore reclamation) is explicit in the types:
// whoever holds the Buffer frees it; views and handles hold none.
#pragma once

#include <cstddef>
#include <utility>

#include "leakbound/runtime/memory_resource.h"

namespace leakbound::runtime {

class Buffer {
 public:
  Buffer() = default;
  Buffer(MemoryResource* resource, std::size_t bytes, const AllocationTag& tag)
      : resource_(resource), bytes_(bytes), data_(resource->Allocate(bytes, tag)) {}
  ~Buffer() { Reset(); }
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      Reset();
      resource_ = std::exchange(other.resource_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void Reset() noexcept {
    if (data_ != nullptr) resource_->Deallocate(data_, bytes_);
    data_ = nullptr;
    bytes_ = 0;
  }
  // Gives up ownership without freeing. Only the leak zoo uses this, to plant leaks on purpose.
  void* Leak() noexcept {
    bytes_ = 0;
    return std::exchange(data_, nullptr);
  }

  void* data() const { return data_; }
  float* floats() const { return static_cast<float*>(data_); }
  std::size_t bytes() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  MemoryResource* resource_ = nullptr;
  std::size_t bytes_ = 0;
  void* data_ = nullptr;
};

}  // namespace leakbound::runtime
