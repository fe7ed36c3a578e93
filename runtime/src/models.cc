// Batches, the MLP model, Trainer and Evaluator.
#include <algorithm>
#include <cmath>
#include <random>

#include "leakbound/runtime/trainer.h"

namespace leakbound::runtime {

Batch Batch::Random(std::int64_t batch, std::int64_t features, std::int64_t classes,
                    std::uint64_t seed) {
  Batch b;
  b.input_shape = Shape{batch, features};
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<std::int32_t> label(0, static_cast<std::int32_t>(classes - 1));
  b.inputs.resize(static_cast<std::size_t>(batch * features));
  for (float& v : b.inputs) v = normal(rng);
  b.labels.resize(static_cast<std::size_t>(batch));
  for (auto& l : b.labels) l = label(rng);
  return b;
}

Mlp::Mlp(EagerSession& session, const std::vector<std::int64_t>& sizes, Activation activation,
         std::uint64_t seed, const std::string& name)
    : sizes_(sizes), activation_(activation) {
  if (sizes.size() < 2) throw ShapeError("Mlp: need at least input and output sizes");
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(sizes[i]));
    weights_.push_back(&session.CreateParam(name + ".w" + std::to_string(i),
                                            Shape{sizes[i], sizes[i + 1]}, scale, seed + 2 * i));
    biases_.push_back(&session.CreateParam(name + ".b" + std::to_string(i), Shape{sizes[i + 1]},
                                           0.0f, seed + 2 * i + 1));
  }
}

TensorRef Mlp::Forward(Tape& tape, TensorRef x) const {
  for (std::size_t i = 0; i < weights_.size(); ++i) {
    const bool last = i + 1 == weights_.size();
    x = Linear(tape, x, tape.Use(*weights_[i]), tape.Use(*biases_[i]),
               last ? Activation::kNone : activation_);
  }
  return x;
}

std::vector<Param*> Mlp::params() const {
  std::vector<Param*> out;
  for (std::size_t i = 0; i < weights_.size(); ++i) {
    out.push_back(weights_[i]);
    out.push_back(biases_[i]);
  }
  return out;
}

std::unique_ptr<Optimizer> MakeOptimizer(OptimizerKind kind, std::vector<Param*> params) {
  if (kind == OptimizerKind::kAdam) return std::make_unique<Adam>(std::move(params), AdamOptions{});
  return std::make_unique<Sgd>(std::move(params), SgdOptions{});
}

float Trainer::Record(Tape& tape, const Batch& batch) {
  TensorRef x = tape.Input(batch.input_shape, batch.inputs);
  TensorRef labels = tape.InputIds(batch.labels);
  TensorRef loss = SoftmaxCrossEntropy(tape, model_.Forward(tape, x), labels);
  tape.Backward(loss);
  optimizer_.Apply(tape);
  return tape.Scalar(loss);
}

float Trainer::Step(const Batch& batch) {
  return session_.WithStep([&](Tape& tape) { return Record(tape, batch); });
}

HostTensor Evaluator::Logits(const Batch& batch) {
  return session_.WithForward([&](Tape& tape) {
    return tape.ToHost(model_.Forward(tape, tape.Input(batch.input_shape, batch.inputs)));
  });
}

double Evaluator::Accuracy(const Batch& batch) {
  const HostTensor logits = Logits(batch);
  const std::int64_t rows = logits.shape[0], cols = logits.shape[1];
  std::int64_t correct = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data.data() + r * cols;
    const auto best = std::max_element(row, row + cols) - row;
    correct += best == batch.labels[static_cast<std::size_t>(r)] ? 1 : 0;
  }
  return rows == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(rows);
}

}  // namespace leakbound::runtime
