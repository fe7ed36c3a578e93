// Devices and their process-wide memory: one leaf resource and one process-wide statistics
// adaptor per device, shared by every session on that device.
#pragma once

#include <memory>
#include <string>

#include "leakbound/runtime/backend.h"
#include "leakbound/runtime/memory_resource.h"
#include "leakbound/runtime/statistics_adaptor.h"

namespace leakbound::runtime {

enum class CudaAllocator : std::uint8_t {
  kPool,     // cudaMallocAsync on a dedicated cudaMemPool (the default)
  kMalloc,   // plain cudaMalloc / cudaFree
};

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  static Device Cpu() { return {}; }
  static Device Cuda(int index = 0) { return {DeviceKind::kCuda, index}; }
  std::string ToString() const;
};

// Process-wide memory of a device: `leaf` is where bytes come from, `stats` counts every byte of
// every session on that device. Lives until process exit.
struct DeviceMemory {
  MemoryResource* leaf = nullptr;
  StatisticsAdaptor* stats = nullptr;  // wraps leaf
};

// The CPU stub's process-wide memory.
DeviceMemory CpuMemory();
// Process-wide statistics for a device kind (CPU: always present).
MemoryStats ProcessStats(const Device& device);
// Starts a new peak window for the device's process-wide statistics (peak = live bytes now).
void ResetProcessPeak(const Device& device);

// Everything a session needs from a device. For CUDA this opens the device (throws
// DeviceUnavailableError naming the cause: built without CUDA, no usable driver, no device).
struct DeviceParts {
  std::unique_ptr<Backend> backend;
  DeviceMemory memory;
};
DeviceParts OpenDevice(const Device& device, CudaAllocator allocator, int blas_threads);

// True when this build has the CUDA backend compiled in.
bool BuiltWithCuda();

}  // namespace leakbound::runtime
