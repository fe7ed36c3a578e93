// CuptiObserver against a real device (CTest label `gpu`): allocations made with cudaMalloc and
// cudaMallocAsync must appear in the ledger with their exact sizes and leave it when freed.
// Each test starts the observer before its first CUDA call (CTest runs every test in its own
// process); without CUPTI, a driver or a device it skips with the reason.
#include <gtest/gtest.h>

#include <string>

#include "leakbound/cupti/observer.h"

#if LEAKBOUND_HAVE_CUPTI
#include <cuda_runtime.h>
#endif

namespace leakbound::cupti {
namespace {

#if LEAKBOUND_HAVE_CUPTI

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Empty when a device is usable, otherwise why not.
std::string NoDeviceReason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(error) + " (" +
           cudaGetErrorString(error) + ")";
  }
  if (count == 0) return "no CUDA device";
  return "";
}

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

// Starts `observer` (before any CUDA call) and skips the test when there is no device to use.
#define START_OR_SKIP(observer)                                                              \
  do {                                                                                       \
    (observer).Start();                                                                      \
    const std::string no_device = NoDeviceReason();                                          \
    if (!no_device.empty()) {                                                                \
      GTEST_SKIP() << no_device << "; observer: " << (observer).StateString();               \
    }                                                                                        \
    if ((observer).unavailable_reason().find("another CUPTI client") != std::string::npos) { \
      GTEST_SKIP() << (observer).StateString();                                              \
    }                                                                                        \
    ASSERT_EQ((observer).state(), ObserverState::kActive) << (observer).StateString();       \
  } while (false)

TEST(ObserverGpu, CudaMallocAndMallocAsync_AppearWithExactBytesAndLeaveWhenFreed) {
  CuptiObserver observer;
  START_OR_SKIP(observer);
  ASSERT_CUDA(cudaFree(nullptr));  // creates the context; its own allocations are the baseline
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  ASSERT_CUDA(cudaDeviceSynchronize());
  observer.Flush();
  const LedgerSnapshot baseline = observer.Snapshot();

  void* device = nullptr;
  ASSERT_CUDA(cudaMalloc(&device, 4 * kMiB));
  ASSERT_CUDA(cudaDeviceSynchronize());
  observer.Flush();
  const LedgerSnapshot with_device = observer.Snapshot();
  EXPECT_EQ(with_device.bucket(MemoryBucket::kDevice).live_bytes,
            baseline.bucket(MemoryBucket::kDevice).live_bytes + 4 * kMiB);
  EXPECT_EQ(with_device.bucket(MemoryBucket::kDevice).live_allocations,
            baseline.bucket(MemoryBucket::kDevice).live_allocations + 1);

  void* pooled = nullptr;
  ASSERT_CUDA(cudaMallocAsync(&pooled, 2 * kMiB, stream));
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  observer.Flush();
  const LedgerSnapshot with_pool = observer.Snapshot();
  EXPECT_EQ(with_pool.bucket(MemoryBucket::kPool).live_bytes,
            baseline.bucket(MemoryBucket::kPool).live_bytes + 2 * kMiB);
  EXPECT_EQ(with_pool.bucket(MemoryBucket::kPool).live_allocations,
            baseline.bucket(MemoryBucket::kPool).live_allocations + 1);
  EXPECT_EQ(with_pool.bucket(MemoryBucket::kDevice), with_device.bucket(MemoryBucket::kDevice));

  ASSERT_CUDA(cudaFreeAsync(pooled, stream));
  ASSERT_CUDA(cudaFree(device));
  ASSERT_CUDA(cudaDeviceSynchronize());
  observer.Flush();
  const LedgerSnapshot freed = observer.Snapshot();
  EXPECT_EQ(freed.bucket(MemoryBucket::kDevice), baseline.bucket(MemoryBucket::kDevice));
  EXPECT_EQ(freed.bucket(MemoryBucket::kPool), baseline.bucket(MemoryBucket::kPool));
  EXPECT_EQ(freed.unmatched_releases, 0u);
  EXPECT_EQ(freed.dropped_records, 0u);
  EXPECT_GE(observer.stats().records_applied, 4u);

  ASSERT_CUDA(cudaStreamDestroy(stream));
  observer.Stop();
  EXPECT_EQ(observer.state(), ObserverState::kDisabled);
}

TEST(ObserverGpu, ExplicitPoolCreatedAndDestroyed_IsTrackedThenDropped) {
  CuptiObserver observer;
  START_OR_SKIP(observer);
  ASSERT_CUDA(cudaFree(nullptr));
  int device = 0;
  ASSERT_CUDA(cudaGetDevice(&device));
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  ASSERT_CUDA(cudaDeviceSynchronize());
  observer.Flush();
  const LedgerSnapshot before = observer.Snapshot();

  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  ASSERT_CUDA(cudaMemPoolCreate(&pool, &props));
  void* pooled = nullptr;
  ASSERT_CUDA(cudaMallocFromPoolAsync(&pooled, 8 * kMiB, pool, stream));
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  observer.Flush();
  const LedgerSnapshot allocated = observer.Snapshot();
  EXPECT_EQ(allocated.pools.size(), before.pools.size() + 1);
  EXPECT_EQ(allocated.bucket(MemoryBucket::kPool).live_bytes,
            before.bucket(MemoryBucket::kPool).live_bytes + 8 * kMiB);
  EXPECT_GE(allocated.pool_reserved_bytes, before.pool_reserved_bytes + 8 * kMiB);

  ASSERT_CUDA(cudaFreeAsync(pooled, stream));
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  ASSERT_CUDA(cudaMemPoolDestroy(pool));
  ASSERT_CUDA(cudaDeviceSynchronize());
  observer.Flush();
  const LedgerSnapshot destroyed = observer.Snapshot();
  EXPECT_EQ(destroyed.pools.size(), before.pools.size());
  EXPECT_EQ(destroyed.bucket(MemoryBucket::kPool), before.bucket(MemoryBucket::kPool));
  EXPECT_EQ(destroyed.destroyed_pool_live_allocations, 0u);
  EXPECT_EQ(destroyed.unmatched_releases, 0u);
  ASSERT_CUDA(cudaStreamDestroy(stream));
}

TEST(ObserverGpu, SecondObserverWhileTheFirstIsActive_IsUnavailableAndLeavesTheFirstAlone) {
  CuptiObserver first;
  START_OR_SKIP(first);
  CuptiObserver second;
  EXPECT_EQ(second.Start(), ObserverState::kUnavailable);
  EXPECT_NE(second.unavailable_reason().find("already active"), std::string::npos)
      << second.StateString();
  EXPECT_EQ(first.state(), ObserverState::kActive);

  void* device = nullptr;
  ASSERT_CUDA(cudaMalloc(&device, kMiB));
  ASSERT_CUDA(cudaDeviceSynchronize());
  first.Flush();
  EXPECT_GE(first.Snapshot().bucket(MemoryBucket::kDevice).live_bytes, kMiB);
  ASSERT_CUDA(cudaFree(device));
}

#else

TEST(ObserverGpu, SkippedWithoutCupti) { GTEST_SKIP() << "built without CUPTI"; }

#endif

}  // namespace
}  // namespace leakbound::cupti
