// The CPU reference backend: plain loops over host memory, OpenBLAS sgemm for matmul.
// It is the specification the CUDA backend is tested against, so clarity beats cleverness here,
// except in Gemm and the bias+activation epilogue that dominate the step time.
#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "leakbound/runtime/backend.h"
#include "leakbound/runtime/errors.h"

namespace leakbound::runtime {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;

inline float GeluForward(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(u));
}
inline float GeluGrad(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
  const float t = std::tanh(u);
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}
inline void Store(float* out, float value, bool accumulate) {
  if (accumulate) {
    *out += value;
  } else {
    *out = value;
  }
}

// OpenBLAS takes `blasint` (32-bit in the usual build): a larger value would be truncated into
// another, valid-looking matmul. Refused like the CUDA backend refuses what cuBLAS cannot take.
blasint BlasDim(std::int64_t value, const char* name) {
  if (value < 0 || value > std::numeric_limits<blasint>::max()) {
    throw ShapeError(std::string("Gemm: ") + name + " = " + std::to_string(value) +
                     " does not fit OpenBLAS's integer (limit " +
                     std::to_string(std::numeric_limits<blasint>::max()) +
                     "); split the matmul into smaller ones");
  }
  return static_cast<blasint>(value);
}

// OpenBLAS, loaded when the first CPU backend is made rather than when the program starts:
// loading it (with libgfortran) and its constructor (a thread per core, a 128 MiB buffer) took
// ~3 ms at every start of `leakbound`, whose commands but `run` never multiply a matrix
// (`leakbound --version`: 6.9 -> 3.2 ms). <cblas.h> gives the functions' types; nothing links
// them. LEAKBOUND_OPENBLAS names another library to load (a path or a soname: an OpenMP build).
#ifndef LEAKBOUND_OPENBLAS_SONAME
#define LEAKBOUND_OPENBLAS_SONAME "libopenblas.so.0"
#endif
struct Blas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&openblas_set_num_threads) set_num_threads = nullptr;
  std::string error;  // why it could not be loaded; empty when it was
};

const Blas& LoadedBlas() {
  static const Blas blas = [] {
    Blas b;
    void* handle = nullptr;
    std::string tried;
    const char* chosen = std::getenv("LEAKBOUND_OPENBLAS");
    const std::vector<const char*> names =
        chosen && *chosen ? std::vector<const char*>{chosen}
                          : std::vector<const char*>{LEAKBOUND_OPENBLAS_SONAME, "libopenblas.so"};
    for (const char* name : names) {
      handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);  // kept open for the process's life
      if (handle) break;
      const char* why = ::dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (why ? why : name);
    }
    if (!handle) {
      b.error = "the CPU backend needs OpenBLAS, which could not be loaded (" + tried + "); " +
                (chosen && *chosen ? "check LEAKBOUND_OPENBLAS, or unset it"
                                   : "install it (Debian: apt-get install libopenblas0)");
      return b;
    }
    b.sgemm = reinterpret_cast<decltype(b.sgemm)>(::dlsym(handle, "cblas_sgemm"));
    b.set_num_threads =
        reinterpret_cast<decltype(b.set_num_threads)>(::dlsym(handle, "openblas_set_num_threads"));
    if (!b.sgemm) b.error = "the OpenBLAS library that was loaded has no cblas_sgemm";
    return b;
  }();
  return blas;
}

// y = act(x + bias) over a rows x cols block, one tight loop per (activation, bias) pair so that
// the compiler can vectorise the cheap ones. x may alias y.
template <class Act>
void BiasActivationLoop(std::int64_t rows, std::int64_t cols, const float* x, const float* bias,
                        float* y, Act act) {
  if (bias == nullptr) {
    const std::int64_t n = rows * cols;
    for (std::int64_t i = 0; i < n; ++i) y[i] = act(x[i]);
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    for (std::int64_t c = 0; c < cols; ++c) yr[c] = act(xr[c] + bias[c]);
  }
}

// dx (=|+=) dy * local gradient, the local gradient computed by `grad(i)`.
template <class Grad>
void ActivationBackwardLoop(std::int64_t n, const float* dy, float* dx, bool accumulate,
                            Grad grad) {
  if (accumulate) {
    for (std::int64_t i = 0; i < n; ++i) dx[i] += grad(i, dy[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) dx[i] = grad(i, dy[i]);
  }
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int blas_threads) : sgemm_(LoadedBlas().sgemm) {
    if (!LoadedBlas().error.empty()) throw DeviceUnavailableError(LoadedBlas().error);
    if (blas_threads > 0 && LoadedBlas().set_num_threads) {
      LoadedBlas().set_num_threads(blas_threads);
    }
  }
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::string Describe() const override { return "cpu (CPU stub, OpenBLAS)"; }
  void Synchronize() override {}

  void CopyFromHost(void* dst, const void* src, std::size_t bytes) override {
    if (bytes != 0) std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, std::size_t bytes) override {
    if (bytes != 0) std::memcpy(dst, src, bytes);
  }
  void Copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes != 0) std::memmove(dst, src, bytes);
  }
  void Fill(float* dst, float value, std::int64_t n) override { std::fill(dst, dst + n, value); }

  void Gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
            float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
            float beta, float* c, std::int64_t ldc) override {
    if (m == 0 || n == 0) return;
    if (k == 0) {  // C = beta * C; beta == 0 writes zeros and never reads C (BLAS semantics)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j)
          c[i * ldc + j] = beta == 0.0f ? 0.0f : c[i * ldc + j] * beta;
      return;
    }
    // Checked in a fixed order (m, n, k, then the leading dims): the error names the first.
    const blasint bm = BlasDim(m, "m"), bn = BlasDim(n, "n"), bk = BlasDim(k, "k");
    const blasint blda = BlasDim(lda, "lda"), bldb = BlasDim(ldb, "ldb");
    const blasint bldc = BlasDim(ldc, "ldc");
    sgemm_(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, bm, bn, bk, alpha, a, blda, b, bldb, beta, c,
                bldc);
  }
  void Axpy(std::int64_t n, float alpha, const float* x, float* y) override {
    for (std::int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
  }
  void Scale(std::int64_t n, float alpha, const float* x, float* y, bool accumulate) override {
    for (std::int64_t i = 0; i < n; ++i) Store(&y[i], alpha * x[i], accumulate);
  }
  void Add(std::int64_t n, const float* a, const float* b, float* y) override {
    for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  }
  void Mul(std::int64_t n, const float* a, const float* b, float* y, bool accumulate) override {
    for (std::int64_t i = 0; i < n; ++i) Store(&y[i], a[i] * b[i], accumulate);
  }
  void BiasActivation(std::int64_t rows, std::int64_t cols, const float* x, const float* bias,
                      Activation act, float* y) override {
    switch (act) {
      case Activation::kNone:
        return BiasActivationLoop(rows, cols, x, bias, y, [](float v) { return v; });
      case Activation::kRelu:
        return BiasActivationLoop(rows, cols, x, bias, y,
                                  [](float v) { return v > 0.0f ? v : 0.0f; });
      case Activation::kGelu:
        return BiasActivationLoop(rows, cols, x, bias, y, [](float v) { return GeluForward(v); });
      case Activation::kTanh:
        return BiasActivationLoop(rows, cols, x, bias, y, [](float v) { return std::tanh(v); });
    }
  }
  void ActivationBackward(std::int64_t n, Activation act, const float* pre, const float* out,
                          const float* dy, float* dx, bool accumulate) override {
    switch (act) {
      case Activation::kNone:
        return ActivationBackwardLoop(n, dy, dx, accumulate, [](std::int64_t, float g) { return g; });
      case Activation::kRelu:
        return ActivationBackwardLoop(n, dy, dx, accumulate, [out](std::int64_t i, float g) {
          return out[i] > 0.0f ? g : 0.0f;
        });
      case Activation::kGelu:
        return ActivationBackwardLoop(n, dy, dx, accumulate, [pre](std::int64_t i, float g) {
          return g * GeluGrad(pre[i]);
        });
      case Activation::kTanh:
        return ActivationBackwardLoop(n, dy, dx, accumulate, [out](std::int64_t i, float g) {
          return g * (1.0f - out[i] * out[i]);
        });
    }
  }
  void ColumnSum(std::int64_t rows, std::int64_t cols, const float* x, float* out,
                 bool accumulate) override {
    if (!accumulate) std::fill(out, out + cols, 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) out[c] += x[r * cols + c];
  }
  void Sum(std::int64_t n, const float* x, float scale, float* out) override {
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i) s += x[i];
    *out = static_cast<float>(s * scale);
  }
  void BroadcastScalar(std::int64_t n, const float* dy, float scale, float* dx,
                       bool accumulate) override {
    const float g = *dy * scale;
    for (std::int64_t i = 0; i < n; ++i) Store(&dx[i], g, accumulate);
  }
  void Transpose(std::int64_t rows_src, std::int64_t cols_src, const float* src, float* dst,
                 bool accumulate) override {
    for (std::int64_t r = 0; r < rows_src; ++r)
      for (std::int64_t c = 0; c < cols_src; ++c)
        Store(&dst[c * rows_src + r], src[r * cols_src + c], accumulate);
  }
  void Copy2D(std::int64_t rows, std::int64_t cols, const float* src, std::int64_t src_ld,
              float* dst, std::int64_t dst_ld, bool accumulate) override {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        Store(&dst[r * dst_ld + c], src[r * src_ld + c], accumulate);
  }
  void Softmax(std::int64_t rows, std::int64_t cols, const float* x, float* y) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
      float* yr = y + r * cols;
      const float mx = *std::max_element(xr, xr + cols);
      double sum = 0;
      for (std::int64_t c = 0; c < cols; ++c) sum += (yr[c] = std::exp(xr[c] - mx));
      const float inv = static_cast<float>(1.0 / sum);
      for (std::int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
  }
  void SoftmaxBackward(std::int64_t rows, std::int64_t cols, const float* y, const float* dy,
                       float* dx, bool accumulate) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* yr = y + r * cols;
      const float* dyr = dy + r * cols;
      double dot = 0;
      for (std::int64_t c = 0; c < cols; ++c) dot += static_cast<double>(yr[c]) * dyr[c];
      for (std::int64_t c = 0; c < cols; ++c)
        Store(&dx[r * cols + c], yr[c] * (dyr[c] - static_cast<float>(dot)), accumulate);
    }
  }
  void SoftmaxCrossEntropy(std::int64_t rows, std::int64_t cols, const float* logits,
                           const std::int32_t* labels, float* probs, float* loss) override {
    Softmax(rows, cols, logits, probs);
    double total = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float p = probs[r * cols + labels[r]];
      total -= std::log(std::max(p, std::numeric_limits<float>::min()));
    }
    *loss = static_cast<float>(total / static_cast<double>(rows));
  }
  void SoftmaxCrossEntropyBackward(std::int64_t rows, std::int64_t cols, const float* probs,
                                   const std::int32_t* labels, const float* dloss, float* dlogits,
                                   bool accumulate) override {
    const float scale = *dloss / static_cast<float>(rows);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const float onehot = c == labels[r] ? 1.0f : 0.0f;
        Store(&dlogits[r * cols + c], scale * (probs[r * cols + c] - onehot), accumulate);
      }
  }
  void MseLoss(std::int64_t n, const float* pred, const float* target, float* loss) override {
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(pred[i]) - target[i];
      s += d * d;
    }
    *loss = static_cast<float>(s / static_cast<double>(n));
  }
  void MseLossBackward(std::int64_t n, const float* pred, const float* target, const float* dloss,
                       float* dpred, bool accumulate) override {
    const float scale = 2.0f * *dloss / static_cast<float>(n);
    for (std::int64_t i = 0; i < n; ++i) Store(&dpred[i], scale * (pred[i] - target[i]), accumulate);
  }
  void LayerNorm(std::int64_t rows, std::int64_t cols, const float* x, const float* gamma,
                 const float* beta, float eps, float* y, float* mean, float* rstd) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
      double mu = 0;
      for (std::int64_t c = 0; c < cols; ++c) mu += xr[c];
      mu /= static_cast<double>(cols);
      double var = 0;
      for (std::int64_t c = 0; c < cols; ++c) var += (xr[c] - mu) * (xr[c] - mu);
      var /= static_cast<double>(cols);
      const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
      mean[r] = static_cast<float>(mu);
      rstd[r] = rs;
      for (std::int64_t c = 0; c < cols; ++c)
        y[r * cols + c] = (xr[c] - mean[r]) * rs * gamma[c] + beta[c];
    }
  }
  void LayerNormBackward(std::int64_t rows, std::int64_t cols, const float* x, const float* gamma,
                         const float* mean, const float* rstd, const float* dy, float* dx,
                         bool accumulate_dx, float* dgamma, bool accumulate_dgamma, float* dbeta,
                         bool accumulate_dbeta) override {
    if (dgamma != nullptr && !accumulate_dgamma) std::fill(dgamma, dgamma + cols, 0.0f);
    if (dbeta != nullptr && !accumulate_dbeta) std::fill(dbeta, dbeta + cols, 0.0f);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
      const float* dyr = dy + r * cols;
      double sum_g = 0, sum_gx = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        const float xhat = (xr[c] - mean[r]) * rstd[r];
        const float g = dyr[c] * gamma[c];
        sum_g += g;
        sum_gx += static_cast<double>(g) * xhat;
        if (dgamma != nullptr) dgamma[c] += dyr[c] * xhat;
        if (dbeta != nullptr) dbeta[c] += dyr[c];
      }
      if (dx == nullptr) continue;
      const float mg = static_cast<float>(sum_g / static_cast<double>(cols));
      const float mgx = static_cast<float>(sum_gx / static_cast<double>(cols));
      for (std::int64_t c = 0; c < cols; ++c) {
        const float xhat = (xr[c] - mean[r]) * rstd[r];
        Store(&dx[r * cols + c], rstd[r] * (dyr[c] * gamma[c] - mg - xhat * mgx), accumulate_dx);
      }
    }
  }
  void EmbeddingLookup(std::int64_t n, std::int64_t dim, const float* table,
                       const std::int32_t* ids, float* out) override {
    for (std::int64_t i = 0; i < n; ++i)
      std::memcpy(out + i * dim, table + static_cast<std::int64_t>(ids[i]) * dim,
                  static_cast<std::size_t>(dim) * sizeof(float));
  }
  void EmbeddingBackward(std::int64_t n, std::int64_t dim, const float* dy,
                         const std::int32_t* ids, float* dtable) override {
    for (std::int64_t i = 0; i < n; ++i) {
      float* row = dtable + static_cast<std::int64_t>(ids[i]) * dim;
      for (std::int64_t d = 0; d < dim; ++d) row[d] += dy[i * dim + d];
    }
  }
  void SgdMomentum(std::int64_t n, float lr, float momentum, float weight_decay, const float* grad,
                   float* velocity, float* param) override {
    for (std::int64_t i = 0; i < n; ++i) {
      const float g = grad[i] + weight_decay * param[i];
      velocity[i] = momentum * velocity[i] + g;
      param[i] -= lr * velocity[i];
    }
  }
  void Adam(std::int64_t n, float lr, float beta1, float beta2, float eps, float bias_correction1,
            float bias_correction2, const float* grad, float* m, float* v, float* param) override {
    for (std::int64_t i = 0; i < n; ++i) {
      m[i] = beta1 * m[i] + (1.0f - beta1) * grad[i];
      v[i] = beta2 * v[i] + (1.0f - beta2) * grad[i] * grad[i];
      const float mhat = m[i] / bias_correction1;
      const float vhat = v[i] / bias_correction2;
      param[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  std::int64_t CountNonFinite(std::int64_t n, const float* x) override {
    std::int64_t count = 0;
    for (std::int64_t i = 0; i < n; ++i) count += std::isfinite(x[i]) ? 0 : 1;
    return count;
  }

 private:
  decltype(&cblas_sgemm) sgemm_;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(int blas_threads) {
  return std::make_unique<CpuBackend>(blas_threads);
}

}  // namespace leakbound::runtime
