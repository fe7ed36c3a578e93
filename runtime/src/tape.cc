// Tape: node storage, handle checks, reads, and the release rules (own -> free, borrow -> keep).
#include "leakbound/runtime/tape.h"

#include <cstring>
#include <sstream>

#include "leakbound/runtime/errors.h"
#include "ops_internal.h"

namespace leakbound::runtime {

const char* OpName(OpKind op) {
  switch (op) {
    case OpKind::kInput: return "input";
    case OpKind::kParam: return "param";
    case OpKind::kMatMul: return "matmul";
    case OpKind::kAdd: return "add";
    case OpKind::kLinear: return "linear";
    case OpKind::kMul: return "mul";
    case OpKind::kActivation: return "activation";
    case OpKind::kSum: return "sum";
    case OpKind::kMean: return "mean";
    case OpKind::kSoftmaxCrossEntropy: return "softmax_cross_entropy";
    case OpKind::kMse: return "mse";
    case OpKind::kLayerNorm: return "layernorm";
    case OpKind::kEmbedding: return "embedding";
    case OpKind::kConcat: return "concat";
    case OpKind::kReshape: return "reshape";
    case OpKind::kTranspose: return "transpose";
    case OpKind::kSoftmax: return "softmax";
    case OpKind::kScale: return "scale";
    case OpKind::kContiguous: return "contiguous";
  }
  return "unknown";
}

Tape::Tape(std::uint64_t session_id, Backend* backend, MemoryResource* resource)
    : session_id_(session_id), backend_(backend), resource_(resource) {
  nodes_.reserve(256);
}

Tape::~Tape() { End(); }

void Tape::Begin(std::uint64_t generation, ScopeKind scope, bool grad_enabled) {
  generation_ = generation;
  scope_ = scope;
  grad_enabled_ = grad_enabled;
  backward_done_ = false;
  backward_floor_ = 0;
}

void Tape::ReleaseNode(Node& node, ReleaseBatch& batch) noexcept {
  batch.Add(node.value);
  batch.Add(node.grad);
  if (leak_workspace_on_end_) {
    node.workspace.Leak();  // planted bug: the bytes stay allocated, nobody holds them
    node.workspace2.Leak();
  } else {
    batch.Add(node.workspace);
    batch.Add(node.workspace2);
  }
}

void Tape::End() noexcept {
  // Reverse order: views (later nodes) stop pointing into their roots before the roots go. The
  // blocks are freed in batches: one counter update and one tracking lock per batch.
  {
    ReleaseBatch batch;
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) ReleaseNode(*it, batch);
  }
  nodes_.clear();  // keeps capacity
  if (generation_ != 0) last_generation_ = generation_;
  generation_ = 0;
  backward_floor_ = 0;
  scope_ = ScopeKind::kNone;
}

void Tape::EndAfterError() noexcept {
  if (skip_release_on_error_) {  // planted bug: the error path forgets to release the tape
    for (Node& node : nodes_) {
      node.value.Leak();
      node.grad.Leak();
      node.workspace.Leak();
      node.workspace2.Leak();
    }
  }
  End();
}

Node& Tape::Resolve(TensorRef ref, const char* op) {
  if (ref.session_id != session_id_) {
    std::ostringstream msg;
    msg << op << ": TensorRef of session " << ref.session_id << " used in session "
        << session_id_ << "; handles are valid only in the session that made them";
    throw ForeignHandleError(msg.str());
  }
  if (ref.generation != generation_ || generation_ == 0) {
    std::ostringstream msg;
    msg << op << ": TensorRef from generation " << ref.generation;
    if (outer_ != nullptr && outer_->active() && ref.generation == outer_->generation()) {
      msg << " belongs to the enclosing scope (generation " << ref.generation
          << ") and cannot be used inside this nested scope (generation " << generation_
          << "); pass host data or parameters into nested scopes";
    } else if (generation_ == 0) {
      msg << " used after the scope that made it ended (no scope is open on this tape; last "
             "generation "
          << last_generation_ << ")";
    } else {
      msg << " used after the step that made it ended (current generation " << generation_
          << ")";
    }
    throw StaleHandleError(msg.str());
  }
  if (ref.index >= nodes_.size()) {
    throw StaleHandleError(std::string(op) + ": TensorRef index " + std::to_string(ref.index) +
                           " is past the end of the tape (" + std::to_string(nodes_.size()) +
                           " nodes); the handle is corrupt");
  }
  return nodes_[ref.index];
}

TensorRef Tape::Push(Node&& node) {
  if (generation_ == 0) {
    throw ScopeError(std::string("recording op '") + OpName(node.op) +
                     "' on a tape with no open scope; record inside WithStep or WithForward");
  }
  const auto index = static_cast<std::uint32_t>(nodes_.size());
  for (std::uint8_t i = 0; i < node.num_parents; ++i) {
    Node& parent = nodes_[node.parents[i]];
    parent.last_consumer = index;
    if (parent.ownership == Ownership::kView) nodes_[parent.view_root].last_consumer = index;
  }
  nodes_.push_back(std::move(node));
  AtBoundary(Boundary::kForward, index);
  return RefTo(index);
}

Buffer Tape::NewBuffer(std::size_t bytes, const char* op, Role role) {
  AllocationTag tag;
  tag.session = session_id_;
  tag.step = generation_;
  tag.op = op;
  tag.role = role;
  tag.scope = scope_;
  return Buffer(resource_, bytes, tag);
}

TensorRef Tape::Input(const Shape& shape, std::span<const float> data) {
  if (static_cast<std::int64_t>(data.size()) != shape.numel()) {
    throw ShapeError("Input: shape " + shape.ToString() + " needs " +
                     std::to_string(shape.numel()) + " values, got " +
                     std::to_string(data.size()));
  }
  Node node;
  node.op = OpKind::kInput;
  node.shape = shape;
  node.value = NewBuffer(data.size_bytes(), OpKind::kInput, Role::kInput);
  node.data = node.value.data();
  backend_->CopyFromHost(node.data, data.data(), data.size_bytes());
  return Push(std::move(node));
}

TensorRef Tape::InputIds(std::span<const std::int32_t> ids) {
  Node node;
  node.op = OpKind::kInput;
  node.dtype = DType::kInt32;
  node.shape = Shape{static_cast<std::int64_t>(ids.size())};
  node.value = NewBuffer(ids.size_bytes(), OpKind::kInput, Role::kInput);
  node.data = node.value.data();
  backend_->CopyFromHost(node.data, ids.data(), ids.size_bytes());
  return Push(std::move(node));
}

TensorRef Tape::Use(Param& param) {
  if (param.session_id() != session_id_) {
    throw ForeignHandleError("Use: parameter '" + param.name() + "' belongs to session " +
                             std::to_string(param.session_id()) + ", not to session " +
                             std::to_string(session_id_));
  }
  if (generation_ == 0) {
    throw ScopeError("Use: parameter '" + param.name() +
                     "' used with no open scope; use parameters inside WithStep or WithForward");
  }
  if (param.node_generation_ == generation_) return RefTo(param.node_index_);
  Node node;
  node.op = OpKind::kParam;
  node.ownership = Ownership::kBorrowedFromParam;
  node.requires_grad = grad_enabled_;
  node.shape = param.shape();
  node.data = param.data();
  node.param = &param;
  TensorRef ref = Push(std::move(node));
  param.node_generation_ = generation_;
  param.node_index_ = ref.index;
  return ref;
}

const float* Tape::ReadFloats(std::uint32_t index, const char* op) {
  Node& n = nodes_[index];
  const Node& root = n.ownership == Ownership::kView ? nodes_[n.view_root] : n;
  if (n.value_released || root.value_released) {
    throw ReleasedValueError(std::string(op) + ": the value of node " + std::to_string(index) +
                             " (" + OpName(n.op) +
                             ") was released by Backward; read it before Backward or call "
                             "Retain(ref) on it");
  }
  if (n.dtype != DType::kFloat32) {
    throw ShapeError(std::string(op) + ": node " + std::to_string(index) +
                     " holds int32 ids, not float values");
  }
  return static_cast<const float*>(n.data);
}

const std::int32_t* Tape::ReadIds(std::uint32_t index, const char* op) {
  Node& n = nodes_[index];
  if (n.dtype != DType::kInt32) {
    throw ShapeError(std::string(op) + ": node " + std::to_string(index) + " (" + OpName(n.op) +
                     ") holds float values, not int32 ids (make ids with Tape::InputIds)");
  }
  if (n.value_released) {
    throw ReleasedValueError(std::string(op) + ": the ids of node " + std::to_string(index) +
                             " were released by Backward; record them again with InputIds or "
                             "call Retain(ref) before Backward");
  }
  return static_cast<const std::int32_t*>(n.data);
}

float Tape::Scalar(TensorRef ref) {
  Node& n = Resolve(ref, "Scalar");
  if (n.shape.numel() != 1) {
    throw ShapeError("Scalar: node of shape " + n.shape.ToString() + " is not a scalar");
  }
  float out = 0;
  backend_->CopyToHost(&out, ReadFloats(ref.index, "Scalar"), sizeof(float));
  return out;
}

HostTensor Tape::ToHost(TensorRef ref) {
  Node& n = Resolve(ref, "ToHost");
  const float* src = ReadFloats(ref.index, "ToHost");
  HostTensor out;
  out.shape = n.shape;
  out.data.resize(static_cast<std::size_t>(n.shape.numel()));
  if (n.transposed) {  // logical [r, c] is physical [c, r]
    std::vector<float> physical(out.data.size());
    backend_->CopyToHost(physical.data(), src, physical.size() * sizeof(float));
    const std::int64_t rows = n.shape[0], cols = n.shape[1];
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        out.data[static_cast<std::size_t>(r * cols + c)] =
            physical[static_cast<std::size_t>(c * rows + r)];
  } else {
    backend_->CopyToHost(out.data.data(), src, out.data.size() * sizeof(float));
  }
  return out;
}

void Tape::CheckFinite(TensorRef ref) {
  Node& n = Resolve(ref, "CheckFinite");
  const std::int64_t bad = backend_->CountNonFinite(n.shape.numel(), ReadFloats(ref.index, "CheckFinite"));
  if (bad != 0) {
    throw NonFiniteError("node " + std::to_string(ref.index) + " (" + OpName(n.op) + ", shape " +
                         n.shape.ToString() + ") has " + std::to_string(bad) +
                         " NaN/Inf values; check the inputs and the learning rate");
  }
}

void Tape::Retain(TensorRef ref) {
  Node& n = Resolve(ref, "Retain");
  n.retained = true;
  if (n.ownership == Ownership::kView) nodes_[n.view_root].retained = true;
}

float* Tape::GradFor(std::uint32_t index, bool* accumulate) {
  Node& n = nodes_[index];
  if (n.param != nullptr) {
    *accumulate = n.param->grad_generation_ == generation_;
    n.param->grad_generation_ = generation_;
    return n.param->grad();
  }
  if (index < backward_floor_) {
    // Only on the manual tape: this node's backward already ran in an earlier Backward call, so
    // a gradient added now would never reach its parents (silently wrong parameter gradients).
    throw ScopeError("Backward: node " + std::to_string(index) + " (" + OpName(n.op) +
                     ") was covered by an earlier Backward on this tape; a later loss cannot "
                     "depend on it. Record the computation again or use one Backward per step");
  }
  if (!n.grad) {
    n.grad = NewBuffer(static_cast<std::size_t>(n.shape.numel()) * sizeof(float), n.op, Role::kGrad);
    *accumulate = false;
  } else {
    *accumulate = true;
  }
  return n.grad.floats();
}

void Tape::Backward(TensorRef loss) {
  Node& l = Resolve(loss, "Backward");
  if (!grad_enabled_) {
    throw ScopeError("Backward inside WithForward: an inference pass records no gradients; "
                     "train inside WithStep");
  }
  if (backward_done_ && scope_ != ScopeKind::kManual) {
    throw ScopeError("Backward called twice in one step: its buffers were released by the first "
                     "call; record a new step");
  }
  if (loss.index < backward_floor_) {
    throw ScopeError("Backward: the loss (node " + std::to_string(loss.index) +
                     ") was already covered by an earlier Backward on this tape");
  }
  if (l.shape.numel() != 1) {
    throw ShapeError("Backward: the loss must be a scalar, got shape " + l.shape.ToString());
  }
  if (!l.requires_grad) {
    throw ScopeError("Backward: the loss does not depend on any parameter; nothing to train");
  }
  backward_done_ = true;
  bool accumulate = false;
  float* seed = GradFor(loss.index, &accumulate);
  backend_->Fill(seed, 1.0f, 1);
  const std::uint32_t keep = l.ownership == Ownership::kView ? l.view_root : loss.index;
  // On the manual tape several Backward calls may follow each other; each walks only the nodes
  // recorded since the previous one (parameter gradients accumulate across them).
  const std::int64_t floor = backward_floor_;
  for (std::int64_t i = loss.index; i >= floor; --i) {
    const auto index = static_cast<std::uint32_t>(i);
    Node& n = nodes_[index];
    if (n.requires_grad && (n.grad || n.param != nullptr) && n.num_parents > 0) {
      AtBoundary(Boundary::kBackward, index);
      BackwardNode(*this, index);
    }
    // The backward of every consumer of node i up to the loss is done, and so is node i's own:
    // its gradient and workspace can go now. Its value can go too unless the caller keeps it
    // (the loss, retained nodes) or a node recorded after the loss reads it.
    if (index != loss.index && index != keep && !n.retained) {
      n.grad.Reset();
      n.workspace.Reset();
      n.workspace2.Reset();
      if (n.ownership == Ownership::kOwned && n.value && n.last_consumer <= loss.index) {
        n.value.Reset();
        n.data = nullptr;  // nothing may read through it any more
        n.value_released = true;
      }
    }
  }
  backward_floor_ = loss.index + 1;
}

}  // namespace leakbound::runtime
