// A libtorch C++ training loop watched by the watch tests: `libtorch_mlp MODE
// STEPS`. A 3-layer MLP trained with SGD on a fixed batch, one
// leakbound_watch_step() per optimizer step. MODE keep_losses keeps every
// step's loss (with its autograd graph) in a std::vector, the classic C++ leak;
// MODE clean is its twin that lets the loss go. One intra-op thread, so the
// exact heap counter sees one deterministic allocation pattern per step.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "leakbound/watch/step.h"

namespace {

struct Mlp : torch::nn::Module {
  Mlp()
      : first(register_module("first", torch::nn::Linear(32, 64))),
        second(register_module("second", torch::nn::Linear(64, 64))),
        third(register_module("third", torch::nn::Linear(64, 1))) {}

  torch::Tensor forward(const torch::Tensor& input) {
    return third(torch::relu(second(torch::relu(first(input)))));
  }

  torch::nn::Linear first, second, third;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 ||
      (std::strcmp(argv[1], "clean") != 0 && std::strcmp(argv[1], "keep_losses") != 0)) {
    std::fprintf(stderr, "usage: libtorch_mlp clean|keep_losses STEPS\n");
    return 2;
  }
  const bool keep_losses = std::strcmp(argv[1], "keep_losses") == 0;
  const int steps = std::atoi(argv[2]);
  torch::set_num_threads(1);
  torch::manual_seed(7);
  Mlp model;
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(0.01));
  const torch::Tensor input = torch::randn({16, 32});
  const torch::Tensor target = torch::randn({16, 1});
  std::vector<torch::Tensor> kept_losses;  // grows by one loss and its graph per step when leaking
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    // The loss by hand (no mse_loss): the same ops every step, nothing cached
    // by the framework.
    torch::Tensor loss = (model.forward(input) - target).pow(2).mean();
    loss.backward();
    optimizer.step();
    if (keep_losses) kept_losses.push_back(loss);
    leakbound_watch_step();
  }
  std::printf("kept %zu losses\n", kept_losses.size());
  return 0;
}
