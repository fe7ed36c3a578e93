// The door to CUDA devices: OpenCudaDevice (what OpenDevice in runtime/src/device.cc calls for
// Device::Cuda(i)) and the process-wide memory of each CUDA device. Per device the process owns
// one non-blocking stream that every session on that device queues its work on, and per allocator
// kind one leaf resource plus one StatisticsAdaptor. All are created on first use and never
// destroyed (like CpuMemory(): sessions may outlive static destruction, and the driver may already
// be shutting down at exit).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "leakbound/runtime/cuda/cuda_resources.h"
#include "leakbound/runtime/device.h"

namespace leakbound::runtime {

// Why cuda:`index` cannot be used ("cannot open cuda:0: no usable CUDA driver ..."), or an empty
// string when it can. Never throws.
std::string CudaUnavailableReason(int index);

// A CUDA backend on cuda:`index` plus the device's process-wide memory for `allocator`. Makes the
// device current on the calling thread. Throws DeviceUnavailableError naming the cause (no usable
// driver, no device, no such index) or RuntimeError for a CUDA failure after the device opened.
DeviceParts OpenCudaDevice(int index, CudaAllocator allocator);

// Process-wide counters of cuda:`index`: the sum over its allocator kinds opened so far (zero when
// none was). peak_bytes is the sum of the per-allocator peaks, an upper bound of the true peak.
// Sums over the allocator kinds in use (normally one per process: the peak is then exact; with
// both kinds in use it is the sum of their peaks, an upper bound).
MemoryStats CudaProcessStats(int index);
// Sets every allocator's peak to its current live bytes (start of a new peak window).
void CudaResetProcessPeak(int index);

// The process-wide memory and stream of cuda:`index` (created on first use; throws like
// OpenCudaDevice when the device is unusable).
DeviceMemory CudaProcessMemory(int index, CudaAllocator allocator);
cudaStream_t CudaProcessStream(int index);
// The process-wide pool of cuda:`index`, or null while no pool memory was opened there.
CudaPoolResource* CudaProcessPool(int index);

const char* CudaAllocatorName(CudaAllocator allocator);

}  // namespace leakbound::runtime
