// cuBLAS, loaded when first used. libcublas pulls in libcublasLt (540 MB on disk): linked into
// the `leakbound` executable, every command paid ~55 ms of start-up and ~215 MiB of resident pages
// for it, `leakbound watch` and `--help` included, although only a cuda:N session and the GPU zoo
// call it. The functions are resolved with dlopen/dlsym the first time one of those needs them.
#pragma once

#include <cublas_v2.h>

namespace leakbound::runtime {

// The cuBLAS entry points the runtime and the GPU zoo call (the _v2 ABI that cublas_v2.h maps
// the plain names to).
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// The loaded library's functions. Throws leakbound::runtime::RuntimeError naming the library and
// dlerror()'s reason when libcublas.so.<major> cannot be loaded or lacks one of them. Thread-safe;
// loads once.
const CublasApi& Cublas();

}  // namespace leakbound::runtime
