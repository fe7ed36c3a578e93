// bench_leakbound: Google Benchmark over the leakbound runtime (and the libtorch peer when built
// with it). A memory manager over the process-wide CPU statistics puts allocations per
// iteration and peak bytes into the JSON next to the times. ci/bench.sh turns the JSON into the
// ratio table of docs/bench.md.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "benchmarks.h"
#include "leakbound/runtime/device.h"
#include "memory_manager.h"
#include "mlp_shapes.h"

namespace {

// Google Benchmark 1.7.1 (Debian bookworm) keeps each repetition's memory result in a
// std::vector and reports through pointers into it; with more than one repetition they dangle
// and the JSON reporter reads freed memory or crashes (google/benchmark#1939, fixed upstream in
// 2025 by #1941).
// So the memory manager is registered only for single-repetition runs (ci/bench.sh runs one).
// Must run before benchmark::Initialize, which consumes the flags.
bool MultipleRepetitions(int argc, char** argv) {
  constexpr std::string_view kFlag = "--benchmark_repetitions=";
  const char* value = std::getenv("BENCHMARK_REPETITIONS");  // the flag's environment default
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg.starts_with(kFlag)) value = argv[i] + kFlag.size();
  }
  return value != nullptr && std::atoi(value) > 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace leakbound;
  const bool memory_manager_safe = !MultipleRepetitions(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  bench::StatisticsMemoryManager memory_manager(*runtime::CpuMemory().stats);
  if (memory_manager_safe) {
    benchmark::RegisterMemoryManager(&memory_manager);
    benchmark::AddCustomContext("leakbound.memory_manager", "runtime::CpuMemory().stats");
  } else {
    benchmark::AddCustomContext("leakbound.memory_manager",
                                "off: needs --benchmark_repetitions=1 (google/benchmark#1939)");
  }
  benchmark::AddCustomContext("leakbound.threads", std::to_string(bench::kThreads));
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");  // read by libgomp before main
  benchmark::AddCustomContext("leakbound.omp_wait_policy",
                              wait_policy != nullptr ? wait_policy : "unset (libgomp default)");
  bench::RegisterRuntimeBenchmarks();
  bench::RegisterHeapBenchmarks();
  bench::RegisterReportsBenchmarks();
#if defined(LEAKBOUND_HAVE_TORCH)
  benchmark::AddCustomContext("leakbound.peer", std::string("libtorch ") + bench::TorchVersion());
  bench::RegisterTorchBenchmarks();
#else
  benchmark::AddCustomContext("leakbound.peer", "absent (built without libtorch)");
#endif

  benchmark::RunSpecifiedBenchmarks();
  benchmark::RegisterMemoryManager(nullptr);
  benchmark::Shutdown();
  return 0;
}
