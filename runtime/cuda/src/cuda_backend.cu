// The CUDA backend: every op of backend.h as a kernel or a cuBLAS call, queued on the device's
// process-wide stream. The kernels mirror runtime/src/cpu_backend.cc, the specification they are
// tested against, and choose obvious correctness over peak speed: grid-stride elementwise loops,
// one block per row for row-wise ops, one thread per column for column sums (the same summation
// order as the CPU), one block for reductions to a device scalar. Sums accumulate in float with a
// tree reduction where the CPU uses double: the tolerances are in docs/cuda.md.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>

#include "cuda_backend.h"
#include "cuda_check.h"
#include "leakbound/runtime/cuda/cublas_api.h"
#include "leakbound/runtime/errors.h"

namespace leakbound::runtime {
namespace {

using Index = std::int64_t;

constexpr int kBlock = 256;         // elementwise, row-wise and column kernels
constexpr int kReduceBlock = 1024;  // single-block reductions to a scalar
constexpr Index kMaxGrid = 8192;    // grid-stride loops cover the rest
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;

// Blocks for `work` independent items of one thread each (work > 0).
unsigned GridFor(Index work) {
  return static_cast<unsigned>(std::min<Index>((work + kBlock - 1) / kBlock, kMaxGrid));
}
// Blocks for `rows` rows of one block each (rows > 0).
unsigned GridForRows(Index rows) { return static_cast<unsigned>(std::min<Index>(rows, kMaxGrid)); }

// ---------------------------------------------------------------------------------------------
// Device helpers

__device__ inline Index FirstIndex() {
  return static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline Index GridStride() { return static_cast<Index>(gridDim.x) * blockDim.x; }

__device__ inline void Store(float* out, float value, bool accumulate) {
  if (accumulate) {
    *out += value;
  } else {
    *out = value;
  }
}

__device__ inline float GeluForward(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}
__device__ inline float GeluGrad(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
  const float t = tanhf(u);
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}
__device__ inline float Activate(float v, Activation act) {
  switch (act) {
    case Activation::kNone: return v;
    case Activation::kRelu: return v > 0.0f ? v : 0.0f;
    case Activation::kGelu: return GeluForward(v);
    case Activation::kTanh: return tanhf(v);
  }
  return v;
}

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduces `value` over the block; every thread gets the same result (a butterfly of commutative
// ops is bitwise identical on every lane). Every thread of the block must call it: it
// synchronises. blockDim.x must be a multiple of 32, at most 1024.
template <class Op>
__device__ float BlockReduce(float value, Op op, float identity) {
  __shared__ float partial[32];
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  __syncthreads();  // readers of the previous call are done with `partial`
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  value = lane < blockDim.x / 32 ? partial[lane] : identity;
  for (int offset = 16; offset > 0; offset /= 2)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}
__device__ inline float BlockSum(float value) { return BlockReduce(value, SumOp{}, 0.0f); }

// ---------------------------------------------------------------------------------------------
// Elementwise kernels (grid-stride)

__global__ void FillKernel(Index n, float value, float* dst) {
  for (Index i = FirstIndex(); i < n; i += GridStride()) dst[i] = value;
}
__global__ void AxpyKernel(Index n, float alpha, const float* x, float* y) {
  for (Index i = FirstIndex(); i < n; i += GridStride()) y[i] += alpha * x[i];
}
__global__ void ScaleKernel(Index n, float alpha, const float* x, float* y, bool accumulate) {
  for (Index i = FirstIndex(); i < n; i += GridStride()) Store(&y[i], alpha * x[i], accumulate);
}
__global__ void AddKernel(Index n, const float* a, const float* b, float* y) {
  for (Index i = FirstIndex(); i < n; i += GridStride()) y[i] = a[i] + b[i];
}
__global__ void MulKernel(Index n, const float* a, const float* b, float* y, bool accumulate) {
  for (Index i = FirstIndex(); i < n; i += GridStride()) Store(&y[i], a[i] * b[i], accumulate);
}
// c[r, col] = beta * c[r, col]: Gemm with k == 0, as the CPU reference does. beta == 0 writes
// zeros without reading C (it may be uninitialised: NaN * 0 is NaN).
__global__ void ScaleMatrixKernel(Index rows, Index cols, float beta, float* c, Index ldc) {
  for (Index i = FirstIndex(); i < rows * cols; i += GridStride()) {
    const Index r = i / cols;
    float& out = c[r * ldc + (i - r * cols)];
    out = beta == 0.0f ? 0.0f : out * beta;
  }
}
__global__ void BiasActivationKernel(Index rows, Index cols, const float* x, const float* bias,
                                     Activation act, float* y) {
  for (Index i = FirstIndex(); i < rows * cols; i += GridStride()) {
    const float v = x[i] + (bias != nullptr ? bias[i % cols] : 0.0f);
    y[i] = Activate(v, act);
  }
}
// `pre` is read only for GELU, `out` only for ReLU and tanh (as on the CPU).
__global__ void ActivationBackwardKernel(Index n, Activation act, const float* pre,
                                         const float* out, const float* dy, float* dx,
                                         bool accumulate) {
  for (Index i = FirstIndex(); i < n; i += GridStride()) {
    float g = dy[i];
    switch (act) {
      case Activation::kNone: break;
      case Activation::kRelu: g = out[i] > 0.0f ? g : 0.0f; break;
      case Activation::kGelu: g *= GeluGrad(pre[i]); break;
      case Activation::kTanh: g *= 1.0f - out[i] * out[i]; break;
    }
    Store(&dx[i], g, accumulate);
  }
}
__global__ void BroadcastScalarKernel(Index n, const float* dy, float scale, float* dx,
                                      bool accumulate) {
  const float g = *dy * scale;
  for (Index i = FirstIndex(); i < n; i += GridStride()) Store(&dx[i], g, accumulate);
}
// dst[c, r] (+)= src[r, c]; one thread per destination element (coalesced writes).
__global__ void TransposeKernel(Index rows_src, Index cols_src, const float* src, float* dst,
                                bool accumulate) {
  for (Index j = FirstIndex(); j < rows_src * cols_src; j += GridStride()) {
    const Index c = j / rows_src;
    const Index r = j - c * rows_src;
    Store(&dst[j], src[r * cols_src + c], accumulate);
  }
}
__global__ void Copy2DKernel(Index rows, Index cols, const float* src, Index src_ld, float* dst,
                             Index dst_ld, bool accumulate) {
  for (Index i = FirstIndex(); i < rows * cols; i += GridStride()) {
    const Index r = i / cols;
    const Index c = i - r * cols;
    Store(&dst[r * dst_ld + c], src[r * src_ld + c], accumulate);
  }
}
__global__ void CrossEntropyBackwardKernel(Index rows, Index cols, const float* probs,
                                           const std::int32_t* labels, const float* dloss,
                                           float* dlogits, bool accumulate) {
  const float scale = *dloss / static_cast<float>(rows);
  for (Index i = FirstIndex(); i < rows * cols; i += GridStride()) {
    const Index r = i / cols;
    const float onehot = i - r * cols == labels[r] ? 1.0f : 0.0f;
    Store(&dlogits[i], scale * (probs[i] - onehot), accumulate);
  }
}
__global__ void MseLossBackwardKernel(Index n, const float* pred, const float* target,
                                      const float* dloss, float* dpred, bool accumulate) {
  const float scale = 2.0f * *dloss / static_cast<float>(n);
  for (Index i = FirstIndex(); i < n; i += GridStride())
    Store(&dpred[i], scale * (pred[i] - target[i]), accumulate);
}
__global__ void EmbeddingLookupKernel(Index n, Index dim, const float* table,
                                      const std::int32_t* ids, float* out) {
  for (Index i = FirstIndex(); i < n * dim; i += GridStride()) {
    const Index row = i / dim;
    out[i] = table[static_cast<Index>(ids[row]) * dim + (i - row * dim)];
  }
}
// Repeated ids add into the same row: atomics (summation order differs from the CPU's).
__global__ void EmbeddingBackwardKernel(Index n, Index dim, const float* dy,
                                        const std::int32_t* ids, float* dtable) {
  for (Index i = FirstIndex(); i < n * dim; i += GridStride()) {
    const Index row = i / dim;
    atomicAdd(&dtable[static_cast<Index>(ids[row]) * dim + (i - row * dim)], dy[i]);
  }
}
__global__ void SgdMomentumKernel(Index n, float lr, float momentum, float weight_decay,
                                  const float* grad, float* velocity, float* param) {
  for (Index i = FirstIndex(); i < n; i += GridStride()) {
    const float g = grad[i] + weight_decay * param[i];
    velocity[i] = momentum * velocity[i] + g;
    param[i] -= lr * velocity[i];
  }
}
__global__ void AdamKernel(Index n, float lr, float beta1, float beta2, float eps,
                           float bias_correction1, float bias_correction2, const float* grad,
                           float* m, float* v, float* param) {
  for (Index i = FirstIndex(); i < n; i += GridStride()) {
    m[i] = beta1 * m[i] + (1.0f - beta1) * grad[i];
    v[i] = beta2 * v[i] + (1.0f - beta2) * grad[i] * grad[i];
    const float mhat = m[i] / bias_correction1;
    const float vhat = v[i] / bias_correction2;
    param[i] -= lr * mhat / (sqrtf(vhat) + eps);
  }
}
__global__ void CountNonFiniteKernel(Index n, const float* x, unsigned long long* counter) {
  unsigned long long count = 0;
  for (Index i = FirstIndex(); i < n; i += GridStride()) count += isfinite(x[i]) ? 0 : 1;
  if (count != 0) atomicAdd(counter, count);
}

// ---------------------------------------------------------------------------------------------
// Column kernels: one thread per column, rows summed in order (the CPU's order).

__global__ void ColumnSumKernel(Index rows, Index cols, const float* x, float* out,
                                bool accumulate) {
  for (Index c = FirstIndex(); c < cols; c += GridStride()) {
    float sum = accumulate ? out[c] : 0.0f;
    for (Index r = 0; r < rows; ++r) sum += x[r * cols + c];
    out[c] = sum;
  }
}
// dgamma[c] (+)= sum_r dy[r,c] * xhat[r,c], dbeta[c] (+)= sum_r dy[r,c]; either may be null.
__global__ void LayerNormParamGradKernel(Index rows, Index cols, const float* x, const float* mean,
                                         const float* rstd, const float* dy, float* dgamma,
                                         bool accumulate_dgamma, float* dbeta,
                                         bool accumulate_dbeta) {
  for (Index c = FirstIndex(); c < cols; c += GridStride()) {
    float g = dgamma != nullptr && accumulate_dgamma ? dgamma[c] : 0.0f;
    float b = dbeta != nullptr && accumulate_dbeta ? dbeta[c] : 0.0f;
    for (Index r = 0; r < rows; ++r) {
      const float d = dy[r * cols + c];
      g += d * ((x[r * cols + c] - mean[r]) * rstd[r]);
      b += d;
    }
    if (dgamma != nullptr) dgamma[c] = g;
    if (dbeta != nullptr) dbeta[c] = b;
  }
}

// ---------------------------------------------------------------------------------------------
// Row kernels: one block per row (grid-stride over rows). Each thread touches the same columns
// in every pass, so an output may alias its input.

__global__ void SoftmaxRowsKernel(Index rows, Index cols, const float* x, float* y) {
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float max = -INFINITY;
    for (Index c = threadIdx.x; c < cols; c += blockDim.x) max = fmaxf(max, xr[c]);
    max = BlockReduce(max, MaxOp{}, -INFINITY);
    float sum = 0.0f;
    for (Index c = threadIdx.x; c < cols; c += blockDim.x) {
      const float e = expf(xr[c] - max);
      yr[c] = e;
      sum += e;
    }
    const float inv = 1.0f / BlockSum(sum);
    for (Index c = threadIdx.x; c < cols; c += blockDim.x) yr[c] *= inv;
  }
}
__global__ void SoftmaxBackwardRowsKernel(Index rows, Index cols, const float* y, const float* dy,
                                          float* dx, bool accumulate) {
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    const Index base = r * cols;
    float dot = 0.0f;
    for (Index c = threadIdx.x; c < cols; c += blockDim.x) dot += y[base + c] * dy[base + c];
    dot = BlockSum(dot);
    for (Index c = threadIdx.x; c < cols; c += blockDim.x)
      Store(&dx[base + c], y[base + c] * (dy[base + c] - dot), accumulate);
  }
}
__global__ void LayerNormRowsKernel(Index rows, Index cols, const float* x, const float* gamma,
                                    const float* beta, float eps, float* y, float* mean,
                                    float* rstd) {
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float sum = 0.0f;
    for (Index c = threadIdx.x; c < cols; c += blockDim.x) sum += xr[c];
    const float mu = BlockSum(sum) / static_cast<float>(cols);
    float squares = 0.0f;
    for (Index c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = xr[c] - mu;
      squares += d * d;
    }
    const float var = BlockSum(squares) / static_cast<float>(cols);
    const float rs = 1.0f / sqrtf(var + eps);
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    for (Index c = threadIdx.x; c < cols; c += blockDim.x)
      y[r * cols + c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
  }
}
__global__ void LayerNormDxRowsKernel(Index rows, Index cols, const float* x, const float* gamma,
                                      const float* mean, const float* rstd, const float* dy,
                                      float* dx, bool accumulate) {
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    const Index base = r * cols;
    const float mu = mean[r];
    const float rs = rstd[r];
    float sum_g = 0.0f;
    float sum_gx = 0.0f;
    for (Index c = threadIdx.x; c < cols; c += blockDim.x) {
      const float g = dy[base + c] * gamma[c];
      sum_g += g;
      sum_gx += g * ((x[base + c] - mu) * rs);
    }
    const float mean_g = BlockSum(sum_g) / static_cast<float>(cols);
    const float mean_gx = BlockSum(sum_gx) / static_cast<float>(cols);
    for (Index c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = (x[base + c] - mu) * rs;
      Store(&dx[base + c], rs * (dy[base + c] * gamma[c] - mean_g - xhat * mean_gx), accumulate);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Single-block reductions to a device scalar (launched with one block of kReduceBlock threads;
// the empty input gives what the CPU gives: 0 for Sum, NaN for the means).

__global__ void SumKernel(Index n, const float* x, float scale, float* out) {
  float sum = 0.0f;
  for (Index i = threadIdx.x; i < n; i += blockDim.x) sum += x[i];
  sum = BlockSum(sum);
  if (threadIdx.x == 0) *out = sum * scale;
}
__global__ void CrossEntropyLossKernel(Index rows, Index cols, const float* probs,
                                       const std::int32_t* labels, float* loss) {
  float total = 0.0f;
  for (Index r = threadIdx.x; r < rows; r += blockDim.x)
    total -= logf(fmaxf(probs[r * cols + labels[r]], FLT_MIN));
  total = BlockSum(total);
  if (threadIdx.x == 0) *loss = total / static_cast<float>(rows);
}
__global__ void MseLossKernel(Index n, const float* pred, const float* target, float* loss) {
  float sum = 0.0f;
  for (Index i = threadIdx.x; i < n; i += blockDim.x) {
    const float d = pred[i] - target[i];
    sum += d * d;
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) *loss = sum / static_cast<float>(n);
}

// ---------------------------------------------------------------------------------------------

void CheckCublas(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw RuntimeError(std::string(call) + " failed: " + Cublas().status_name(status) + " (" +
                     std::to_string(static_cast<int>(status)) +
                     "): " + Cublas().status_string(status));
}

int GemmDim(Index value, const char* name) {
  if (value < 0 || value > INT_MAX) {
    throw ShapeError(std::string("Gemm: ") + name + " = " + std::to_string(value) +
                     " does not fit cuBLAS's 32-bit int (limit " + std::to_string(INT_MAX) +
                     "); split the matmul into smaller ones");
  }
  return static_cast<int>(value);
}

#define LB_LAUNCH(kernel, grid, block, ...) Launch(#kernel, kernel, grid, block, __VA_ARGS__)

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, cudaStream_t stream, std::string description)
      : device_(device), stream_(stream), description_(std::move(description)) {
    const DeviceGuard guard(device_);
    CheckCublas(Cublas().create(&cublas_), "cublasCreate");
    try {
      CheckCublas(Cublas().set_stream(cublas_, stream_), "cublasSetStream");
      // Plain FP32 (no TF32 tensor-op math): the tolerance against the CPU assumes it.
      CheckCublas(Cublas().set_math_mode(cublas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
      // The CountNonFinite counter: backend scratch, not tensor data, so it does not go through
      // the resource stack (like cuBLAS's own workspace).
      CheckCuda(cudaMalloc(&counter_, sizeof(*counter_)), "cudaMalloc (non-finite counter)");
    } catch (...) {
      Cublas().destroy(cublas_);
      throw;
    }
  }
  ~CudaBackend() override {
    const DeviceGuard guard(device_);
    if (cudaStreamSynchronize(stream_) != cudaSuccess) (void)cudaGetLastError();
    Cublas().destroy(cublas_);
    if (cudaFree(counter_) != cudaSuccess) (void)cudaGetLastError();
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string Describe() const override { return description_; }
  void Synchronize() override {
    const DeviceGuard guard(device_);
    CheckCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  // Both host copies return with the stream synchronised: the caller may reuse or read the host
  // buffer at once, whether it is pageable or pinned. (A pageable host-to-device copy already
  // waits for the stream before it starts, so the sync after it costs only the copy itself.)
  void CopyFromHost(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    const DeviceGuard guard(device_);
    CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_),
              "cudaMemcpyAsync (host to device)");
    CheckCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (after host to device)");
  }
  void CopyToHost(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    const DeviceGuard guard(device_);
    CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
              "cudaMemcpyAsync (device to host)");
    CheckCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (after device to host)");
  }
  void Copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0 || dst == src) return;
    const auto d = reinterpret_cast<std::uintptr_t>(dst);
    const auto s = reinterpret_cast<std::uintptr_t>(src);
    if (d < s + bytes && s < d + bytes) {
      throw RuntimeError("Copy: source and destination overlap (" + std::to_string(bytes) +
                         " bytes); the CUDA backend copies disjoint buffers only");
    }
    const DeviceGuard guard(device_);
    CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
              "cudaMemcpyAsync (device to device)");
  }
  void Fill(float* dst, float value, std::int64_t n) override {
    if (n <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(FillKernel, GridFor(n), kBlock, n, value, dst);
  }

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the row-major buffers read
  // as column-major are the transposes, so cuBLAS gets B before A, n before m, same flags and
  // leading dimensions.
  void Gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
            float* c, std::int64_t ldc) override {
    if (m == 0 || n == 0) return;
    const DeviceGuard guard(device_);
    if (k == 0) {
      LB_LAUNCH(ScaleMatrixKernel, GridFor(m * n), kBlock, m, n, beta, c, ldc);
      return;
    }
    CheckCublas(Cublas().sgemm(cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                            trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, GemmDim(n, "n"), GemmDim(m, "m"),
                            GemmDim(k, "k"), &alpha, b, GemmDim(ldb, "ldb"), a, GemmDim(lda, "lda"),
                            &beta, c, GemmDim(ldc, "ldc")),
                "cublasSgemm");
  }
  void Axpy(std::int64_t n, float alpha, const float* x, float* y) override {
    if (n <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(AxpyKernel, GridFor(n), kBlock, n, alpha, x, y);
  }
  void Scale(std::int64_t n, float alpha, const float* x, float* y, bool accumulate) override {
    if (n <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(ScaleKernel, GridFor(n), kBlock, n, alpha, x, y, accumulate);
  }
  void Add(std::int64_t n, const float* a, const float* b, float* y) override {
    if (n <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(AddKernel, GridFor(n), kBlock, n, a, b, y);
  }
  void Mul(std::int64_t n, const float* a, const float* b, float* y, bool accumulate) override {
    if (n <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(MulKernel, GridFor(n), kBlock, n, a, b, y, accumulate);
  }
  void BiasActivation(std::int64_t rows, std::int64_t cols, const float* x, const float* bias,
                      Activation act, float* y) override {
    if (rows <= 0 || cols <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(BiasActivationKernel, GridFor(rows * cols), kBlock, rows, cols, x, bias, act, y);
  }
  void ActivationBackward(std::int64_t n, Activation act, const float* pre, const float* out,
                          const float* dy, float* dx, bool accumulate) override {
    if (n <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(ActivationBackwardKernel, GridFor(n), kBlock, n, act, pre, out, dy, dx, accumulate);
  }
  void ColumnSum(std::int64_t rows, std::int64_t cols, const float* x, float* out,
                 bool accumulate) override {
    if (cols <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(ColumnSumKernel, GridFor(cols), kBlock, rows, cols, x, out, accumulate);
  }
  void Sum(std::int64_t n, const float* x, float scale, float* out) override {
    const DeviceGuard guard(device_);
    LB_LAUNCH(SumKernel, 1u, kReduceBlock, n, x, scale, out);
  }
  void BroadcastScalar(std::int64_t n, const float* dy, float scale, float* dx,
                       bool accumulate) override {
    if (n <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(BroadcastScalarKernel, GridFor(n), kBlock, n, dy, scale, dx, accumulate);
  }
  void Transpose(std::int64_t rows_src, std::int64_t cols_src, const float* src, float* dst,
                 bool accumulate) override {
    if (rows_src <= 0 || cols_src <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(TransposeKernel, GridFor(rows_src * cols_src), kBlock, rows_src, cols_src, src, dst,
              accumulate);
  }
  void Copy2D(std::int64_t rows, std::int64_t cols, const float* src, std::int64_t src_ld,
              float* dst, std::int64_t dst_ld, bool accumulate) override {
    if (rows <= 0 || cols <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(Copy2DKernel, GridFor(rows * cols), kBlock, rows, cols, src, src_ld, dst, dst_ld,
              accumulate);
  }
  void Softmax(std::int64_t rows, std::int64_t cols, const float* x, float* y) override {
    if (rows <= 0 || cols <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(SoftmaxRowsKernel, GridForRows(rows), kBlock, rows, cols, x, y);
  }
  void SoftmaxBackward(std::int64_t rows, std::int64_t cols, const float* y, const float* dy,
                       float* dx, bool accumulate) override {
    if (rows <= 0 || cols <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(SoftmaxBackwardRowsKernel, GridForRows(rows), kBlock, rows, cols, y, dy, dx,
              accumulate);
  }
  void SoftmaxCrossEntropy(std::int64_t rows, std::int64_t cols, const float* logits,
                           const std::int32_t* labels, float* probs, float* loss) override {
    Softmax(rows, cols, logits, probs);
    const DeviceGuard guard(device_);
    LB_LAUNCH(CrossEntropyLossKernel, 1u, kReduceBlock, rows, cols, probs, labels, loss);
  }
  void SoftmaxCrossEntropyBackward(std::int64_t rows, std::int64_t cols, const float* probs,
                                   const std::int32_t* labels, const float* dloss, float* dlogits,
                                   bool accumulate) override {
    if (rows <= 0 || cols <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(CrossEntropyBackwardKernel, GridFor(rows * cols), kBlock, rows, cols, probs, labels,
              dloss, dlogits, accumulate);
  }
  void MseLoss(std::int64_t n, const float* pred, const float* target, float* loss) override {
    const DeviceGuard guard(device_);
    LB_LAUNCH(MseLossKernel, 1u, kReduceBlock, n, pred, target, loss);
  }
  void MseLossBackward(std::int64_t n, const float* pred, const float* target, const float* dloss,
                       float* dpred, bool accumulate) override {
    if (n <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(MseLossBackwardKernel, GridFor(n), kBlock, n, pred, target, dloss, dpred, accumulate);
  }
  void LayerNorm(std::int64_t rows, std::int64_t cols, const float* x, const float* gamma,
                 const float* beta, float eps, float* y, float* mean, float* rstd) override {
    if (rows <= 0 || cols <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(LayerNormRowsKernel, GridForRows(rows), kBlock, rows, cols, x, gamma, beta, eps, y,
              mean, rstd);
  }
  void LayerNormBackward(std::int64_t rows, std::int64_t cols, const float* x, const float* gamma,
                         const float* mean, const float* rstd, const float* dy, float* dx,
                         bool accumulate_dx, float* dgamma, bool accumulate_dgamma, float* dbeta,
                         bool accumulate_dbeta) override {
    if (cols <= 0) return;
    const DeviceGuard guard(device_);
    if (dgamma != nullptr || dbeta != nullptr) {
      LB_LAUNCH(LayerNormParamGradKernel, GridFor(cols), kBlock, rows, cols, x, mean, rstd, dy,
                dgamma, accumulate_dgamma, dbeta, accumulate_dbeta);
    }
    if (dx != nullptr && rows > 0) {
      LB_LAUNCH(LayerNormDxRowsKernel, GridForRows(rows), kBlock, rows, cols, x, gamma, mean, rstd,
                dy, dx, accumulate_dx);
    }
  }
  void EmbeddingLookup(std::int64_t n, std::int64_t dim, const float* table,
                       const std::int32_t* ids, float* out) override {
    if (n <= 0 || dim <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(EmbeddingLookupKernel, GridFor(n * dim), kBlock, n, dim, table, ids, out);
  }
  void EmbeddingBackward(std::int64_t n, std::int64_t dim, const float* dy, const std::int32_t* ids,
                         float* dtable) override {
    if (n <= 0 || dim <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(EmbeddingBackwardKernel, GridFor(n * dim), kBlock, n, dim, dy, ids, dtable);
  }
  void SgdMomentum(std::int64_t n, float lr, float momentum, float weight_decay, const float* grad,
                   float* velocity, float* param) override {
    if (n <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(SgdMomentumKernel, GridFor(n), kBlock, n, lr, momentum, weight_decay, grad, velocity,
              param);
  }
  void Adam(std::int64_t n, float lr, float beta1, float beta2, float eps, float bias_correction1,
            float bias_correction2, const float* grad, float* m, float* v, float* param) override {
    if (n <= 0) return;
    const DeviceGuard guard(device_);
    LB_LAUNCH(AdamKernel, GridFor(n), kBlock, n, lr, beta1, beta2, eps, bias_correction1,
              bias_correction2, grad, m, v, param);
  }
  std::int64_t CountNonFinite(std::int64_t n, const float* x) override {
    if (n <= 0) return 0;
    const DeviceGuard guard(device_);
    CheckCuda(cudaMemsetAsync(counter_, 0, sizeof(*counter_), stream_), "cudaMemsetAsync");
    LB_LAUNCH(CountNonFiniteKernel, GridFor(n), kBlock, n, x, counter_);
    unsigned long long count = 0;
    CopyToHost(&count, counter_, sizeof(count));
    return static_cast<std::int64_t>(count);
  }

 private:
  // Launches on the backend's stream and checks the launch. Arguments convert to the kernel's
  // parameter types here, in host code.
  template <class... Params, class... Args>
  void Launch(const char* name, void (*kernel)(Params...), unsigned grid, int block, Args... args) {
    kernel<<<grid, block, 0, stream_>>>(static_cast<Params>(args)...);
    CheckLaunch(name);
  }

  int device_;
  cudaStream_t stream_;
  std::string description_;
  cublasHandle_t cublas_ = nullptr;
  unsigned long long* counter_ = nullptr;
};

#undef LB_LAUNCH

}  // namespace

std::unique_ptr<Backend> MakeCudaBackend(int device, cudaStream_t stream, std::string description) {
  return std::make_unique<CudaBackend>(device, stream, std::move(description));
}

}  // namespace leakbound::runtime
