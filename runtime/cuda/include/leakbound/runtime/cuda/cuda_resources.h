// Leaf memory resources of a CUDA device. CudaMallocResource: plain cudaMalloc / cudaFree.
// CudaPoolResource: a dedicated cudaMemPool_t, allocations with cudaMallocFromPoolAsync and frees
// with cudaFreeAsync, both ordered on one stream. Statistics, tracking and fault injection are
// adaptors stacked above these leaves; the leaves themselves keep no counters.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "leakbound/runtime/memory_resource.h"

namespace leakbound::runtime {

// cudaMalloc / cudaFree on one device. A buffer may still be read by work queued on `stream`, so
// each free synchronises that stream first (cudaFree synchronises the device anyway; the explicit
// sync states the invariant instead of relying on it).
class CudaMallocResource final : public MemoryResource {
 public:
  CudaMallocResource(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  int device_index() const { return device_; }

 private:
  void* DoAllocate(std::size_t bytes, const AllocationTag& tag) override;
  void DoDeallocate(void* ptr, std::size_t bytes) noexcept override;
  DeviceKind DoDevice() const override { return DeviceKind::kCuda; }

  int device_;
  cudaStream_t stream_;
};

// The pool's own view of its memory (cudaMemPoolAttr*). `reserved` is what the pool holds from the
// driver, `used` what it has handed out and not yet got back in stream order. Noisy with respect
// to the runtime's exact counters: sizes are rounded to the pool's granularity.
struct PoolUsage {
  std::uint64_t reserved_current = 0;  // cudaMemPoolAttrReservedMemCurrent
  std::uint64_t reserved_high = 0;     // cudaMemPoolAttrReservedMemHigh
  std::uint64_t used_current = 0;      // cudaMemPoolAttrUsedMemCurrent
  std::uint64_t used_high = 0;         // cudaMemPoolAttrUsedMemHigh
};

// A stream-ordered pool owned by this resource (not the device's default pool, so nothing else in
// the process shares it and its attributes describe the runtime's tensors only).
//
// Release threshold: left at the CUDA default of 0 bytes, so at every synchronisation of the
// stream the pool returns all unused memory to the driver. `reserved` then tracks `used` closely
// (a leak shows up in both) at the price of re-mapping memory each step. SetReleaseThreshold(
// UINT64_MAX) keeps freed memory cached instead (faster; `reserved` stays at its high-water mark).
class CudaPoolResource final : public MemoryResource {
 public:
  // Creates the pool on `device`; allocations and frees are ordered on `stream`, a stream of that
  // device that must outlive the resource. Throws RuntimeError when the pool cannot be created.
  CudaPoolResource(int device, cudaStream_t stream);
  // Synchronises the stream (pending frees complete) and destroys the pool. Every allocation must
  // have been deallocated.
  ~CudaPoolResource() override;

  PoolUsage Usage() const;
  // Restarts both high-water marks at the current values (cudaMemPoolSetAttribute(..High, 0)).
  void ResetHighWatermarks();
  std::uint64_t release_threshold() const;
  void SetReleaseThreshold(std::uint64_t bytes);
  // Synchronises the stream, then returns unused memory to the driver until the pool holds at most
  // `min_bytes_to_keep` reserved bytes (cudaMemPoolTrimTo).
  void Trim(std::size_t min_bytes_to_keep);

  int device_index() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cudaMemPool_t pool() const { return pool_; }

 private:
  void* DoAllocate(std::size_t bytes, const AllocationTag& tag) override;
  void DoDeallocate(void* ptr, std::size_t bytes) noexcept override;
  DeviceKind DoDevice() const override { return DeviceKind::kCuda; }
  std::uint64_t Attribute(cudaMemPoolAttr attribute) const;

  int device_;
  cudaStream_t stream_;
  cudaMemPool_t pool_ = nullptr;
};

}  // namespace leakbound::runtime
