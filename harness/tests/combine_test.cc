// Combining counter verdicts into a workload verdict, and the pool-fragmentation class.
#include <gtest/gtest.h>

#include "leakbound/harness/runner.h"

namespace leakbound::harness {
namespace {

reports::CounterVerdict V(const std::string& counter, reports::VerdictClass verdict) {
  reports::CounterVerdict v;
  v.counter = counter;
  v.verdict = verdict;
  v.evidence = counter + " " + reports::ToString(verdict);
  return v;
}

TEST(ClassifyPoolFragmentation, ReservedGrowsUsedFlat_IsFragmentation) {
  std::vector<reports::CounterVerdict> v{V("cupti.pool_reserved_bytes", reports::kUnboundedGrowth),
                                         V("cupti.pool_bytes", reports::kPass)};
  ClassifyPoolFragmentation(v);
  EXPECT_EQ(v[0].verdict, reports::kPoolFragmentation);
  EXPECT_NE(v[0].evidence.find("stay flat"), std::string::npos);
}

TEST(ClassifyPoolFragmentation, ReservedAndUsedBothGrow_StaysGrowth) {
  std::vector<reports::CounterVerdict> v{V("cuda.pool_reserved_bytes", reports::kUnboundedGrowth),
                                         V("cuda.pool_used_bytes", reports::kUnboundedGrowth)};
  ClassifyPoolFragmentation(v);
  EXPECT_EQ(v[0].verdict, reports::kUnboundedGrowth);
}

TEST(CombineVerdicts, MostSevereClassWinsAndZooNeedsItsNamedCounter) {
  workloads::WorkloadInfo zoo;
  zoo.kind = workloads::Kind::kZoo;
  zoo.expectation = reports::kUnboundedGrowth;
  zoo.detected_by = "host.heap_bytes";
  reports::WorkloadResult r;
  r.counters = {V("runtime.live_bytes", reports::kNotReturnedToBaseline),
                V("host.heap_bytes", reports::kUnboundedGrowth)};
  CombineVerdicts(zoo, r);
  EXPECT_EQ(r.verdict, reports::kUnboundedGrowth);
  EXPECT_TRUE(r.met_expectation);

  // Right class, wrong counter: the zoo entry is not counted as detected.
  r.counters = {V("runtime.live_bytes", reports::kUnboundedGrowth),
                V("host.heap_bytes", reports::kPass)};
  CombineVerdicts(zoo, r);
  EXPECT_EQ(r.verdict, reports::kUnboundedGrowth);
  EXPECT_FALSE(r.met_expectation);

  workloads::WorkloadInfo clean;
  clean.kind = workloads::Kind::kClean;
  clean.expectation = reports::kPass;
  r.counters = {V("runtime.live_bytes", reports::kPass), V("host.heap_bytes", reports::kPass)};
  CombineVerdicts(clean, r);
  EXPECT_EQ(r.verdict, reports::kPass);
  EXPECT_TRUE(r.met_expectation);
  r.counters.push_back(V("runtime.live_allocations", reports::kPeakOverBudget));
  CombineVerdicts(clean, r);
  EXPECT_FALSE(r.met_expectation);
}

}  // namespace
}  // namespace leakbound::harness
