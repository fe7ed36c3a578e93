// MlpRig, tags, options and the LeakSanitizer helpers shared by every workload group.
#include "common.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define LEAKBOUND_WORKLOADS_HAVE_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define LEAKBOUND_WORKLOADS_HAVE_LSAN 1
#endif
#ifdef LEAKBOUND_WORKLOADS_HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace leakbound::workloads::internal {

using runtime::AllocationTag;
using runtime::EagerSession;

WorkloadInfo Info(Kind kind, std::string name, std::string description,
                  reports::VerdictClass expectation,
                  std::string detected_by) {
  WorkloadInfo info;
  info.name = std::move(name);
  info.description = std::move(description);
  info.kind = kind;
  info.expectation = expectation;
  info.detected_by = std::move(detected_by);
  return info;
}

runtime::SessionOptions OptionsFor(const WorkloadContext& context, runtime::PlantedFaults faults) {
  runtime::SessionOptions options;
  options.device = context.device;
  options.blas_threads = context.blas_threads;
  options.faults = faults;
  return options;
}


void Quiesce(const std::vector<EagerSession*>& sessions) {
  for (EagerSession* session : sessions) session->backend().Synchronize();
}

void FillBuffer(EagerSession& session, const runtime::Buffer& buffer, float value) {
  session.backend().Fill(buffer.floats(), value,
                         static_cast<std::int64_t>(buffer.bytes() / sizeof(float)));
}

void MlpRig::Setup(const WorkloadContext& context, const Config& config) {
  const std::uint64_t seed = context.seed * 1000003u + config.seed_offset * 7919u;
  session_ = std::make_unique<EagerSession>(OptionsFor(context, config.faults));
  model_ = std::make_unique<runtime::Mlp>(*session_, config.sizes, config.activation, seed);
  optimizer_ = runtime::MakeOptimizer(config.optimizer, model_->params());
  trainer_ = std::make_unique<runtime::Trainer>(*session_, *model_, *optimizer_);
  batch_ =
      runtime::Batch::Random(config.batch, config.sizes.front(), config.sizes.back(), seed + 1);
}

void MlpRig::Teardown() {
  trainer_.reset();
  optimizer_.reset();
  model_.reset();
  session_.reset();  // frees parameters, gradients, optimizer state and any tape leftovers
  batch_ = runtime::Batch{};
}

float MlpRig::TrainStep() { return trainer_->Step(batch_); }

runtime::TensorRef MlpRig::ForwardBackward(runtime::Tape& tape) {
  runtime::TensorRef x = tape.Input(batch_.input_shape, batch_.inputs);
  runtime::TensorRef labels = tape.InputIds(batch_.labels);
  runtime::TensorRef loss = runtime::SoftmaxCrossEntropy(tape, model_->Forward(tape, x), labels);
  tape.Backward(loss);
  return loss;
}

void IgnoreIntentionalLeak([[maybe_unused]] const void* pointer) {
#ifdef LEAKBOUND_WORKLOADS_HAVE_LSAN
  __lsan_ignore_object(pointer);
#endif
}

IntentionalLeakScope::IntentionalLeakScope() {
#ifdef LEAKBOUND_WORKLOADS_HAVE_LSAN
  __lsan_disable();
#endif
}

IntentionalLeakScope::~IntentionalLeakScope() {
#ifdef LEAKBOUND_WORKLOADS_HAVE_LSAN
  __lsan_enable();
#endif
}

}  // namespace leakbound::workloads::internal

namespace leakbound::workloads {

runtime::AllocationTag UserTag(const runtime::EagerSession& session, const char* op, runtime::Role role,
                      runtime::ScopeKind scope) {
  runtime::AllocationTag tag;
  tag.session = session.id();
  tag.step = session.generation();
  tag.op = op;
  tag.role = role;
  tag.scope = scope;
  return tag;
}

}  // namespace leakbound::workloads
