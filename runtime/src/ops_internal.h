// Internal to the runtime: the backward dispatcher the tape calls during Backward.
#pragma once

#include <cstdint>

#include "leakbound/runtime/tape.h"

namespace leakbound::runtime {

// Propagates node `index`'s gradient into its parents' gradients.
void BackwardNode(Tape& tape, std::uint32_t index);

}  // namespace leakbound::runtime
