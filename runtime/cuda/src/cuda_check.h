// Status checks for the CUDA runtime and the device guard: every failed CUDA call becomes a typed
// exception whose message names the call and the error, so a failure on a GPU machine that cannot
// be debugged interactively still says what went wrong and where.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace leakbound::runtime {

// "cudaErrorMemoryAllocation (2): out of memory".
std::string CudaErrorText(cudaError_t error);

// Throws RuntimeError("<call> failed: <error text>") unless `error` is cudaSuccess. The runtime's
// last-error slot is cleared first, so a handled failure is not reported again by the next
// kernel-launch check.
void CheckCuda(cudaError_t error, const char* call);

// Checks a kernel launch (cudaGetLastError): RuntimeError naming the kernel.
void CheckLaunch(const char* kernel);

// Makes `device` current on this thread for the guard's lifetime and restores the previous device.
// Never throws (it is used in noexcept deallocations): a failure to switch shows up as the error of
// the next CUDA call.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

}  // namespace leakbound::runtime
