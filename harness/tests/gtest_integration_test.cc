// EXPECT_LEAK_BOUND: passes on clean work, fails (with evidence) on a leak.
#include "leakbound/harness/gtest.h"

#include <gtest/gtest-spi.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "leakbound/runtime/trainer.h"

namespace leakbound::harness {
namespace {

TEST(LeakBoundMacro, RegisteredCleanWorkloadPasses) { EXPECT_LEAK_BOUND("mlp_sgd"); }

// A user's own training loop, written as a LambdaWorkload.
struct UserLoop {
  std::unique_ptr<runtime::EagerSession> session;
  std::unique_ptr<runtime::Mlp> model;
  std::unique_ptr<runtime::Optimizer> opt;
  runtime::Batch batch = runtime::Batch::Random(8, 16, 4, 1);
  std::vector<runtime::Buffer> cache;  // the leak, when `leaky`
  bool leaky = false;

  LambdaWorkload AsWorkload() {
    LambdaWorkload w;
    w.name = leaky ? "user_leaky_loop" : "user_clean_loop";
    w.setup = [this] {
      session = std::make_unique<runtime::EagerSession>();
      model = std::make_unique<runtime::Mlp>(*session, std::vector<std::int64_t>{16, 32, 4},
                                             runtime::Activation::kRelu, 3);
      opt = runtime::MakeOptimizer(runtime::OptimizerKind::kSgd, model->params());
      cache.reserve(1024);
    };
    w.step = [this](std::int64_t) {
      runtime::Trainer(*session, *model, *opt).Step(batch);
      if (leaky) {
        cache.emplace_back(session->resource(), 96,
                           runtime::AllocationTag{session->id(), session->generation(),
                                                  "user_cache", runtime::Role::kUser,
                                                  runtime::ScopeKind::kNone});
      }
    };
    w.teardown = [this] {
      cache.clear();
      opt.reset();
      model.reset();
      session.reset();
    };
    w.sessions = [this] { return std::vector<runtime::EagerSession*>{session.get()}; };
    return w;
  }
};

TEST(LeakBoundMacro, UserCleanLoopPasses) {
  UserLoop loop;
  EXPECT_LEAK_BOUND(loop.AsWorkload());
}

TEST(LeakBoundMacro, UserLeakyLoopFailsWithEvidenceAndAttribution) {
  UserLoop loop;
  loop.leaky = true;
  const ::testing::AssertionResult r = IsLeakBound(loop.AsWorkload());
  ASSERT_FALSE(r);
  const std::string message = r.message();
  EXPECT_NE(message.find("unbounded-growth"), std::string::npos) << message;
  EXPECT_NE(message.find("96 B/step"), std::string::npos) << message;
  EXPECT_NE(message.find("user_cache"), std::string::npos) << message;
  EXPECT_NONFATAL_FAILURE(EXPECT_LEAK_BOUND(loop.AsWorkload()), "unbounded-growth");
}


// ---- The exact host heap, with no calibration (issue 9's acceptance) -------------------------

// Plain host allocations a user's code makes, kept (the leak) or freed every step.
struct HostLoop {
  std::vector<void*> kept;
  std::vector<std::unique_ptr<char[]>> kept_new;
  std::mt19937 rng{7};
  LambdaWorkload Make(const std::function<void(HostLoop&, std::int64_t)>& body) {
    LambdaWorkload w;
    w.setup = [this] {
      kept.reserve(4096);
      kept_new.reserve(4096);
    };
    w.step = [this, body](std::int64_t i) { body(*this, i); };
    w.teardown = [this] {
      for (void* p : kept) std::free(p);
      std::vector<void*>().swap(kept);
      std::vector<std::unique_ptr<char[]>>().swap(kept_new);
    };
    return w;
  }
};

void ExpectCaught(const reports::WorkloadResult& r, const std::string& counter,
                  const std::string& rate) {
  EXPECT_EQ(r.verdict, reports::kUnboundedGrowth) << Explain(r);
  const std::string message = Explain(r);
  EXPECT_NE(message.find("unbounded-growth"), std::string::npos) << message;
  EXPECT_NE(message.find(counter), std::string::npos) << message;
  EXPECT_NE(message.find(rate), std::string::npos) << message;
}

TEST(HostHeap, FourBytePerStepMallocLeak_CaughtWithoutCalibration) {
  HostLoop loop;
  const auto r = RunLeakCheck(loop.Make([](HostLoop& l, std::int64_t) {
    void* p = std::malloc(4);
    l.kept.push_back(p);  // reserved in setup: the vector itself does not grow the heap
  }));
  ExpectCaught(r, "host.heap_bytes", "grew 4 B/step");
}

TEST(HostHeap, SixteenKiBPerStepNewLeak_CaughtWithoutCalibration) {
  HostLoop loop;
  const auto r = RunLeakCheck(loop.Make([](HostLoop& l, std::int64_t) {
    l.kept_new.emplace_back(new char[16384]);
  }));
  ExpectCaught(r, "host.heap_bytes", "grew 16384 B/step");
}

TEST(HostHeap, FortyBytesKeptEverySeventhStep_CaughtAsSlowLeak) {
  HostLoop loop;
  LambdaWorkload w = loop.Make([](HostLoop& l, std::int64_t i) {
    if (i % 7 == 6) l.kept.push_back(std::malloc(40));
  });
  w.period_steps = 7;
  const auto r = RunLeakCheck(w);
  EXPECT_EQ(r.verdict, reports::kUnboundedGrowth) << Explain(r);
  EXPECT_NE(Explain(r).find("host.heap_bytes"), std::string::npos) << Explain(r);
}

TEST(HostHeap, RandomSizedAllocationsFreedEachStep_PassHundredOfHundredRuns) {
  for (int run = 0; run < 100; ++run) {
    HostLoop loop;
    loop.rng.seed(static_cast<unsigned>(run));
    const auto r = RunLeakCheck(loop.Make([](HostLoop& l, std::int64_t) {
      std::uniform_int_distribution<std::size_t> size(1, 65536);
      std::vector<std::unique_ptr<char[]>> scratch;
      for (int k = 0; k < 8; ++k) scratch.emplace_back(new char[size(l.rng)]);
      void* p = std::malloc(size(l.rng));
      std::free(p);
    }));
    ASSERT_EQ(r.verdict, reports::kPass) << "run " << run << ": " << Explain(r);
  }
}

TEST(HostHeap, OneLargeAllocationAfterWarmup_FreedAtTeardown_Passes) {
  HostLoop loop;
  const auto r = RunLeakCheck(loop.Make([](HostLoop& l, std::int64_t i) {
    if (i == 40) l.kept.push_back(std::malloc(8 << 20));
  }));
  EXPECT_EQ(r.verdict, reports::kPass) << Explain(r);
  EXPECT_GT(r.blocks, 3) << "confirmation blocks were run";
  bool named = false;
  for (const auto& c : r.counters)
    named |= c.counter == "host.heap_bytes" &&
             c.evidence.find("one-time rise of 8.00 MiB at step 40") != std::string::npos;
  EXPECT_TRUE(named) << Explain(r);
}

TEST(HostHeap, OneLargeAllocationAfterWarmup_NeverFreed_IsNotReturnedToBaseline) {
  static std::vector<void*> forgotten;
  LambdaWorkload w;
  w.step = [](std::int64_t i) {
    if (i == 40) forgotten.push_back(std::malloc(8 << 20));
  };
  const auto r = RunLeakCheck(w);
  EXPECT_EQ(r.verdict, reports::kNotReturnedToBaseline) << Explain(r);
  EXPECT_NE(r.evidence.find("one-time rise of 8.00 MiB at step 40"), std::string::npos)
      << r.evidence;
  for (void* p : forgotten) std::free(p);
}

TEST(HostHeap, NewSessionEveryStep_Passes) {
  LambdaWorkload w;
  w.step = [](std::int64_t) {
    runtime::EagerSession session;
    runtime::Mlp model(session, std::vector<std::int64_t>{8, 16, 2}, runtime::Activation::kRelu, 1);
    auto opt = runtime::MakeOptimizer(runtime::OptimizerKind::kSgd, model.params());
    runtime::Trainer(session, model, *opt).Step(runtime::Batch::Random(4, 8, 2, 1));
  };
  const auto r = RunLeakCheck(w);
  EXPECT_EQ(r.verdict, reports::kPass) << Explain(r);
}

TEST(HostHeap, EmptyWorkload_IsFlatToTheByte) {
  LambdaWorkload w;
  w.step = [](std::int64_t) {};
  const auto r = RunLeakCheck(w);
  ASSERT_EQ(r.verdict, reports::kPass) << Explain(r);
  for (const auto& s : r.series) {
    if (s.name != "host.heap_bytes" && s.name != "host.heap_allocations") continue;
    for (double v : s.values) ASSERT_EQ(v, s.values.front()) << s.name;
  }
}

TEST(HostHeap, ScheduleShorterThanDeclaredPeriod_IsRefusedSayingWhatToPass) {
  LambdaWorkload w;
  w.step = [](std::int64_t) {};
  w.period_steps = 20;
  try {
    RunLeakCheck(w);
    ADD_FAILURE() << "a block of 16 steps was accepted for a period of 20";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("pass --steps 20 or more"), std::string::npos) << e.what();
  }
}


// A probe that throws is the workload's error result, not an exception out of the run.
class ThrowingProbe final : public Probe {
 public:
  explicit ThrowingProbe(int throw_on) : throw_on_(throw_on) {}
  const std::vector<CounterInfo>& Counters() const override { return counters_; }
  void Sample(std::vector<double>& out) override {
    if (++samples_ == throw_on_) throw std::runtime_error("sensor unplugged");
    out.push_back(0);
  }
  std::string Name() const override { return "throwing"; }

 private:
  int throw_on_;
  int samples_ = 0;
  std::vector<CounterInfo> counters_{{"throwing.value", "count", true, true}};
};

TEST(Runner, ProbeThrowingAtBaselineOrMidRun_IsAnErrorResultNamingIt) {
  for (int throw_on : {1, 10}) {
    RunOptions options;
    options.extra_probes = [throw_on] {
      std::vector<std::unique_ptr<Probe>> probes;
      probes.push_back(std::make_unique<ThrowingProbe>(throw_on));
      return probes;
    };
    LambdaWorkload w;
    w.step = [](std::int64_t) {};
    reports::WorkloadResult r;
    ASSERT_NO_THROW(r = RunLeakCheck(w, options));
    EXPECT_EQ(r.verdict, reports::kError) << "throw on sample " << throw_on;
    EXPECT_NE(r.evidence.find("sensor unplugged"), std::string::npos) << r.evidence;
  }
}


TEST(Runner, WorkloadFactoryThrowing_IsAnErrorResultNotAnEscape) {
  workloads::Registration reg;
  reg.info.name = "broken_factory";
  reg.info.expectation = reports::kPass;
  reg.make = []() -> std::unique_ptr<workloads::Workload> {
    throw std::runtime_error("cannot open the dataset");
  };
  reports::WorkloadResult r;
  ASSERT_NO_THROW(r = Runner(RunOptions{}).Run(reg));
  EXPECT_EQ(r.verdict, reports::kError);
  EXPECT_NE(r.evidence.find("cannot open the dataset"), std::string::npos) << r.evidence;
}

}  // namespace
}  // namespace leakbound::harness

namespace leakbound::harness {
namespace {

// One random-size runtime buffer held across each step (the previous one freed), through
// session.resource(): bounded, at every seed and at 5 blocks of 32 steps (the schedule);
// the same loop keeping 64 B a step on top is growth on runtime.live_bytes.
reports::WorkloadResult RandomRuntimeBuffer(std::uint64_t seed, bool leaky, RunOptions options) {
  std::unique_ptr<runtime::EagerSession> session;
  std::unique_ptr<runtime::Buffer> held;
  std::vector<runtime::Buffer> kept;
  std::mt19937_64 rng(seed);
  LambdaWorkload w;
  w.setup = [&] {
    session = std::make_unique<runtime::EagerSession>();
    kept.reserve(4096);
  };
  w.step = [&](std::int64_t) {
    const runtime::AllocationTag tag{session->id(), session->generation(), "user_buffer",
                                     runtime::Role::kUser, runtime::ScopeKind::kNone};
    held.reset();
    held = std::make_unique<runtime::Buffer>(session->resource(), 1 + rng() % (256 * 1024), tag);
    if (leaky) kept.emplace_back(session->resource(), 64, tag);
  };
  w.teardown = [&] {
    held.reset();
    kept.clear();
    session.reset();
  };
  w.sessions = [&] { return std::vector<runtime::EagerSession*>{session.get()}; };
  return RunLeakCheck(w, options);
}

TEST(CensusInProcess, RandomSizeRuntimeBufferHeldAcrossSteps_PassesAtEverySeed) {
  for (const auto& [blocks, steps] : {std::pair{3, 16}, std::pair{5, 32}}) {
    RunOptions options;
    options.blocks = blocks;
    options.steps_per_block = steps;
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
      const reports::WorkloadResult r = RandomRuntimeBuffer(seed, false, options);
      EXPECT_EQ(r.verdict, reports::kPass) << "seed " << seed << ", " << blocks << " blocks: "
                                           << r.evidence;
    }
  }
}

TEST(CensusInProcess, RandomSizeRuntimeBufferPlusAKeptOne_IsGrowthOnTheRuntime) {
  RunOptions options;
  options.blocks = 5;
  options.steps_per_block = 32;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const reports::WorkloadResult r = RandomRuntimeBuffer(seed, true, options);
    EXPECT_EQ(r.verdict, reports::kUnboundedGrowth) << r.evidence;
    bool runtime_grew = false;
    for (const reports::CounterVerdict& v : r.counters) {
      if (v.counter == "runtime.live_bytes") {
        runtime_grew = v.verdict == reports::kUnboundedGrowth && v.slope_per_step == 64;
        EXPECT_TRUE(runtime_grew) << v.evidence;
      }
    }
  }
}

}  // namespace
}  // namespace leakbound::harness
