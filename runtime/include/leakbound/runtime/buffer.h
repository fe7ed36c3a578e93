// Buffer: a move-only owner of one allocation from a MemoryResource. The runtime holds tensor
// bytes only through Buffers, so ownership (and therefore reclamation) is explicit in the types:
// whoever holds the Buffer frees it; views and handles hold none.
#pragma once

#include <array>
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

  MemoryResource* resource() const { return resource_; }
  void* data() const { return data_; }
  float* floats() const { return static_cast<float*>(data_); }
  std::size_t bytes() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  friend class ReleaseBatch;

  MemoryResource* resource_ = nullptr;
  std::size_t bytes_ = 0;
  void* data_ = nullptr;
};

// Frees many Buffers with one DeallocateMany per run of Buffers from the same resource (a tape's
// buffers all come from its session's stack). Add empties the Buffer at once, so ownership stays
// explicit: a Buffer added here is already released as far as its holder is concerned, and the
// batch frees it by Flush or its destructor. No allocation, nothing thrown.
class ReleaseBatch {
 public:
  ReleaseBatch() = default;
  ReleaseBatch(const ReleaseBatch&) = delete;
  ReleaseBatch& operator=(const ReleaseBatch&) = delete;
  ~ReleaseBatch() { Flush(); }

  void Add(Buffer& buffer) noexcept {
    if (buffer.data_ == nullptr) return;
    if (count_ == blocks_.size() || (count_ != 0 && buffer.resource_ != resource_)) Flush();
    resource_ = buffer.resource_;
    blocks_[count_++] = Block{std::exchange(buffer.data_, nullptr), std::exchange(buffer.bytes_, 0)};
  }
  void Flush() noexcept {
    if (count_ != 0) resource_->DeallocateMany(std::span<const Block>(blocks_.data(), count_));
    count_ = 0;
  }

 private:
  MemoryResource* resource_ = nullptr;
  std::array<Block, 64> blocks_{};
  std::size_t count_ = 0;
};

}  // namespace leakbound::runtime
