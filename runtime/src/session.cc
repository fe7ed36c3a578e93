// EagerSession: the adaptor stack, parameters, and the scope guard behind WithStep/WithForward.
#include "leakbound/runtime/session.h"

#include <atomic>
#include <cstdio>
#include <exception>
#include <random>

namespace leakbound::runtime {
namespace {
std::atomic<std::uint64_t> next_session_id{1};

DeviceParts OpenSessionDevice(const SessionOptions& options) {
  DeviceParts parts = OpenDevice(options.device, options.cuda_allocator, options.blas_threads);
  if (options.wrap_backend) {
    parts.backend = options.wrap_backend(std::move(parts.backend));
    if (parts.backend == nullptr) {
      throw RuntimeError(
          "SessionOptions::wrap_backend returned no backend; return the one it "
          "was given or a decorator around it");
    }
  }
  return parts;
}

std::atomic<std::uint64_t> destructor_error_count{0};

void ReportDestructorError(std::uint64_t session_id, const char* what) noexcept {
  if (destructor_error_count.fetch_add(1, std::memory_order_relaxed) == 0) {
    std::fprintf(stderr,
                 "leakbound: ~EagerSession (session %llu): synchronising the device failed: %s. "
                 "The error was not rethrown (destructors must not throw); later ones are only "
                 "counted (EagerSession::destructor_errors())\n",
                 static_cast<unsigned long long>(session_id), what);
  }
}
}  // namespace

EagerSession::EagerSession(SessionOptions options)
    : options_(options),
      id_(next_session_id.fetch_add(1)),
      parts_(OpenSessionDevice(options)),
      backend_(parts_.backend.get()),
      tracking_(options.track_allocations ? std::make_unique<TrackingAdaptor>(parts_.memory.stats)
                                          : nullptr),
      session_stats_(tracking_ ? static_cast<MemoryResource*>(tracking_.get())
                               : static_cast<MemoryResource*>(parts_.memory.stats)),
      failing_(&session_stats_),
      top_(&failing_),
      step_tape_(id_, backend_, top_),
      forward_tape_(id_, backend_, top_),
      manual_tape_(id_, backend_, top_) {
  for (Tape* tape : {&step_tape_, &forward_tape_, &manual_tape_}) {
    tape->set_leak_workspace_on_end(options.faults.leak_workspace_on_scope_exit);
    tape->set_skip_release_on_error(options.faults.skip_release_on_error);
    tape->set_boundary_hook(&boundary_hook_);
  }
  forward_tape_.set_outer(&step_tape_);
}

std::uint64_t EagerSession::destructor_errors() {
  return destructor_error_count.load(std::memory_order_relaxed);
}

EagerSession::~EagerSession() {
  // Tapes first (they hold tape-owned buffers), then parameters; all before the adaptors.
  manual_tape_.End();
  forward_tape_.End();
  step_tape_.End();
  params_.clear();
  // A destructor must not throw (it would terminate the process): a device error surfacing
  // here (a sticky CUDA error) is counted, and the first one is reported on stderr.
  try {
    backend_->Synchronize();
  } catch (const std::exception& e) {
    ReportDestructorError(id_, e.what());
  } catch (...) {
    ReportDestructorError(id_, "an exception that is not a std::exception");
  }
}

Param& EagerSession::CreateParam(std::string name, const Shape& shape, float scale,
                                 std::uint64_t seed) {
  std::vector<float> values(static_cast<std::size_t>(shape.numel()));
  if (scale != 0.0f) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(-scale, scale);
    for (float& v : values) v = dist(rng);
  }
  return CreateParam(std::move(name), shape, values);
}

Param& EagerSession::CreateParam(std::string name, const Shape& shape,
                                 std::span<const float> values) {
  if (static_cast<std::int64_t>(values.size()) != shape.numel()) {
    throw ShapeError("CreateParam '" + name + "': shape " + shape.ToString() + " needs " +
                     std::to_string(shape.numel()) + " values, got " +
                     std::to_string(values.size()));
  }
  const std::size_t bytes = values.size_bytes();
  AllocationTag tag{id_, 0, "param", Role::kParameter, ScopeKind::kNone};
  Buffer storage(top_, bytes, tag);
  tag.role = Role::kParameterGrad;
  Buffer grad(top_, bytes, tag);
  backend_->CopyFromHost(storage.data(), values.data(), bytes);
  backend_->Fill(grad.floats(), 0.0f, shape.numel());
  return params_.emplace_back(id_, std::move(name), shape, std::move(storage), std::move(grad));
}

std::vector<Param*> EagerSession::params() {
  std::vector<Param*> out;
  for (Param& p : params_) out.push_back(&p);
  return out;
}

std::vector<float> EagerSession::ReadParam(const Param& param) {
  if (param.session_id() != id_) {
    throw ForeignHandleError("ReadParam: parameter '" + param.name() + "' belongs to session " +
                             std::to_string(param.session_id()));
  }
  std::vector<float> out(static_cast<std::size_t>(param.shape().numel()));
  backend_->CopyToHost(out.data(), param.data(), param.bytes());
  return out;
}

Tape& EagerSession::ManualTape() {
  if (!manual_tape_.active()) manual_tape_.Begin(NextGeneration(), ScopeKind::kManual, true);
  return manual_tape_;
}

void EagerSession::ResetManualTape() { manual_tape_.End(); }

EagerSession::ScopeGuard::ScopeGuard(EagerSession& session, ScopeKind scope)
    : tape_(nullptr), uncaught_at_entry_(std::uncaught_exceptions()) {
  if (scope == ScopeKind::kStep) {
    if (session.step_tape_.active() || session.forward_tape_.active()) {
      throw ScopeError(session.forward_tape_.active()
                           ? "WithStep inside WithForward: an inference pass cannot contain a "
                             "training step"
                           : "WithStep inside WithStep: steps do not nest; run them one after "
                             "another");
    }
    tape_ = &session.step_tape_;
    tape_->Begin(session.NextGeneration(), ScopeKind::kStep, true);
  } else {
    if (session.forward_tape_.active()) {
      throw ScopeError("WithForward inside WithForward: inference passes do not nest");
    }
    tape_ = &session.forward_tape_;
    tape_->Begin(session.NextGeneration(), ScopeKind::kForward, false);
  }
}

EagerSession::ScopeGuard::~ScopeGuard() {
  if (std::uncaught_exceptions() > uncaught_at_entry_) {
    tape_->EndAfterError();
  } else {
    tape_->End();
  }
}

}  // namespace leakbound::runtime
