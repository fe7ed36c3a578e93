// Param: a trainable parameter. It owns its storage, its gradient and its optimizer state, all
// persistent across steps; a tape only ever borrows the storage (never frees it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "leakbound/runtime/buffer.h"
#include "leakbound/runtime/tensor.h"

namespace leakbound::runtime {

class Param {
 public:
  Param(std::uint64_t session_id, std::string name, Shape shape, Buffer storage, Buffer grad)
      : session_id_(session_id),
        name_(std::move(name)),
        shape_(shape),
        storage_(std::move(storage)),
        grad_(std::move(grad)) {}
  Param(const Param&) = delete;
  Param& operator=(const Param&) = delete;

  const std::string& name() const { return name_; }
  const Shape& shape() const { return shape_; }
  std::uint64_t session_id() const { return session_id_; }
  float* data() const { return storage_.floats(); }
  float* grad() const { return grad_.floats(); }
  std::size_t bytes() const { return storage_.bytes(); }
  // The generation whose Backward last wrote the gradient (0: none). An optimizer applies only
  // gradients of the current generation, so a stale gradient is never applied twice.
  std::uint64_t grad_generation() const { return grad_generation_; }

  // Optimizer state slots (momentum; Adam m and v), allocated once on first use.
  std::vector<Buffer>& optimizer_state() { return optimizer_state_; }
  std::int64_t optimizer_steps() const { return optimizer_steps_; }

 private:
  friend class Tape;
  friend class Optimizer;
  std::uint64_t session_id_;
  std::string name_;
  Shape shape_;
  Buffer storage_;
  Buffer grad_;
  std::uint64_t grad_generation_ = 0;
  // Tape node that borrows this param in the generation `node_generation_` (one leaf per param
  // per generation, so a param used twice is one node whose storage is borrowed once).
  std::uint64_t node_generation_ = 0;
  std::uint32_t node_index_ = 0;
  std::vector<Buffer> optimizer_state_;
  std::int64_t optimizer_steps_ = 0;
};

}  // namespace leakbound::runtime
