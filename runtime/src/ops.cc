// Forward ops: shape checks, output allocation (tape-owned), kernel calls, and what is saved for
// backward. Workspace is saved only when the tape records gradients; an inference pass releases
// its scratch inside the op (explicit release, see scratch.h).
#include "leakbound/runtime/ops.h"

#include <algorithm>
#include <string>
#include <vector>

#include "leakbound/runtime/errors.h"
#include "ops_internal.h"

namespace leakbound::runtime {
namespace {

std::size_t FloatBytes(std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); }

// Resolves a float operand, turning a transposed view into a contiguous copy when the op needs
// contiguous data (`allow_transposed` only for ops that read strides, i.e. matmul).
TensorRef Operand(Tape& tape, TensorRef ref, const char* op, bool allow_transposed = false) {
  Node& n = tape.Resolve(ref, op);
  if (n.dtype != DType::kFloat32) {
    throw ShapeError(std::string(op) + ": expected float values, got int32 ids (node " +
                     std::to_string(ref.index) + ")");
  }
  if (n.transposed && !allow_transposed) return Contiguous(tape, ref);
  return ref;
}

struct NewNode {
  Node node;
  float* out = nullptr;
};

// A node that owns a fresh value of `shape`, child of `parents`.
NewNode MakeOwned(Tape& tape, OpKind op, const Shape& shape,
                  std::initializer_list<TensorRef> parents) {
  NewNode made;
  Node& n = made.node;
  n.op = op;
  n.shape = shape;
  for (TensorRef p : parents) {
    n.parents[n.num_parents++] = p.index;
    n.requires_grad = n.requires_grad || tape.node(p.index).requires_grad;
  }
  n.requires_grad = n.requires_grad && tape.grad_enabled();
  n.value = tape.NewBuffer(FloatBytes(shape.numel()), op, Role::kValue);
  n.data = n.value.data();
  made.out = n.value.floats();
  return made;
}

void RequireSameShape(const Node& a, const Node& b, const char* op) {
  if (!(a.shape == b.shape)) {
    throw ShapeError(std::string(op) + ": operand shapes differ: " + a.shape.ToString() + " vs " +
                     b.shape.ToString());
  }
}

void RequireRank(const Node& n, int rank, const char* op, const char* operand) {
  if (n.shape.rank() != rank) {
    throw ShapeError(std::string(op) + ": " + operand + " must have rank " + std::to_string(rank) +
                     ", got shape " + n.shape.ToString());
  }
}

// Ids validated on the host against [0, limit).
const std::int32_t* CheckIds(Tape& tape, TensorRef ref, std::int64_t limit, const char* op,
                             const char* what) {
  const Node& ids = tape.node(ref.index);
  if (ids.dtype != DType::kInt32) {
    throw ShapeError(std::string(op) + ": " + what + " must be int32 ids (Tape::InputIds)");
  }
  const std::int32_t* device_ids = tape.ReadIds(ref.index, op);
  thread_local std::vector<std::int32_t> host;
  host.resize(static_cast<std::size_t>(ids.shape.numel()));
  tape.backend().CopyToHost(host.data(), device_ids, host.size() * sizeof(std::int32_t));
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (host[i] < 0 || host[i] >= limit) {
      throw ShapeError(std::string(op) + ": " + what + "[" + std::to_string(i) + "] = " +
                       std::to_string(host[i]) + " is outside [0, " + std::to_string(limit) + ")");
    }
  }
  return device_ids;
}

TensorRef Unary(Tape& tape, TensorRef x, Activation act, const char* name) {
  x = Operand(tape, x, name);
  Node& in = tape.node(x.index);
  const float* src = tape.ReadFloats(x.index, name);
  NewNode made = MakeOwned(tape, OpKind::kActivation, in.shape, {x});
  made.node.activation = act;
  tape.backend().BiasActivation(1, in.shape.numel(), src, nullptr, act, made.out);
  return tape.Push(std::move(made.node));
}

TensorRef Reduce(Tape& tape, TensorRef x, OpKind op, const char* name) {
  x = Operand(tape, x, name);
  Node& in = tape.node(x.index);
  if (in.shape.numel() == 0) {
    throw ShapeError(std::string(name) + ": cannot reduce an empty tensor of shape " +
                     in.shape.ToString());
  }
  const float* src = tape.ReadFloats(x.index, name);
  const std::int64_t n = in.shape.numel();
  NewNode made = MakeOwned(tape, op, Shape{}, {x});
  made.node.attr = op == OpKind::kMean ? 1.0f / static_cast<float>(n) : 1.0f;
  tape.backend().Sum(n, src, made.node.attr, made.out);
  return tape.Push(std::move(made.node));
}

}  // namespace

TensorRef MatMul(Tape& tape, TensorRef a, TensorRef b) {
  a = Operand(tape, a, "MatMul", true);
  b = Operand(tape, b, "MatMul", true);
  const Node& na = tape.node(a.index);
  const Node& nb = tape.node(b.index);
  RequireRank(na, 2, "MatMul", "a");
  RequireRank(nb, 2, "MatMul", "b");
  const std::int64_t m = na.shape[0], k = na.shape[1], n = nb.shape[1];
  if (nb.shape[0] != k) {
    throw ShapeError("MatMul: inner dimensions differ: a " + na.shape.ToString() + " x b " +
                     nb.shape.ToString());
  }
  const bool ta = na.transposed, tb = nb.transposed;
  const float* pa = tape.ReadFloats(a.index, "MatMul");
  const float* pb = tape.ReadFloats(b.index, "MatMul");
  NewNode made = MakeOwned(tape, OpKind::kMatMul, Shape{m, n}, {a, b});
  tape.backend().Gemm(ta, tb, m, n, k, 1.0f, pa, ta ? m : k, pb, tb ? k : n, 0.0f, made.out, n);
  return tape.Push(std::move(made.node));
}

TensorRef Add(Tape& tape, TensorRef a, TensorRef b) {
  a = Operand(tape, a, "Add");
  b = Operand(tape, b, "Add");
  const Node& na = tape.node(a.index);
  const Node& nb = tape.node(b.index);
  const float* pa = tape.ReadFloats(a.index, "Add");
  const float* pb = tape.ReadFloats(b.index, "Add");
  if (na.shape == nb.shape) {
    NewNode made = MakeOwned(tape, OpKind::kAdd, na.shape, {a, b});
    tape.backend().Add(na.shape.numel(), pa, pb, made.out);
    return tape.Push(std::move(made.node));
  }
  if (nb.shape.rank() == 1 && na.shape.rank() >= 1 && nb.shape[0] == na.shape.cols()) {
    NewNode made = MakeOwned(tape, OpKind::kAdd, na.shape, {a, b});
    made.node.attr = 1.0f;  // bias broadcast over rows
    tape.backend().BiasActivation(na.shape.rows(), na.shape.cols(), pa, pb, Activation::kNone,
                                  made.out);
    return tape.Push(std::move(made.node));
  }
  throw ShapeError("Add: shapes " + na.shape.ToString() + " and " + nb.shape.ToString() +
                   " are neither equal nor [..., c] + [c]");
}

TensorRef Linear(Tape& tape, TensorRef x, TensorRef w, TensorRef b, Activation activation) {
  x = Operand(tape, x, "Linear", true);
  w = Operand(tape, w, "Linear", true);
  b = Operand(tape, b, "Linear");
  const Node& nx = tape.node(x.index);
  const Node& nw = tape.node(w.index);
  const Node& nb = tape.node(b.index);
  RequireRank(nx, 2, "Linear", "x");
  RequireRank(nw, 2, "Linear", "w");
  const std::int64_t m = nx.shape[0], k = nx.shape[1], n = nw.shape[1];
  if (nw.shape[0] != k) {
    throw ShapeError("Linear: x " + nx.shape.ToString() + " does not match w " +
                     nw.shape.ToString());
  }
  if (nb.shape.rank() != 1 || nb.shape[0] != n) {
    throw ShapeError("Linear: bias must have shape [" + std::to_string(n) + "], got " +
                     nb.shape.ToString());
  }
  const bool tx = nx.transposed, tw = nw.transposed;
  const float* px = tape.ReadFloats(x.index, "Linear");
  const float* pw = tape.ReadFloats(w.index, "Linear");
  const float* pb = tape.ReadFloats(b.index, "Linear");
  NewNode made = MakeOwned(tape, OpKind::kLinear, Shape{m, n}, {x, w, b});
  made.node.activation = activation;
  Backend& be = tape.backend();
  if (activation == Activation::kGelu && made.node.requires_grad) {
    // GELU's backward needs its input: keep the pre-activation as workspace.
    made.node.workspace = tape.NewBuffer(FloatBytes(m * n), OpKind::kLinear, Role::kWorkspace);
    float* pre = made.node.workspace.floats();
    be.Gemm(tx, tw, m, n, k, 1.0f, px, tx ? m : k, pw, tw ? k : n, 0.0f, pre, n);
    be.BiasActivation(m, n, pre, pb, Activation::kNone, pre);
    be.BiasActivation(m, n, pre, nullptr, activation, made.out);
  } else {
    be.Gemm(tx, tw, m, n, k, 1.0f, px, tx ? m : k, pw, tw ? k : n, 0.0f, made.out, n);
    be.BiasActivation(m, n, made.out, pb, activation, made.out);
  }
  return tape.Push(std::move(made.node));
}

TensorRef Mul(Tape& tape, TensorRef a, TensorRef b) {
  a = Operand(tape, a, "Mul");
  b = Operand(tape, b, "Mul");
  RequireSameShape(tape.node(a.index), tape.node(b.index), "Mul");
  const float* pa = tape.ReadFloats(a.index, "Mul");
  const float* pb = tape.ReadFloats(b.index, "Mul");
  NewNode made = MakeOwned(tape, OpKind::kMul, tape.node(a.index).shape, {a, b});
  tape.backend().Mul(made.node.shape.numel(), pa, pb, made.out, false);
  return tape.Push(std::move(made.node));
}

TensorRef Relu(Tape& tape, TensorRef x) { return Unary(tape, x, Activation::kRelu, "Relu"); }
TensorRef Gelu(Tape& tape, TensorRef x) { return Unary(tape, x, Activation::kGelu, "Gelu"); }
TensorRef Tanh(Tape& tape, TensorRef x) { return Unary(tape, x, Activation::kTanh, "Tanh"); }

TensorRef Scale(Tape& tape, TensorRef x, float alpha) {
  x = Operand(tape, x, "Scale");
  const float* src = tape.ReadFloats(x.index, "Scale");
  NewNode made = MakeOwned(tape, OpKind::kScale, tape.node(x.index).shape, {x});
  made.node.attr = alpha;
  tape.backend().Scale(made.node.shape.numel(), alpha, src, made.out, false);
  return tape.Push(std::move(made.node));
}

TensorRef Sum(Tape& tape, TensorRef x) { return Reduce(tape, x, OpKind::kSum, "Sum"); }
TensorRef Mean(Tape& tape, TensorRef x) { return Reduce(tape, x, OpKind::kMean, "Mean"); }

TensorRef SoftmaxCrossEntropy(Tape& tape, TensorRef logits, TensorRef labels) {
  logits = Operand(tape, logits, "SoftmaxCrossEntropy");
  const Node& nl = tape.node(logits.index);
  const Node& ny = tape.Resolve(labels, "SoftmaxCrossEntropy");
  RequireRank(nl, 2, "SoftmaxCrossEntropy", "logits");
  const std::int64_t rows = nl.shape[0], cols = nl.shape[1];
  if (rows == 0 || cols == 0) {
    throw ShapeError("SoftmaxCrossEntropy: empty logits " + nl.shape.ToString());
  }
  if (ny.shape.numel() != rows) {
    throw ShapeError("SoftmaxCrossEntropy: " + std::to_string(ny.shape.numel()) +
                     " labels for " + std::to_string(rows) + " rows of logits");
  }
  const std::int32_t* py = CheckIds(tape, labels, cols, "SoftmaxCrossEntropy", "labels");
  const float* pl = tape.ReadFloats(logits.index, "SoftmaxCrossEntropy");
  NewNode made = MakeOwned(tape, OpKind::kSoftmaxCrossEntropy, Shape{}, {logits, labels});
  // Probabilities: saved for backward when training, scratch released right here otherwise.
  Buffer probs = tape.NewBuffer(FloatBytes(rows * cols), OpKind::kSoftmaxCrossEntropy,
                                Role::kWorkspace);
  tape.backend().SoftmaxCrossEntropy(rows, cols, pl, py, probs.floats(), made.out);
  if (made.node.requires_grad) made.node.workspace = std::move(probs);
  return tape.Push(std::move(made.node));
}

TensorRef Mse(Tape& tape, TensorRef pred, TensorRef target) {
  pred = Operand(tape, pred, "Mse");
  target = Operand(tape, target, "Mse");
  RequireSameShape(tape.node(pred.index), tape.node(target.index), "Mse");
  const std::int64_t n = tape.node(pred.index).shape.numel();
  if (n == 0) throw ShapeError("Mse: empty operands");
  const float* pp = tape.ReadFloats(pred.index, "Mse");
  const float* pt = tape.ReadFloats(target.index, "Mse");
  NewNode made = MakeOwned(tape, OpKind::kMse, Shape{}, {pred, target});
  tape.backend().MseLoss(n, pp, pt, made.out);
  return tape.Push(std::move(made.node));
}

TensorRef LayerNorm(Tape& tape, TensorRef x, TensorRef gamma, TensorRef beta, float eps) {
  x = Operand(tape, x, "LayerNorm");
  gamma = Operand(tape, gamma, "LayerNorm");
  beta = Operand(tape, beta, "LayerNorm");
  const Node& nx = tape.node(x.index);
  const std::int64_t rows = nx.shape.rows(), cols = nx.shape.cols();
  for (TensorRef p : {gamma, beta}) {
    const Node& np = tape.node(p.index);
    if (np.shape.rank() != 1 || np.shape[0] != cols) {
      throw ShapeError("LayerNorm: gamma and beta must have shape [" + std::to_string(cols) +
                       "], got " + np.shape.ToString());
    }
  }
  if (cols == 0) throw ShapeError("LayerNorm: rows of length 0 in " + nx.shape.ToString());
  const float* px = tape.ReadFloats(x.index, "LayerNorm");
  const float* pg = tape.ReadFloats(gamma.index, "LayerNorm");
  const float* pb = tape.ReadFloats(beta.index, "LayerNorm");
  NewNode made = MakeOwned(tape, OpKind::kLayerNorm, nx.shape, {x, gamma, beta});
  made.node.attr = eps;
  Buffer mean = tape.NewBuffer(FloatBytes(rows), OpKind::kLayerNorm, Role::kWorkspace);
  Buffer rstd = tape.NewBuffer(FloatBytes(rows), OpKind::kLayerNorm, Role::kWorkspace);
  tape.backend().LayerNorm(rows, cols, px, pg, pb, eps, made.out, mean.floats(), rstd.floats());
  if (made.node.requires_grad) {
    made.node.workspace = std::move(mean);
    made.node.workspace2 = std::move(rstd);
  }
  return tape.Push(std::move(made.node));
}

TensorRef Embedding(Tape& tape, TensorRef table, TensorRef ids) {
  table = Operand(tape, table, "Embedding");
  const Node& nt = tape.node(table.index);
  const Node& ni = tape.Resolve(ids, "Embedding");
  RequireRank(nt, 2, "Embedding", "table");
  const std::int32_t* pi = CheckIds(tape, ids, nt.shape[0], "Embedding", "ids");
  const std::int64_t n = ni.shape.numel(), dim = nt.shape[1];
  const float* pt = tape.ReadFloats(table.index, "Embedding");
  NewNode made = MakeOwned(tape, OpKind::kEmbedding, Shape{n, dim}, {table, ids});
  tape.backend().EmbeddingLookup(n, dim, pt, pi, made.out);
  return tape.Push(std::move(made.node));
}

TensorRef Concat(Tape& tape, TensorRef a, TensorRef b) {
  a = Operand(tape, a, "Concat");
  b = Operand(tape, b, "Concat");
  const Node& na = tape.node(a.index);
  const Node& nb = tape.node(b.index);
  RequireRank(na, 2, "Concat", "a");
  RequireRank(nb, 2, "Concat", "b");
  if (na.shape[0] != nb.shape[0]) {
    throw ShapeError("Concat: row counts differ: " + na.shape.ToString() + " and " +
                     nb.shape.ToString());
  }
  const std::int64_t rows = na.shape[0], ca = na.shape[1], cb = nb.shape[1];
  const float* pa = tape.ReadFloats(a.index, "Concat");
  const float* pb = tape.ReadFloats(b.index, "Concat");
  NewNode made = MakeOwned(tape, OpKind::kConcat, Shape{rows, ca + cb}, {a, b});
  tape.backend().Copy2D(rows, ca, pa, ca, made.out, ca + cb, false);
  tape.backend().Copy2D(rows, cb, pb, cb, made.out + ca, ca + cb, false);
  return tape.Push(std::move(made.node));
}

TensorRef Softmax(Tape& tape, TensorRef x) {
  x = Operand(tape, x, "Softmax");
  const Node& nx = tape.node(x.index);
  if (nx.shape.cols() == 0) throw ShapeError("Softmax: rows of length 0 in " + nx.shape.ToString());
  const float* px = tape.ReadFloats(x.index, "Softmax");
  NewNode made = MakeOwned(tape, OpKind::kSoftmax, nx.shape, {x});
  tape.backend().Softmax(nx.shape.rows(), nx.shape.cols(), px, made.out);
  return tape.Push(std::move(made.node));
}

namespace {
TensorRef MakeView(Tape& tape, TensorRef x, OpKind op, const Shape& shape, bool transposed) {
  const Node& nx = tape.node(x.index);
  tape.ReadFloats(x.index, OpName(op));  // a view of a released value is refused here
  Node view;
  view.op = op;
  view.ownership = Ownership::kView;
  view.shape = shape;
  view.transposed = transposed;
  view.data = nx.data;
  view.view_root = nx.ownership == Ownership::kView ? nx.view_root : x.index;
  view.parents[0] = x.index;
  view.num_parents = 1;
  view.requires_grad = nx.requires_grad && tape.grad_enabled();
  return tape.Push(std::move(view));
}
}  // namespace

TensorRef Reshape(Tape& tape, TensorRef x, const Shape& shape) {
  x = Operand(tape, x, "Reshape");
  const Node& nx = tape.node(x.index);
  if (nx.shape.numel() != shape.numel()) {
    throw ShapeError("Reshape: cannot view " + nx.shape.ToString() + " (" +
                     std::to_string(nx.shape.numel()) + " elements) as " + shape.ToString() +
                     " (" + std::to_string(shape.numel()) + " elements)");
  }
  return MakeView(tape, x, OpKind::kReshape, shape, false);
}

TensorRef Transpose(Tape& tape, TensorRef x) {
  x = Operand(tape, x, "Transpose", true);
  const Node& nx = tape.node(x.index);
  RequireRank(nx, 2, "Transpose", "x");
  return MakeView(tape, x, OpKind::kTranspose, Shape{nx.shape[1], nx.shape[0]}, !nx.transposed);
}

TensorRef Contiguous(Tape& tape, TensorRef x) {
  const Node& nx = tape.Resolve(x, "Contiguous");
  const float* src = tape.ReadFloats(x.index, "Contiguous");
  NewNode made = MakeOwned(tape, OpKind::kContiguous, nx.shape, {x});
  if (nx.transposed) {  // physical [cols, rows] -> logical [rows, cols]
    tape.backend().Transpose(nx.shape[1], nx.shape[0], src, made.out, false);
  } else {
    tape.backend().Copy(made.out, src, FloatBytes(nx.shape.numel()));
  }
  return tape.Push(std::move(made.node));
}

}  // namespace leakbound::runtime
