// EXPECT_LEAK_BOUND: passes on clean work, fails (with evidence) on a leak.
#include "leakbound/harness/gtest.h"

#include <gtest/gtest-spi.h>

#include <memory>
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

}  // namespace
}  // namespace leakbound::harness
