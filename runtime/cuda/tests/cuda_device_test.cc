// The CUDA device door, its leaf resources and sessions on cuda:0: the unavailable-device error
// (the one test that runs on a machine without a driver), pool usage accounting, typed
// out-of-memory errors, process-wide counters, an MLP training step matching the CPU loss, and
// live bytes flat across two blocks of WithStep.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_support.h"
#include "leakbound/runtime/cuda/cublas_api.h"
#include "leakbound/runtime/session.h"
#include "leakbound/runtime/trainer.h"

namespace leakbound::runtime::testing {
namespace {

// Under ctest --resource-spec-file (ci/ctest_resources.py) each gpu test is given one GPU by its
// nvidia-smi index in CTEST_RESOURCE_GROUP_0_GPUS ("id:1,slots:1"). Make that GPU this process's
// cuda:0 before the first CUDA call; nvidia-smi numbers GPUs in PCI bus order.
[[maybe_unused]] const bool kGpuFromCtestResourceGroup = [] {
  const char* group = std::getenv("CTEST_RESOURCE_GROUP_0_GPUS");
  if (group == nullptr) return false;
  const std::string spec = group;
  const std::size_t id = spec.find("id:");
  if (id == std::string::npos) return false;
  const std::string index = spec.substr(id + 3, spec.find(',', id) - (id + 3));
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
  setenv("CUDA_VISIBLE_DEVICES", index.c_str(), 1);
  return true;
}();

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CudaDevice, OpenWithoutAUsableDevice_RaisesDeviceUnavailableNamingTheCause) {
  int count = 0;
  const cudaError_t probe = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  if (probe == cudaSuccess && count > 0) {
    GTEST_SKIP() << "a CUDA device is present (" << count << "), so cuda:0 opens";
  }
  try {
    OpenCudaDevice(0, CudaAllocator::kPool);
    FAIL() << "cuda:0 opened although cudaGetDeviceCount returned " << cudaGetErrorName(probe);
  } catch (const DeviceUnavailableError& e) {
    const std::string what = e.what();
    std::printf("[reason] %s\n", what.c_str());
    EXPECT_TRUE(Contains(what, "cannot open cuda:0")) << what;
    EXPECT_TRUE(Contains(what, "cpu device")) << what;  // says what to do
    if (probe == cudaErrorInsufficientDriver) {
      EXPECT_TRUE(Contains(what, "no usable CUDA driver")) << what;
      EXPECT_TRUE(Contains(what, "cudaErrorInsufficientDriver, 35")) << what;
    } else {
      EXPECT_TRUE(Contains(what, "no CUDA device") || Contains(what, "driver")) << what;
    }
    EXPECT_EQ(what, CudaUnavailableReason(0));
  }
  // The same cause through the session and the other entry points; nothing was created.
  SessionOptions options;
  options.device = Device::Cuda(0);
  EXPECT_THROW({ EagerSession session(options); }, DeviceUnavailableError);
  EXPECT_THROW(CudaProcessMemory(0, CudaAllocator::kMalloc), DeviceUnavailableError);
  EXPECT_EQ(CudaProcessPool(0), nullptr);
  EXPECT_EQ(CudaProcessStats(0).live_bytes, 0);
  EXPECT_EQ(ProcessStats(Device::Cuda(0)).allocation_count, 0);
}

// cuBLAS is loaded on first use (cublas_api.h), not linked: it must still be found where the
// toolkit is (the executable's RUNPATH), with every entry point the runtime calls. Needs no
// driver: the status strings are host code.
TEST(CudaDevice, Cublas_IsLoadedOnFirstUse_WithEveryEntryPoint) {
  const CublasApi& api = Cublas();
  EXPECT_NE(api.create, nullptr);
  EXPECT_NE(api.destroy, nullptr);
  EXPECT_NE(api.set_stream, nullptr);
  EXPECT_NE(api.set_math_mode, nullptr);
  EXPECT_NE(api.sgemm, nullptr);
  EXPECT_STREQ(api.status_name(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_EQ(&Cublas(), &api);  // loaded once
}

TEST(CudaDevice, IndexPastTheLastDevice_SaysWhichDevicesExist) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    GTEST_SKIP() << CudaUnavailableReason(0);
  }
  try {
    OpenCudaDevice(count, CudaAllocator::kPool);
    FAIL() << "cuda:" << count << " opened";
  } catch (const DeviceUnavailableError& e) {
    EXPECT_TRUE(Contains(e.what(), "does not exist (" + std::to_string(count))) << e.what();
  }
}

TEST_F(CudaTest, Describe_NamesTheDeviceAndTheAllocator) {
  cudaDeviceProp prop = {};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  const std::string text = gpu().Describe();
  std::printf("[describe] %s\n", text.c_str());
  EXPECT_EQ(gpu().kind(), DeviceKind::kCuda);
  EXPECT_TRUE(Contains(text, "cuda:0")) << text;
  EXPECT_TRUE(Contains(text, prop.name)) << text;
  EXPECT_TRUE(Contains(text, "pool")) << text;
  EXPECT_EQ(device_memory()->device(), DeviceKind::kCuda);
}

TEST_F(CudaTest, PoolResource_UsageCountsAllocationsAndReturnsToStartAfterFrees) {
  const cudaStream_t stream = CudaProcessStream(0);
  CudaPoolResource pool(0, stream);
  EXPECT_EQ(pool.release_threshold(), 0u);  // the CUDA default, kept on purpose
  const PoolUsage start = pool.Usage();
  EXPECT_EQ(start.used_current, 0u);  // a fresh pool of its own

  const std::vector<std::size_t> sizes = {1 << 20, (3 << 20) + 5, 0, 4096};
  std::vector<void*> ptrs;
  std::uint64_t requested = 0;
  for (std::size_t bytes : sizes) {
    ptrs.push_back(pool.Allocate(bytes));
    requested += bytes;
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const PoolUsage during = pool.Usage();
  EXPECT_GE(during.used_current, start.used_current + requested);
  EXPECT_GE(during.reserved_current, during.used_current);
  EXPECT_GE(during.used_high, during.used_current);
  EXPECT_GE(during.reserved_high, during.reserved_current);
  EXPECT_NE(ptrs[2], nullptr);  // zero bytes still get a unique pointer
  EXPECT_NE(ptrs[2], ptrs[3]);

  // The memory is usable by the backend's kernels (same stream).
  gpu().Fill(static_cast<float*>(ptrs[0]), 2.5f, (1 << 20) / 4);
  float last = 0;
  gpu().CopyToHost(&last, static_cast<float*>(ptrs[0]) + (1 << 20) / 4 - 1, sizeof(float));
  EXPECT_EQ(last, 2.5f);

  for (std::size_t i = 0; i < ptrs.size(); ++i) pool.Deallocate(ptrs[i], sizes[i]);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(pool.Usage().used_current, start.used_current);
  pool.Trim(0);
  EXPECT_EQ(pool.Usage().reserved_current, 0u);
  pool.ResetHighWatermarks();
  EXPECT_EQ(pool.Usage().used_high, pool.Usage().used_current);
  pool.SetReleaseThreshold(std::uint64_t{64} << 20);
  EXPECT_EQ(pool.release_threshold(), std::uint64_t{64} << 20);
}

TEST_F(CudaTest, Resources_ImpossibleRequest_RaiseOutOfMemoryNamingTheCallAndDeviceStaysUsable) {
  const std::size_t huge = std::size_t{1} << 50;  // 1 PiB
  CudaMallocResource plain(0, CudaProcessStream(0));
  CudaPoolResource pool(0, CudaProcessStream(0));
  try {
    plain.Allocate(huge);
    FAIL() << "cudaMalloc of 1 PiB succeeded";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), huge);
    EXPECT_TRUE(Contains(e.what(), "cudaMalloc on cuda:0 failed")) << e.what();
  }
  try {
    pool.Allocate(huge);
    FAIL() << "cudaMallocFromPoolAsync of 1 PiB succeeded";
  } catch (const OutOfMemoryError& e) {
    EXPECT_TRUE(Contains(e.what(), "cudaMallocFromPoolAsync on cuda:0 failed")) << e.what();
  }
  // The failures were consumed: the next launches and allocations report no stale error.
  void* a = plain.Allocate(0);
  void* b = plain.Allocate(0);
  EXPECT_NE(a, b);
  plain.Deallocate(a, 0);
  plain.Deallocate(b, 0);
  Twin t(gpu(), device_memory());
  auto x = t.Floats(Random(1000, 60));
  auto y = t.Floats(Random(1000, 61));
  cpu().Scale(1000, 2.0f, x.cpu, y.cpu, true);
  gpu().Scale(1000, 2.0f, x.gpu, y.gpu, true);
  EXPECT_TRUE(Close(t.Download(y), Twin::Host(y), 1e-6));
}

TEST_F(CudaTest, ProcessStats_CountEveryByteOfBothAllocatorsOfTheDevice) {
  const MemoryStats before = CudaProcessStats(0);
  const DeviceMemory malloc_memory = CudaProcessMemory(0, CudaAllocator::kMalloc);
  void* p = device_memory()->Allocate(12345);
  void* q = malloc_memory.stats->Allocate(100);
  const MemoryStats during = CudaProcessStats(0);
  EXPECT_EQ(during.live_bytes - before.live_bytes, 12345 + 100);
  EXPECT_EQ(during.live_allocations - before.live_allocations, 2);
  EXPECT_EQ(ProcessStats(Device::Cuda(0)).live_bytes, during.live_bytes);
  EXPECT_EQ(CudaProcessPool(0), memory().leaf);
  device_memory()->Deallocate(p, 12345);
  malloc_memory.stats->Deallocate(q, 100);
  EXPECT_EQ(CudaProcessStats(0).live_bytes, before.live_bytes);
  EXPECT_EQ(CudaProcessStats(0).free_count - before.free_count, 2);
}

std::vector<float> TrainLosses(const Device& device, CudaAllocator allocator, int steps) {
  SessionOptions options;
  options.device = device;
  options.cuda_allocator = allocator;
  EagerSession session(options);
  Mlp model(session, {32, 64, 64, 10}, Activation::kGelu, 5);
  auto optimizer = MakeOptimizer(OptimizerKind::kAdam, model.params());
  Trainer trainer(session, model, *optimizer);
  const Batch batch = Batch::Random(16, 32, 10, 9);
  std::vector<float> losses;
  for (int i = 0; i < steps; ++i) losses.push_back(trainer.Step(batch));
  return losses;
}

// Loss of every step within 1e-3 relative of the CPU's (the ops' own bounds are far tighter; the
// margin covers Adam, which turns a tiny gradient's sign difference into a full lr-sized step).
TEST_F(CudaTest, EagerSession_MlpTrainingSteps_MatchTheCpuLoss) {
  constexpr int kSteps = 5;
  const std::vector<float> cpu_losses = TrainLosses(Device::Cpu(), CudaAllocator::kPool, kSteps);
  for (CudaAllocator allocator : {CudaAllocator::kPool, CudaAllocator::kMalloc}) {
    const std::vector<float> gpu_losses = TrainLosses(Device::Cuda(0), allocator, kSteps);
    ASSERT_EQ(gpu_losses.size(), cpu_losses.size());
    for (int i = 0; i < kSteps; ++i) {
      EXPECT_NEAR(gpu_losses[i], cpu_losses[i], 1e-3 * std::fabs(cpu_losses[i]))
          << "step " << i << " allocator " << CudaAllocatorName(allocator);
    }
    EXPECT_LT(gpu_losses.back(), gpu_losses.front()) << "training does not reduce the loss";
  }
}

// The leak-bound check of runtime/tests/stress_test.cc on cuda:0: after two equal blocks of
// WithStep the session's live bytes and allocations are equal, the pool's used bytes too (after a
// stream sync), and the device's process counters return to their baseline with the session.
TEST_F(CudaTest, WithStep_LiveBytesFlatAcrossTwoBlocksAndBackToBaseline) {
  constexpr int kBlockSteps = 20;
  for (CudaAllocator allocator : {CudaAllocator::kPool, CudaAllocator::kMalloc}) {
    const std::string name = CudaAllocatorName(allocator);
    const MemoryStats baseline = ProcessStats(Device::Cuda(0));
    {
      SessionOptions options;
      options.device = Device::Cuda(0);
      options.cuda_allocator = allocator;
      EagerSession session(options);
      Mlp model(session, {32, 64, 64, 10}, Activation::kGelu, 5);
      auto optimizer = MakeOptimizer(OptimizerKind::kAdam, model.params());
      Trainer trainer(session, model, *optimizer);
      const Batch batch = Batch::Random(16, 32, 10, 9);
      CudaPoolResource* pool = allocator == CudaAllocator::kPool ? CudaProcessPool(0) : nullptr;
      auto run_block = [&] {
        for (int i = 0; i < kBlockSteps; ++i) trainer.Step(batch);
        session.backend().Synchronize();
        return std::make_pair(session.stats(), pool ? pool->Usage() : PoolUsage{});
      };
      trainer.Step(batch);  // warm-up: optimizer state is allocated lazily
      const auto [block1, pool1] = run_block();
      const auto [block2, pool2] = run_block();
      std::printf(
          "[figures] %s: live %lld B in %lld allocations after block 1, %lld B after "
          "block 2; pool used %llu B / %llu B\n",
          name.c_str(), static_cast<long long>(block1.live_bytes),
          static_cast<long long>(block1.live_allocations),
          static_cast<long long>(block2.live_bytes),
          static_cast<unsigned long long>(pool1.used_current),
          static_cast<unsigned long long>(pool2.used_current));
      EXPECT_GT(block2.allocation_count, block1.allocation_count) << name;  // steps allocate
      EXPECT_EQ(block2.live_bytes, block1.live_bytes) << name;
      EXPECT_EQ(block2.live_allocations, block1.live_allocations) << name;
      EXPECT_EQ(pool2.used_current, pool1.used_current) << name;
    }
    const MemoryStats after = ProcessStats(Device::Cuda(0));
    EXPECT_EQ(after.live_bytes, baseline.live_bytes) << name;
    EXPECT_EQ(after.live_allocations, baseline.live_allocations) << name;
  }
}

}  // namespace
}  // namespace leakbound::runtime::testing
