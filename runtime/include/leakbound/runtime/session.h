// EagerSession: one device, a set of parameters, and one tape per scope. Two exception-safe
// scopes: WithStep (one training step) and WithForward (one inference pass). On every exit of a
// scope the tape releases exactly the buffers it owns and retires its generation; parameters,
// their gradients and optimizer state are never freed by a scope.
#pragma once

#include <array>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "leakbound/runtime/device.h"
#include "leakbound/runtime/errors.h"
#include "leakbound/runtime/failing_adaptor.h"
#include "leakbound/runtime/param.h"
#include "leakbound/runtime/statistics_adaptor.h"
#include "leakbound/runtime/tape.h"
#include "leakbound/runtime/tracking_adaptor.h"

namespace leakbound::runtime {

// Host data: values that own every byte they hold, so they stay valid after a scope released
// its tape. A scope body may return only these (or void). This is an allow-list, not a list of
// dangerous types: a raw pointer (Tape::ReadFloats), a span, a string_view, a closure or a struct
// that might hold one is refused, so nothing a body returns can point into freed tape memory.
// A result type of your own: specialise IsHostData for it, which is the promise that it owns
// all its bytes (no pointer, reference or view members).
template <class T>
struct IsHostData : std::bool_constant<std::is_arithmetic_v<T> || std::is_enum_v<T>> {};
template <>
struct IsHostData<void> : std::true_type {};
template <>
struct IsHostData<std::string> : std::true_type {};
template <>
struct IsHostData<Shape> : std::true_type {};
template <>
struct IsHostData<HostTensor> : std::true_type {};
template <>
struct IsHostData<MemoryStats> : std::true_type {};
template <class T>
struct IsHostData<std::vector<T>> : IsHostData<T> {};
template <class T, std::size_t N>
struct IsHostData<std::array<T, N>> : IsHostData<T> {};
template <class T>
struct IsHostData<std::optional<T>> : IsHostData<T> {};
template <class A, class B>
struct IsHostData<std::pair<A, B>>
    : std::bool_constant<IsHostData<A>::value && IsHostData<B>::value> {};
template <class... Ts>
struct IsHostData<std::tuple<Ts...>> : std::bool_constant<(IsHostData<Ts>::value && ...)> {};

// What WithStep / WithForward refuse to return: anything but host data, references included.
template <class Result>
inline constexpr bool kEscapesTape = std::is_reference_v<Result> || std::is_volatile_v<Result> ||
                                     !IsHostData<std::remove_const_t<Result>>::value;

// Planted faults for the leak zoo: off by default, each one a realistic runtime bug.
struct PlantedFaults {
  bool leak_workspace_on_scope_exit = false;  // the tape forgets its workspace buffers
  bool skip_release_on_error = false;         // an exception exit skips the release
};

struct SessionOptions {
  Device device = Device::Cpu();
  CudaAllocator cuda_allocator = CudaAllocator::kPool;
  bool track_allocations = true;  // tracking adaptor in the stack (attribution)
  int blas_threads = 0;           // CPU: OpenBLAS threads (0: leave as configured)
  PlantedFaults faults;
  // (optional) Decorates the device's backend, e.g. to trace its calls or, in a test, to make
  // Synchronize fail like a sticky CUDA error. Defaults to the device's backend as it is.
  std::function<std::unique_ptr<Backend>(std::unique_ptr<Backend>)> wrap_backend;
};

class EagerSession {
 public:
  explicit EagerSession(SessionOptions options = {});
  ~EagerSession();
  EagerSession(const EagerSession&) = delete;
  EagerSession& operator=(const EagerSession&) = delete;

  std::uint64_t id() const { return id_; }
  const Device& device() const { return options_.device; }
  Backend& backend() { return *backend_; }

  // Parameters, owned by the session for its lifetime. Init: values drawn uniformly from
  // [-scale, scale] with a seeded generator (scale 0 gives zeros), or copied from `values`.
  Param& CreateParam(std::string name, const Shape& shape, float scale, std::uint64_t seed);
  Param& CreateParam(std::string name, const Shape& shape, std::span<const float> values);
  std::vector<Param*> params();
  std::vector<float> ReadParam(const Param& param);

  // One training step: a fresh tape generation; the body records forward, calls Backward and an
  // optimizer. The body may return host data (IsHostData: a loss, a vector), nothing else.
  template <class Body>
  auto WithStep(Body&& body) -> std::invoke_result_t<Body, Tape&> {
    using Result = std::invoke_result_t<Body, Tape&>;
    static_assert(!kEscapesTape<Result>,
                  "WithStep body returns something that is not host data (a tape handle, pointer, "
                  "view or reference) and would dangle when the step ends; return host data "
                  "(tape.Scalar(ref), tape.ToHost(ref)) or specialise IsHostData for your type");
    ScopeGuard guard(*this, ScopeKind::kStep);
    return std::invoke(std::forward<Body>(body), guard.tape());
  }

  // One inference pass: no gradients, no saved workspace. The body's result must be host data
  // (IsHostData; it is produced before the temporaries are released, and owns its bytes). Allowed
  // inside a WithStep body (an evaluation during training) with its own tape; handles do not cross
  // between the two tapes.
  template <class Body>
  auto WithForward(Body&& body) -> std::invoke_result_t<Body, Tape&> {
    using Result = std::invoke_result_t<Body, Tape&>;
    static_assert(!kEscapesTape<Result>,
                  "WithForward body returns something that is not host data (a tape handle, "
                  "pointer, view or reference) and would dangle when the pass ends; return "
                  "tape.ToHost(ref), tape.Scalar(ref) or specialise IsHostData for your type");
    ScopeGuard guard(*this, ScopeKind::kForward);
    return std::invoke(std::forward<Body>(body), guard.tape());
  }

  // A tape with no scope: nothing releases it but ResetManualTape(). Exists for code that must
  // manage a tape by hand (and for the zoo's "scope missing" leak). Prefer the scopes.
  Tape& ManualTape();
  void ResetManualTape();

  // Memory. `resource()` is the top of this session's adaptor stack: user allocations through
  // it are counted and tracked like tensor bytes.
  MemoryResource* resource() { return top_; }
  MemoryStats stats() const { return session_stats_.Snapshot(); }
  StatisticsAdaptor& statistics() { return session_stats_; }
  const TrackingAdaptor* tracking() const { return tracking_.get(); }
  FailingAdaptor& faults() { return failing_; }
  std::uint64_t generation() const { return next_generation_ - 1; }
  bool in_scope() const { return step_tape_.active() || forward_tape_.active(); }
  // Fault-sweep hook, called at every op boundary of every tape (empty: none).
  void SetBoundaryHook(BoundaryHook hook) { boundary_hook_ = std::move(hook); }
  // Errors that ~EagerSession caught and did not rethrow (a destructor must not throw), e.g. a
  // sticky CUDA error surfacing in its final synchronise. Process-wide; the first is also
  // reported on stderr.
  static std::uint64_t destructor_errors();

 private:
  class ScopeGuard {
   public:
    ScopeGuard(EagerSession& session, ScopeKind scope);
    ~ScopeGuard();
    ScopeGuard(const ScopeGuard&) = delete;
    ScopeGuard& operator=(const ScopeGuard&) = delete;
    Tape& tape() { return *tape_; }

   private:
    Tape* tape_;
    int uncaught_at_entry_;
  };

  std::uint64_t NextGeneration() { return next_generation_++; }

  SessionOptions options_;
  std::uint64_t id_;
  DeviceParts parts_;
  Backend* backend_;
  // The session's adaptor stack, top first:
  //   failing -> session statistics -> tracking (optional) -> process statistics -> leaf
  std::unique_ptr<TrackingAdaptor> tracking_;
  StatisticsAdaptor session_stats_;
  FailingAdaptor failing_;
  MemoryResource* top_;
  std::deque<Param> params_;  // stable addresses
  BoundaryHook boundary_hook_;
  Tape step_tape_;
  Tape forward_tape_;
  Tape manual_tape_;
  std::uint64_t next_generation_ = 1;
};

}  // namespace leakbound::runtime
