// Backward of every op: reads the node's gradient and the values its parents still hold, and
// writes (first contribution) or accumulates (later ones) into the parents' gradients.
// Scratch needed only during one node's backward is released before the function returns.
#include <string>

#include "leakbound/runtime/errors.h"
#include "ops_internal.h"

namespace leakbound::runtime {
namespace {

struct ParentGrad {
  float* ptr = nullptr;  // null when the parent needs no gradient
  bool accumulate = false;
};

ParentGrad GradOf(Tape& tape, const Node& node, int slot) {
  const std::uint32_t p = node.parents[static_cast<std::size_t>(slot)];
  ParentGrad g;
  if (tape.node(p).requires_grad) g.ptr = tape.GradFor(p, &g.accumulate);
  return g;
}

const float* Value(Tape& tape, const Node& node, int slot) {
  return tape.ReadFloats(node.parents[static_cast<std::size_t>(slot)], "Backward");
}

// dA = dC B^T and dB = A^T dC for C = op(A) op(B), honouring transposed views.
void MatMulGrads(Tape& tape, const Node& node, const float* dc) {
  const Node& a = tape.node(node.parents[0]);
  const Node& b = tape.node(node.parents[1]);
  const std::int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
  const bool ta = a.transposed, tb = b.transposed;
  const std::int64_t lda = ta ? m : k, ldb = tb ? k : n;
  Backend& be = tape.backend();
  if (ParentGrad ga = GradOf(tape, node, 0); ga.ptr != nullptr) {
    be.Gemm(false, !tb, m, k, n, 1.0f, dc, n, Value(tape, node, 1), ldb,
            ga.accumulate ? 1.0f : 0.0f, ga.ptr, k);
  }
  if (ParentGrad gb = GradOf(tape, node, 1); gb.ptr != nullptr) {
    be.Gemm(!ta, false, k, n, m, 1.0f, Value(tape, node, 0), lda, dc, n,
            gb.accumulate ? 1.0f : 0.0f, gb.ptr, n);
  }
}

void CopyGrad(Tape& tape, const Node& node, int slot, const float* dy, std::int64_t n,
              float alpha = 1.0f) {
  if (ParentGrad g = GradOf(tape, node, slot); g.ptr != nullptr) {
    tape.backend().Scale(n, alpha, dy, g.ptr, g.accumulate);
  }
}

}  // namespace

void BackwardNode(Tape& tape, std::uint32_t index) {
  Node& node = tape.node(index);
  const float* dy = node.grad.floats();
  Backend& be = tape.backend();
  const std::int64_t numel = node.shape.numel();
  switch (node.op) {
    case OpKind::kInput:
    case OpKind::kParam:
      return;
    case OpKind::kMatMul:
      MatMulGrads(tape, node, dy);
      return;
    case OpKind::kLinear: {
      const std::int64_t rows = node.shape[0], cols = node.shape[1];
      // The gradient through the activation overwrites the node's own gradient: nothing reads
      // that buffer after this node's backward (no API exposes a non-parameter gradient, and
      // Backward releases it next), so no scratch of the node's size is needed.
      const float* dpre = dy;
      if (node.activation != Activation::kNone) {
        const float* pre = node.workspace ? node.workspace.floats() : nullptr;
        float* in_place = node.grad.floats();
        be.ActivationBackward(numel, node.activation, pre, node.value.floats(), dy, in_place,
                              false);
        dpre = in_place;
      }
      MatMulGrads(tape, node, dpre);
      if (ParentGrad gb = GradOf(tape, node, 2); gb.ptr != nullptr) {
        be.ColumnSum(rows, cols, dpre, gb.ptr, gb.accumulate);
      }
      return;
    }
    case OpKind::kAdd:
      CopyGrad(tape, node, 0, dy, numel);
      if (node.attr != 0.0f) {  // bias broadcast
        if (ParentGrad gb = GradOf(tape, node, 1); gb.ptr != nullptr) {
          be.ColumnSum(node.shape.rows(), node.shape.cols(), dy, gb.ptr, gb.accumulate);
        }
      } else {
        CopyGrad(tape, node, 1, dy, numel);
      }
      return;
    case OpKind::kMul:
      if (ParentGrad ga = GradOf(tape, node, 0); ga.ptr != nullptr) {
        be.Mul(numel, dy, Value(tape, node, 1), ga.ptr, ga.accumulate);
      }
      if (ParentGrad gb = GradOf(tape, node, 1); gb.ptr != nullptr) {
        be.Mul(numel, dy, Value(tape, node, 0), gb.ptr, gb.accumulate);
      }
      return;
    case OpKind::kActivation:
      if (ParentGrad g = GradOf(tape, node, 0); g.ptr != nullptr) {
        be.ActivationBackward(numel, node.activation, Value(tape, node, 0), node.value.floats(),
                              dy, g.ptr, g.accumulate);
      }
      return;
    case OpKind::kScale:
      CopyGrad(tape, node, 0, dy, numel, node.attr);
      return;
    case OpKind::kSum:
    case OpKind::kMean: {
      const std::int64_t n = tape.node(node.parents[0]).shape.numel();
      if (ParentGrad g = GradOf(tape, node, 0); g.ptr != nullptr) {
        be.BroadcastScalar(n, dy, node.attr, g.ptr, g.accumulate);
      }
      return;
    }
    case OpKind::kSoftmaxCrossEntropy: {
      const Node& logits = tape.node(node.parents[0]);
      const std::int32_t* labels = tape.ReadIds(node.parents[1], "Backward");
      if (ParentGrad g = GradOf(tape, node, 0); g.ptr != nullptr) {
        be.SoftmaxCrossEntropyBackward(logits.shape[0], logits.shape[1], node.workspace.floats(),
                                       labels, dy, g.ptr, g.accumulate);
      }
      return;
    }
    case OpKind::kMse: {
      const std::int64_t n = tape.node(node.parents[0]).shape.numel();
      const float* pred = Value(tape, node, 0);
      const float* target = Value(tape, node, 1);
      if (ParentGrad g = GradOf(tape, node, 0); g.ptr != nullptr) {
        be.MseLossBackward(n, pred, target, dy, g.ptr, g.accumulate);
      }
      // d/dtarget = -d/dpred: the same kernel with the operands swapped.
      if (ParentGrad g = GradOf(tape, node, 1); g.ptr != nullptr) {
        be.MseLossBackward(n, target, pred, dy, g.ptr, g.accumulate);
      }
      return;
    }
    case OpKind::kLayerNorm: {
      const ParentGrad gx = GradOf(tape, node, 0);
      const ParentGrad gg = GradOf(tape, node, 1);
      const ParentGrad gb = GradOf(tape, node, 2);
      be.LayerNormBackward(node.shape.rows(), node.shape.cols(), Value(tape, node, 0),
                           Value(tape, node, 1), node.workspace.floats(),
                           node.workspace2.floats(), dy, gx.ptr, gx.accumulate, gg.ptr,
                           gg.accumulate, gb.ptr, gb.accumulate);
      return;
    }
    case OpKind::kEmbedding: {
      const Node& table = tape.node(node.parents[0]);
      const std::int32_t* ids = tape.ReadIds(node.parents[1], "Backward");
      if (ParentGrad g = GradOf(tape, node, 0); g.ptr != nullptr) {
        if (!g.accumulate) be.Fill(g.ptr, 0.0f, table.shape.numel());
        be.EmbeddingBackward(node.shape[0], node.shape[1], dy, ids, g.ptr);
      }
      return;
    }
    case OpKind::kConcat: {
      const std::int64_t rows = node.shape[0], cols = node.shape[1];
      const std::int64_t ca = tape.node(node.parents[0]).shape[1];
      if (ParentGrad ga = GradOf(tape, node, 0); ga.ptr != nullptr) {
        be.Copy2D(rows, ca, dy, cols, ga.ptr, ca, ga.accumulate);
      }
      if (ParentGrad gb = GradOf(tape, node, 1); gb.ptr != nullptr) {
        be.Copy2D(rows, cols - ca, dy + ca, cols, gb.ptr, cols - ca, gb.accumulate);
      }
      return;
    }
    case OpKind::kSoftmax:
      if (ParentGrad g = GradOf(tape, node, 0); g.ptr != nullptr) {
        be.SoftmaxBackward(node.shape.rows(), node.shape.cols(), node.value.floats(), dy, g.ptr,
                           g.accumulate);
      }
      return;
    case OpKind::kReshape:
    case OpKind::kContiguous:
      CopyGrad(tape, node, 0, dy, numel);
      return;
    case OpKind::kTranspose:
      if (ParentGrad g = GradOf(tape, node, 0); g.ptr != nullptr) {
        be.Transpose(node.shape[0], node.shape[1], dy, g.ptr, g.accumulate);
      }
      return;
  }
  throw RuntimeError("Backward: op " + std::string(OpName(node.op)) + " has no backward");
}

}  // namespace leakbound::runtime
