// Fault sweeps over every single-session clean training and evaluation workload:
//  - allocation-failure sweep: count the allocations K of one step, then for every k in 1..K
//    run a step whose k-th allocation fails;
//  - exception sweep: count the op boundaries of one step (forward nodes, backward nodes,
//    optimizer points), then throw at each of them.
// Each time: the typed error surfaces, live bytes after the failed step equal those before it,
// parameters are as the optimizer's all-or-nothing policy says (bitwise unchanged when the
// failure came before the update; bitwise equal to a fault-free twin run when it came after),
// and the next step succeeds and returns to the same live bytes.
#include <gtest/gtest.h>

#include <cstdio>

#include "leakbound/runtime/errors.h"
#include "leakbound/workloads/workload.h"

namespace leakbound::harness {
namespace {

struct InjectedFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<std::vector<float>> ReadParams(runtime::EagerSession& s) {
  std::vector<std::vector<float>> out;
  for (runtime::Param* p : s.params()) out.push_back(s.ReadParam(*p));
  return out;
}

struct SweepTotals {
  int workloads = 0;
  long long allocation_points = 0;
  long long boundary_points = 0;
};
SweepTotals totals;

// The workload under test and a fault-free twin stepped in lockstep: the twin takes a step
// whenever the parameters of the faulty one are supposed to have moved.
class Pair {
 public:
  explicit Pair(const workloads::Registration& reg) : faulty_(reg.make()), twin_(reg.make()) {
    faulty_->Setup({});
    twin_->Setup({});
  }
  ~Pair() {
    faulty_->Teardown();
    twin_->Teardown();
  }
  runtime::EagerSession& session() { return *faulty_->Sessions().at(0); }
  std::size_t sessions() { return faulty_->Sessions().size(); }
  void CleanStep() {
    faulty_->Step(step_);
    twin_->Step(step_);
    ++step_;
  }
  // Arms a fault, runs one step and checks the guarantees. Returns whether the fault fired.
  template <class Expected>
  bool FaultyStep(const std::function<void()>& arm, const std::function<void()>& disarm,
                  const bool* after_update, const std::string& what) {
    runtime::EagerSession& s = session();
    const runtime::MemoryStats before = s.stats();
    const auto params_before = ReadParams(s);
    arm();
    bool threw = false;
    try {
      faulty_->Step(step_);
    } catch (const Expected&) {
      threw = true;
    }
    disarm();
    if (!threw) {
      twin_->Step(step_++);
      return false;
    }
    EXPECT_EQ(s.stats().live_bytes, before.live_bytes) << what;
    EXPECT_EQ(s.stats().live_allocations, before.live_allocations) << what;
    if (after_update != nullptr && *after_update) {
      twin_->Step(step_);  // the update completed: parameters must equal the twin's
      EXPECT_EQ(ReadParams(s), ReadParams(*twin_->Sessions().at(0))) << what << ": not fully updated";
    } else {
      EXPECT_EQ(ReadParams(s), params_before) << what << ": parameters changed";
    }
    ++step_;
    EXPECT_NO_THROW(CleanStep()) << "the step after " << what;
    EXPECT_EQ(s.stats().live_bytes, before.live_bytes) << "after recovery from " << what;
    EXPECT_EQ(ReadParams(s), ReadParams(*twin_->Sessions().at(0))) << "after recovery from " << what;
    return true;
  }

 private:
  std::unique_ptr<workloads::Workload> faulty_, twin_;
  std::int64_t step_ = 0;
};

class FaultSweep : public ::testing::TestWithParam<std::string> {};

TEST_P(FaultSweep, EveryAllocationAndEveryOpBoundaryOfAStep) {
  const workloads::Registration* reg = workloads::FindWorkload(GetParam());
  ASSERT_NE(reg, nullptr);
  Pair pair(*reg);
  ASSERT_EQ(pair.sessions(), 1u);
  runtime::EagerSession& s = pair.session();
  for (int i = 0; i < 3; ++i) pair.CleanStep();  // warm-up: lazily allocated state exists

  const auto count_before = s.stats().allocation_count;
  pair.CleanStep();
  const auto allocations = s.stats().allocation_count - count_before;
  ASSERT_GT(allocations, 0);
  int injected = 0;
  for (int k = 1; k <= allocations; ++k) {
    const bool fired = pair.FaultyStep<runtime::OutOfMemoryError>(
        [&] { s.faults().FailNthAllocation(static_cast<std::uint64_t>(k)); },
        [&] { s.faults().Disarm(); }, nullptr, "allocation failure " + std::to_string(k));
    EXPECT_TRUE(fired) << "allocation " << k << " of " << allocations << " was not reached";
    injected += fired ? 1 : 0;
  }

  int boundaries = 0;
  s.SetBoundaryHook([&](runtime::Boundary, std::uint32_t) { ++boundaries; });
  pair.CleanStep();
  s.SetBoundaryHook({});
  ASSERT_GT(boundaries, 0);
  int thrown = 0;
  for (int b = 1; b <= boundaries; ++b) {
    int seen = 0;
    bool after_update = false;
    const bool fired = pair.FaultyStep<InjectedFailure>(
        [&] {
          s.SetBoundaryHook([&seen, &after_update, b](runtime::Boundary kind, std::uint32_t) {
            if (++seen == b) {
              after_update = kind == runtime::Boundary::kAfterUpdate;
              throw InjectedFailure("injected at boundary " + std::to_string(b));
            }
          });
        },
        [&] { s.SetBoundaryHook({}); }, &after_update, "exception at boundary " + std::to_string(b));
    EXPECT_TRUE(fired) << "boundary " << b << " of " << boundaries << " was not reached";
    thrown += fired ? 1 : 0;
  }
  std::printf("[figures] %s: %d/%lld allocation failures injected, %d/%d op-boundary exceptions\n",
              GetParam().c_str(), injected, static_cast<long long>(allocations), thrown, boundaries);
  totals.workloads += 1;
  totals.allocation_points += injected;
  totals.boundary_points += thrown;
}

// Clean training and evaluation workloads with one session and no exception handling of their
// own (throws_every_k catches exceptions by design; threaded_sessions steps on worker threads).
INSTANTIATE_TEST_SUITE_P(Clean, FaultSweep,
                         ::testing::Values("mlp_sgd", "mlp_adam", "mlp_eval", "transformer_block",
                                           "rnn_unrolled", "embedding_concat",
                                           "eval_inside_train"));

class SweepReport : public ::testing::Environment {
 public:
  void TearDown() override {
    std::printf("[figures] fault sweeps: %d workloads, %lld allocation-failure points, %lld "
                "exception points\n",
                totals.workloads, totals.allocation_points, totals.boundary_points);
  }
};
const auto* const kReport = ::testing::AddGlobalTestEnvironment(new SweepReport);

}  // namespace
}  // namespace leakbound::harness
