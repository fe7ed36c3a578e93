// Shared by the CUDA tests: a fixture that opens cuda:0 or skips with the reason, Twin (each
// operand as a host buffer for the CPU reference and a device buffer for CUDA, filled alike), and
// the closeness check with its stated bound.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "leakbound/runtime/backend.h"
#include "leakbound/runtime/cuda/cuda_device.h"
#include "leakbound/runtime/errors.h"

namespace leakbound::runtime::testing {

// Opens cuda:0 (pool allocator) once per suite; each test skips with the DeviceUnavailableError
// message when it could not be opened.
class CudaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    try {
      parts_ = new DeviceParts(OpenCudaDevice(0, CudaAllocator::kPool));
    } catch (const DeviceUnavailableError& e) {
      unavailable_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    delete parts_;
    parts_ = nullptr;
  }
  void SetUp() override {
    if (parts_ == nullptr) GTEST_SKIP() << unavailable_;
    cpu_ = MakeCpuBackend(1);
  }
  Backend& gpu() { return *parts_->backend; }
  Backend& cpu() { return *cpu_; }
  const DeviceMemory& memory() { return parts_->memory; }
  MemoryResource* device_memory() { return parts_->memory.stats; }

 private:
  static inline DeviceParts* parts_ = nullptr;
  static inline std::string unavailable_;
  std::unique_ptr<Backend> cpu_;
};

template <class T>
struct Operand {
  T* cpu = nullptr;  // host memory, for the CPU backend
  T* gpu = nullptr;  // device memory, for the CUDA backend
  std::int64_t n = 0;
};

// Operands of one comparison. Device buffers come from the device's process-wide memory and are
// returned when the Twin goes away.
class Twin {
 public:
  Twin(Backend& gpu, MemoryResource* memory) : gpu_(gpu), memory_(memory) {}
  ~Twin() {
    try {
      gpu_.Synchronize();
    } catch (const RuntimeError& e) {  // the test that broke the stream reports it; free anyway
      ADD_FAILURE() << e.what();
    }
    for (const auto& [ptr, bytes] : device_) memory_->Deallocate(ptr, bytes);
  }
  Twin(const Twin&) = delete;
  Twin& operator=(const Twin&) = delete;

  Operand<float> Floats(std::vector<float> values) { return Upload(floats_, std::move(values)); }
  Operand<std::int32_t> Ints(std::vector<std::int32_t> values) {
    return Upload(ints_, std::move(values));
  }
  std::vector<float> Download(const Operand<float>& x) {
    std::vector<float> out(static_cast<std::size_t>(x.n));
    gpu_.CopyToHost(out.data(), x.gpu, out.size() * sizeof(float));
    return out;
  }
  static std::vector<float> Host(const Operand<float>& x) {
    return std::vector<float>(x.cpu, x.cpu + x.n);
  }

 private:
  template <class T>
  Operand<T> Upload(std::deque<std::vector<T>>& store, std::vector<T> values) {
    const std::size_t bytes = values.size() * sizeof(T);
    void* ptr = memory_->Allocate(bytes);
    device_.emplace_back(ptr, bytes);
    gpu_.CopyFromHost(ptr, values.data(), bytes);
    std::vector<T>& host = store.emplace_back(std::move(values));
    return {host.data(), static_cast<T*>(ptr), static_cast<std::int64_t>(host.size())};
  }

  Backend& gpu_;
  MemoryResource* memory_;
  std::deque<std::vector<float>> floats_;  // deques: stable addresses
  std::deque<std::vector<std::int32_t>> ints_;
  std::vector<std::pair<void*, std::size_t>> device_;
};

inline std::vector<float> Random(std::int64_t n, std::uint64_t seed, float lo = -2.0f,
                                 float hi = 2.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(static_cast<std::size_t>(n));
  for (float& v : out) v = dist(rng);
  return out;
}

inline std::vector<std::int32_t> RandomIds(std::int64_t n, std::int32_t bound, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> dist(0, bound - 1);
  std::vector<std::int32_t> out(static_cast<std::size_t>(n));
  for (auto& v : out) v = dist(rng);
  return out;
}

// Element i passes when |gpu_i - cpu_i| <= tol * (|cpu_i| + scale): relative to the element with a
// floor at the magnitude of the whole result (`scale` defaults to max_i |cpu_i|), so outputs that
// cross zero are judged against the size of their operands. tol = 0 demands bitwise-equal values.
// NaN must match NaN.
inline ::testing::AssertionResult Close(const std::vector<float>& gpu,
                                        const std::vector<float>& cpu, double tol,
                                        double scale = -1.0) {
  if (gpu.size() != cpu.size()) {
    return ::testing::AssertionFailure()
           << "size " << gpu.size() << " on CUDA vs " << cpu.size() << " on the CPU";
  }
  if (scale < 0) {
    scale = 0;
    for (float v : cpu) scale = std::isfinite(v) ? std::max(scale, std::fabs(double{v})) : scale;
  }
  std::size_t failures = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const double g = gpu[i], c = cpu[i];
    const bool ok = (std::isnan(g) && std::isnan(c)) || g == c ||
                    std::fabs(g - c) <= tol * (std::fabs(c) + scale);
    if (ok) continue;
    if (failures++ < 5) {
      first << "\n  [" << i << "] cuda " << g << " vs cpu " << c << ", |diff| " << std::fabs(g - c)
            << " > bound " << tol * (std::fabs(c) + scale);
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << failures << " of " << cpu.size() << " elements outside tol " << tol << " (scale "
         << scale << "):" << first.str();
}

}  // namespace leakbound::runtime::testing
