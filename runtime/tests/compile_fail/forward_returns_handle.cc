// Must not compile: a WithForward body returning a TensorRef would hand out a dangling handle.
#include "leakbound/runtime/ops.h"
#include "leakbound/runtime/session.h"

int main() {
  leakbound::runtime::EagerSession session;
  auto escaped = session.WithForward([](leakbound::runtime::Tape& tape) {
    const float one = 1.0f;
    return tape.Input(leakbound::runtime::Shape{1}, {&one, 1});
  });
  (void)escaped;
}
