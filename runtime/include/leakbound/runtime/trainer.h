// A small model zoo and the Trainer / Evaluator that drive it through the scopes:
// Trainer::Step runs one WithStep (forward, backward, optimizer); Evaluator::Evaluate runs one
// WithForward and returns host data. Workloads and benchmarks build on these.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "leakbound/runtime/ops.h"
#include "leakbound/runtime/optimizer.h"
#include "leakbound/runtime/session.h"

namespace leakbound::runtime {

// A synthetic classification batch, generated once on the host (deterministic from a seed).
struct Batch {
  Shape input_shape;
  std::vector<float> inputs;
  std::vector<std::int32_t> labels;
  static Batch Random(std::int64_t batch, std::int64_t features, std::int64_t classes,
                      std::uint64_t seed);
};

// Multi-layer perceptron: Linear(+activation) per hidden layer, a final Linear to logits.
class Mlp {
 public:
  // sizes = {in, hidden..., out}.
  Mlp(EagerSession& session, const std::vector<std::int64_t>& sizes, Activation activation,
      std::uint64_t seed, const std::string& name = "mlp");
  TensorRef Forward(Tape& tape, TensorRef x) const;
  std::vector<Param*> params() const;
  const std::vector<std::int64_t>& sizes() const { return sizes_; }

 private:
  std::vector<std::int64_t> sizes_;
  Activation activation_;
  std::vector<Param*> weights_;
  std::vector<Param*> biases_;
};

enum class OptimizerKind { kSgd, kAdam };
std::unique_ptr<Optimizer> MakeOptimizer(OptimizerKind kind, std::vector<Param*> params);

class Trainer {
 public:
  Trainer(EagerSession& session, const Mlp& model, Optimizer& optimizer)
      : session_(session), model_(model), optimizer_(optimizer) {}
  // One WithStep: forward, softmax cross-entropy, backward, optimizer. Returns the loss.
  float Step(const Batch& batch);
  // The body of Step on a tape the caller opened (WithStep, or the manual tape for a driver that
  // releases by hand). Returns the loss.
  float Record(Tape& tape, const Batch& batch);

 private:
  EagerSession& session_;
  const Mlp& model_;
  Optimizer& optimizer_;
};

class Evaluator {
 public:
  Evaluator(EagerSession& session, const Mlp& model) : session_(session), model_(model) {}
  // One WithForward: returns the logits on the host.
  HostTensor Logits(const Batch& batch);
  // One WithForward: fraction of rows whose argmax equals the label.
  double Accuracy(const Batch& batch);

 private:
  EagerSession& session_;
  const Mlp& model_;
};

}  // namespace leakbound::runtime
