// The leak zoo: each workload plants exactly one labelled leak class that the harness must
// report, on the counter named by its `detected_by`. The bugs are realistic ones (a dropped
// buffer, a cache without a cap, a missing scope, a runtime that forgets workspace, a buggy
// optimizer, a bypass of the runtime allocator) on top of otherwise clean MLP training.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "common.h"
#include "leakbound/runtime/scratch.h"

namespace leakbound::workloads::internal {
namespace {

using runtime::Buffer;
using runtime::OptimizerKind;
using runtime::Param;
using runtime::Role;
using runtime::ScopeKind;
using runtime::Tape;
using runtime::TensorRef;

MlpRig::Config ZooMlp(OptimizerKind optimizer = OptimizerKind::kSgd,
                      runtime::PlantedFaults faults = {}) {
  MlpRig::Config config;
  config.optimizer = optimizer;
  config.seed_offset = 53;
  config.faults = faults;
  return config;
}

// Trains a clean MLP; every 8th step a 12 MiB scratch buffer (an oversized activation
// checkpoint) is allocated and released within the step. The steady working set is a few
// hundred KiB above the baseline; the spike takes the peak past the 8 MiB budget.
class PeakOverBudget final : public MlpWorkload {
 public:
  static constexpr double kBudgetBytes = 8.0 * (1 << 20);
  static constexpr std::size_t kSpikeBytes = 12u << 20;
  static constexpr std::int64_t kPeriod = 8;

  PeakOverBudget() : MlpWorkload(ZooMlp()) {}
  void Step(std::int64_t step) override {
    if (step % kPeriod == kPeriod - 1) {
      runtime::EagerSession& session = rig_.session();
      runtime::ReleaseThen(session.resource(), kSpikeBytes,
                           UserTag(session, "activation_spike", Role::kScratch),
                           [&](Buffer& spike) { FillBuffer(session, spike, 0.0f); });
    }
    rig_.TrainStep();
    rig_.Quiesce();
  }
};

// Each step stages 1 KiB through the session and drops the pointer (Buffer::Leak).
class UnreachableBuffer final : public MlpWorkload {
 public:
  UnreachableBuffer() : MlpWorkload(ZooMlp()) {}
  void Step(std::int64_t) override {
    Buffer staging(rig_.session().resource(), 1024, UserTag(rig_.session(), "unreachable_staging"));
    FillBuffer(rig_.session(), staging, 1.0f);
    IgnoreIntentionalLeak(staging.Leak());  // the bug: nobody frees it
    rig_.TrainStep();
    rig_.Quiesce();
  }
};

// A per-step result cache with no cap: a std::vector<Buffer> that gains 2 KiB every step.
// Everything stays reachable and is freed at Teardown.
class ReachableCache final : public MlpWorkload {
 public:
  ReachableCache() : MlpWorkload(ZooMlp()) {}
  void Step(std::int64_t step) override {
    Buffer& entry = cache_.emplace_back(rig_.session().resource(), 2048,
                                        UserTag(rig_.session(), "uncapped_cache_entry"));
    FillBuffer(rig_.session(), entry, static_cast<float>(step));
    rig_.TrainStep();
    rig_.Quiesce();
  }
  void Teardown() override {
    cache_.clear();
    cache_.shrink_to_fit();
    MlpWorkload::Teardown();
  }

 private:
  std::vector<Buffer> cache_;
};

// Trains on session.ManualTape() with no scope: the tape is never reset, so every step's
// inputs, values and saved workspace stay on it until the session is destroyed at Teardown.
class TapeNeverReset final : public MlpWorkload {
 public:
  TapeNeverReset() : MlpWorkload(ZooMlp(OptimizerKind::kAdam)) {}
  void Step(std::int64_t) override {
    Tape& tape = rig_.session().ManualTape();  // the bug: no WithStep around it
    rig_.ForwardBackward(tape);
    rig_.optimizer().Apply(tape);
    rig_.Quiesce();
  }
};

// A GELU MLP (Linear saves its pre-activation as workspace) on a session whose tape forgets
// workspace buffers when a scope ends: a planted runtime bug, unreachable bytes every step.
class WorkspaceNotReleased final : public MlpWorkload {
 public:
  WorkspaceNotReleased() : MlpWorkload(Config()) {}
  void Step(std::int64_t) override {
    {
      IntentionalLeakScope planted;
      rig_.TrainStep();
    }
    rig_.Quiesce();
  }

 private:
  static MlpRig::Config Config() {
    runtime::PlantedFaults faults;
    faults.leak_workspace_on_scope_exit = true;
    MlpRig::Config config = ZooMlp(OptimizerKind::kSgd, faults);
    config.activation = runtime::Activation::kGelu;
    return config;
  }
};

class DataLoaderHiccup : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every 3rd step the body throws after Backward (caught by the workload) on a session whose
// error path skips the tape's release: a planted runtime bug that leaks the whole tape.
class ErrorPathSkipsRelease final : public MlpWorkload {
 public:
  static constexpr std::int64_t kPeriod = 3;
  ErrorPathSkipsRelease() : MlpWorkload(Config()) {}
  void Step(std::int64_t step) override {
    try {
      IntentionalLeakScope planted;
      rig_.session().WithStep([&](Tape& tape) {
        TensorRef loss = rig_.ForwardBackward(tape);
        if (step % kPeriod == kPeriod - 1) throw DataLoaderHiccup("next batch not ready");
        rig_.optimizer().Apply(tape);
        return tape.Scalar(loss);
      });
    } catch (const DataLoaderHiccup&) {
    }
    rig_.Quiesce();
  }

 private:
  static MlpRig::Config Config() {
    runtime::PlantedFaults faults;
    faults.skip_release_on_error = true;
    return ZooMlp(OptimizerKind::kSgd, faults);
  }
};

// Leaks `bytes` through the session every `period` steps (at steps period-1, 2*period-1, ...).
class PeriodicLeak final : public MlpWorkload {
 public:
  static constexpr std::size_t kMaxBytes = 256;
  PeriodicLeak(std::size_t bytes, std::int64_t period, const char* op)
      : MlpWorkload(ZooMlp()), bytes_(std::min(bytes, kMaxBytes)), period_(period), op_(op) {
    pattern_.fill(0xab);
  }
  void Step(std::int64_t step) override {
    if (step % period_ == period_ - 1) {
      Buffer record(rig_.session().resource(), bytes_, UserTag(rig_.session(), op_));
      rig_.session().backend().CopyFromHost(record.data(), pattern_.data(), bytes_);
      IgnoreIntentionalLeak(record.Leak());
    }
    rig_.TrainStep();
    rig_.Quiesce();
  }

 private:
  std::array<unsigned char, kMaxBytes> pattern_{};  // what a leaked record holds
  std::size_t bytes_;
  std::int64_t period_;
  const char* op_;  // static storage: the tracking adaptor keeps the pointer
};

// Momentum SGD that allocates a fresh velocity buffer per parameter every step (copying the
// old one) and keeps each superseded buffer in a history list: the planted bug. The update
// itself is correct.
class OptimizerStatePerStep final : public MlpWorkload {
 public:
  OptimizerStatePerStep() : MlpWorkload(ZooMlp()) {}
  void Setup(const WorkloadContext& context) override {
    MlpWorkload::Setup(context);
    velocity_.resize(rig_.model().params().size());
  }
  void Step(std::int64_t) override {
    rig_.session().WithStep([&](Tape& tape) {
      TensorRef loss = rig_.ForwardBackward(tape);
      BuggySgdApply(tape);
      return tape.Scalar(loss);
    });
    rig_.Quiesce();
  }
  void Teardown() override {
    history_.clear();
    history_.shrink_to_fit();
    velocity_.clear();
    velocity_.shrink_to_fit();
    MlpWorkload::Teardown();
  }

 private:
  static constexpr float kLearningRate = 0.01f, kMomentum = 0.9f;

  void BuggySgdApply(Tape& tape) {
    runtime::EagerSession& session = rig_.session();
    const std::vector<Param*> params = rig_.model().params();
    for (std::size_t i = 0; i < params.size(); ++i) {
      Param& param = *params[i];
      if (param.grad_generation() != tape.generation()) continue;
      Buffer fresh(session.resource(), param.bytes(),
                   UserTag(session, "buggy_sgd", Role::kOptimizerState, ScopeKind::kStep));
      if (velocity_[i]) {
        session.backend().Copy(fresh.data(), velocity_[i].data(), param.bytes());
      } else {
        FillBuffer(session, fresh, 0.0f);
      }
      session.backend().SgdMomentum(param.shape().numel(), kLearningRate, kMomentum, 0.0f,
                                    param.grad(), fresh.floats(), param.data());
      if (velocity_[i]) history_.push_back(std::move(velocity_[i]));
      velocity_[i] = std::move(fresh);
    }
  }

  std::vector<Buffer> velocity_;  // current state, one per parameter
  std::vector<Buffer> history_;   // the bug: superseded state is never freed
};

// Evaluation through WithForward whose body copies the logits into a buffer of its own
// (allocated through the session inside the forward scope) and keeps it in a growing list.
class LeakInForward final : public MlpWorkload {
 public:
  LeakInForward() : MlpWorkload(ZooMlp()) {}
  void Step(std::int64_t) override {
    runtime::EagerSession& session = rig_.session();
    session.WithForward([&](Tape& tape) {
      const runtime::Batch& batch = rig_.batch();
      TensorRef logits = rig_.model().Forward(tape, tape.Input(batch.input_shape, batch.inputs));
      const auto bytes = static_cast<std::size_t>(tape.ShapeOf(logits).numel()) * sizeof(float);
      Buffer copy(session.resource(), bytes,
                  UserTag(session, "forward_logits_copy", Role::kUser, ScopeKind::kForward));
      session.backend().Copy(copy.data(), tape.ReadFloats(logits.index, "forward_logits_copy"),
                             bytes);
      kept_logits_.push_back(std::move(copy));  // the bug: kept beyond the pass
      return tape.ToHost(logits);
    });
    rig_.Quiesce();
  }
  void Teardown() override {
    kept_logits_.clear();
    kept_logits_.shrink_to_fit();
    MlpWorkload::Teardown();
  }

 private:
  std::vector<Buffer> kept_logits_;
};

// Each step mallocs 16 KiB of host staging (written, and kept reachable in an array reserved
// in Setup) behind the runtime allocator's back: the runtime counters stay flat, only the
// malloc heap grows. Freed at Teardown.
class HostMallocBypass final : public MlpWorkload {
 public:
  static constexpr std::size_t kBlockBytes = 16384;
  static constexpr std::size_t kReserved = 4096;

  HostMallocBypass() : MlpWorkload(ZooMlp()) {}
  void Setup(const WorkloadContext& context) override {
    MlpWorkload::Setup(context);
    blocks_.reserve(kReserved);
  }
  void Step(std::int64_t step) override {
    void* block = std::malloc(kBlockBytes);
    if (block == nullptr) throw std::bad_alloc();
    std::memset(block, static_cast<int>(step & 0xff), kBlockBytes);
    blocks_.push_back(block);
    rig_.TrainStep();
    rig_.Quiesce();
  }
  void Teardown() override {
    for (void* block : blocks_) std::free(block);
    blocks_.clear();
    blocks_.shrink_to_fit();
    MlpWorkload::Teardown();
  }

 private:
  std::vector<void*> blocks_;
};

// Clean training; Setup allocates a 64 KiB lookup table that Teardown forgets to free.
class TeardownLeak final : public MlpWorkload {
 public:
  static constexpr std::size_t kTableBytes = 65536;

  TeardownLeak() : MlpWorkload(ZooMlp()) {}
  void Setup(const WorkloadContext& context) override {
    MlpWorkload::Setup(context);
    table_ = Buffer(rig_.session().resource(), kTableBytes,
                    UserTag(rig_.session(), "setup_lookup_table"));
    FillBuffer(rig_.session(), table_, 0.25f);
  }
  void Step(std::int64_t) override {
    rig_.TrainStep();
    rig_.Quiesce();
  }
  void Teardown() override {
    IgnoreIntentionalLeak(table_.Leak());  // the bug: forgotten, never freed
    MlpWorkload::Teardown();
  }

 private:
  Buffer table_;
};

}  // namespace

void AddZooWorkloads(std::vector<Registration>& out) {
  const std::string live = "runtime.live_bytes";
  auto growth = [&](std::string name, std::string description) {
    return Info(Kind::kZoo, std::move(name), std::move(description), reports::kUnboundedGrowth,
                live);
  };
  out.push_back(Register<UnreachableBuffer>(
      growth("zoo_unreachable_buffer",
             "Trains an MLP and each step allocates a 1 KiB buffer through "
             "the session and drops its pointer (Buffer::Leak), planting "
             "unreachable growth.")));
  out.push_back(Register<ReachableCache>(
      growth("zoo_reachable_cache",
             "Trains an MLP beside a cache with no cap (a std::vector<Buffer>) "
             "that gains a 2 KiB entry every step, planting reachable growth "
             "freed only at Teardown.")));
  out.push_back(Register<TapeNeverReset>(
      growth("zoo_tape_never_reset",
             "Trains an MLP with Adam on session.ManualTape() with no scope, "
             "planting a tape that is never reset and grows every step.")));
  out.push_back(Register<WorkspaceNotReleased>(
      growth("zoo_workspace_not_released",
             "Trains a GELU MLP on a session whose tape forgets its "
             "saved workspace at scope exit (a planted runtime bug), "
             "leaking the pre-activations every step.")));
  out.push_back(Register<ErrorPathSkipsRelease>(
      growth("zoo_error_path_skips_release",
             "Trains an MLP whose step body throws every 3rd step on "
             "a session whose error path skips the tape's release (a "
             "planted runtime bug), leaking that step's tape.")));
  out.back().info.period_steps = 3;
  out.push_back({growth("zoo_slow_leak",
                        "Trains an MLP and leaks one 256-byte runtime "
                        "allocation every 7 steps, planting a slow leak."),
                 [] { return std::make_unique<PeriodicLeak>(256, 7, "slow_leak_record"); }});
  out.back().info.period_steps = 7;
  out.push_back({growth("zoo_smallest_leak",
                        "Trains an MLP and leaks one 1-byte runtime "
                        "allocation per step, planting the smallest leak."),
                 [] { return std::make_unique<PeriodicLeak>(1, 1, "smallest_leak_flag"); }});
  out.push_back(Register<OptimizerStatePerStep>(
      growth("zoo_optimizer_state_per_step",
             "Trains an MLP with a buggy momentum SGD that allocates "
             "fresh velocity buffers every step and keeps the old ones "
             "in a growing list, planting optimizer-state growth.")));
  out.push_back(Register<LeakInForward>(
      growth("zoo_leak_in_forward",
             "Evaluates an MLP with WithForward whose body copies the logits into "
             "a session buffer it keeps in a growing list, planting a leak inside "
             "the forward scope.")));
  out.push_back(Register<HostMallocBypass>(
      Info(Kind::kZoo, "zoo_host_malloc_bypass",
           "Trains an MLP and mallocs 16 KiB of host staging per step that it keeps until "
           "Teardown, planting growth that bypasses the runtime allocator (runtime counters stay "
           "flat).",
           reports::kUnboundedGrowth, "host.heap_bytes")));
  out.push_back(Register<TeardownLeak>(
      Info(Kind::kZoo, "zoo_teardown_leak",
           "Trains an MLP cleanly but Teardown forgets a 64 KiB table allocated in Setup, "
           "planting memory not returned to baseline.",
           reports::kNotReturnedToBaseline, live)));
  // The budget is what the workload may hold above its pre-Setup baseline, judged on
  // runtime.live_bytes together with the high-water mark runtime.peak_bytes between samples.
  WorkloadInfo peak = Info(Kind::kZoo, "zoo_peak_over_budget",
                           "Trains an MLP and every 8th step allocates and frees a 12 MiB "
                           "scratch spike, planting a peak above its 8 MiB budget.",
                           reports::kPeakOverBudget, live);
  peak.peak_budget_bytes = PeakOverBudget::kBudgetBytes;
  peak.period_steps = 8;
  out.push_back(Register<PeakOverBudget>(std::move(peak)));
}

}  // namespace leakbound::workloads::internal
