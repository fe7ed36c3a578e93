// Workload: what the harness drives in blocks of steps. Clean workloads must stay leak-bound;
// the leak zoo plants one labelled leak class each; traps look suspicious but are bounded.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "leakbound/runtime/device.h"
#include "leakbound/runtime/session.h"
#include "leakbound/reports/verdict_class.h"

namespace leakbound::workloads {

enum class Kind { kClean, kZoo, kTrap };
const char* KindName(Kind kind);

struct WorkloadInfo {
  std::string name;         // CLI name, snake_case: "mlp_sgd", "zoo_slow_leak"
  std::string description;  // one sentence: what it does (and, for the zoo, what it plants)
  Kind kind = Kind::kClean;
  // reports::kPass for clean workloads and traps; the planted class for zoo entries
  // (reports::kUnboundedGrowth, kNotReturnedToBaseline, kPeakOverBudget, ...).
  reports::VerdictClass expectation = reports::kPass;
  // The counter that must show the planted leak (zoo), e.g. "runtime.live_bytes" or
  // "host.heap_bytes"; empty for clean/trap.
  std::string detected_by;
  // Bytes the workload may hold above its pre-setup baseline at its peak (judged on
  // runtime.live_bytes with the allocator's high-water mark between samples).
  std::optional<double> peak_budget_bytes;
  bool needs_cuda = false;                  // GPU-only entries (skipped on the CPU stub)
  // Several sessions step concurrently, so the process peak depends on how their threads
  // interleave. The harness then also records a schedule-independent bound (the sum of each
  // session's own high-water mark), and diff judges the peak on that bound.
  bool peak_depends_on_schedule = false;
  // The workload's own period in steps (a sawtooth of period 8, a leak every 8th step): the
  // runner refuses a block shorter than this (docs/verdicts.md).
  int period_steps = 1;
};

struct WorkloadContext {
  runtime::Device device = runtime::Device::Cpu();
  int blas_threads = 0;  // passed to SessionOptions
  std::uint64_t seed = 1;
};

class Workload {
 public:
  virtual ~Workload() = default;
  // Creates sessions, parameters, data. Memory allocated here is part of the workload's
  // steady state (and must be gone after Teardown).
  virtual void Setup(const WorkloadContext& context) = 0;
  // One step; `step` counts from 0 over warm-up and measured blocks. Must be quiesced on return
  // (any device work synchronised) so probes may sample.
  virtual void Step(std::int64_t step) = 0;
  // Destroys everything Setup made (the zoo may "forget" some on purpose).
  virtual void Teardown() = 0;
  // Sessions whose tracking adaptors attribute outstanding memory. Valid Setup..Teardown.
  virtual std::vector<runtime::EagerSession*> Sessions() = 0;
};

// Tag for an allocation a workload (or a user's LambdaWorkload) makes itself through
// session.resource(), so attribution names it: `op` must be a string literal (the tracking
// adaptor keeps the pointer); the step is the session's current tape generation, so
// attribution can age the allocation.
runtime::AllocationTag UserTag(const runtime::EagerSession& session, const char* op,
                               runtime::Role role = runtime::Role::kUser,
                               runtime::ScopeKind scope = runtime::ScopeKind::kNone);

struct Registration {
  WorkloadInfo info;
  std::function<std::unique_ptr<Workload>()> make;
};

// Every workload, clean first, then traps, then the zoo; names unique.
const std::vector<Registration>& AllWorkloads();
// nullptr when unknown.
const Registration* FindWorkload(const std::string& name);

}  // namespace leakbound::workloads
