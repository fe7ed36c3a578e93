// Test support: a Backend that forwards every call to another one, so a test
// can override the one call it needs to fail (a sticky device error in
// Synchronize) and keep the rest real.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "leakbound/runtime/backend.h"

namespace leakbound::runtime::testing {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  void Synchronize() override { inner_->Synchronize(); }
  DeviceKind kind() const override { return inner_->kind(); }
  std::string Describe() const override { return inner_->Describe(); }
  void CopyFromHost(void *dst, const void *src, std::size_t bytes) override {
    inner_->CopyFromHost(dst, src, bytes);
  }
  void CopyToHost(void *dst, const void *src, std::size_t bytes) override {
    inner_->CopyToHost(dst, src, bytes);
  }
  void Copy(void *dst, const void *src, std::size_t bytes) override {
    inner_->Copy(dst, src, bytes);
  }
  void Fill(float *dst, float value, std::int64_t n) override { inner_->Fill(dst, value, n); }
  void Gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float *a, std::int64_t lda, const float *b, std::int64_t ldb, float beta,
            float *c, std::int64_t ldc) override {
    inner_->Gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void Axpy(std::int64_t n, float alpha, const float *x, float *y) override {
    inner_->Axpy(n, alpha, x, y);
  }
  void Scale(std::int64_t n, float alpha, const float *x, float *y, bool accumulate) override {
    inner_->Scale(n, alpha, x, y, accumulate);
  }
  void Add(std::int64_t n, const float *a, const float *b, float *y) override {
    inner_->Add(n, a, b, y);
  }
  void Mul(std::int64_t n, const float *a, const float *b, float *y, bool accumulate) override {
    inner_->Mul(n, a, b, y, accumulate);
  }
  void BiasActivation(std::int64_t rows, std::int64_t cols, const float *x, const float *bias,
                      Activation act, float *y) override {
    inner_->BiasActivation(rows, cols, x, bias, act, y);
  }
  void ActivationBackward(std::int64_t n, Activation act, const float *pre, const float *out,
                          const float *dy, float *dx, bool accumulate) override {
    inner_->ActivationBackward(n, act, pre, out, dy, dx, accumulate);
  }
  void ColumnSum(std::int64_t rows, std::int64_t cols, const float *x, float *out,
                 bool accumulate) override {
    inner_->ColumnSum(rows, cols, x, out, accumulate);
  }
  void Sum(std::int64_t n, const float *x, float scale, float *out) override {
    inner_->Sum(n, x, scale, out);
  }
  void BroadcastScalar(std::int64_t n, const float *dy, float scale, float *dx,
                       bool accumulate) override {
    inner_->BroadcastScalar(n, dy, scale, dx, accumulate);
  }
  void Transpose(std::int64_t rows_src, std::int64_t cols_src, const float *src, float *dst,
                 bool accumulate) override {
    inner_->Transpose(rows_src, cols_src, src, dst, accumulate);
  }
  void Copy2D(std::int64_t rows, std::int64_t cols, const float *src, std::int64_t src_ld,
              float *dst, std::int64_t dst_ld, bool accumulate) override {
    inner_->Copy2D(rows, cols, src, src_ld, dst, dst_ld, accumulate);
  }
  void Softmax(std::int64_t rows, std::int64_t cols, const float *x, float *y) override {
    inner_->Softmax(rows, cols, x, y);
  }
  void SoftmaxBackward(std::int64_t rows, std::int64_t cols, const float *y, const float *dy,
                       float *dx, bool accumulate) override {
    inner_->SoftmaxBackward(rows, cols, y, dy, dx, accumulate);
  }
  void SoftmaxCrossEntropy(std::int64_t rows, std::int64_t cols, const float *logits,
                           const std::int32_t *labels, float *probs, float *loss) override {
    inner_->SoftmaxCrossEntropy(rows, cols, logits, labels, probs, loss);
  }
  void SoftmaxCrossEntropyBackward(std::int64_t rows, std::int64_t cols, const float *probs,
                                   const std::int32_t *labels, const float *dloss, float *dlogits,
                                   bool accumulate) override {
    inner_->SoftmaxCrossEntropyBackward(rows, cols, probs, labels, dloss, dlogits, accumulate);
  }
  void MseLoss(std::int64_t n, const float *pred, const float *target, float *loss) override {
    inner_->MseLoss(n, pred, target, loss);
  }
  void MseLossBackward(std::int64_t n, const float *pred, const float *target, const float *dloss,
                       float *dpred, bool accumulate) override {
    inner_->MseLossBackward(n, pred, target, dloss, dpred, accumulate);
  }
  void LayerNorm(std::int64_t rows, std::int64_t cols, const float *x, const float *gamma,
                 const float *beta, float eps, float *y, float *mean, float *rstd) override {
    inner_->LayerNorm(rows, cols, x, gamma, beta, eps, y, mean, rstd);
  }
  void LayerNormBackward(std::int64_t rows, std::int64_t cols, const float *x, const float *gamma,
                         const float *mean, const float *rstd, const float *dy, float *dx,
                         bool accumulate_dx, float *dgamma, bool accumulate_dgamma, float *dbeta,
                         bool accumulate_dbeta) override {
    inner_->LayerNormBackward(rows, cols, x, gamma, mean, rstd, dy, dx, accumulate_dx, dgamma,
                              accumulate_dgamma, dbeta, accumulate_dbeta);
  }
  void EmbeddingLookup(std::int64_t n, std::int64_t dim, const float *table,
                       const std::int32_t *ids, float *out) override {
    inner_->EmbeddingLookup(n, dim, table, ids, out);
  }
  void EmbeddingBackward(std::int64_t n, std::int64_t dim, const float *dy, const std::int32_t *ids,
                         float *dtable) override {
    inner_->EmbeddingBackward(n, dim, dy, ids, dtable);
  }
  void SgdMomentum(std::int64_t n, float lr, float momentum, float weight_decay, const float *grad,
                   float *velocity, float *param) override {
    inner_->SgdMomentum(n, lr, momentum, weight_decay, grad, velocity, param);
  }
  void Adam(std::int64_t n, float lr, float beta1, float beta2, float eps, float bias_correction1,
            float bias_correction2, const float *grad, float *m, float *v, float *param) override {
    inner_->Adam(n, lr, beta1, beta2, eps, bias_correction1, bias_correction2, grad, m, v, param);
  }
  std::int64_t CountNonFinite(std::int64_t n, const float *x) override {
    return inner_->CountNonFinite(n, x);
  }

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace leakbound::runtime::testing
