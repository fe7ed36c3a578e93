// leakbound's own benchmarks: the MLP training step three ways (WithStep, explicit release, no
// reclamation) and WithStep against explicit release paired step by step; the WithForward
// evaluation pass; scope exit against tape length next to the bare free of the same buffers
// (the physical floor); probe sampling; allocation throughput of the host resource alone and
// under each adaptor. Times are wall clock: OpenBLAS runs on kThreads threads that a
// per-thread CPU clock would not see.
#include <benchmark/benchmark.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks.h"
#include "fixtures.h"
#include "leakbound/harness/probes.h"
#include "leakbound/runtime/device.h"
#include "leakbound/runtime/ops.h"
#include "memory_manager.h"

namespace leakbound::bench {
namespace {

using benchmark::Counter;

// Peak counters of a training benchmark: the session's measured peak (statistics adaptor) over
// the analytic minimum, in total and for the transient (per-step) part alone.
void ReportStepPeak(benchmark::State& state, const MlpShape& shape,
                    const runtime::MemoryStats& stats, std::int64_t persistent_live) {
  const MinimumBytes minimum = AnalyticMinimum(shape);
  const auto peak = static_cast<double>(stats.peak_bytes);
  state.counters["peak_bytes"] = peak;
  state.counters["min_bytes"] = static_cast<double>(minimum.total());
  state.counters["peak_over_min"] = peak / static_cast<double>(minimum.total());
  state.counters["transient_peak_bytes"] = static_cast<double>(stats.peak_bytes - persistent_live);
  state.counters["transient_min_bytes"] = static_cast<double>(minimum.transient);
}

// Allocations per step through the session's stack over the timed loop.
void ReportAllocationsPerStep(benchmark::State& state, std::int64_t count_before,
                              std::int64_t count_after) {
  state.counters["allocs_per_step"] =
      Counter(static_cast<double>(count_after - count_before), Counter::kAvgIterations);
}

// --- training step ----------------------------------------------------------------------------

// The scope: WithStep releases the tape on exit. exit_ns times the exit alone (from the end of
// the body to WithStep's return).
void StepWithStep(benchmark::State& state, const MlpShape& shape) {
  MlpFixture f(shape);
  Clock::time_point body_end;
  auto body = [&](runtime::Tape& tape) {
    const float loss = f.Record(tape);
    body_end = Clock::now();
    return loss;
  };
  f.session.WithStep(body);  // warm-up: the first step allocates the momentum buffers
  const std::int64_t count_before = f.session.stats().allocation_count;
  double exit_ns = 0;
  {
    const MemoryPassWindow window;
    for (auto _ : state) {
      benchmark::DoNotOptimize(f.session.WithStep(body));
      exit_ns += Nanoseconds(Clock::now() - body_end);
    }
  }
  state.counters["exit_ns"] = Counter(exit_ns, Counter::kAvgIterations);
  ReportAllocationsPerStep(state, count_before, f.session.stats().allocation_count);
  ReportStepPeak(state, shape, f.session.stats(), f.session.stats().live_bytes);
}

// Hand-written explicit release: the same work on the manual tape, reset by hand after each
// step. exit_ns times ResetManualTape alone.
void StepExplicitRelease(benchmark::State& state, const MlpShape& shape) {
  MlpFixture f(shape);
  f.Record(f.session.ManualTape());
  f.session.ResetManualTape();
  const std::int64_t count_before = f.session.stats().allocation_count;
  double exit_ns = 0;
  {
    const MemoryPassWindow window;
    for (auto _ : state) {
      benchmark::DoNotOptimize(f.Record(f.session.ManualTape()));
      const Clock::time_point release_start = Clock::now();
      f.session.ResetManualTape();
      exit_ns += Nanoseconds(Clock::now() - release_start);
    }
  }
  state.counters["exit_ns"] = Counter(exit_ns, Counter::kAvgIterations);
  ReportAllocationsPerStep(state, count_before, f.session.stats().allocation_count);
  ReportStepPeak(state, shape, f.session.stats(), f.session.stats().live_bytes);
}

// The two drivers above alternating step by step on one fixture, each step timed alone: the
// paired ratio withstep_over_explicit is the one that can tell whether the scope costs anything.
void StepPaired(benchmark::State& state, const MlpShape& shape) {
  MlpFixture f(shape);
  auto with_step = [&] {
    const Clock::time_point start = Clock::now();
    benchmark::DoNotOptimize(f.Step());
    return Nanoseconds(Clock::now() - start);
  };
  auto explicit_release = [&] {
    const Clock::time_point start = Clock::now();
    benchmark::DoNotOptimize(f.Record(f.session.ManualTape()));
    f.session.ResetManualTape();
    return Nanoseconds(Clock::now() - start);
  };
  with_step();  // warm-up of both paths (momentum, tape capacity)
  explicit_release();
  PairedTimes pairs;
  for (auto _ : state) {
    const auto [a, b] =
        pairs.InTurn([&] { return with_step(); }, [&] { return explicit_release(); });
    pairs.Add(a, b);
  }
  pairs.Report(state, "withstep_ns", "explicit_ns", "withstep_over_explicit");
}

// No reclamation: the manual tape is never reset, so what Backward keeps (the loss node: its
// value, gradient and softmax probabilities) piles up step after step, and parameter gradients
// accumulate across steps. Runs a fixed, small number of iterations; growth_bytes_per_step is
// the leak rate.
void StepNoReclamation(benchmark::State& state, const MlpShape& shape) {
  MlpFixture f(shape);
  f.Step();  // momentum
  const std::int64_t live_before = f.session.stats().live_bytes;
  {
    const MemoryPassWindow window;
    for (auto _ : state) benchmark::DoNotOptimize(f.Record(f.session.ManualTape()));
  }
  const std::int64_t live_after = f.session.stats().live_bytes;
  state.counters["growth_bytes_per_step"] =
      Counter(static_cast<double>(live_after - live_before), Counter::kAvgIterations);
  f.session.ResetManualTape();
}

// --- evaluation pass --------------------------------------------------------------------------

void EvalWithForward(benchmark::State& state, const MlpShape& shape) {
  MlpFixture f(shape);
  runtime::Evaluator evaluator(f.session, f.model);
  evaluator.Logits(f.batch);
  const std::int64_t live_before = f.session.stats().live_bytes;
  f.session.statistics().ResetPeak();
  {
    const MemoryPassWindow window;
    for (auto _ : state) {
      runtime::HostTensor logits = evaluator.Logits(f.batch);
      benchmark::DoNotOptimize(logits.data.data());
    }
  }
  state.counters["transient_peak_bytes"] =
      static_cast<double>(f.session.stats().peak_bytes - live_before);
}

// --- scope exit against tape length -----------------------------------------------------------

constexpr std::size_t kTinyBytes = 4 * sizeof(float);  // every node of the chain: one [1, 4]

// The floor: frees of `blocks` (already allocated from `host`) in the tape's reverse order.
double TimeBareFrees(runtime::MemoryResource* host, std::vector<void*>& blocks) {
  const Clock::time_point start = Clock::now();
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) host->Deallocate(*it, kTinyBytes);
  return Nanoseconds(Clock::now() - start);
}

// Records a chain of `nodes` cheap nodes (an input, then alternating Scale and Add) and times
// only the scope's exit, which frees one tiny value per node: ns_per_node = exit / nodes. Each
// iteration also frees `nodes` tiny blocks straight to the host resource (untimed for the
// benchmark's own time), so exit_over_bare is a paired ratio per node against the floor.
// `tracked` false drops the tracking adaptor from the session's stack (its share of the cost).
void ScopeExit(benchmark::State& state, runtime::ScopeKind scope, bool tracked) {
  runtime::SessionOptions options = BenchSessionOptions();
  options.track_allocations = tracked;
  runtime::EagerSession session(options);
  runtime::MemoryResource* host = runtime::CpuMemory().leaf;
  const std::int64_t nodes = state.range(0);
  const auto per_node = static_cast<double>(nodes);
  const std::vector<float> tiny = {1.0f, 2.0f, 3.0f, 4.0f};
  std::vector<void*> blocks(static_cast<std::size_t>(nodes));
  Clock::time_point body_end;
  auto body = [&](runtime::Tape& tape) {
    runtime::TensorRef x = tape.Input(runtime::Shape{1, 4}, tiny);
    for (std::int64_t i = 1; i < nodes; ++i) {
      x = i % 2 == 1 ? runtime::Scale(tape, x, 0.5f) : runtime::Add(tape, x, x);
    }
    body_end = Clock::now();
  };
  auto exit_ns = [&] {
    if (scope == runtime::ScopeKind::kStep) {
      session.WithStep(body);
    } else {
      session.WithForward(body);
    }
    return Nanoseconds(Clock::now() - body_end);
  };
  auto bare_ns = [&] {
    for (void*& block : blocks) block = host->Allocate(kTinyBytes);
    return TimeBareFrees(host, blocks);
  };
  PairedTimes pairs;
  const MemoryPassWindow window;
  for (auto _ : state) {
    const auto [exit, bare] = pairs.InTurn([&] { return exit_ns(); }, [&] { return bare_ns(); });
    pairs.Add(exit / per_node, bare / per_node);
    state.SetIterationTime(exit * 1e-9);
  }
  state.counters["nodes"] = per_node;
  pairs.Report(state, "ns_per_node", "bare_ns_per_free", "exit_over_bare");
}

// The floor on its own: `frees` frees of the same tiny size straight to the host resource, in
// the tape's (reverse) order, timed alone.
void BareFree(benchmark::State& state) {
  runtime::MemoryResource* host = runtime::CpuMemory().leaf;
  const std::int64_t frees = state.range(0);
  std::vector<void*> blocks(static_cast<std::size_t>(frees));
  double free_ns = 0;
  for (auto _ : state) {
    for (void*& block : blocks) block = host->Allocate(kTinyBytes);
    const double ns = TimeBareFrees(host, blocks);
    free_ns += ns;
    state.SetIterationTime(ns * 1e-9);
  }
  state.counters["frees"] = static_cast<double>(frees);
  state.counters["ns_per_free"] =
      Counter(free_ns / static_cast<double>(frees), Counter::kAvgIterations);
}

// --- probe sampling ---------------------------------------------------------------------------

enum class ProbeKind { kRuntime, kTracking, kHost, kAll };

// One Sample() of the probe(s) with a medium session alive after a step (a realistic heap and
// tracking map), as the Runner samples after every step.
void ProbeSample(benchmark::State& state, ProbeKind kind) {
  MlpFixture f(ShapeNamed("medium"));
  f.Step();
  const runtime::Device device = runtime::Device::Cpu();
  auto sessions = [&f] { return std::vector<runtime::EagerSession*>{&f.session}; };
  std::vector<std::unique_ptr<harness::Probe>> probes;
  switch (kind) {
    case ProbeKind::kRuntime:
      probes.push_back(std::make_unique<harness::RuntimeAllocatorProbe>(device));
      break;
    case ProbeKind::kTracking:
      probes.push_back(std::make_unique<harness::TrackingProbe>(sessions));
      break;
    case ProbeKind::kHost:
      probes.push_back(std::make_unique<harness::HostProcessProbe>());
      break;
    case ProbeKind::kAll:
      probes = harness::DefaultProbes(device, sessions);
      break;
  }
  std::vector<double> samples;
  samples.reserve(16);
  const MemoryPassWindow window;  // a probe must not allocate through the runtime: expect 0
  for (auto _ : state) {
    samples.clear();
    for (const auto& probe : probes) probe->Sample(samples);
    benchmark::DoNotOptimize(samples.data());
    benchmark::ClobberMemory();
  }
}

// --- allocation throughput --------------------------------------------------------------------

enum class Stack { kHost, kStatistics, kTracking, kFailing, kSession };
constexpr int kBurst = 64;  // allocations held at once, then freed in order

double TimeBurst(runtime::MemoryResource* resource, std::size_t bytes,
                 const runtime::AllocationTag& tag, std::array<void*, kBurst>& blocks) {
  const Clock::time_point start = Clock::now();
  for (void*& block : blocks) block = resource->Allocate(bytes, tag);
  for (void* block : blocks) resource->Deallocate(block, bytes);
  benchmark::ClobberMemory();
  return Nanoseconds(Clock::now() - start);
}

// Bursts of kBurst allocations of range(0) bytes, then their frees, through one stack: the host
// resource alone, one adaptor over it, or a session's whole stack (failing -> session
// statistics -> tracking -> process statistics -> host). Each iteration pairs a burst through
// the stack with one through the bare host resource: over_host is the adaptor overhead as a
// paired ratio (1 within noise for the host itself). The benchmark's time is the stack's burst;
// items = allocate+free pairs.
void AllocThroughput(benchmark::State& state, Stack stack) {
  runtime::MemoryResource* host = runtime::CpuMemory().leaf;
  runtime::StatisticsAdaptor statistics(host);
  runtime::TrackingAdaptor tracking(host);
  runtime::FailingAdaptor failing(host);
  std::unique_ptr<runtime::EagerSession> session;
  runtime::MemoryResource* top = host;
  switch (stack) {
    case Stack::kHost:
      break;
    case Stack::kStatistics:
      top = &statistics;
      break;
    case Stack::kTracking:
      top = &tracking;
      break;
    case Stack::kFailing:
      top = &failing;
      break;
    case Stack::kSession:
      session = std::make_unique<runtime::EagerSession>(BenchSessionOptions());
      top = session->resource();
      break;
  }
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const runtime::AllocationTag tag{0, 0, "bench", runtime::Role::kUser, runtime::ScopeKind::kNone};
  std::array<void*, kBurst> blocks{};
  PairedTimes pairs;
  const MemoryPassWindow window;
  for (auto _ : state) {
    const auto [through_stack, through_host] =
        pairs.InTurn([&] { return TimeBurst(top, bytes, tag, blocks); },
                     [&] { return TimeBurst(host, bytes, tag, blocks); });
    pairs.Add(through_stack / kBurst, through_host / kBurst);
    state.SetIterationTime(through_stack * 1e-9);
  }
  state.SetItemsProcessed(state.iterations() * kBurst);
  pairs.Report(state, "ns_per_pair", "host_ns_per_pair", "over_host");
}

}  // namespace

void RegisterRuntimeBenchmarks() {
  using benchmark::RegisterBenchmark;
  for (const MlpShape& shape : MlpShapes()) {
    const bool large = shape.name == "large";
    RegisterBenchmark(("step/withstep/" + shape.name).c_str(), StepWithStep, shape)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    RegisterBenchmark(("step/explicit/" + shape.name).c_str(), StepExplicitRelease, shape)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    // Enough pairs for a tight ratio: ~1000 small, ~60 medium, ~7 large per repetition.
    RegisterBenchmark(("step/paired/" + shape.name).c_str(), StepPaired, shape)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(shape.name == "small" ? 1.0
                  : large               ? 4.0
                                        : 2.0);
    RegisterBenchmark(("step/noreclaim/" + shape.name).c_str(), StepNoReclamation, shape)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(large ? 4 : 20);
    RegisterBenchmark(("eval/withforward/" + shape.name).c_str(), EvalWithForward, shape)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  struct ScopeVariant {
    const char* name;
    runtime::ScopeKind scope;
    bool tracked;
  };
  for (const ScopeVariant& v :
       {ScopeVariant{"withstep", runtime::ScopeKind::kStep, true},
        ScopeVariant{"withforward", runtime::ScopeKind::kForward, true},
        ScopeVariant{"withstep_untracked", runtime::ScopeKind::kStep, false}}) {
    // Recording is untimed and costs several times the exit: a short MinTime keeps the run
    // short while still timing hundreds of exits per size.
    RegisterBenchmark((std::string("scope_exit/") + v.name).c_str(), ScopeExit, v.scope, v.tracked)
        ->RangeMultiplier(4)
        ->Range(1, 4096)
        ->MinTime(0.1)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  RegisterBenchmark("bare_free", BareFree)
      ->RangeMultiplier(4)
      ->Range(1, 4096)
      ->MinTime(0.1)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  for (const auto& [name, kind] :
       {std::pair{"runtime", ProbeKind::kRuntime}, std::pair{"tracking", ProbeKind::kTracking},
        std::pair{"host", ProbeKind::kHost}, std::pair{"all", ProbeKind::kAll}}) {
    RegisterBenchmark((std::string("probe/") + name).c_str(), ProbeSample, kind)
        ->UseRealTime()
        ->Unit(benchmark::kNanosecond);
  }
  for (const auto& [name, stack] :
       {std::pair{"host", Stack::kHost}, std::pair{"statistics", Stack::kStatistics},
        std::pair{"tracking", Stack::kTracking}, std::pair{"failing", Stack::kFailing},
        std::pair{"session", Stack::kSession}}) {
    RegisterBenchmark((std::string("alloc/") + name).c_str(), AllocThroughput, stack)
        ->Arg(256)
        ->Arg(64 << 10)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace leakbound::bench
