// Shared building blocks of the workloads (private to workloads/src): session options from the
// context, allocation tags for user allocations, and MlpRig, the small MLP classifier most
// workloads train. Nothing here allocates per step beyond what the runtime's scopes release.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "leakbound/reports/report.h"
#include "leakbound/runtime/ops.h"
#include "leakbound/runtime/optimizer.h"
#include "leakbound/runtime/session.h"
#include "leakbound/runtime/trainer.h"
#include "leakbound/workloads/workload.h"

namespace leakbound::workloads::internal {

// Each group file appends its registrations in the order they should be listed.
void AddCleanWorkloads(std::vector<Registration>& out);
void AddModelWorkloads(std::vector<Registration>& out);  // clean, larger models
void AddTrapWorkloads(std::vector<Registration>& out);
void AddZooWorkloads(std::vector<Registration>& out);
// GPU-only zoo entries (empty in a build without CUDA).
void AddGpuZooWorkloads(std::vector<Registration>& out);

// A registration whose factory default-constructs W.
template <class W>
Registration Register(WorkloadInfo info) {
  return Registration{std::move(info), [] { return std::make_unique<W>(); }};
}

// The registry entry of a workload; expectation and detected_by as in WorkloadInfo.
WorkloadInfo Info(Kind kind, std::string name, std::string description,
                  reports::VerdictClass expectation = reports::kPass, std::string detected_by = {});

runtime::SessionOptions OptionsFor(const WorkloadContext& context,
                                   runtime::PlantedFaults faults = {});

using workloads::UserTag;  // public: leakbound/workloads/workload.h

// Waits for queued device work of every session (a no-op on the CPU stub), so a probe that
// samples after Step sees a quiesced device.
void Quiesce(const std::vector<runtime::EagerSession*>& sessions);

// Writes `value` over a workload-owned buffer, so its pages are really touched as a real
// table's would be.
void FillBuffer(runtime::EagerSession& session, const runtime::Buffer& buffer, float value);

// One session, an MLP, its optimizer and one fixed synthetic batch. Setup allocates all of it;
// Teardown frees it in dependency order (optimizer and model hold Param pointers into the
// session), so the process returns to the runtime counters it had before Setup.
class MlpRig {
 public:
  struct Config {
    std::vector<std::int64_t> sizes{64, 128, 10};  // in, hidden..., classes
    runtime::Activation activation = runtime::Activation::kRelu;
    runtime::OptimizerKind optimizer = runtime::OptimizerKind::kSgd;
    std::int64_t batch = 32;
    std::uint64_t seed_offset = 0;  // distinct rigs in one workload draw distinct data
    runtime::PlantedFaults faults;
  };

  void Setup(const WorkloadContext& context, const Config& config);
  void Teardown();

  // One WithStep through runtime::Trainer; returns the loss.
  float TrainStep();
  // The body of a training step on `tape` (forward, cross-entropy, backward), without the
  // optimizer, so workloads can interleave their own code; returns the loss node.
  runtime::TensorRef ForwardBackward(runtime::Tape& tape);

  runtime::EagerSession& session() { return *session_; }
  const runtime::Mlp& model() const { return *model_; }
  runtime::Optimizer& optimizer() { return *optimizer_; }
  const runtime::Batch& batch() const { return batch_; }
  std::vector<runtime::EagerSession*> Sessions() {
    return session_ ? std::vector<runtime::EagerSession*>{session_.get()}
                    : std::vector<runtime::EagerSession*>{};
  }
  void Quiesce() { internal::Quiesce(Sessions()); }

 private:
  std::unique_ptr<runtime::EagerSession> session_;
  std::unique_ptr<runtime::Mlp> model_;
  std::unique_ptr<runtime::Optimizer> optimizer_;
  std::unique_ptr<runtime::Trainer> trainer_;
  runtime::Batch batch_;
};

// A workload that is one MlpRig plus whatever the subclass adds around its training step.
class MlpWorkload : public Workload {
 public:
  explicit MlpWorkload(MlpRig::Config config) : config_(std::move(config)) {}
  void Setup(const WorkloadContext& context) override { rig_.Setup(context, config_); }
  void Teardown() override { rig_.Teardown(); }
  std::vector<runtime::EagerSession*> Sessions() override { return rig_.Sessions(); }

 protected:
  MlpRig::Config config_;
  MlpRig rig_;
};

// Deliberate leaks of the zoo are invisible to LeakSanitizer (in ASan builds), so that a
// sanitizer run of the zoo reports the harness's verdicts rather than failing at exit. The
// runtime's counters still see every byte.
void IgnoreIntentionalLeak(const void* pointer);
// While alive, allocations made by this thread are not reported by LeakSanitizer (for leaks
// planted inside the runtime, whose pointers the workload never sees).
class IntentionalLeakScope {
 public:
  IntentionalLeakScope();
  ~IntentionalLeakScope();
  IntentionalLeakScope(const IntentionalLeakScope&) = delete;
  IntentionalLeakScope& operator=(const IntentionalLeakScope&) = delete;
};

}  // namespace leakbound::workloads::internal
