// CUDA status checks and the device guard (see cuda_check.h).
#include "cuda_check.h"

#include "leakbound/runtime/errors.h"

namespace leakbound::runtime {

std::string CudaErrorText(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + " (" + std::to_string(static_cast<int>(error)) +
         "): " + cudaGetErrorString(error);
}

void CheckCuda(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return;
  (void)cudaGetLastError();  // clear the slot: this failure is reported here, not by the next check
  throw RuntimeError(std::string(call) + " failed: " + CudaErrorText(error));
}

void CheckLaunch(const char* kernel) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return;
  throw RuntimeError(std::string("launch of kernel ") + kernel +
                     " failed: " + CudaErrorText(error));
}

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    (void)cudaGetLastError();
    previous_ = -1;
  }
  if (previous_ != device) {
    switched_ = cudaSetDevice(device) == cudaSuccess;
    if (!switched_) (void)cudaGetLastError();
  }
}

DeviceGuard::~DeviceGuard() {
  if (switched_ && previous_ >= 0) (void)cudaSetDevice(previous_);
}

}  // namespace leakbound::runtime
