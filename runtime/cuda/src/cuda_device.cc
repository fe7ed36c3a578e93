// OpenCudaDevice and the process-wide state of each CUDA device (see cuda_device.h): the checks
// that turn "no driver / no device / no such index" into DeviceUnavailableError, and the lazily
// created, deliberately leaked stream + leaf + statistics adaptor per (device, allocator kind).
#include "leakbound/runtime/cuda/cuda_device.h"

#include <cstdio>
#include <map>
#include <mutex>

#include "cuda_backend.h"
#include "cuda_check.h"
#include "leakbound/runtime/errors.h"

namespace leakbound::runtime {
namespace {

constexpr int kAllocatorKinds = 2;

struct DeviceState {
  cudaStream_t stream = nullptr;
  MemoryResource* leaf[kAllocatorKinds] = {};
  StatisticsAdaptor* stats[kAllocatorKinds] = {};
};

// Leaked on purpose (see the header). The mutex guards creation; the adaptors are thread-safe.
std::mutex& StateMutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}
std::map<int, DeviceState>& States() {
  static auto* states = new std::map<int, DeviceState>();
  return *states;
}

std::string DeviceName(int index) { return "cuda:" + std::to_string(index); }

void ThrowIfUnavailable(int index) {
  const std::string reason = CudaUnavailableReason(index);
  if (!reason.empty()) throw DeviceUnavailableError(reason);
}

// Requires StateMutex() held and the device usable.
DeviceState& StateWithStream(int index) {
  DeviceState& state = States()[index];
  if (state.stream == nullptr) {
    const DeviceGuard guard(index);
    // Non-blocking: the runtime's work does not serialise with the legacy default stream that
    // other code in the process (tools, probes) may use.
    CheckCuda(cudaStreamCreateWithFlags(&state.stream, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");
  }
  return state;
}

std::string Describe(int index, CudaAllocator allocator) {
  cudaDeviceProp prop = {};
  CheckCuda(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  const double gib = static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
  char memory[32];
  std::snprintf(memory, sizeof memory, "%.0f GiB", gib);
  return DeviceName(index) + " (" + prop.name + ", sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + memory + ", " + CudaAllocatorName(allocator) +
         " allocator, cuBLAS)";
}

}  // namespace

const char* CudaAllocatorName(CudaAllocator allocator) {
  switch (allocator) {
    case CudaAllocator::kPool: return "pool (cudaMallocFromPoolAsync)";
    case CudaAllocator::kMalloc: return "cudaMalloc";
  }
  return "unknown";
}

std::string CudaUnavailableReason(int index) {
  const std::string prefix = "cannot open " + DeviceName(index) + ": ";
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) (void)cudaGetLastError();
  if (error == cudaErrorInsufficientDriver) {
    return prefix +
           "no usable CUDA driver (cudaErrorInsufficientDriver, 35): install or update the "
           "NVIDIA driver (it is missing or older than this CUDA runtime), or use the cpu device";
  }
  if (error == cudaErrorNoDevice || (error == cudaSuccess && count == 0)) {
    return prefix +
           "no CUDA device (the driver found none): check CUDA_VISIBLE_DEVICES, or use "
           "the cpu device";
  }
  if (error != cudaSuccess) {
    return prefix + "cudaGetDeviceCount failed: " + CudaErrorText(error) +
           " (check the NVIDIA driver installation), or use the cpu device";
  }
  if (index < 0 || index >= count) {
    return prefix + DeviceName(index) + " does not exist (" + std::to_string(count) +
           (count == 1 ? " device" : " devices") + ": cuda:0 to cuda:" + std::to_string(count - 1) +
           ")";
  }
  return "";
}

DeviceMemory CudaProcessMemory(int index, CudaAllocator allocator) {
  ThrowIfUnavailable(index);
  const std::lock_guard lock(StateMutex());
  DeviceState& state = StateWithStream(index);
  const int kind = static_cast<int>(allocator);
  if (state.leaf[kind] == nullptr) {
    if (allocator == CudaAllocator::kPool) {
      state.leaf[kind] = new CudaPoolResource(index, state.stream);
    } else {
      state.leaf[kind] = new CudaMallocResource(index, state.stream);
    }
    state.stats[kind] = new StatisticsAdaptor(state.leaf[kind]);
  }
  return {state.leaf[kind], state.stats[kind]};
}

cudaStream_t CudaProcessStream(int index) {
  ThrowIfUnavailable(index);
  const std::lock_guard lock(StateMutex());
  return StateWithStream(index).stream;
}

CudaPoolResource* CudaProcessPool(int index) {
  const std::lock_guard lock(StateMutex());
  const auto it = States().find(index);
  if (it == States().end()) return nullptr;
  return static_cast<CudaPoolResource*>(it->second.leaf[static_cast<int>(CudaAllocator::kPool)]);
}

MemoryStats CudaProcessStats(int index) {
  MemoryStats total;
  const std::lock_guard lock(StateMutex());
  const auto it = States().find(index);
  if (it == States().end()) return total;
  for (const StatisticsAdaptor* stats : it->second.stats) {
    if (stats == nullptr) continue;
    const MemoryStats s = stats->Snapshot();
    total.live_bytes += s.live_bytes;
    total.live_allocations += s.live_allocations;
    total.peak_bytes += s.peak_bytes;
    total.allocation_count += s.allocation_count;
    total.free_count += s.free_count;
    total.total_bytes_allocated += s.total_bytes_allocated;
  }
  return total;
}

void CudaResetProcessPeak(int index) {
  const std::lock_guard lock(StateMutex());
  const auto it = States().find(index);
  if (it == States().end()) return;
  for (StatisticsAdaptor* stats : it->second.stats) {
    if (stats != nullptr) stats->ResetPeak();
  }
}

DeviceParts OpenCudaDevice(int index, CudaAllocator allocator) {
  ThrowIfUnavailable(index);
  // Creates the primary context; a device in exclusive or prohibited compute mode fails here.
  const cudaError_t error = cudaSetDevice(index);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    throw DeviceUnavailableError("cannot open " + DeviceName(index) +
                                 ": cudaSetDevice failed: " + CudaErrorText(error));
  }
  DeviceParts parts;
  parts.memory = CudaProcessMemory(index, allocator);
  parts.backend = MakeCudaBackend(index, CudaProcessStream(index), Describe(index, allocator));
  return parts;
}

}  // namespace leakbound::runtime
