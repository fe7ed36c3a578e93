// The benchmark shapes and the liveness model behind their analytic minimum (see mlp_shapes.h).
#include "mlp_shapes.h"

#include <algorithm>

namespace leakbound::bench {

const std::vector<MlpShape>& MlpShapes() {
  static const std::vector<MlpShape> shapes = {
      {"small", 32, {784, 128, 10}},
      {"medium", 128, {1024, 1024, 1024, 10}},
      {"large", 512, {4096, 4096, 10}},
  };
  return shapes;
}

MinimumBytes AnalyticMinimum(const MlpShape& shape) {
  constexpr std::int64_t kFloat = 4, kLabel = 4;
  const std::vector<std::int64_t>& n = shape.sizes;
  const auto layers = static_cast<std::int64_t>(n.size()) - 1;
  const std::int64_t batch = shape.batch;
  // Activation i: 0 is the input, `layers` the logits.
  auto activation = [&](std::int64_t i) { return batch * n[static_cast<std::size_t>(i)] * kFloat; };

  MinimumBytes out;
  for (std::int64_t i = 0; i < layers; ++i) {
    const std::int64_t in = n[static_cast<std::size_t>(i)],
                       next = n[static_cast<std::size_t>(i + 1)];
    out.persistent += 3 * (in * next + next) * kFloat;  // storage, gradient, momentum
  }

  // Alive for the whole step: the input, the labels, the loss value and its seed gradient.
  const std::int64_t base = activation(0) + batch * kLabel + 2 * kFloat;
  const std::int64_t probabilities = activation(layers);
  std::int64_t hidden = 0;  // h_1 .. h_{L-1}
  for (std::int64_t i = 1; i < layers; ++i) hidden += activation(i);

  // The loss forward: every activation, the logits and the probabilities computed from them.
  std::int64_t peak = base + hidden + activation(layers) + probabilities;
  // The loss backward: probabilities in, logits gradient out (the logits are not needed).
  peak = std::max(peak, base + hidden + probabilities + activation(layers));
  // Layer i backward, last to first: inputs of layers 1..i (h_0 is in base), the ReLU output of
  // layer i (none for the last layer), the gradient into layer i and the one out of it (none out
  // of the first layer: the input needs no gradient).
  std::int64_t inputs_still_needed = hidden;
  for (std::int64_t i = layers; i >= 1; --i) {
    if (i < layers) inputs_still_needed -= activation(i);
    const std::int64_t mask = i < layers ? activation(i) : 0;
    const std::int64_t grad_out = i > 1 ? activation(i - 1) : 0;
    peak = std::max(peak, base + inputs_still_needed + mask + activation(i) + grad_out);
  }
  out.transient = peak;
  return out;
}

}  // namespace leakbound::bench
