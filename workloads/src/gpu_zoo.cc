// The leak zoo's GPU entries: leaks only a device-side observer sees. On the CPU stub they are
// listed but not run (needs_cuda); their detection logic is proven on synthetic CUPTI records in
// cupti/tests. Each trains a small MLP on cuda:0 beside the planted bug.
#include "common.h"

#if defined(LEAKBOUND_HAVE_CUDA)
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "leakbound/runtime/cuda/cublas_api.h"

namespace leakbound::workloads::internal {
namespace {

void Check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorString(status));
  }
}

// Base: an MLP training on the context's CUDA device.
class GpuRig : public Workload {
 public:
  void Setup(const WorkloadContext& context) override {
    MlpRig::Config config;
    rig_.Setup(context, config);
    device_ = context.device.index;
  }
  void Teardown() override { rig_.Teardown(); }
  std::vector<runtime::EagerSession*> Sessions() override { return rig_.Sessions(); }

 protected:
  MlpRig rig_;
  int device_ = 0;
};

// A raw cudaMalloc each step that bypasses the runtime's allocator: the runtime's counters stay
// flat; the CUPTI ledger's synchronous device bucket (and the driver) grow 1 MiB per step.
class RawMallocBypass final : public GpuRig {
 public:
  void Setup(const WorkloadContext& context) override {
    GpuRig::Setup(context);
    kept_.reserve(4096);
  }
  void Step(std::int64_t) override {
    rig_.TrainStep();
    void* p = nullptr;
    Check(cudaMalloc(&p, kBytes), "cudaMalloc");
    kept_.push_back(p);
    Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  void Teardown() override {
    for (void* p : kept_) cudaFree(p);
    kept_.clear();
    GpuRig::Teardown();
  }

 private:
  static constexpr std::size_t kBytes = std::size_t{1} << 20;
  std::vector<void*> kept_;
};

// A stream-ordered pool that never releases (threshold = max) serving ever larger requests:
// each step's block is freed, but the next, larger request cannot reuse it, so the pool's
// reserved bytes grow while the bytes in use at every quiesce point stay at zero.
class PoolFragmentation final : public GpuRig {
 public:
  void Setup(const WorkloadContext& context) override {
    GpuRig::Setup(context);
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device_;
    Check(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
    std::uint64_t keep_everything = std::numeric_limits<std::uint64_t>::max();
    Check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_everything),
          "cudaMemPoolSetAttribute");
    Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  void Step(std::int64_t step) override {
    rig_.TrainStep();
    const std::size_t bytes = (static_cast<std::size_t>(step) + 1) * (std::size_t{2} << 20);
    void* p = nullptr;
    Check(cudaMallocFromPoolAsync(&p, bytes, pool_, stream_), "cudaMallocFromPoolAsync");
    Check(cudaFreeAsync(p, stream_), "cudaFreeAsync");
    Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  void Teardown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (pool_ != nullptr) cudaMemPoolDestroy(pool_);
    stream_ = nullptr;
    pool_ = nullptr;
    GpuRig::Teardown();
  }

 private:
  cudaMemPool_t pool_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// A cuBLAS handle created every step and never destroyed (the classic "handle per call" bug):
// its device workspace and host state accumulate.
class CublasHandlePerStep final : public GpuRig {
 public:
  void Setup(const WorkloadContext& context) override {
    GpuRig::Setup(context);
    handles_.reserve(4096);
  }
  void Step(std::int64_t) override {
    rig_.TrainStep();
    cublasHandle_t handle = nullptr;
    if (leakbound::runtime::Cublas().create(&handle) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
    handles_.push_back(handle);
    Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  void Teardown() override {
    for (cublasHandle_t h : handles_) leakbound::runtime::Cublas().destroy(h);
    handles_.clear();
    GpuRig::Teardown();
  }

 private:
  std::vector<cublasHandle_t> handles_;
};

}  // namespace

void AddGpuZooWorkloads(std::vector<Registration>& out) {
  auto gpu = [](WorkloadInfo info) {
    info.needs_cuda = true;
    return info;
  };
  out.push_back(Register<RawMallocBypass>(gpu(Info(
      Kind::kZoo, "zoo_cuda_raw_malloc_bypass",
      "Trains an MLP on CUDA and cudaMallocs 1 MiB per step behind the runtime's back, planting "
      "device growth only CUPTI and the driver can see.",
      reports::kUnboundedGrowth, "cupti.device_bytes"))));
  out.push_back(Register<PoolFragmentation>(gpu(Info(
      Kind::kZoo, "zoo_cuda_pool_fragmentation",
      "Trains an MLP on CUDA beside a never-releasing memory pool that serves an ever larger "
      "request each step, planting reserved bytes that grow while used bytes stay flat.",
      reports::kPoolFragmentation, "cupti.pool_reserved_bytes"))));
  out.push_back(Register<CublasHandlePerStep>(gpu(Info(
      Kind::kZoo, "zoo_cuda_cublas_handle_per_step",
      "Trains an MLP on CUDA and creates a cuBLAS handle every step that is never destroyed, "
      "planting library-owned growth (host state of each handle, and its device workspace).",
      reports::kUnboundedGrowth, "host.heap_bytes"))));
}

}  // namespace leakbound::workloads::internal

#else

namespace leakbound::workloads::internal {
void AddGpuZooWorkloads(std::vector<Registration>&) {}  // CPU stub: no GPU entries
}  // namespace leakbound::workloads::internal

#endif
