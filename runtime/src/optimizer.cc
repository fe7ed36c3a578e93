// Optimizers: two-phase Apply (allocate state, then a non-failing in-place update).
#include "leakbound/runtime/optimizer.h"

#include <cmath>

#include "leakbound/runtime/errors.h"

namespace leakbound::runtime {

int Optimizer::Apply(Tape& tape) {
  if (!tape.active() || !tape.grad_enabled()) {
    throw ScopeError("Optimizer::Apply outside a WithStep scope; optimizers run inside a step");
  }
  const std::uint64_t generation = tape.generation();
  // Phase 1: state for every parameter that will be updated. May throw; nothing updated yet.
  for (Param* p : params_) {
    if (p->session_id() != tape.session_id()) {
      throw ForeignHandleError("Optimizer::Apply: parameter '" + p->name() +
                               "' belongs to session " + std::to_string(p->session_id()) +
                               ", the step to session " + std::to_string(tape.session_id()));
    }
    if (p->grad_generation() != generation) continue;
    auto& state = p->optimizer_state();
    while (static_cast<int>(state.size()) < StateSlots()) {
      tape.AtBoundary(Boundary::kOptimizerState, static_cast<std::uint32_t>(state.size()));
      // Persistent state belongs to the parameter, not to this step: no scope in its tag.
      const AllocationTag tag{tape.session_id(), generation, "optimizer", Role::kOptimizerState,
                              ScopeKind::kNone};
      Buffer slot(tape.resource(), p->bytes(), tag);
      tape.backend().Fill(slot.floats(), 0.0f, p->shape().numel());
      state.push_back(std::move(slot));
    }
  }
  tape.AtBoundary(Boundary::kBeforeUpdate, 0);
  // Phase 2: in-place updates; cannot fail.
  int updated = 0;
  for (Param* p : params_) {
    if (p->grad_generation() != generation) continue;
    Update(tape, *p);
    CountStep(*p);
    ++updated;
  }
  tape.AtBoundary(Boundary::kAfterUpdate, static_cast<std::uint32_t>(updated));
  return updated;
}

void Sgd::Update(Tape& tape, Param& param) noexcept {
  tape.backend().SgdMomentum(param.shape().numel(), o_.lr, o_.momentum, o_.weight_decay,
                             param.grad(), param.optimizer_state()[0].floats(), param.data());
}

void Adam::Update(Tape& tape, Param& param) noexcept {
  const auto t = static_cast<float>(param.optimizer_steps() + 1);
  const float c1 = 1.0f - std::pow(o_.beta1, t);
  const float c2 = 1.0f - std::pow(o_.beta2, t);
  auto& state = param.optimizer_state();
  tape.backend().Adam(param.shape().numel(), o_.lr, o_.beta1, o_.beta2, o_.eps, c1, c2,
                      param.grad(), state[0].floats(), state[1].floats(), param.data());
}

}  // namespace leakbound::runtime
