// Devices: the CPU stub's process-wide memory, and the door to the CUDA backend.
#include "leakbound/runtime/device.h"

#include "leakbound/runtime/errors.h"

namespace leakbound::runtime {

#if defined(LEAKBOUND_HAVE_CUDA)
// Implemented in runtime/cuda/ (compiled only with the CUDA toolkit).
DeviceParts OpenCudaDevice(int index, CudaAllocator allocator);
MemoryStats CudaProcessStats(int index);
void CudaResetProcessPeak(int index);
#endif

std::string Device::ToString() const {
  return kind == DeviceKind::kCpu ? "cpu" : "cuda:" + std::to_string(index);
}

DeviceMemory CpuMemory() {
  // Leaked on purpose: sessions may outlive static destruction order in tests and tools.
  static auto* host = new HostResource();
  static auto* stats = new StatisticsAdaptor(host);
  return {host, stats};
}

MemoryStats ProcessStats(const Device& device) {
  if (device.kind == DeviceKind::kCpu) return CpuMemory().stats->Snapshot();
#if defined(LEAKBOUND_HAVE_CUDA)
  return CudaProcessStats(device.index);
#else
  return {};
#endif
}

void ResetProcessPeak(const Device& device) {
  if (device.kind == DeviceKind::kCpu) {
    CpuMemory().stats->ResetPeak();
    return;
  }
#if defined(LEAKBOUND_HAVE_CUDA)
  CudaResetProcessPeak(device.index);
#endif
}

bool BuiltWithCuda() {
#if defined(LEAKBOUND_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

DeviceParts OpenDevice(const Device& device, CudaAllocator allocator, int blas_threads) {
  if (device.kind == DeviceKind::kCpu) {
    DeviceParts parts;
    parts.backend = MakeCpuBackend(blas_threads);
    parts.memory = CpuMemory();
    return parts;
  }
#if defined(LEAKBOUND_HAVE_CUDA)
  return OpenCudaDevice(device.index, allocator);
#else
  (void)allocator;
  throw DeviceUnavailableError(
      "cannot open " + device.ToString() +
      ": this leakbound was built without CUDA (the CPU stub); rebuild with the CUDA toolkit "
      "installed (LEAKBOUND_CUDA=AUTO or ON) or use the cpu device");
#endif
}

}  // namespace leakbound::runtime
