// Typed errors of the runtime. Each message says what was wrong and what to do about it.
#pragma once

#include <stdexcept>
#include <string>

namespace leakbound::runtime {

class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Shapes that do not fit the op, negative or overflowing sizes, empty where data is required.
class ShapeError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// A TensorRef from a retired tape generation (the scope that made it has ended).
class StaleHandleError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// A TensorRef or Param that belongs to another session.
class ForeignHandleError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// A scope used where it is not allowed (WithStep nested in a scope, Backward in WithForward...).
class ScopeError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// The value of a node was already released (by Backward's early release) and cannot be read.
class ReleasedValueError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// A device cannot be used: build without CUDA, no usable driver, no such device.
class DeviceUnavailableError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// Non-finite values where finite ones are required (inputs checked on request).
class NonFiniteError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// A memory resource adaptor constructed over a null upstream.
class NullUpstreamError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

}  // namespace leakbound::runtime
