// CudaMallocResource and CudaPoolResource (see cuda_resources.h). A zero-byte request gets a
// one-byte allocation so that every Allocate returns a unique pointer with a matching Deallocate.
#include "leakbound/runtime/cuda/cuda_resources.h"

#include <cstdio>
#include <string>

#include "cuda_check.h"

namespace leakbound::runtime {
namespace {

std::size_t AtLeastOneByte(std::size_t bytes) { return bytes == 0 ? 1 : bytes; }

// Deallocation is noexcept: a failure is reported on stderr and the pointer is abandoned.
void ReportFreeFailure(const char* call, int device, cudaError_t error) {
  (void)cudaGetLastError();
  std::fprintf(stderr, "leakbound: %s on cuda:%d failed: %s\n", call, device,
               CudaErrorText(error).c_str());
}

}  // namespace

void* CudaMallocResource::DoAllocate(std::size_t bytes, const AllocationTag&) {
  const DeviceGuard guard(device_);
  void* ptr = nullptr;
  const cudaError_t error = cudaMalloc(&ptr, AtLeastOneByte(bytes));
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    throw OutOfMemoryError(
        bytes, {},
        "cudaMalloc on cuda:" + std::to_string(device_) + " failed: " + CudaErrorText(error));
  }
  return ptr;
}

void CudaMallocResource::DoDeallocate(void* ptr, std::size_t) noexcept {
  const DeviceGuard guard(device_);
  cudaError_t error = cudaStreamSynchronize(stream_);
  if (error != cudaSuccess)
    ReportFreeFailure("cudaStreamSynchronize before cudaFree", device_, error);
  error = cudaFree(ptr);
  if (error != cudaSuccess) ReportFreeFailure("cudaFree", device_, error);
}

CudaPoolResource::CudaPoolResource(int device, cudaStream_t stream)
    : device_(device), stream_(stream) {
  const DeviceGuard guard(device_);
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device_;
  CheckCuda(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
}

CudaPoolResource::~CudaPoolResource() {
  const DeviceGuard guard(device_);
  if (cudaStreamSynchronize(stream_) != cudaSuccess) (void)cudaGetLastError();
  if (cudaMemPoolDestroy(pool_) != cudaSuccess) (void)cudaGetLastError();
}

void* CudaPoolResource::DoAllocate(std::size_t bytes, const AllocationTag&) {
  const DeviceGuard guard(device_);
  void* ptr = nullptr;
  const cudaError_t error = cudaMallocFromPoolAsync(&ptr, AtLeastOneByte(bytes), pool_, stream_);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    throw OutOfMemoryError(bytes, {},
                           "cudaMallocFromPoolAsync on cuda:" + std::to_string(device_) +
                               " failed: " + CudaErrorText(error));
  }
  return ptr;
}

void CudaPoolResource::DoDeallocate(void* ptr, std::size_t) noexcept {
  const DeviceGuard guard(device_);
  const cudaError_t error = cudaFreeAsync(ptr, stream_);
  if (error != cudaSuccess) ReportFreeFailure("cudaFreeAsync", device_, error);
}

std::uint64_t CudaPoolResource::Attribute(cudaMemPoolAttr attribute) const {
  std::uint64_t value = 0;  // the cuuint64_t attributes are 64-bit unsigned
  CheckCuda(cudaMemPoolGetAttribute(pool_, attribute, &value), "cudaMemPoolGetAttribute");
  return value;
}

PoolUsage CudaPoolResource::Usage() const {
  PoolUsage usage;
  usage.reserved_current = Attribute(cudaMemPoolAttrReservedMemCurrent);
  usage.reserved_high = Attribute(cudaMemPoolAttrReservedMemHigh);
  usage.used_current = Attribute(cudaMemPoolAttrUsedMemCurrent);
  usage.used_high = Attribute(cudaMemPoolAttrUsedMemHigh);
  return usage;
}

void CudaPoolResource::ResetHighWatermarks() {
  std::uint64_t zero = 0;  // the only value these attributes accept: "reset to current"
  CheckCuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero),
            "cudaMemPoolSetAttribute(cudaMemPoolAttrReservedMemHigh)");
  CheckCuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero),
            "cudaMemPoolSetAttribute(cudaMemPoolAttrUsedMemHigh)");
}

std::uint64_t CudaPoolResource::release_threshold() const {
  return Attribute(cudaMemPoolAttrReleaseThreshold);
}

void CudaPoolResource::SetReleaseThreshold(std::uint64_t bytes) {
  CheckCuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &bytes),
            "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)");
}

void CudaPoolResource::Trim(std::size_t min_bytes_to_keep) {
  const DeviceGuard guard(device_);
  CheckCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  CheckCuda(cudaMemPoolTrimTo(pool_, min_bytes_to_keep), "cudaMemPoolTrimTo");
}

}  // namespace leakbound::runtime
