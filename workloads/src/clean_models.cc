// Clean workloads with more than an MLP on the tape: a transformer block, a long unrolled RNN
// and an embedding + dense-feature model. Each owns its session and parameters directly and
// trains with Adam, one WithStep per step; host data is generated once in Setup.
#include <array>
#include <cmath>
#include <random>
#include <span>

#include "common.h"

namespace leakbound::workloads::internal {
namespace {

using runtime::Activation;
using runtime::EagerSession;
using runtime::Param;
using runtime::Shape;
using runtime::Tape;
using runtime::TensorRef;

std::vector<float> NormalValues(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(n));
  for (float& v : values) v = normal(rng);
  return values;
}

std::vector<std::int32_t> UniformIds(std::int64_t n, std::int32_t bound, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> id(0, bound - 1);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (auto& v : ids) v = id(rng);
  return ids;
}

// Base for workloads that hold one session, a list of parameters and an Adam optimizer.
class SessionWorkload : public Workload {
 public:
  void Teardown() override {
    optimizer_.reset();
    session_.reset();  // parameters, gradients and optimizer state go with the session
    ReleaseHostData();
  }
  std::vector<EagerSession*> Sessions() override {
    return session_ ? std::vector<EagerSession*>{session_.get()} : std::vector<EagerSession*>{};
  }

 protected:
  virtual void ReleaseHostData() = 0;
  void OpenSession(const WorkloadContext& context) {
    session_ = std::make_unique<EagerSession>(OptionsFor(context));
    seed_ = context.seed * 1000003u;
  }
  Param& Weight(const char* name, std::int64_t rows, std::int64_t cols) {
    return session_->CreateParam(name, Shape{rows, cols},
                                 1.0f / std::sqrt(static_cast<float>(rows)), seed_++);
  }
  Param& Constant(const char* name, std::int64_t n, float value) {
    const std::vector<float> values(static_cast<std::size_t>(n), value);
    return session_->CreateParam(name, Shape{n}, values);
  }
  void MakeAdam() {
    optimizer_ = runtime::MakeOptimizer(runtime::OptimizerKind::kAdam, session_->params());
  }
  // One WithStep: loss_of(tape) records the forward pass and returns the loss node.
  template <class LossOf>
  void TrainStep(LossOf&& loss_of) {
    session_->WithStep([&](Tape& tape) {
      TensorRef loss = loss_of(tape);
      tape.Backward(loss);
      optimizer_->Apply(tape);
      return tape.Scalar(loss);
    });
    Quiesce(Sessions());
  }

  std::unique_ptr<EagerSession> session_;
  std::unique_ptr<runtime::Optimizer> optimizer_;
  std::uint64_t seed_ = 0;
};

// Pre-norm transformer block on one sequence: LayerNorm, single-head attention
// (softmax(Q K^T / sqrt(d)) V, output projection), residual; LayerNorm, GELU MLP, residual;
// a linear head and a next-token cross-entropy.
class TransformerBlock final : public SessionWorkload {
 public:
  static constexpr std::int64_t kTokens = 16, kWidth = 32, kHidden = 64, kVocab = 16;

  void Setup(const WorkloadContext& context) override {
    OpenSession(context);
    ln1_gamma_ = &Constant("ln1.gamma", kWidth, 1.0f);
    ln1_beta_ = &Constant("ln1.beta", kWidth, 0.0f);
    for (int i = 0; i < 4; ++i) {
      static constexpr const char* kNames[] = {"attn.wq", "attn.wk", "attn.wv", "attn.wo"};
      static constexpr const char* kBiasNames[] = {"attn.bq", "attn.bk", "attn.bv", "attn.bo"};
      proj_w_[i] = &Weight(kNames[i], kWidth, kWidth);
      proj_b_[i] = &Constant(kBiasNames[i], kWidth, 0.0f);
    }
    ln2_gamma_ = &Constant("ln2.gamma", kWidth, 1.0f);
    ln2_beta_ = &Constant("ln2.beta", kWidth, 0.0f);
    mlp_w1_ = &Weight("mlp.w1", kWidth, kHidden);
    mlp_b1_ = &Constant("mlp.b1", kHidden, 0.0f);
    mlp_w2_ = &Weight("mlp.w2", kHidden, kWidth);
    mlp_b2_ = &Constant("mlp.b2", kWidth, 0.0f);
    head_w_ = &Weight("head.w", kWidth, kVocab);
    head_b_ = &Constant("head.b", kVocab, 0.0f);
    MakeAdam();
    tokens_ = NormalValues(kTokens * kWidth, seed_++);
    targets_ = UniformIds(kTokens, kVocab, seed_++);
  }

  void Step(std::int64_t) override {
    TrainStep([&](Tape& tape) {
      auto linear = [&](TensorRef x, int i) {
        return runtime::Linear(tape, x, tape.Use(*proj_w_[i]), tape.Use(*proj_b_[i]));
      };
      TensorRef x = tape.Input(Shape{kTokens, kWidth}, tokens_);
      TensorRef a = runtime::LayerNorm(tape, x, tape.Use(*ln1_gamma_), tape.Use(*ln1_beta_));
      TensorRef q = linear(a, 0), k = linear(a, 1), v = linear(a, 2);
      const float inv_sqrt_width = 1.0f / std::sqrt(static_cast<float>(kWidth));
      TensorRef scores = runtime::Scale(tape, runtime::MatMul(tape, q, runtime::Transpose(tape, k)),
                                        inv_sqrt_width);
      TensorRef attended = runtime::MatMul(tape, runtime::Softmax(tape, scores), v);
      TensorRef h = runtime::Add(tape, x, linear(attended, 3));
      TensorRef m = runtime::LayerNorm(tape, h, tape.Use(*ln2_gamma_), tape.Use(*ln2_beta_));
      TensorRef f =
          runtime::Linear(tape, m, tape.Use(*mlp_w1_), tape.Use(*mlp_b1_), Activation::kGelu);
      f = runtime::Linear(tape, f, tape.Use(*mlp_w2_), tape.Use(*mlp_b2_));
      TensorRef y = runtime::Add(tape, h, f);
      TensorRef logits = runtime::Linear(tape, y, tape.Use(*head_w_), tape.Use(*head_b_));
      return runtime::SoftmaxCrossEntropy(tape, logits, tape.InputIds(targets_));
    });
  }

 private:
  void ReleaseHostData() override {
    tokens_ = {};
    targets_ = {};
  }
  Param* ln1_gamma_ = nullptr;
  Param* ln1_beta_ = nullptr;
  std::array<Param*, 4> proj_w_{};  // q, k, v, output
  std::array<Param*, 4> proj_b_{};
  Param* ln2_gamma_ = nullptr;
  Param* ln2_beta_ = nullptr;
  Param* mlp_w1_ = nullptr;
  Param* mlp_b1_ = nullptr;
  Param* mlp_w2_ = nullptr;
  Param* mlp_b2_ = nullptr;
  Param* head_w_ = nullptr;
  Param* head_b_ = nullptr;
  std::vector<float> tokens_;
  std::vector<std::int32_t> targets_;
};

// h_t = tanh(x_t W + h_{t-1} U + b) for 64 time steps, loss on the last state: a tape of
// ~450 nodes, every one of which must be released at the end of the step.
class RnnUnrolled final : public SessionWorkload {
 public:
  static constexpr std::int64_t kSteps = 64, kBatch = 8, kInput = 16, kState = 32, kClasses = 10;

  void Setup(const WorkloadContext& context) override {
    OpenSession(context);
    w_ = &Weight("rnn.w", kInput, kState);
    u_ = &Weight("rnn.u", kState, kState);
    b_ = &Constant("rnn.b", kState, 0.0f);
    out_w_ = &Weight("rnn.out_w", kState, kClasses);
    out_b_ = &Constant("rnn.out_b", kClasses, 0.0f);
    MakeAdam();
    sequence_ = NormalValues(kSteps * kBatch * kInput, seed_++);
    initial_state_.assign(static_cast<std::size_t>(kBatch * kState), 0.0f);
    labels_ = UniformIds(kBatch, kClasses, seed_++);
  }

  void Step(std::int64_t) override {
    TrainStep([&](Tape& tape) {
      const std::span<const float> sequence(sequence_);
      const auto frame = static_cast<std::size_t>(kBatch * kInput);
      TensorRef h = tape.Input(Shape{kBatch, kState}, initial_state_);
      for (std::int64_t t = 0; t < kSteps; ++t) {
        TensorRef x = tape.Input(Shape{kBatch, kInput},
                                 sequence.subspan(static_cast<std::size_t>(t) * frame, frame));
        TensorRef pre = runtime::Add(tape, runtime::Linear(tape, x, tape.Use(*w_), tape.Use(*b_)),
                                     runtime::MatMul(tape, h, tape.Use(*u_)));
        h = runtime::Tanh(tape, pre);
      }
      TensorRef logits = runtime::Linear(tape, h, tape.Use(*out_w_), tape.Use(*out_b_));
      return runtime::SoftmaxCrossEntropy(tape, logits, tape.InputIds(labels_));
    });
  }

 private:
  void ReleaseHostData() override {
    sequence_ = {};
    initial_state_ = {};
    labels_ = {};
  }
  Param* w_ = nullptr;
  Param* u_ = nullptr;
  Param* b_ = nullptr;
  Param* out_w_ = nullptr;
  Param* out_b_ = nullptr;
  std::vector<float> sequence_;  // [steps][batch][input]
  std::vector<float> initial_state_;
  std::vector<std::int32_t> labels_;
};

// Categorical ids through an embedding table, concatenated with dense features, into an MLP.
class EmbeddingConcat final : public SessionWorkload {
 public:
  static constexpr std::int64_t kBatch = 32, kVocab = 100, kEmbed = 16, kDense = 16, kHidden = 64,
                                kClasses = 10;

  void Setup(const WorkloadContext& context) override {
    OpenSession(context);
    table_ = &session_->CreateParam("embedding.table", Shape{kVocab, kEmbed}, 0.1f, seed_++);
    model_ = std::make_unique<runtime::Mlp>(
        *session_, std::vector<std::int64_t>{kEmbed + kDense, kHidden, kClasses}, Activation::kRelu,
        seed_++);
    MakeAdam();
    ids_ = UniformIds(kBatch, kVocab, seed_++);
    dense_ = NormalValues(kBatch * kDense, seed_++);
    labels_ = UniformIds(kBatch, kClasses, seed_++);
  }

  void Step(std::int64_t) override {
    TrainStep([&](Tape& tape) {
      TensorRef embedded = runtime::Embedding(tape, tape.Use(*table_), tape.InputIds(ids_));
      TensorRef features =
          runtime::Concat(tape, embedded, tape.Input(Shape{kBatch, kDense}, dense_));
      return runtime::SoftmaxCrossEntropy(tape, model_->Forward(tape, features),
                                          tape.InputIds(labels_));
    });
  }

  void Teardown() override {
    model_.reset();
    SessionWorkload::Teardown();
  }

 private:
  void ReleaseHostData() override {
    ids_ = {};
    dense_ = {};
    labels_ = {};
  }
  Param* table_ = nullptr;
  std::unique_ptr<runtime::Mlp> model_;
  std::vector<std::int32_t> ids_;
  std::vector<float> dense_;
  std::vector<std::int32_t> labels_;
};

}  // namespace

void AddModelWorkloads(std::vector<Registration>& out) {
  out.push_back(Register<TransformerBlock>(
      Info(Kind::kClean, "transformer_block",
           "Trains one pre-norm transformer block (16 tokens, width 32: layernorm, single-head "
           "attention, residuals, GELU MLP, linear head, cross-entropy) with Adam.")));
  out.push_back(Register<RnnUnrolled>(
      Info(Kind::kClean, "rnn_unrolled",
           "Trains a tanh RNN unrolled over 64 time steps (batch 8, state 32) with "
           "the loss on the last state: one long tape per step, Adam.")));
  out.push_back(Register<EmbeddingConcat>(
      Info(Kind::kClean, "embedding_concat",
           "Trains an embedding lookup of 32 ids concatenated with 16 dense "
           "features into a 32-64-10 MLP with cross-entropy and Adam.")));
}

}  // namespace leakbound::workloads::internal
