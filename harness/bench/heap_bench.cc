// The host-heap interposer's cost (watch/heap, docs/heap.md): a malloc+free pair through the
// interposer against glibc's own entry points (__libc_malloc / __libc_free, which bypass it),
// and the medium training step with the interposer counting against the same step with counting
// switched off (leakbound_heap_set_counting(0): the hooks only forward). Both are paired
// (PairedTimes), so their ratios hold on a noisy shared machine.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdlib>
#include <string>

#include "benchmarks.h"
#include "fixtures.h"
#include "leakbound/watch/heap.h"

extern "C" void* __libc_malloc(std::size_t size);
extern "C" void __libc_free(void* block);

namespace leakbound::bench {
namespace {

constexpr int kPairsPerBatch = 256;

// Through a volatile pointer, so the compiler cannot elide or fuse the pair.
void* (*volatile g_malloc)(std::size_t) = std::malloc;
void (*volatile g_free)(void*) = std::free;
void* (*volatile g_libc_malloc)(std::size_t) = __libc_malloc;
void (*volatile g_libc_free)(void*) = __libc_free;

double TimePairs(void* (*allocate)(std::size_t), void (*release)(void*), std::size_t bytes) {
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < kPairsPerBatch; ++i) {
    void* block = allocate(bytes);
    benchmark::DoNotOptimize(block);
    release(block);
  }
  return Nanoseconds(Clock::now() - start);
}

// heap/malloc_free/<bytes>: batches of malloc+free pairs through the interposer (counting) and
// through glibc directly, alternating; over_glibc is the paired ratio per pair.
void MallocFreePair(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  if (!leakbound_heap_active()) {
    state.SkipWithError(leakbound_heap_state());
    return;
  }
  PairedTimes pairs;
  TimePairs(g_malloc, g_free, bytes);  // warm-up: tcache bin, table slot
  TimePairs(g_libc_malloc, g_libc_free, bytes);
  for (auto _ : state) {
    const auto [hooked, bare] =
        pairs.InTurn([&] { return TimePairs(g_malloc, g_free, bytes); },
                     [&] { return TimePairs(g_libc_malloc, g_libc_free, bytes); });
    pairs.Add(hooked / kPairsPerBatch, bare / kPairsPerBatch);
    state.SetIterationTime(hooked * 1e-9);
  }
  state.SetItemsProcessed(state.iterations() * kPairsPerBatch);
  pairs.Report(state, "ns_per_pair", "glibc_ns_per_pair", "over_glibc");
}

// heap/step/<shape>: one WithStep training step with the interposer counting, one with counting
// off, alternating; counting_over_off is the paired ratio.
void StepCountingVsOff(benchmark::State& state, const MlpShape& shape) {
  if (!leakbound_heap_active()) {
    state.SkipWithError(leakbound_heap_state());
    return;
  }
  MlpFixture f(shape);
  auto step = [&](bool counting) {
    leakbound_heap_set_counting(counting ? 1 : 0);
    const Clock::time_point start = Clock::now();
    benchmark::DoNotOptimize(f.Step());
    const double ns = Nanoseconds(Clock::now() - start);
    leakbound_heap_set_counting(1);
    return ns;
  };
  step(true);  // warm-up: momentum buffers
  step(false);
  PairedTimes pairs;
  for (auto _ : state) {
    const auto [counting, off] =
        pairs.InTurn([&] { return step(true); }, [&] { return step(false); });
    pairs.Add(counting, off);
  }
  pairs.Report(state, "counting_ns", "off_ns", "counting_over_off");
}

}  // namespace

void RegisterHeapBenchmarks() {
  benchmark::RegisterBenchmark("heap/malloc_free", MallocFreePair)
      ->Arg(16)
      ->Arg(256)
      ->Arg(4096)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  for (const char* name : {"small", "medium"}) {
    const MlpShape& shape = ShapeNamed(name);
    benchmark::RegisterBenchmark((std::string("heap/step/") + name).c_str(), StepCountingVsOff,
                                 shape)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(2.0);
  }
}

}  // namespace leakbound::bench
