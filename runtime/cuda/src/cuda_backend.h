// Factory of the CUDA backend (runtime/cuda/src/cuda_backend.cu), used by OpenCudaDevice.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "leakbound/runtime/backend.h"

namespace leakbound::runtime {

// Kernels of cuda:`device`, all queued on `stream` (which must outlive the backend); a cuBLAS
// handle bound to that stream is created here. `description` is what Describe() returns.
std::unique_ptr<Backend> MakeCudaBackend(int device, cudaStream_t stream, std::string description);

}  // namespace leakbound::runtime
