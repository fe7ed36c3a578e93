// GoogleTest integration: assert in one line that a workload is leak-bound.
//   EXPECT_LEAK_BOUND("mlp_sgd");
//   EXPECT_LEAK_BOUND(leakbound::harness::LambdaWorkload{...});
// What is counted, with no calibration: the leakbound runtime's allocators (runtime.*), and the
// whole process's host heap, exactly (host.heap_bytes / host.heap_allocations: every malloc,
// new, calloc, ... through the interposer linked with this target), minus what the harness
// allocates for itself. Noisy counters (RSS, mallinfo2) are reported, judged only with floors.
// A failure prints the verdict, its evidence, the counter verdicts and what is outstanding.
// Link target: leakbound_gtest (leakbound::gtest).
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
  // When set, called instead of `setup` with the run's context (device, seed, BLAS threads).
  std::function<void(const workloads::WorkloadContext&)> setup_with_context;
  std::function<void(std::int64_t)> step;
  std::function<void()> teardown = [] {};
  // Sessions whose tracking attributes what leaks (optional).
  std::function<std::vector<runtime::EagerSession*>()> sessions = [] {
    return std::vector<runtime::EagerSession*>{};
  };
  // The workload's own period in steps; blocks must be at least this long.
  int period_steps = 1;
};

// Runs the workload and returns its whole result (verdict class, rate, counter, what is
// outstanding), for tests that assert a class:
//   EXPECT_EQ(RunLeakCheck(w).verdict, reports::kUnboundedGrowth);
reports::WorkloadResult RunLeakCheck(const LambdaWorkload& workload, const RunOptions& options = {});
reports::WorkloadResult RunLeakCheck(const std::string& workload_name, const RunOptions& options = {});

// Tag for allocations a lambda makes through session.resource(), so attribution names them.
using workloads::UserTag;

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
