// The shared MLP fixture and the paired-times statistics.
#include "fixtures.h"

#include <algorithm>
#include <cmath>

#include "leakbound/runtime/ops.h"

namespace leakbound::bench {

runtime::SessionOptions BenchSessionOptions() {
  runtime::SessionOptions options;
  options.blas_threads = kThreads;
  return options;
}

const MlpShape& ShapeNamed(const std::string& name) {
  for (const MlpShape& shape : MlpShapes()) {
    if (shape.name == name) return shape;
  }
  return MlpShapes().front();
}

MlpFixture::MlpFixture(const MlpShape& shape)
    : session(BenchSessionOptions()),
      model(session, shape.sizes, runtime::Activation::kRelu, /*seed=*/1),
      optimizer(runtime::MakeOptimizer(runtime::OptimizerKind::kSgd, model.params())),
      batch(runtime::Batch::Random(shape.batch, shape.sizes.front(), shape.sizes.back(),
                                   /*seed=*/7)) {}

float MlpFixture::Record(runtime::Tape& tape) {
  return runtime::Trainer(session, model, *optimizer).Record(tape, batch);
}

void PairedTimes::Add(double a_ns, double b_ns) {
  sum_a_ += a_ns;
  sum_b_ += b_ns;
  const double log_ratio = std::log(a_ns / b_ns);
  sum_log_ += log_ratio;
  sum_log2_ += log_ratio * log_ratio;
  ++pairs_;
}

void PairedTimes::Report(benchmark::State& state, const std::string& a, const std::string& b,
                         const std::string& ratio) const {
  if (pairs_ == 0) return;
  const auto n = static_cast<double>(pairs_);
  const double mean_log = sum_log_ / n;
  const double variance = pairs_ > 1 ? (sum_log2_ - n * mean_log * mean_log) / (n - 1) : 0.0;
  state.counters[a] = sum_a_ / n;
  state.counters[b] = sum_b_ / n;
  state.counters[ratio] = std::exp(mean_log);
  state.counters[ratio + "_stderr"] = std::sqrt(std::max(variance, 0.0) / n);
}

}  // namespace leakbound::bench
