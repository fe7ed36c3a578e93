// The MLP shapes both peers of bench_leakbound train (small, medium, large), the fixed thread
// count, and the analytic minimum of the bytes one SGD-with-momentum training step needs, which
// the runtime's measured peak is compared with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace leakbound::bench {

// OpenBLAS threads of the leakbound session and intra-op threads of the libtorch peer.
inline constexpr int kThreads = 2;

struct MlpShape {
  std::string name;  // "small", "medium", "large": part of benchmark names
  std::int64_t batch = 0;
  std::vector<std::int64_t> sizes;  // {in, hidden..., classes}; ReLU after every hidden layer
};

// small: batch 32, 784-128-10; medium: batch 128, 1024-1024-1024-10; large: batch 512,
// 4096-4096-10.
const std::vector<MlpShape>& MlpShapes();

// Bytes a training step of `shape` cannot do without, float32 values and int32 labels:
//   persistent: parameters + their gradients + one momentum slot each (SGD with momentum);
//   transient:  the largest set of step values alive at one time under reverse-mode liveness:
//               the input, labels and loss, every layer input still needed for a weight
//               gradient, the ReLU output of the layer being differentiated (its mask), the
//               softmax probabilities until the loss backward, and the gradient flowing in and
//               the one flowing out of the layer being differentiated (ReLU backward in place,
//               logits dropped once the probabilities exist).
struct MinimumBytes {
  std::int64_t persistent = 0;
  std::int64_t transient = 0;
  std::int64_t total() const { return persistent + transient; }
};
MinimumBytes AnalyticMinimum(const MlpShape& shape);

}  // namespace leakbound::bench
