// Ops: each records one node on the tape with its forward value and knows its backward.
// Shapes are checked up front (ShapeError says which op, which operand, what was expected).
// Reshape and Transpose are no-copy views that own nothing.
#pragma once

#include "leakbound/runtime/backend.h"
#include "leakbound/runtime/tape.h"
#include "leakbound/runtime/tensor.h"

namespace leakbound::runtime {

// [m, k] x [k, n] -> [m, n]. Transposed views are consumed without a copy.
TensorRef MatMul(Tape& tape, TensorRef a, TensorRef b);
// Elementwise a + b for equal shapes, or a [..., c] + b [c] (bias broadcast over rows).
TensorRef Add(Tape& tape, TensorRef a, TensorRef b);
// Fused act(x W + b): x [m, k], W [k, n], b [n]. Saves the pre-activation only for GELU.
TensorRef Linear(Tape& tape, TensorRef x, TensorRef w, TensorRef b,
                 Activation activation = Activation::kNone);
TensorRef Mul(Tape& tape, TensorRef a, TensorRef b);
TensorRef Relu(Tape& tape, TensorRef x);
TensorRef Gelu(Tape& tape, TensorRef x);  // tanh approximation
TensorRef Tanh(Tape& tape, TensorRef x);
TensorRef Scale(Tape& tape, TensorRef x, float alpha);
TensorRef Sum(Tape& tape, TensorRef x);   // -> scalar
TensorRef Mean(Tape& tape, TensorRef x);  // -> scalar
// Mean cross-entropy of row-wise softmax(logits [n, c]) against labels (ids in [0, c)).
TensorRef SoftmaxCrossEntropy(Tape& tape, TensorRef logits, TensorRef labels);
// mean((pred - target)^2); both operands receive gradients when they need them.
TensorRef Mse(Tape& tape, TensorRef pred, TensorRef target);
// Row-wise layer norm of x [..., c] with gamma, beta [c].
TensorRef LayerNorm(Tape& tape, TensorRef x, TensorRef gamma, TensorRef beta, float eps = 1e-5f);
// Rows of table [v, d] picked by ids [n] (ids in [0, v)) -> [n, d].
TensorRef Embedding(Tape& tape, TensorRef table, TensorRef ids);
// Concatenation of two 2-D tensors along the last axis: [r, a] ++ [r, b] -> [r, a + b].
TensorRef Concat(Tape& tape, TensorRef a, TensorRef b);
// Row-wise softmax over the last axis.
TensorRef Softmax(Tape& tape, TensorRef x);
// Views (no copy, own nothing).
TensorRef Reshape(Tape& tape, TensorRef x, const Shape& shape);
TensorRef Transpose(Tape& tape, TensorRef x);  // 2-D
// A contiguous copy (used automatically where an op needs contiguous input).
TensorRef Contiguous(Tape& tape, TensorRef x);

}  // namespace leakbound::runtime
