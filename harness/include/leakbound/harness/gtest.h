// GoogleTest integration: assert in one line that a workload is leak-bound.
//   EXPECT_LEAK_BOUND("mlp_sgd");
//   EXPECT_LEAK_BOUND(leakbound::harness::LambdaWorkload{...});
// A failure prints the verdict, its evidence, the counter verdicts and what is outstanding.
// Link target: leakbound_gtest.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "leakbound/harness/runner.h"

namespace leakbound::harness {

// A user-defined workload from callables (for tests of one's own runtime code).
struct LambdaWorkload {
  std::string name = "lambda";
  std::function<void()> setup = [] {};
  std::function<void(std::int64_t)> step;
  std::function<void()> teardown = [] {};
  // Sessions whose tracking attributes what leaks (optional).
  std::function<std::vector<runtime::EagerSession*>()> sessions = [] {
    return std::vector<runtime::EagerSession*>{};
  };
};

// Runs without noise-floor calibration (noisy counters are reported, not judged) unless the
// options carry floors.
::testing::AssertionResult IsLeakBound(const std::string& workload_name,
                                       const RunOptions& options = {});
::testing::AssertionResult IsLeakBound(const LambdaWorkload& workload,
                                       const RunOptions& options = {});

// The human-readable evidence of one result (used in failure messages).
std::string Explain(const reports::WorkloadResult& result);

}  // namespace leakbound::harness

#define EXPECT_LEAK_BOUND(...) EXPECT_TRUE(::leakbound::harness::IsLeakBound(__VA_ARGS__))
#define ASSERT_LEAK_BOUND(...) ASSERT_TRUE(::leakbound::harness::IsLeakBound(__VA_ARGS__))
