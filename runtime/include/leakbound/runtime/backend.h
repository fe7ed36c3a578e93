// Backend: the op kernels of one device behind one narrow interface. Pointers are device
// pointers of that backend's memory. The CPU backend is the reference; the CUDA backend is
// tested against it. "accumulate" means out += result, otherwise out = result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "leakbound/runtime/memory_resource.h"

namespace leakbound::runtime {

enum class Activation : std::uint8_t { kNone, kRelu, kGelu, kTanh };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string Describe() const = 0;
  // Waits until all queued work is done (no-op on CPU). Probes sample after this.
  virtual void Synchronize() = 0;

  virtual void CopyFromHost(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void CopyToHost(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void Copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void Fill(float* dst, float value, std::int64_t n) = 0;

  // C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C, row-major, leading dims in elements.
  virtual void Gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    float alpha, const float* a, std::int64_t lda, const float* b,
                    std::int64_t ldb, float beta, float* c, std::int64_t ldc) = 0;
  // y += alpha * x
  virtual void Axpy(std::int64_t n, float alpha, const float* x, float* y) = 0;
  // y = alpha * x (accumulate: y += alpha * x)
  virtual void Scale(std::int64_t n, float alpha, const float* x, float* y, bool accumulate) = 0;
  virtual void Add(std::int64_t n, const float* a, const float* b, float* y) = 0;
  virtual void Mul(std::int64_t n, const float* a, const float* b, float* y, bool accumulate) = 0;
  // y[r,c] = act(x[r,c] + bias[c]); bias may be null.
  virtual void BiasActivation(std::int64_t rows, std::int64_t cols, const float* x,
                              const float* bias, Activation act, float* y) = 0;
  // dx = dy * act'(pre) where pre is the activation input and out its output. dx may alias dy
  // (elementwise, in place) when accumulate is false.
  virtual void ActivationBackward(std::int64_t n, Activation act, const float* pre,
                                  const float* out, const float* dy, float* dx,
                                  bool accumulate) = 0;
  // out[c] (+)= sum_r x[r,c]
  virtual void ColumnSum(std::int64_t rows, std::int64_t cols, const float* x, float* out,
                         bool accumulate) = 0;
  // out[0] = scale * sum(x)  (out is a device scalar)
  virtual void Sum(std::int64_t n, const float* x, float scale, float* out) = 0;
  // dx (+)= scale * dy[0]  (dy a device scalar)
  virtual void BroadcastScalar(std::int64_t n, const float* dy, float scale, float* dx,
                               bool accumulate) = 0;
  // dst[r, c] (+)= src[c, r], src is [rows_src, cols_src] row-major, dst [cols_src, rows_src].
  virtual void Transpose(std::int64_t rows_src, std::int64_t cols_src, const float* src,
                         float* dst, bool accumulate) = 0;
  // Strided 2-D copy: dst[r, c] (+)= src[r, c] with leading dims.
  virtual void Copy2D(std::int64_t rows, std::int64_t cols, const float* src, std::int64_t src_ld,
                      float* dst, std::int64_t dst_ld, bool accumulate) = 0;
  // Row-wise softmax.
  virtual void Softmax(std::int64_t rows, std::int64_t cols, const float* x, float* y) = 0;
  virtual void SoftmaxBackward(std::int64_t rows, std::int64_t cols, const float* y,
                               const float* dy, float* dx, bool accumulate) = 0;
  // Mean softmax cross-entropy over rows; probs [rows, cols] saved for backward.
  virtual void SoftmaxCrossEntropy(std::int64_t rows, std::int64_t cols, const float* logits,
                                   const std::int32_t* labels, float* probs, float* loss) = 0;
  virtual void SoftmaxCrossEntropyBackward(std::int64_t rows, std::int64_t cols,
                                           const float* probs, const std::int32_t* labels,
                                           const float* dloss, float* dlogits,
                                           bool accumulate) = 0;
  // loss = mean((pred - target)^2)
  virtual void MseLoss(std::int64_t n, const float* pred, const float* target, float* loss) = 0;
  virtual void MseLossBackward(std::int64_t n, const float* pred, const float* target,
                               const float* dloss, float* dpred, bool accumulate) = 0;
  // Row-wise layer norm; mean and rstd [rows] saved for backward.
  virtual void LayerNorm(std::int64_t rows, std::int64_t cols, const float* x, const float* gamma,
                         const float* beta, float eps, float* y, float* mean, float* rstd) = 0;
  // Each output may be null (not needed); accumulate flags per output.
  virtual void LayerNormBackward(std::int64_t rows, std::int64_t cols, const float* x,
                                 const float* gamma, const float* mean, const float* rstd,
                                 const float* dy, float* dx, bool accumulate_dx, float* dgamma,
                                 bool accumulate_dgamma, float* dbeta, bool accumulate_dbeta) = 0;
  // out[i, :] = table[ids[i], :]. ids must be in [0, vocab): checked by the caller.
  virtual void EmbeddingLookup(std::int64_t n, std::int64_t dim, const float* table,
                               const std::int32_t* ids, float* out) = 0;
  // dtable[ids[i], :] += dy[i, :] (dtable must be initialised).
  virtual void EmbeddingBackward(std::int64_t n, std::int64_t dim, const float* dy,
                                 const std::int32_t* ids, float* dtable) = 0;
  // Optimizer updates, in place. The update of one parameter cannot fail.
  virtual void SgdMomentum(std::int64_t n, float lr, float momentum, float weight_decay,
                           const float* grad, float* velocity, float* param) = 0;
  virtual void Adam(std::int64_t n, float lr, float beta1, float beta2, float eps,
                    float bias_correction1, float bias_correction2, const float* grad, float* m,
                    float* v, float* param) = 0;
  // Counts non-finite values (NaN, +-Inf).
  virtual std::int64_t CountNonFinite(std::int64_t n, const float* x) = 0;
};

// The CPU reference backend (OpenBLAS for Gemm). `blas_threads` 0 keeps OpenBLAS's setting.
std::unique_ptr<Backend> MakeCpuBackend(int blas_threads = 0);

}  // namespace leakbound::runtime
