// What several benchmark files share: the leakbound MLP fixture (session, model, optimizer,
// batch, and the step's work), the session options every benchmark uses, a wall clock, and
// PairedTimes, the paired measurement behind every ratio the targets judge.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "leakbound/runtime/session.h"
#include "leakbound/runtime/trainer.h"
#include "mlp_shapes.h"

namespace leakbound::bench {

using Clock = std::chrono::steady_clock;

inline double Nanoseconds(Clock::duration d) {
  return std::chrono::duration<double, std::nano>(d).count();
}

// The default adaptor stack (failing, statistics, tracking) with kThreads OpenBLAS threads.
runtime::SessionOptions BenchSessionOptions();

// The shape called `name` ("small", "medium", "large").
const MlpShape& ShapeNamed(const std::string& name);

// One session holding an MLP of `shape` (ReLU), SGD with momentum 0.9 (MakeOptimizer's SGD:
// lr 0.01) and one fixed synthetic batch (Batch::Random, seed 7: the peer trains on the same).
struct MlpFixture {
  explicit MlpFixture(const MlpShape& shape);

  // The work of one training step, the same for every driver: Trainer::Record (Step's body:
  // forward, softmax cross-entropy, backward, optimizer) on whichever tape the driver opened.
  float Record(runtime::Tape& tape);
  // One WithStep around Record.
  float Step() {
    return session.WithStep([this](runtime::Tape& tape) { return Record(tape); });
  }

  runtime::EagerSession session;
  runtime::Mlp model;
  std::unique_ptr<runtime::Optimizer> optimizer;
  runtime::Batch batch;
};

// Two timings taken back to back, many times, in alternating order. Drifts of a shared machine
// (other processes, OpenBLAS workers spinning or parked, heap state) hit both sides of a pair
// alike, so the ratio is far steadier than one of two separately run benchmarks. Reports
// `<a>` and `<b>` (mean ns per pair), `<ratio>` (geometric mean of a/b over the pairs) and
// `<ratio>_stderr` (standard error of its logarithm: about its relative error).
class PairedTimes {
 public:
  // Which side goes first in the next pair (they alternate).
  bool a_first() const { return pairs_ % 2 == 0; }
  // Runs `a` and `b` (each returns nanoseconds) in this pair's order; returns {a_ns, b_ns}.
  template <typename A, typename B>
  std::pair<double, double> InTurn(A&& a, B&& b) const {
    if (a_first()) {
      const double a_ns = a();
      return {a_ns, b()};
    }
    const double b_ns = b();
    return {a(), b_ns};
  }
  void Add(double a_ns, double b_ns);
  void Report(benchmark::State& state, const std::string& a, const std::string& b,
              const std::string& ratio) const;

 private:
  double sum_a_ = 0, sum_b_ = 0, sum_log_ = 0, sum_log2_ = 0;
  std::int64_t pairs_ = 0;
};

}  // namespace leakbound::bench
