// Judge on synthetic traces: the GPU verdict paths (allocator bypass, library handles, pool
// fragmentation, reconciliation) with CUPTI active and inactive, inconclusive and failed
// recordings, and trace files read back exactly or refused with a clear error.
#include "leakbound/harness/judge.h"

#include <gtest/gtest.h>

#include <functional>

#include "leakbound/reports/format.h"

namespace leakbound::harness {
namespace {

constexpr int kWarmup = 4, kBlocks = 4, kSteps = 8;
constexpr int kTotal = kWarmup + kBlocks * kSteps;

TraceCounter Counter(const std::string& name, const std::string& probe,
                     const std::function<double(int)>& at, bool exact = true) {
  TraceCounter c;
  c.name = name;
  c.unit = name.ends_with("allocations") ? "count" : "bytes";
  c.exact = exact;
  c.probe = probe;
  for (int i = 0; i < kTotal; ++i) c.values.push_back(at(i));
  c.baseline = at(0);
  c.final_value = at(0);
  return c;
}

// A GPU run: the runtime's live bytes flat at 1 MiB; CUPTI counters as given.
Trace GpuTrace(bool cupti_active, const std::function<double(int)>& device,
               const std::function<double(int)>& static_bytes,
               const std::function<double(int)>& pool_reserved,
               const std::function<double(int)>& pool_bytes) {
  Trace t;
  t.subject.name = "synthetic";
  t.subject.kind = "clean";
  t.warmup_steps = kWarmup;
  t.blocks = kBlocks;
  t.steps_per_block = kSteps;
  t.probes = {{"runtime", "active"},
              {"cupti", cupti_active ? "active" : "unavailable: no CUDA driver (error 35)"}};
  t.counters.push_back(Counter("runtime.live_bytes", "runtime", [](int) { return 1 << 20; }));
  t.counters.push_back(Counter("cupti.device_bytes", "cupti", device));
  t.counters.push_back(Counter("cupti.pool_bytes", "cupti", pool_bytes));
  t.counters.push_back(Counter("cupti.pool_reserved_bytes", "cupti", pool_reserved));
  t.counters.push_back(Counter("cupti.static_bytes", "cupti", static_bytes));
  t.step_ns.assign(kTotal, 1000);
  t.probe_ns.assign(kTotal, 10);
  return t;
}

const reports::CounterVerdict* Find(const reports::WorkloadResult& r, const std::string& name) {
  for (const auto& c : r.counters)
    if (c.counter == name) return &c;
  return nullptr;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

auto Flat(double v) {
  return [v](int) { return v; };
}
auto Growing(double base, double per_step) {
  return [=](int i) { return base + per_step * i; };
}

TEST(Judge, AllocatorBypass_CuptiActive_FlagsDeviceGrowthTheRuntimeDoesNotSee) {
  const Trace t = GpuTrace(true, Growing(1 << 20, 4096), Flat(0), Flat(0), Flat(0));
  const auto r = Judge(t);
  EXPECT_EQ(r.verdict, reports::kUnboundedGrowth) << r.evidence;
  const auto* device = Find(r, "cupti.device_bytes");
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->verdict, reports::kUnboundedGrowth);
  EXPECT_EQ(device->slope_per_step, 4096);
  EXPECT_TRUE(Contains(device->evidence, "allocator-bypass")) << device->evidence;
  // Reconciliation is derived from the active ledger: others own 4096 B more each step.
  const auto* others = Find(r, "reconcile.owned_by_others_bytes");
  ASSERT_NE(others, nullptr);
  EXPECT_EQ(others->verdict, reports::kUnboundedGrowth);
  EXPECT_EQ(others->slope_per_step, 4096);
}

TEST(Judge, AllocatorBypass_CuptiInactive_NotJudgedAndNoReconciliation) {
  const Trace t = GpuTrace(false, Growing(1 << 20, 4096), Flat(0), Flat(0), Flat(0));
  const auto r = Judge(t);
  EXPECT_EQ(r.verdict, reports::kPass) << r.evidence;
  const auto* device = Find(r, "cupti.device_bytes");
  ASSERT_NE(device, nullptr);
  EXPECT_FALSE(device->judged);
  EXPECT_TRUE(Contains(device->evidence, "unavailable: no CUDA driver")) << device->evidence;
  EXPECT_EQ(Find(r, "reconcile.owned_by_others_bytes"), nullptr);
}

TEST(Judge, LibraryHandles_CuptiActive_StaticGrowthNamedAsHandles) {
  const Trace t = GpuTrace(true, Growing(1 << 20, 512), Growing(0, 256), Flat(0), Flat(0));
  const auto r = Judge(t);
  EXPECT_EQ(r.verdict, reports::kUnboundedGrowth);
  const auto* statics = Find(r, "cupti.static_bytes");
  ASSERT_NE(statics, nullptr);
  EXPECT_EQ(statics->verdict, reports::kUnboundedGrowth);
  EXPECT_TRUE(Contains(statics->evidence, "library-handles")) << statics->evidence;
}

TEST(Judge, LibraryHandles_CuptiInactive_Pass) {
  const Trace t = GpuTrace(false, Growing(1 << 20, 512), Growing(0, 256), Flat(0), Flat(0));
  EXPECT_EQ(Judge(t).verdict, reports::kPass);
}

TEST(Judge, PoolFragmentation_CuptiActive_ReservedGrowsUsedFlat) {
  const Trace t = GpuTrace(true, Flat(1 << 20), Flat(0), Growing(2 << 20, 65536), Flat(1 << 20));
  const auto r = Judge(t);
  EXPECT_EQ(r.verdict, reports::kPoolFragmentation) << r.evidence;
  const auto* reserved = Find(r, "cupti.pool_reserved_bytes");
  ASSERT_NE(reserved, nullptr);
  EXPECT_EQ(reserved->verdict, reports::kPoolFragmentation);
  EXPECT_TRUE(Contains(reserved->evidence, "utilised bytes stayed bounded")) << reserved->evidence;
}

// Reserved bytes growing beside "in use" bytes that are flat but not judged (informational) is
// growth, not fragmentation: only a judged "in use" counter can say the pool does not reuse.
TEST(Judge, PoolFragmentation_UsedNotJudged_StaysGrowth) {
  for (const bool used_judged : {true, false}) {
    Trace t = GpuTrace(false, Flat(1 << 20), Flat(0), Flat(2 << 20), Flat(1 << 20));
    t.counters.push_back(Counter("cuda.pool_reserved_bytes", "runtime", Growing(2 << 20, 65536)));
    t.counters.push_back(Counter("cuda.pool_used_bytes", "runtime", Flat(1 << 20)));
    t.counters.back().judged = used_judged;
    const auto r = Judge(t);
    const auto* reserved = Find(r, "cuda.pool_reserved_bytes");
    ASSERT_NE(reserved, nullptr);
    EXPECT_EQ(reserved->verdict,
              used_judged ? reports::kPoolFragmentation : reports::kUnboundedGrowth)
        << reserved->evidence;
  }
}

// The summary's peak is the peak counter's (sampled between steps), not the largest step sample;
// allocations per step are over every measured step, the first included.
TEST(Judge, Summary_PeakFromItsPeakCounter_AllocationsPerStepExact) {
  Trace t = GpuTrace(false, Flat(1 << 20), Flat(0), Flat(2 << 20), Flat(1 << 20));
  TraceCounter peak = Counter("runtime.peak_bytes", "runtime", Flat(5 << 20));
  peak.judged = false;
  peak.peak_of = "runtime.live_bytes";
  t.counters.push_back(peak);
  TraceCounter count = Counter("runtime.allocation_count", "runtime", Growing(0, 10));
  count.judged = false;
  t.counters.push_back(count);
  auto r = Judge(t);
  EXPECT_EQ(r.peak_bytes, (5 << 20) - (1 << 20)) << r.evidence;
  EXPECT_EQ(r.allocations_per_step, 10.0);
  t.warmup_steps = 0;
  t.blocks = kTotal / kSteps;
  t.counters.back().values.resize(static_cast<std::size_t>(t.blocks * kSteps));
  for (TraceCounter& c : t.counters) c.values.resize(t.counters.back().values.size());
  t.step_ns.resize(t.counters.back().values.size());
  t.probe_ns.resize(t.counters.back().values.size());
  r = Judge(t);
  EXPECT_EQ(r.allocations_per_step, 10.0) << r.evidence;
}

TEST(Judge, PoolFragmentation_CuptiInactive_Pass) {
  const Trace t = GpuTrace(false, Flat(1 << 20), Flat(0), Growing(2 << 20, 65536), Flat(1 << 20));
  EXPECT_EQ(Judge(t).verdict, reports::kPass);
}

TEST(Judge, Reconciliation_FlatLedger_PassesWithOthersOwningTheContext) {
  // The ledger sees 3 MiB: 1 MiB is the runtime's, 2 MiB someone else's (context, libraries).
  const Trace t = GpuTrace(true, Flat(3 << 20), Flat(0), Flat(0), Flat(0));
  const auto r = Judge(t);
  EXPECT_EQ(r.verdict, reports::kPass) << r.evidence;
  const auto* others = Find(r, "reconcile.owned_by_others_bytes");
  ASSERT_NE(others, nullptr);
  EXPECT_EQ(others->verdict, reports::kPass);
  EXPECT_EQ(others->baseline, 2 << 20);
}

// A Runner's failed recording is an error, never judged, even with every sample there (its
// final one may come from a teardown cut short), also when its series would show growth.
TEST(Judge, FailedRecording_IsErrorWithItsReason) {
  Trace t = GpuTrace(true, Growing(1 << 20, 4096), Flat(0), Flat(0), Flat(0));
  t.error = "the workload threw: boom";
  const auto r = Judge(t);
  EXPECT_EQ(r.verdict, reports::kError);
  EXPECT_EQ(r.evidence, "the workload threw: boom");
  EXPECT_TRUE(r.counters.empty());
  EXPECT_FALSE(r.met_expectation);
}

// A watched program killed after its steps had leaked (the one the kernel kills is the one that
// leaks): the leak is the finding, and the evidence names the ending first. With no leak in what
// arrived, the ending is the finding; with too few steps, nothing is judged.
TEST(Judge, FailedRecording_WithALeakInWhatArrived_IsTheLeak) {
  Trace t = GpuTrace(true, Growing(1 << 20, 4096), Flat(0), Flat(0), Flat(0));
  t.subject.kind = "watched";
  t.error = "the program was killed by SIGSEGV after 40 steps";
  auto r = Judge(t);
  EXPECT_EQ(r.verdict, reports::kUnboundedGrowth) << r.evidence;
  EXPECT_TRUE(r.evidence.starts_with("the program was killed by SIGSEGV after 40 steps; judged on "
                                     "what arrived: ")) << r.evidence;
  Trace flat = GpuTrace(true, Flat(0), Flat(0), Flat(0), Flat(0));
  flat.subject.kind = "watched";
  flat.error = t.error;
  r = Judge(flat);
  EXPECT_EQ(r.verdict, reports::kError);
  EXPECT_TRUE(r.evidence.starts_with(t.error + "; no leak in what arrived (")) << r.evidence;
  for (auto& c : flat.counters) c.values.resize(kWarmup + kSteps);
  r = Judge(flat);
  EXPECT_EQ(r.verdict, reports::kError);
  EXPECT_EQ(r.evidence, t.error + "; the series are what arrived");
  EXPECT_TRUE(r.counters.empty());
}

TEST(Judge, EndedEarlyWithOneBlock_IsInconclusive) {
  Trace t = GpuTrace(true, Flat(0), Flat(0), Flat(0), Flat(0));
  t.blocks = 1;
  for (auto& c : t.counters) c.values.resize(kWarmup + kSteps);
  t.ended_early = "the program exited after 12 steps; 2 blocks of 8 steps after warm-up are needed";
  const auto r = Judge(t);
  EXPECT_EQ(r.verdict, reports::kInconclusive);
  EXPECT_TRUE(Contains(r.evidence, "exited after 12 steps")) << r.evidence;
}

// The attribution's order: a row that rose at every block end (it kept survivors from every
// block) comes before a larger one that jumped once, and rates are per step between the ends.
TEST(Judge, Attribution_RowRisingAtEveryBlockEnd_ComesBeforeAOneTimeJump) {
  Trace t = GpuTrace(false, Flat(0), Flat(0), Flat(0), Flat(0));
  const int first = kWarmup + kSteps - 1;
  for (int b = 0; b < 3; ++b) {
    const int end = first + b * kSteps;
    const std::uint64_t creep = 100 + 800 * static_cast<std::uint64_t>(b);
    const std::uint64_t jump = b == 0 ? 0 : 4 << 20;  // one 4 MiB buffer, kept from block 2 on
    t.outstanding.push_back({end,
                             {{"jump", "heap", "none", jump, b == 0 ? 0u : 1u, end, end},
                              {"creep", "heap", "none", creep, 1 + 8u * b, kWarmup, end},
                              {"steady", "heap", "none", 1 << 20, 1, 0, 0}}});
  }
  const auto r = Judge(t);
  ASSERT_EQ(r.attribution.size(), 3u);
  EXPECT_EQ(r.attribution[0].op, "creep");
  EXPECT_EQ(r.attribution[0].rose_at, 2);
  EXPECT_EQ(r.attribution[0].transitions, 2);
  EXPECT_DOUBLE_EQ(r.attribution[0].bytes_per_step, 1600.0 / (2 * kSteps));
  EXPECT_EQ(r.attribution[1].op, "jump");
  EXPECT_EQ(r.attribution[1].rose_at, 1);
  EXPECT_EQ(r.attribution[2].op, "steady");
  EXPECT_EQ(r.attribution[2].rose_at, 0);
  EXPECT_EQ(r.attribution[2].bytes_per_step, 0);
}

// Two call sites under one name (two return addresses on one source line) are one row, judged on
// their sum.
TEST(Judge, Attribution_RowsSharingAName_AreMergedBeforeTheirGrowthIsRead) {
  Trace t = GpuTrace(false, Flat(0), Flat(0), Flat(0), Flat(0));
  const int first = kWarmup + kSteps - 1;
  for (int b = 0; b < 3; ++b) {
    const int end = first + b * kSteps;
    OutstandingSnapshot snapshot{end, {{"?", "heap", "none", 1000, 1, 0, 0}}};
    if (b > 0) snapshot.rows.push_back({"?", "heap", "none", 5u * b, 1u * b, kWarmup, end});
    t.outstanding.push_back(snapshot);
  }
  const auto r = Judge(t);
  ASSERT_EQ(r.attribution.size(), 1u);
  EXPECT_EQ(r.attribution[0].bytes, 1010u);
  EXPECT_EQ(r.attribution[0].allocations, 3u);
  EXPECT_EQ(r.attribution[0].rose_at, 2);
  EXPECT_DOUBLE_EQ(r.attribution[0].bytes_per_step, 10.0 / (2 * kSteps));
}

// A row's own census (a watched call site's, SITE_CENSUS) at each block end: survivors by block
// of birth, cohorts one per block from `from_block` (0-based), plus the warm-up's.
std::vector<CensusCohort> RowCensusAt(int block_end, const std::vector<std::uint64_t>& kept,
                                      int from_block = 0) {
  std::vector<CensusCohort> cohorts;
  if (from_block == 0) cohorts.push_back({-1, 512, 4});
  for (int k = from_block; k <= block_end; ++k) {
    cohorts.push_back({kWarmup + k * kSteps, kept[static_cast<std::size_t>(k)],
                       kept[static_cast<std::size_t>(k)] / 32});
  }
  return cohorts;
}

// The census decides whether a row grows. "ws": a working set whose live bytes happened to rise at
// every block end, survivors only from the block in flight: not growing. "leak": 24 B/step from
// every block, beside a working set whose fall at one block end used to hide it (rose at 2 of 3):
// growing, at its census rate, first. "old": no census, rose at every block end: the rule without
// one.
TEST(Judge, Attribution_RowCensus_DecidesGrowthInsteadOfTheRise) {
  Trace t = GpuTrace(false, Flat(0), Flat(0), Flat(0), Flat(0));
  const std::uint64_t per_block = 24 * kSteps;
  const std::uint64_t ws_live[] = {1000, 1200, 1300, 1700};
  const std::uint64_t leak_live[] = {4000, 3000, 5000, 6000};  // fell once: a working set beside
  for (int b = 0; b < kBlocks; ++b) {
    const int end = kWarmup + (b + 1) * kSteps - 1;
    std::vector<std::uint64_t> ws_kept(kBlocks, 0), leak_kept(kBlocks, per_block);
    ws_kept[static_cast<std::size_t>(b)] = ws_live[b];  // only the block in flight
    OutstandingSnapshot snapshot{end, {}};
    OutstandingRow ws{"ws", "heap", "none", ws_live[b], 10, kWarmup, end};
    ws.census = RowCensusAt(b, ws_kept);
    OutstandingRow leak{"leak", "heap", "none", leak_live[b], 40, kWarmup, end};
    leak.census = RowCensusAt(b, leak_kept);
    snapshot.rows = {ws, leak, {"old", "heap", "none", 100u * (b + 1), 1u + b, kWarmup, end}};
    t.outstanding.push_back(snapshot);
  }
  const auto r = Judge(t);
  ASSERT_EQ(r.attribution.size(), 3u);
  EXPECT_EQ(r.attribution[0].op, "leak");
  EXPECT_TRUE(reports::Grows(r.attribution[0]));
  EXPECT_EQ(r.attribution[0].census, "growth");
  EXPECT_EQ(r.attribution[0].rose_at, 2);
  EXPECT_DOUBLE_EQ(r.attribution[0].bytes_per_step, 24.0);
  EXPECT_EQ(r.attribution[0].survivor_bytes.size(), static_cast<std::size_t>(kBlocks));
  EXPECT_EQ(r.attribution[1].op, "old");  // 100 B a block: 12.5 B/step
  EXPECT_TRUE(reports::Grows(r.attribution[1]));
  EXPECT_EQ(r.attribution[1].census, "");
  EXPECT_EQ(r.attribution[2].op, "ws");
  EXPECT_EQ(r.attribution[2].rose_at, 3);
  EXPECT_FALSE(reports::Grows(r.attribution[2]));
  EXPECT_EQ(r.attribution[2].census, "bounded");
}

// A census that began after block 1 (the site was asked for late) is judged over the blocks it
// covers whole, and says from which; with fewer than three such blocks, the rise decides.
TEST(Judge, Attribution_RowCensusStartedLate_IsJudgedOnTheBlocksItCovers) {
  for (const int from : {1, 2}) {
    Trace t = GpuTrace(false, Flat(0), Flat(0), Flat(0), Flat(0));
    for (int b = 0; b < kBlocks; ++b) {
      const int end = kWarmup + (b + 1) * kSteps - 1;
      OutstandingRow row{"late", "heap", "none", 64u * (b + 1), 2u * (b + 1), kWarmup, end};
      if (b >= from) row.census = RowCensusAt(b, std::vector<std::uint64_t>(kBlocks, 64), from);
      t.outstanding.push_back({end, {row}});
    }
    const auto r = Judge(t);
    ASSERT_EQ(r.attribution.size(), 1u);
    if (from == 1) {
      EXPECT_EQ(r.attribution[0].census, "growth");
      EXPECT_EQ(r.attribution[0].census_from_block, 2);
      EXPECT_EQ(r.attribution[0].survivor_bytes.size(), 3u);
      EXPECT_DOUBLE_EQ(r.attribution[0].bytes_per_step, 8.0);
    } else {
      EXPECT_EQ(r.attribution[0].census, "");  // two blocks: the census cannot decide
      EXPECT_EQ(r.attribution[0].rose_at, 3);
    }
    EXPECT_TRUE(reports::Grows(r.attribution[0]));
  }
}

TEST(TraceFile, RoundTrip_IsExact) {
  TraceFile file;
  file.meta.device_class = "cpu";
  file.meta.tool_version = "0.1.0";
  file.noise_floors["host.malloc_arena_bytes"] = {64.5, 65536};
  Trace t = GpuTrace(true, Growing(1 << 20, 4096), Flat(0), Flat(0), Flat(0));
  t.outstanding.push_back({11, {{"matmul", "value", "step", 4096, 2, 3, 11}}});
  t.outstanding.back().rows[0].census = {{-1, 100, 1}, {4, 4096, 2}};
  t.peak_bound_bytes = 123;
  t.subject.peak_budget_bytes = 8 << 20;
  t.confirmation_blocks = 0;
  file.traces.push_back(t);
  const TraceFile back = TraceFileFromJson(TraceFileToJson(file), "memory");
  EXPECT_EQ(back, file);
  EXPECT_EQ(JudgeTraceFile(back).workloads[0], Judge(t, {file.noise_floors}));
}

TEST(TraceFile, Malformed_AreRefusedNamingTheField) {
  TraceFile file;
  file.traces.push_back(GpuTrace(true, Flat(0), Flat(0), Flat(0), Flat(0)));
  std::string text = TraceFileToJson(file);
  auto expect_error = [](const std::string& input, const std::string& part) {
    try {
      TraceFileFromJson(input, "t.json");
      ADD_FAILURE() << "accepted: " << input.substr(0, 80);
    } catch (const TraceError& e) {
      EXPECT_TRUE(Contains(e.what(), part)) << e.what();
    }
  };
  expect_error("{", "not a JSON trace");
  expect_error("{\"schema_version\": 1}", "$.format");
  std::string wrong_blocks = text;
  const auto at = wrong_blocks.find("\"blocks\": 4");
  ASSERT_NE(at, std::string::npos);
  wrong_blocks.replace(at, 11, "\"blocks\": 5");
  expect_error(wrong_blocks, "samples but the schedule");
  std::string bad_class = text;
  const auto ex = bad_class.find("\"expectation\": \"PASS\"");
  ASSERT_NE(ex, std::string::npos);
  bad_class.replace(ex, 21, "\"expectation\": \"leaky\"");
  expect_error(bad_class, "not one of PASS");
}


// Recorded traces of real programs under `leakbound watch` (watch/tests/traces): the foreign-trace
// rules (docs/verdicts.md) judge them without the program.
reports::WorkloadResult JudgeRecorded(const std::string& file) {
  const TraceFile f = LoadTraceFile(std::string(LEAKBOUND_SOURCE_DIR) + "/watch/tests/traces/" + file);
  EXPECT_EQ(f.traces.size(), 1u);
  return JudgeTraceFile(f).workloads.at(0);
}

TEST(JudgeRecorded, TorchCleanMlp_Passes) {
  const auto r = JudgeRecorded("torch_mlp_clean_step_on.json");
  EXPECT_EQ(r.verdict, reports::kPass) << r.evidence;
}

TEST(JudgeRecorded, TorchSummedLoss_IsGrowthOnTheHostHeap) {
  const auto r = JudgeRecorded("torch_mlp_sum_loss_step_on.json");
  EXPECT_EQ(r.verdict, reports::kUnboundedGrowth) << r.evidence;
  const auto* heap = Find(r, "host.heap_bytes");
  ASSERT_NE(heap, nullptr);
  EXPECT_EQ(heap->verdict, reports::kUnboundedGrowth);
  EXPECT_GT(heap->slope_per_step, 1000) << heap->evidence;
  EXPECT_GT(r.steady_live_bytes, 0) << "the summary reads the host heap of a watched program";
}

TEST(JudgeRecorded, PythonOneTimeRise_IsNotGrowth) {
  const auto r = JudgeRecorded("python_one_time_rise.json");
  EXPECT_EQ(r.verdict, reports::kPass) << r.evidence;
}

TEST(Judge, WatchedTrace_ResidueIsReportedNotJudged) {
  Trace t = GpuTrace(false, Flat(0), Flat(0), Flat(0), Flat(0));
  t.subject.kind = "watched";
  t.counters[0].final_value += 32;
  const auto r = Judge(t);
  EXPECT_EQ(r.verdict, reports::kPass) << r.evidence;
  EXPECT_TRUE(Contains(Find(r, "runtime.live_bytes")->evidence, "return to baseline not judged"));
  t.subject.kind = "clean";
  EXPECT_EQ(Judge(t).verdict, reports::kNotReturnedToBaseline);
}

TEST(Judge, NoCounterJudged_IsInconclusiveNamingTheProbes) {
  Trace t = GpuTrace(false, Flat(0), Flat(0), Flat(0), Flat(0));
  t.counters.erase(t.counters.begin());  // only the inactive CUPTI counters remain
  const auto r = Judge(t);
  EXPECT_EQ(r.verdict, reports::kInconclusive);
  EXPECT_TRUE(Contains(r.evidence, "cupti: unavailable: no CUDA driver")) << r.evidence;
}


TEST(Judge, TorchReconciliation_LedgerGrowsOutsideTheCachingAllocator_IsFlagged) {
  // PyTorch's reserve is flat at 2 MiB; the ledger grows 4 KiB/step: something bypasses it.
  Trace t = GpuTrace(true, Growing(2 << 20, 4096), Flat(0), Flat(0), Flat(0));
  t.subject.kind = "watched";
  t.counters.erase(t.counters.begin());  // no leakbound runtime in a watched program
  t.probes.push_back({"torch", "active"});
  t.counters.push_back(Counter("torch.reserved_bytes", "torch", Flat(2 << 20)));
  const auto r = Judge(t);
  const auto* outside = Find(r, "reconcile.outside_torch_bytes");
  ASSERT_NE(outside, nullptr);
  EXPECT_EQ(outside->verdict, reports::kUnboundedGrowth);
  EXPECT_EQ(outside->slope_per_step, 4096);
  EXPECT_EQ(Find(r, "torch.reserved_bytes")->verdict, reports::kPass);
  t.probes.back().state = "unavailable: torch.cuda is not available";
  EXPECT_EQ(Find(Judge(t), "reconcile.outside_torch_bytes"), nullptr);
}


TEST(Judge, PartlyUnavailableProbe_StillJudgesWhatItMeasures) {
  Trace t = GpuTrace(true, Growing(1 << 20, 4096), Flat(0), Flat(0), Flat(0));
  t.probes[1].state = "partly unavailable: pool attributes cannot be read";
  EXPECT_EQ(Find(Judge(t), "cupti.device_bytes")->verdict, reports::kUnboundedGrowth);
}

TEST(TraceFile, UnknownKindOrUnlistedProbe_AreRefused) {
  TraceFile file;
  file.traces.push_back(GpuTrace(true, Flat(0), Flat(0), Flat(0), Flat(0)));
  file.traces[0].subject.kind = "watch";
  EXPECT_THROW(TraceFileFromJson(TraceFileToJson(file), "t.json"), TraceError);
  file.traces[0].subject.kind = "watched";
  file.traces[0].counters[0].probe = "nowhere";
  try {
    TraceFileFromJson(TraceFileToJson(file), "t.json");
    ADD_FAILURE() << "a counter of an unlisted probe was accepted";
  } catch (const TraceError& e) {
    EXPECT_TRUE(Contains(e.what(), "which is not in `probes`")) << e.what();
  }
}

}  // namespace
}  // namespace leakbound::harness

namespace leakbound::harness {
namespace {

// A host-heap trace with a census at every block end: bytes born in each block and kept.
Trace CensusTrace(const std::vector<std::uint64_t>& kept_per_block) {
  Trace t;
  t.subject.name = "census";
  t.subject.kind = "watched";
  t.warmup_steps = kWarmup;
  t.blocks = kBlocks;
  t.steps_per_block = kSteps;
  t.probes = {{"host", "active"}};
  t.counters.push_back(Counter("host.heap_bytes", "host", Flat(1 << 20)));
  t.step_ns.assign(kTotal, 1000);
  t.probe_ns.assign(kTotal, 10);
  for (int b = 0; b < kBlocks; ++b) {
    CensusSnapshot s{"host.heap_bytes", kWarmup + (b + 1) * kSteps - 1, {{-1, 4096, 3}}};
    for (int k = 0; k <= b; ++k) {
      s.cohorts.push_back({kWarmup + k * kSteps, kept_per_block[static_cast<std::size_t>(k)], 1});
    }
    t.census.push_back(s);
  }
  return t;
}

TEST(TraceFile, Census_RoundTripsWithItsTail) {
  TraceFile file;
  Trace t = CensusTrace({64, 64, 64, 64});
  t.tail_steps = 3;
  for (TraceCounter& c : t.counters) c.values.insert(c.values.end(), 3, 1 << 20);
  t.step_ns.insert(t.step_ns.end(), 3, 1000);
  t.probe_ns.insert(t.probe_ns.end(), 3, 10);
  file.traces.push_back(t);
  const TraceFile back = TraceFileFromJson(TraceFileToJson(file), "memory");
  EXPECT_EQ(back, file);
  const reports::WorkloadResult r = JudgeTraceFile(back).workloads[0];
  EXPECT_EQ(r.verdict, reports::kUnboundedGrowth) << r.evidence;
  EXPECT_EQ(r.series[0].values.size(), static_cast<std::size_t>(kTotal + 3));  // the tail is shown
  EXPECT_EQ(Find(r, "host.heap_bytes")->survivor_bytes, (std::vector<double>{64, 64, 64, 64}));
}

TEST(TraceFile, MalformedCensus_IsRefusedNamingTheField) {
  auto expect_error = [](const Trace& t, const std::string& part) {
    TraceFile file;
    file.traces.push_back(t);
    try {
      TraceFileFromJson(TraceFileToJson(file), "t.json");
      ADD_FAILURE() << "accepted a census that should be refused (" << part << ")";
    } catch (const TraceError& e) {
      EXPECT_TRUE(Contains(e.what(), part)) << e.what();
    }
  };
  Trace unknown = CensusTrace({1, 1, 1, 1});
  unknown.census[0].counter = "host.nothing";
  expect_error(unknown, "not in `counters`");
  Trace order = CensusTrace({1, 1, 1, 1});
  std::swap(order.census[0].cohorts[0], order.census[0].cohorts[1]);
  expect_error(order, "born in increasing steps");
  Trace future = CensusTrace({1, 1, 1, 1});
  future.census[0].cohorts.back().born_step = future.census[0].step + 1;
  expect_error(future, "born_step");
  Trace twice = CensusTrace({1, 1, 1, 1});
  twice.census[1].step = twice.census[0].step;
  expect_error(twice, "censuses are in step order");
}

TEST(TraceFile, SchemaOneTrace_IsJudgedByBlockRangesAndSaysSo) {
  TraceFile file;
  Trace t = CensusTrace({0, 0, 0, 0});
  t.census.clear();
  t.subject.kind = "clean";
  file.traces.push_back(t);
  std::string text = TraceFileToJson(file);
  const auto at = text.find("\"schema_version\": 2");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 19, "\"schema_version\": 1");
  const TraceFile back = TraceFileFromJson(text, "old.json");
  EXPECT_EQ(back.traces[0].schema_version, 1);
  const reports::WorkloadResult r = JudgeTraceFile(back).workloads[0];
  EXPECT_EQ(r.verdict, reports::kPass);
  EXPECT_TRUE(Contains(Find(r, "host.heap_bytes")->evidence, "schema-1 trace has no census"));
  std::string future = text;
  future.replace(at, 19, "\"schema_version\": 3");
  EXPECT_THROW(TraceFileFromJson(future, "new.json"), TraceError);
}

TEST(Judge, WatchedCensus_OneOlderBlockOnly_IsInconclusiveNotPass) {
  // The leak that fired twice: once in block 1, once too late to age. Nothing can confirm it.
  const reports::WorkloadResult r = Judge(CensusTrace({1024, 0, 0, 1024}), {});
  EXPECT_EQ(r.verdict, reports::kInconclusive) << r.evidence;
  EXPECT_TRUE(Contains(r.evidence, "run at least")) << r.evidence;
}

TEST(Judge, CensusPass_TopLineDoesNotClaimFlatOrBaseline) {
  const reports::WorkloadResult r = Judge(CensusTrace({0, 0, 0, 5000}), {});
  EXPECT_EQ(r.verdict, reports::kPass);
  EXPECT_TRUE(Contains(r.evidence, "return to baseline not judged")) << r.evidence;
  EXPECT_FALSE(Contains(r.evidence, "back at its baseline")) << r.evidence;
}

}  // namespace
}  // namespace leakbound::harness

namespace leakbound::harness {
namespace {

TEST(TraceFile, InconclusiveWatchTrace_IsReadBackAndJudgedAgain) {
  // What `watch` writes when too few steps arrived: no blocks, no block length, the reason.
  Trace t = CensusTrace({0, 0, 0, 0});
  t.census.clear();
  t.warmup_steps = kTotal;
  t.blocks = 0;
  t.steps_per_block = 0;
  t.ended_early = "only 36 steps arrived; judging needs at least 40";
  TraceFile file;
  file.traces.push_back(t);
  const TraceFile back = TraceFileFromJson(TraceFileToJson(file), "inconclusive.json");
  EXPECT_EQ(back, file);
  const reports::WorkloadResult r = JudgeTraceFile(back).workloads[0];
  EXPECT_EQ(r.verdict, reports::kInconclusive);
  EXPECT_TRUE(Contains(r.evidence, "only 36 steps arrived")) << r.evidence;
}

}  // namespace
}  // namespace leakbound::harness

namespace leakbound::harness {
namespace {

TEST(Judge, CountCounter_FollowsItsBytesCensus_StrayBlocksDoNotMakeItOneTime) {
  // One 2-byte block left in block 1: below the bytes floor (0.5 B/step x 8 steps = 4 B), so the
  // bytes census says bounded; the count census alone (floor: one block) would say one-time.
  Trace t = CensusTrace({2, 0, 0, 0});
  t.counters.push_back(Counter("host.heap_allocations", "host", Flat(100)));
  const reports::WorkloadResult r = Judge(t, {});
  EXPECT_EQ(Find(r, "host.heap_bytes")->verdict, reports::kPass);
  EXPECT_EQ(Find(r, "host.heap_allocations")->verdict, reports::kPass)
      << Find(r, "host.heap_allocations")->evidence;
  EXPECT_EQ(r.verdict, reports::kPass) << r.evidence;
}

TEST(Judge, RuntimeCensusNotAccountingForTheCounter_IsNotUsed) {
  Trace t = CensusTrace({64, 64, 64, 64});
  t.subject.kind = "clean";
  t.counters[0].name = "runtime.live_bytes";
  t.counters[0].probe = "runtime";
  t.probes = {{"runtime", "active"}};
  for (CensusSnapshot& s : t.census) s.counter = "runtime.live_bytes";
  // The census holds 4 KiB + 256 B where the counter rose 0 B above its baseline: sessions the
  // census cannot see hold the rest (here: less), so the census is not used.
  t.counters[0].values.back() += 1;
  t.counters[0].final_value = t.counters[0].values.front();
  const reports::WorkloadResult r = Judge(t, {});
  const reports::CounterVerdict* v = Find(r, "runtime.live_bytes");
  EXPECT_TRUE(v->survivor_bytes.empty());
  EXPECT_TRUE(Contains(v->evidence, "the tracked sessions hold")) << v->evidence;
}

TEST(Judge, TwoBlocks_CensusDecidesNothingAndTheSummaryDoesNotClaimIt) {
  Trace t = CensusTrace({0, 0, 0, 0});
  t.blocks = 2;
  t.warmup_steps = kTotal - 2 * kSteps;
  t.census.clear();
  t.census.push_back({"host.heap_bytes", kTotal - 1, {{-1, 0, 0}}});
  const reports::WorkloadResult r = Judge(t, {});
  EXPECT_TRUE(Find(r, "host.heap_bytes")->survivor_bytes.empty());
  EXPECT_FALSE(Contains(r.evidence, "census of survivors")) << r.evidence;
}

}  // namespace
}  // namespace leakbound::harness
