// The two tests this project grew from. Leak-bound stress: a training workload through WithStep
// for two equal blocks; live bytes and allocations after block 2 equal those after block 1
// exactly, and the process returns to its pre-session baseline when the session is destroyed.
// Eager-scope stress: the same for repeated WithForward passes. Each is shown to fail when
// reclamation is broken (a scope skipped, a planted runtime bug).
#include <gtest/gtest.h>

#include <cstdio>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAKBOUND_LSAN_DISABLE() __lsan_disable()
#define LEAKBOUND_LSAN_ENABLE() __lsan_enable()
#else
#define LEAKBOUND_LSAN_DISABLE() (void)0
#define LEAKBOUND_LSAN_ENABLE() (void)0
#endif

#include "leakbound/runtime/ops.h"
#include "leakbound/runtime/session.h"
#include "leakbound/runtime/trainer.h"

namespace leakbound::runtime {
namespace {

constexpr int kBlockSteps = 40;

struct BlockFigures {
  MemoryStats baseline;  // process-wide, before the session exists
  MemoryStats block1;    // session, after block 1
  MemoryStats block2;    // session, after block 2
  MemoryStats final;     // process-wide, after the session is destroyed
};

// How one step is driven: through the scope, or (broken) straight onto the manual tape.
enum class Driver { kWithStep, kWithForward, kManualTapeNoScope, kWithStepLeakyWorkspace };

BlockFigures RunBlocks(Driver driver) {
  BlockFigures f;
  f.baseline = ProcessStats(Device::Cpu());
  {
    SessionOptions options;
    options.faults.leak_workspace_on_scope_exit = driver == Driver::kWithStepLeakyWorkspace;
    EagerSession session(options);
    Mlp model(session, {32, 64, 64, 10}, Activation::kGelu, 5);
    auto opt = MakeOptimizer(OptimizerKind::kAdam, model.params());
    Trainer trainer(session, model, *opt);
    Evaluator evaluator(session, model);
    const Batch batch = Batch::Random(16, 32, 10, 9);
    auto step = [&] {
      switch (driver) {
        case Driver::kWithStep:
        case Driver::kWithStepLeakyWorkspace:
          trainer.Step(batch);
          break;
        case Driver::kWithForward:
          evaluator.Logits(batch);
          break;
        case Driver::kManualTapeNoScope: {  // the scope is missing: nothing resets the tape
          Tape& tape = session.ManualTape();
          TensorRef loss = SoftmaxCrossEntropy(
              tape, model.Forward(tape, tape.Input(batch.input_shape, batch.inputs)),
              tape.InputIds(batch.labels));
          tape.Backward(loss);
          opt->Apply(tape);
          break;
        }
      }
    };
    step();  // warm-up: lazily allocated optimizer state
    for (int i = 0; i < kBlockSteps; ++i) step();
    f.block1 = session.stats();
    for (int i = 0; i < kBlockSteps; ++i) step();
    f.block2 = session.stats();
  }
  f.final = ProcessStats(Device::Cpu());
  return f;
}

void Print(const char* name, const BlockFigures& f) {
  std::printf("[figures] %s: baseline %lld B, after block 1 %lld B (%lld allocs), after block 2 "
              "%lld B (%lld allocs), after session %lld B\n",
              name, static_cast<long long>(f.baseline.live_bytes),
              static_cast<long long>(f.block1.live_bytes),
              static_cast<long long>(f.block1.live_allocations),
              static_cast<long long>(f.block2.live_bytes),
              static_cast<long long>(f.block2.live_allocations),
              static_cast<long long>(f.final.live_bytes));
}

TEST(Stress, LeakBound_WithStep_FlatAcrossBlocksAndBackToBaseline) {
  const BlockFigures f = RunBlocks(Driver::kWithStep);
  Print("leak-bound stress (WithStep)", f);
  EXPECT_GT(f.block1.live_bytes, 0);
  EXPECT_EQ(f.block2.live_bytes, f.block1.live_bytes);
  EXPECT_EQ(f.block2.live_allocations, f.block1.live_allocations);
  EXPECT_EQ(f.final.live_bytes, f.baseline.live_bytes);
  EXPECT_EQ(f.final.live_allocations, f.baseline.live_allocations);
}

TEST(Stress, EagerScope_WithForward_FlatAcrossBlocksAndBackToBaseline) {
  const BlockFigures f = RunBlocks(Driver::kWithForward);
  Print("eager-scope stress (WithForward)", f);
  EXPECT_GT(f.block1.live_bytes, 0);
  EXPECT_EQ(f.block2.live_bytes, f.block1.live_bytes);
  EXPECT_EQ(f.block2.live_allocations, f.block1.live_allocations);
  EXPECT_EQ(f.final.live_bytes, f.baseline.live_bytes);
  EXPECT_EQ(f.final.live_allocations, f.baseline.live_allocations);
}

TEST(Stress, SameCheckCatchesAMissingScope) {
  const BlockFigures f = RunBlocks(Driver::kManualTapeNoScope);
  Print("missing scope (manual tape, never reset)", f);
  EXPECT_GT(f.block2.live_bytes, f.block1.live_bytes);  // growth across blocks: caught
  // Destroying the session still frees the tape: this leak is invisible to before/after checks.
  EXPECT_EQ(f.final.live_bytes, f.baseline.live_bytes);
}

TEST(Stress, SameCheckCatchesAPlantedWorkspaceLeakInTheRuntime) {
  LEAKBOUND_LSAN_DISABLE();  // the planted leak is deliberate: keep LeakSanitizer quiet about it
  const BlockFigures f = RunBlocks(Driver::kWithStepLeakyWorkspace);
  LEAKBOUND_LSAN_ENABLE();
  Print("planted runtime bug (workspace not released)", f);
  EXPECT_GT(f.block2.live_bytes, f.block1.live_bytes);
  EXPECT_GT(f.final.live_bytes, f.baseline.live_bytes);  // unreachable: never returned
}

}  // namespace
}  // namespace leakbound::runtime
