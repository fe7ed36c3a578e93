#include "leakbound/runtime/cuda/cublas_api.h"

#include <dlfcn.h>

#include <string>

#include "leakbound/runtime/errors.h"

namespace leakbound::runtime {
namespace {

#define LB_STR2(x) #x
#define LB_STR(x) LB_STR2(x)
// The soname of the toolkit the runtime was compiled against (CUBLAS_VER_MAJOR from cublas_api.h).
constexpr const char* kSoname = "libcublas.so." LB_STR(CUBLAS_VER_MAJOR);

template <typename Fn>
void Resolve(void* library, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(library, name));
  if (out == nullptr) {
    throw RuntimeError(std::string("cuBLAS: ") + kSoname + " has no " + name +
                       " (a different cuBLAS than the toolkit leakbound was built with)");
  }
}

CublasApi Load() {
  // The executable's RUNPATH (the toolkit's lib folder at build time) and LD_LIBRARY_PATH are
  // searched, as for a linked library.
  void* library = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    throw RuntimeError(std::string("cuBLAS unavailable: cannot load ") + kSoname + ": " +
                       (why ? why : "unknown reason") +
                       " (install the CUDA toolkit's cuBLAS or put its lib folder on "
                       "LD_LIBRARY_PATH)");
  }
  CublasApi api;
  Resolve(library, "cublasCreate_v2", api.create);
  Resolve(library, "cublasDestroy_v2", api.destroy);
  Resolve(library, "cublasSetStream_v2", api.set_stream);
  Resolve(library, "cublasSetMathMode", api.set_math_mode);
  Resolve(library, "cublasSgemm_v2", api.sgemm);
  Resolve(library, "cublasGetStatusName", api.status_name);
  Resolve(library, "cublasGetStatusString", api.status_string);
  return api;  // the library stays loaded for the process's life
}

}  // namespace

const CublasApi& Cublas() {
  static const CublasApi api = Load();  // a failed load throws and is tried again next time
  return api;
}

}  // namespace leakbound::runtime
