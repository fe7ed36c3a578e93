// The libtorch peer: the same MLP (Linear + ReLU per hidden layer), the same batch, loss
// (softmax cross-entropy) and optimizer (SGD, lr 0.01, momentum 0.9) as the leakbound step, on
// kThreads intra-op threads; alone, and paired step by step with leakbound's WithStep /
// WithForward (the ratio the targets judge). Built only when libtorch is found
// (LEAKBOUND_HAVE_TORCH).
#include <benchmark/benchmark.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <string>
#include <vector>

#include "benchmarks.h"
#include "fixtures.h"
#include "leakbound/runtime/trainer.h"

namespace leakbound::bench {
namespace {

struct TorchMlpImpl : torch::nn::Module {
  explicit TorchMlpImpl(const std::vector<std::int64_t>& sizes) {
    for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
      layers.push_back(
          register_module("linear" + std::to_string(i), torch::nn::Linear(sizes[i], sizes[i + 1])));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (std::size_t i = 0; i < layers.size(); ++i) {
      x = layers[i]->forward(x);
      if (i + 1 < layers.size()) x = torch::relu(x);
    }
    return x;
  }
  std::vector<torch::nn::Linear> layers;
};
TORCH_MODULE(TorchMlp);

// The model, its optimizer and the leakbound batch as tensors (made once, like the leakbound
// fixture's host batch; each leakbound step copies it onto its tape, a host-to-host memcpy).
struct TorchFixture {
  explicit TorchFixture(const MlpShape& shape)
      : model(shape.sizes),
        optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9)) {
    const runtime::Batch batch =
        runtime::Batch::Random(shape.batch, shape.sizes.front(), shape.sizes.back(), /*seed=*/7);
    inputs = torch::from_blob(const_cast<float*>(batch.inputs.data()),
                              {shape.batch, shape.sizes.front()}, torch::kFloat32)
                 .clone();
    labels = torch::from_blob(const_cast<std::int32_t*>(batch.labels.data()), {shape.batch},
                              torch::kInt32)
                 .to(torch::kInt64);
  }

  // Gradients are set to none before each step (PyTorch's default since 2.0; 1.13's C++
  // zero_grad() would zero them in place), so backward writes them fresh as leakbound does.
  float Step() {
    for (torch::Tensor& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(inputs), labels);
    loss.backward();
    optimizer.step();
    return loss.item<float>();
  }

  std::vector<float> Logits() {
    torch::NoGradGuard no_grad;
    const torch::Tensor logits = model->forward(inputs).contiguous();
    const float* data = logits.data_ptr<float>();
    return std::vector<float>(data, data + logits.numel());  // host data, as Evaluator returns
  }

  TorchMlp model;
  torch::optim::SGD optimizer;
  torch::Tensor inputs;
  torch::Tensor labels;
};

void TorchStep(benchmark::State& state, const MlpShape& shape) {
  TorchFixture f(shape);
  f.Step();  // warm-up: gradients and momentum buffers exist from the second step on
  for (auto _ : state) benchmark::DoNotOptimize(f.Step());
}

void TorchEval(benchmark::State& state, const MlpShape& shape) {
  TorchFixture f(shape);
  f.Logits();
  for (auto _ : state) {
    std::vector<float> logits = f.Logits();
    benchmark::DoNotOptimize(logits.data());
  }
}

// One leakbound call and one libtorch call alternating (which goes first swaps every pair),
// each timed alone: leakbound_over_torch is their paired ratio.
template <class Leakbound, class Torch>
void Paired(benchmark::State& state, Leakbound&& leakbound, Torch&& torch) {
  auto timed = [](auto&& fn) {
    const Clock::time_point start = Clock::now();
    benchmark::DoNotOptimize(fn());
    return Nanoseconds(Clock::now() - start);
  };
  timed(leakbound);  // warm-up of both (momentum buffers, gradients, allocator caches)
  timed(torch);
  PairedTimes pairs;
  for (auto _ : state) {
    const auto [ours, theirs] =
        pairs.InTurn([&] { return timed(leakbound); }, [&] { return timed(torch); });
    pairs.Add(ours, theirs);
  }
  pairs.Report(state, "leakbound_ns", "torch_ns", "leakbound_over_torch");
}

void PairedStep(benchmark::State& state, const MlpShape& shape) {
  MlpFixture ours(shape);
  TorchFixture theirs(shape);
  Paired(
      state, [&] { return ours.Step(); }, [&] { return theirs.Step(); });
}

void PairedEval(benchmark::State& state, const MlpShape& shape) {
  MlpFixture ours(shape);
  runtime::Evaluator evaluator(ours.session, ours.model);
  TorchFixture theirs(shape);
  Paired(
      state, [&] { return evaluator.Logits(ours.batch).data.size(); },
      [&] { return theirs.Logits().size(); });
}

}  // namespace

const char* TorchVersion() { return TORCH_VERSION; }

void RegisterTorchBenchmarks() {
  torch::set_num_threads(kThreads);
  torch::manual_seed(1);
  for (const MlpShape& shape : MlpShapes()) {
    benchmark::RegisterBenchmark(("torch/step/" + shape.name).c_str(), TorchStep, shape)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("torch/eval/" + shape.name).c_str(), TorchEval, shape)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    // Enough pairs for a tight ratio (a large training pair takes ~0.6 s).
    const double min_time = shape.name == "small" ? 1.0 : shape.name == "medium" ? 2.0 : 4.0;
    benchmark::RegisterBenchmark(("torch/paired_step/" + shape.name).c_str(), PairedStep, shape)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(min_time);
    benchmark::RegisterBenchmark(("torch/paired_eval/" + shape.name).c_str(), PairedEval, shape)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(min_time);
  }
}

}  // namespace leakbound::bench
