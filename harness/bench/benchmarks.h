// Registration of bench_leakbound's benchmark families. Names are '/'-separated so that
// --benchmark_filter can pick a family, a variant or a shape (docs/bench.md lists them all):
//   step/{withstep,explicit,paired,noreclaim}/<shape>    eval/withforward/<shape>
//   torch/{step,eval,paired_step,paired_eval}/<shape>    (only when built with libtorch)
//   scope_exit/{withstep,withforward,withstep_untracked}/<nodes>    bare_free/<frees>
//   probe/{runtime,tracking,host,all}
//   alloc/{host,statistics,tracking,failing,session}/<bytes>
//   heap/malloc_free/<bytes>    heap/step/<shape>    (the host-heap interposer, heap_bench.cc)
//   reports/series/<samples>    (writing a trace's series, reports_bench.cc)
#pragma once

namespace leakbound::bench {

void RegisterRuntimeBenchmarks();
void RegisterHeapBenchmarks();
void RegisterReportsBenchmarks();
#if defined(LEAKBOUND_HAVE_TORCH)
void RegisterTorchBenchmarks();
const char* TorchVersion();
#endif

}  // namespace leakbound::bench
