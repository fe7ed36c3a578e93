// Explicit release discipline for code that has no tape, e.g. an in-op reduction that needs
// scratch, or a tool that stages data outside any scope. Use a scope (WithStep / WithForward)
// whenever ops are recorded; use these when bytes are needed for the duration of one call:
// the scratch is released on every exit path of `body`, exceptions included.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include "leakbound/runtime/buffer.h"

namespace leakbound::runtime {

// Allocates `bytes` from `resource`, runs body(Buffer&), then releases the buffer.
template <class Body>
decltype(auto) ReleaseThen(MemoryResource* resource, std::size_t bytes, const AllocationTag& tag,
                           Body&& body) {
  Buffer scratch(resource, bytes, tag);
  return std::forward<Body>(body)(scratch);
}

// Several scratch buffers at once; if the k-th allocation fails the first k-1 are released.
template <std::size_t N, class Body>
decltype(auto) ReleaseManyThen(MemoryResource* resource, const std::array<std::size_t, N>& bytes,
                               const AllocationTag& tag, Body&& body) {
  std::array<Buffer, N> scratch;
  for (std::size_t i = 0; i < N; ++i) scratch[i] = Buffer(resource, bytes[i], tag);
  return std::forward<Body>(body)(scratch);
}

}  // namespace leakbound::runtime
