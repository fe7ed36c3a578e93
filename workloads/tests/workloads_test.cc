// Workload registry and contract checks without the harness: names and labels, and each
// workload driven on the CPU for a warm-up and two equal blocks of steps. Clean workloads and
// traps must be flat across the blocks (exact runtime counters, and the malloc heap where it
// can be read exactly) and return to the pre-Setup counters; zoo entries must show their
// planted class on the counter they name.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "leakbound/reports/report.h"
#include "leakbound/runtime/device.h"
#include "leakbound/workloads/workload.h"

#if defined(__SANITIZE_ADDRESS__)
#define LEAKBOUND_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LEAKBOUND_TEST_ASAN 1
#endif
#endif

namespace leakbound::workloads {
namespace {

using runtime::Device;
using runtime::MemoryStats;
using runtime::ProcessStats;

constexpr int kWarmupSteps = 16;
constexpr int kBlockSteps = 16;
constexpr std::size_t kHostBypassBlockBytes = 16384;  // zoo_host_malloc_bypass, per step

// Whether the malloc heap's in-use bytes (mallinfo2 uordblks) can be compared exactly. ASan's
// allocator does not feed mallinfo2. glibc's per-thread tcache holds freed chunks that mallinfo2
// counts as in use, so with it on the figure drifts by a few hundred bytes now and then until
// the cache is full (bounded, but not exact); ctest runs this binary with
// GLIBC_TUNABLES=glibc.malloc.tcache_count=0, which makes a clean workload's heap exactly flat.
bool HeapIsExact() {
#ifdef LEAKBOUND_TEST_ASAN
  return false;
#else
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return tunables != nullptr && std::strstr(tunables, "glibc.malloc.tcache_count=0") != nullptr;
#endif
}

bool IsSnakeCase(const std::string& name) {
  if (name.empty() || !std::islower(static_cast<unsigned char>(name.front()))) return false;
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  }
  return true;
}

TEST(Registry, NamesAreUniqueSnakeCaseAndFindable) {
  std::set<std::string> names;
  for (const Registration& r : AllWorkloads()) {
    EXPECT_TRUE(names.insert(r.info.name).second) << "duplicate name " << r.info.name;
    EXPECT_TRUE(IsSnakeCase(r.info.name)) << r.info.name;
    EXPECT_FALSE(r.info.description.empty()) << r.info.name;
    EXPECT_EQ(r.info.description.back(), '.') << r.info.name << ": one sentence";
    EXPECT_EQ(FindWorkload(r.info.name), &r);
    EXPECT_TRUE(r.make);
  }
  EXPECT_EQ(FindWorkload("no_such_workload"), nullptr);
  EXPECT_GE(names.size(), 26u);
}

TEST(Registry, ListsCleanThenTrapsThenZoo) {
  int rank = 0;
  for (const Registration& r : AllWorkloads()) {
    const int this_rank = r.info.kind == Kind::kClean ? 0 : r.info.kind == Kind::kTrap ? 1 : 2;
    EXPECT_GE(this_rank, rank) << r.info.name << " is out of order";
    rank = this_rank;
  }
}

TEST(Registry, ZooEntriesNameTheirClassAndCounter_CleanAndTrapsExpectPass) {
  int zoo = 0;
  int cpu_zoo_or_other = 0;
  for (const Registration& r : AllWorkloads()) {
    const WorkloadInfo& info = r.info;
    if (info.kind == Kind::kZoo) {
      ++zoo;
      EXPECT_NE(info.expectation, reports::kPass) << info.name;
      EXPECT_FALSE(info.detected_by.empty()) << info.name;
      EXPECT_EQ(info.name.rfind("zoo_", 0), 0u) << info.name;
    } else {
      EXPECT_EQ(info.expectation, reports::kPass) << info.name;
      EXPECT_TRUE(info.detected_by.empty()) << info.name;
    }
    if (info.kind == Kind::kTrap) {
      EXPECT_EQ(info.name.rfind("trap_", 0), 0u) << info.name;
    }
    // A peak budget exists exactly where peak-over-budget is the planted class.
    EXPECT_EQ(info.peak_budget_bytes.has_value(), info.expectation == reports::kPeakOverBudget)
        << info.name;
    // Only the GPU zoo entries need CUDA; they are registered in CUDA builds only.
    EXPECT_EQ(info.needs_cuda, info.name.rfind("zoo_cuda_", 0) == 0) << info.name;
    if (!info.needs_cuda) ++cpu_zoo_or_other;
  }
  EXPECT_EQ(zoo - (static_cast<int>(AllWorkloads().size()) - cpu_zoo_or_other), 12);
}

TEST(Registry, KindNames) {
  EXPECT_STREQ(KindName(Kind::kClean), "clean");
  EXPECT_STREQ(KindName(Kind::kTrap), "trap");
  EXPECT_STREQ(KindName(Kind::kZoo), "zoo");
}

std::size_t HeapInUse() { return mallinfo2().uordblks; }

// Process-wide runtime counters around one run: Setup, warm-up, two equal blocks, Teardown.
struct RunFigures {
  MemoryStats before_setup;
  MemoryStats after_block1;
  MemoryStats after_block2;
  MemoryStats after_teardown;
  std::int64_t peak_bytes = 0;  // process-wide peak from Setup to the end of block 2
  std::size_t heap_after_block1 = 0;
  std::size_t heap_after_block2 = 0;
  std::size_t sessions = 0;
  std::vector<std::int64_t> live_bytes_per_step;  // relative to before_setup
};

RunFigures RunBlocks(const Registration& registration) {
  RunFigures f;
  f.live_bytes_per_step.reserve(kWarmupSteps + 2 * kBlockSteps);  // no heap growth mid-run
  const Device cpu = Device::Cpu();
  runtime::CpuMemory().stats->ResetPeak();
  f.before_setup = ProcessStats(cpu);
  std::unique_ptr<Workload> workload = registration.make();
  workload->Setup(WorkloadContext{});
  f.sessions = workload->Sessions().size();
  std::int64_t step = 0;
  auto run_steps = [&](int count) {
    for (int i = 0; i < count; ++i) {
      workload->Step(step++);
      f.live_bytes_per_step.push_back(ProcessStats(cpu).live_bytes - f.before_setup.live_bytes);
    }
  };
  run_steps(kWarmupSteps);
  run_steps(kBlockSteps);
  f.after_block1 = ProcessStats(cpu);
  f.heap_after_block1 = HeapInUse();
  run_steps(kBlockSteps);
  f.after_block2 = ProcessStats(cpu);
  f.heap_after_block2 = HeapInUse();
  f.peak_bytes = f.after_block2.peak_bytes;
  workload->Teardown();
  workload.reset();
  f.after_teardown = ProcessStats(cpu);
  return f;
}

class EveryWorkload : public ::testing::TestWithParam<std::size_t> {
 protected:
  const Registration& registration() const { return AllWorkloads()[GetParam()]; }
};

TEST_P(EveryWorkload, RunsOnTheCpuAndShowsItsExpectation) {
  const WorkloadInfo& info = registration().info;
  if (info.needs_cuda) GTEST_SKIP() << info.name << " needs a CUDA device (GPU zoo entry)";
  const RunFigures f = RunBlocks(registration());
  EXPECT_GE(f.sessions, 1u) << "Sessions() must name the sessions to attribute";
  const bool growth = info.expectation == reports::kUnboundedGrowth;

  if (info.kind != Kind::kZoo || !growth || info.detected_by != "runtime.live_bytes") {
    // Everything but runtime-counter growth is flat on the runtime counters.
    EXPECT_EQ(f.after_block2.live_bytes, f.after_block1.live_bytes);
    EXPECT_EQ(f.after_block2.live_allocations, f.after_block1.live_allocations);
  }
  if (info.kind != Kind::kZoo) {
    EXPECT_EQ(f.after_teardown.live_bytes, f.before_setup.live_bytes) << "residue after Teardown";
    EXPECT_EQ(f.after_teardown.live_allocations, f.before_setup.live_allocations);
    if (HeapIsExact()) {
      EXPECT_EQ(f.heap_after_block2, f.heap_after_block1) << "malloc heap changed across blocks";
    }
    // Deterministic: a second run allocates the same bytes at every step.
    EXPECT_EQ(RunBlocks(registration()).live_bytes_per_step, f.live_bytes_per_step);
    return;
  }

  if (growth && info.detected_by == "runtime.live_bytes") {
    EXPECT_GT(f.after_block2.live_bytes, f.after_block1.live_bytes);
  } else if (growth && info.detected_by == "host.heap_bytes") {
    EXPECT_EQ(f.after_teardown.live_bytes, f.before_setup.live_bytes);
#ifndef LEAKBOUND_TEST_ASAN
    // At least half of what it malloc'd in block 2, whatever the tcache does meanwhile.
    EXPECT_GE(f.heap_after_block2, f.heap_after_block1 + kBlockSteps * kHostBypassBlockBytes / 2);
#endif
  } else if (info.expectation == reports::kNotReturnedToBaseline) {
    EXPECT_GT(f.after_teardown.live_bytes, f.before_setup.live_bytes);
  } else if (info.expectation == reports::kPeakOverBudget) {
    ASSERT_TRUE(info.peak_budget_bytes.has_value());
    // The budget is relative to the pre-Setup baseline.
    const double baseline = static_cast<double>(f.before_setup.live_bytes);
    EXPECT_GT(static_cast<double>(f.peak_bytes) - baseline, *info.peak_budget_bytes);
    EXPECT_LT(static_cast<double>(f.after_block2.live_bytes) - baseline, *info.peak_budget_bytes)
        << "the steady working set must fit the budget; only the spike crosses it";
    EXPECT_EQ(f.after_teardown.live_bytes, f.before_setup.live_bytes);
  } else {
    ADD_FAILURE() << info.name << ": no check for expectation " << info.expectation << " on "
                  << info.detected_by;
  }
}

INSTANTIATE_TEST_SUITE_P(Workloads, EveryWorkload,
                         ::testing::Range<std::size_t>(0, AllWorkloads().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& param) {
                           return AllWorkloads()[param.param].info.name;
                         });

}  // namespace
}  // namespace leakbound::workloads
