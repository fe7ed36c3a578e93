// Must not compile: a WithStep body returning handles inside a container.
#include <vector>

#include "leakbound/runtime/ops.h"
#include "leakbound/runtime/session.h"

int main() {
  leakbound::runtime::EagerSession session;
  auto escaped = session.WithStep([](leakbound::runtime::Tape& tape) {
    const float one = 1.0f;
    return std::vector<leakbound::runtime::TensorRef>{tape.Input(leakbound::runtime::Shape{1}, {&one, 1})};
  });
  (void)escaped;
}
