// Tape: the nodes recorded during one scope (one tape generation). The tape frees exactly the
// buffers it owns: values it produced, gradients of non-parameter nodes and workspace. Values
// borrowed from a parameter and views of other nodes own nothing, so releasing the tape can never
// free a parameter's storage or a buffer that a view still points into.
#pragma once

#include <array>
#include <functional>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "leakbound/runtime/backend.h"
#include "leakbound/runtime/buffer.h"
#include "leakbound/runtime/param.h"
#include "leakbound/runtime/tensor.h"

namespace leakbound::runtime {

enum class OpKind : std::uint8_t {
  kInput, kParam, kMatMul, kAdd, kLinear, kMul, kActivation, kSum, kMean, kSoftmaxCrossEntropy,
  kMse, kLayerNorm, kEmbedding, kConcat, kReshape, kTranspose, kSoftmax, kScale, kContiguous,
};
const char* OpName(OpKind op);

// Who owns the bytes `data` points to.
enum class Ownership : std::uint8_t {
  kOwned,              // this node's `value` buffer
  kBorrowedFromParam,  // a parameter's storage
  kView,               // another node's bytes (reshape, transpose); `view_root` names the owner
};

struct Node {
  OpKind op = OpKind::kInput;
  Ownership ownership = Ownership::kOwned;
  DType dtype = DType::kFloat32;
  bool requires_grad = false;
  bool transposed = false;  // 2-D view whose bytes are laid out as [cols, rows]
  Activation activation = Activation::kNone;
  std::uint8_t num_parents = 0;
  std::array<std::uint32_t, 3> parents{};
  std::uint32_t view_root = 0;  // for views: the node that owns (or borrows) the bytes
  // The newest node that reads this one's value (directly, or through a view of it); 0: none.
  // Backward keeps the value while a consumer past its loss may still need it.
  std::uint32_t last_consumer = 0;
  Shape shape;
  void* data = nullptr;
  Param* param = nullptr;
  float attr = 0;  // op attribute (scale factor, layernorm eps)
  Buffer value;
  Buffer grad;
  Buffer workspace;   // saved for backward (probs, mean/rstd, pre-activation, ids copy)
  Buffer workspace2;
  bool value_released = false;  // released early by Backward
  bool retained = false;        // kept through Backward's early release (Retain)
};

// Points of a step where a test may interrupt it (fault sweeps).
enum class Boundary : std::uint8_t {
  kForward,         // after each recorded node
  kBackward,        // before each node's backward
  kOptimizerState,  // before each optimizer state allocation
  kBeforeUpdate,    // after the optimizer's state phase, before any parameter changes
  kAfterUpdate,     // after every parameter was updated
};
using BoundaryHook = std::function<void(Boundary, std::uint32_t index)>;

class Tape {
 public:
  Tape(std::uint64_t session_id, Backend* backend, MemoryResource* resource);
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;
  ~Tape();

  // Inputs copied from the host onto the tape (owned by the tape).
  TensorRef Input(const Shape& shape, std::span<const float> data);
  TensorRef Input(const HostTensor& tensor) { return Input(tensor.shape, tensor.data); }
  TensorRef InputIds(std::span<const std::int32_t> ids);
  // A leaf that borrows the parameter's storage; using one Param twice gives the same node.
  TensorRef Use(Param& param);

  // Reads. Throw StaleHandleError / ForeignHandleError / ReleasedValueError.
  float Scalar(TensorRef ref);
  HostTensor ToHost(TensorRef ref);
  Shape ShapeOf(TensorRef ref) { return Resolve(ref, "ShapeOf").shape; }
  // Throws NonFiniteError naming the node when its value has NaN or Inf.
  void CheckFinite(TensorRef ref);
  // Keeps this node's value readable after Backward (which otherwise releases it early).
  void Retain(TensorRef ref);

  // Reverse-mode pass from a scalar loss. Parameter gradients are written (first write of the
  // generation overwrites, later ones accumulate). Intermediate values, gradients and workspace
  // are released as soon as no remaining backward work needs them; the loss value is kept, and
  // so are values that a node recorded after the loss reads (a second loss on the manual tape
  // sharing inputs or labels with the first).
  void Backward(TensorRef loss);

  // --- scope management (EagerSession) ---
  void Begin(std::uint64_t generation, ScopeKind scope, bool grad_enabled);
  // Releases every buffer the tape owns and retires the generation. Never throws.
  void End() noexcept;
  bool active() const { return generation_ != 0; }
  std::uint64_t generation() const { return generation_; }
  std::uint64_t last_generation() const { return last_generation_; }
  ScopeKind scope() const { return scope_; }
  bool grad_enabled() const { return grad_enabled_; }
  std::size_t size() const { return nodes_.size(); }
  // The enclosing tape, whose handles are rejected with a message that says so.
  void set_outer(const Tape* outer) { outer_ = outer; }
  // Zoo hook: when set, End() forgets workspace buffers instead of freeing them (a planted bug).
  void set_leak_workspace_on_end(bool leak) { leak_workspace_on_end_ = leak; }
  // Zoo hook: when set, End() after an exception does not free anything (a planted bug).
  void set_skip_release_on_error(bool skip) { skip_release_on_error_ = skip; }
  void EndAfterError() noexcept;
  // Test hook called at every op boundary (may throw to simulate a failure there).
  void set_boundary_hook(const BoundaryHook* hook) { hook_ = hook; }
  void AtBoundary(Boundary boundary, std::uint32_t index) {
    if (hook_ != nullptr && *hook_) (*hook_)(boundary, index);
  }

  // --- for ops ---
  Node& Resolve(TensorRef ref, const char* op);
  Node& node(std::uint32_t index) { return nodes_[index]; }
  TensorRef Push(Node&& node);
  TensorRef RefTo(std::uint32_t index) const { return {session_id_, generation_, index}; }
  Buffer NewBuffer(std::size_t bytes, OpKind op, Role role) {
    return NewBuffer(bytes, OpName(op), role);
  }
  // `op` must have static storage duration.
  Buffer NewBuffer(std::size_t bytes, const char* op, Role role);
  Backend& backend() { return *backend_; }
  MemoryResource* resource() const { return resource_; }
  std::uint64_t session_id() const { return session_id_; }
  // Float pointer to the node's data, checking it has not been released.
  const float* ReadFloats(std::uint32_t index, const char* op);
  // Int32 ids of an InputIds node, checking the dtype and that they have not been released.
  const std::int32_t* ReadIds(std::uint32_t index, const char* op);
  // The gradient buffer of node `index`, allocated on first use; *accumulate tells whether a
  // kernel must add (true) or may overwrite (false). Parameters write into their own gradient.
  float* GradFor(std::uint32_t index, bool* accumulate);

 private:
  void ReleaseNode(Node& node, ReleaseBatch& batch) noexcept;

  std::uint64_t session_id_;
  Backend* backend_;
  MemoryResource* resource_;
  std::vector<Node> nodes_;  // capacity kept across generations: no per-op heap churn
  std::uint64_t generation_ = 0;
  std::uint64_t last_generation_ = 0;
  ScopeKind scope_ = ScopeKind::kNone;
  bool grad_enabled_ = false;
  bool backward_done_ = false;
  std::uint32_t backward_floor_ = 0;  // nodes below were covered by an earlier Backward
  const Tape* outer_ = nullptr;
  bool leak_workspace_on_end_ = false;
  bool skip_release_on_error_ = false;
  const BoundaryHook* hook_ = nullptr;
};

}  // namespace leakbound::runtime
