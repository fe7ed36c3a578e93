// Device probes: CUDA driver, runtime pool, graph memory and CUPTI ledger.
#include "leakbound/harness/device_probes.h"

#include "leakbound/cupti/observer.h"
#include "leakbound/harness/cupti_probe.h"

#if defined(LEAKBOUND_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "leakbound/runtime/cuda/cuda_device.h"
#endif

namespace leakbound::harness {
namespace {

cupti::CuptiObserver& Observer() {
  static auto* observer = new cupti::CuptiObserver();  // process lifetime, like the driver's
  return *observer;
}
bool observer_requested = false;

#if defined(LEAKBOUND_HAVE_CUDA)
// cuda.driver_used_bytes: total - free from cudaMemGetInfo. Noisy (other processes, driver
// reservations), judged against a calibrated floor.
class CudaDriverProbe final : public Probe {
 public:
  explicit CudaDriverProbe(int index)
      : index_(index), counters_{{"cuda.driver_used_bytes", "bytes", false, true}} {}
  const std::vector<CounterInfo>& Counters() const override { return counters_; }
  void Sample(std::vector<double>& out) override {
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(index_);
    cudaDeviceSynchronize();
    std::size_t free_bytes = 0, total = 0;
    const bool ok = cudaMemGetInfo(&free_bytes, &total) == cudaSuccess;
    cudaSetDevice(previous);
    out.push_back(ok ? static_cast<double>(total - free_bytes) : 0.0);
  }
  std::string Name() const override { return "cuda"; }

 private:
  int index_;
  std::vector<CounterInfo> counters_;
};

// The runtime's dedicated pool and CUDA graph memory. Exact: these are the driver's own
// attributes of memory only the runtime (or graphs) use.
class CudaPoolProbe final : public Probe {
 public:
  explicit CudaPoolProbe(int index)
      : index_(index),
        counters_{{"cuda.pool_reserved_bytes", "bytes", true, true},
                  {"cuda.pool_used_bytes", "bytes", true, true},
                  {"cuda.pool_reserved_high_bytes", "bytes", true, false},
                  {"cuda.graph_used_bytes", "bytes", true, true},
                  {"cuda.graph_reserved_bytes", "bytes", true, true}} {}
  const std::vector<CounterInfo>& Counters() const override { return counters_; }
  void Sample(std::vector<double>& out) override {
    runtime::PoolUsage usage;
    if (runtime::CudaPoolResource* pool = runtime::CudaProcessPool(index_)) usage = pool->Usage();
    out.push_back(static_cast<double>(usage.reserved_current));
    out.push_back(static_cast<double>(usage.used_current));
    out.push_back(static_cast<double>(usage.reserved_high));
    std::uint64_t graph_used = 0, graph_reserved = 0;
    cudaDeviceGetGraphMemAttribute(index_, cudaGraphMemAttrUsedMemCurrent, &graph_used);
    cudaDeviceGetGraphMemAttribute(index_, cudaGraphMemAttrReservedMemCurrent, &graph_reserved);
    out.push_back(static_cast<double>(graph_used));
    out.push_back(static_cast<double>(graph_reserved));
  }
  std::string Name() const override { return "cuda-pool"; }

 private:
  int index_;
  std::vector<CounterInfo> counters_;
};
#endif

}  // namespace

void StartDeviceObservers(const runtime::Device& device) {
  if (device.kind != runtime::DeviceKind::kCuda) return;
  observer_requested = true;
  Observer().Start();
}

std::string DeviceObserverState() {
  if (!observer_requested) return "not used (cpu)";
  return Observer().StateString();
}

std::vector<std::unique_ptr<Probe>> DeviceProbes(const runtime::Device& device) {
  std::vector<std::unique_ptr<Probe>> probes;
  if (device.kind != runtime::DeviceKind::kCuda) return probes;
#if defined(LEAKBOUND_HAVE_CUDA)
  probes.push_back(std::make_unique<CudaDriverProbe>(device.index));
  probes.push_back(std::make_unique<CudaPoolProbe>(device.index));
#endif
  probes.push_back(std::make_unique<CuptiProbe>(Observer()));
  return probes;
}

}  // namespace leakbound::harness
