// A benchmark::MemoryManager over a statistics adaptor, so that Google Benchmark's JSON carries
// allocations per iteration and peak bytes next to the times. Google Benchmark runs it in a
// separate pass after timing, so counting never perturbs a timed run.
#pragma once

#include <benchmark/benchmark.h>

#include "leakbound/runtime/statistics_adaptor.h"

namespace leakbound::bench {

// Opens a counter scope on Start and reports it on Stop: num_allocs (allocations made),
// max_bytes_used (peak above the bytes live when the window opened), total_allocated_bytes and
// net_heap_growth (live bytes when the window closed minus when it opened). A benchmark narrows
// the window to its timed loop with a MemoryPassWindow. Only allocations through `stats` are
// seen: with the process-wide CPU statistics that is every tensor byte of every session, and
// nothing that the libtorch peer allocates. One manager is active at a time.
class StatisticsMemoryManager final : public benchmark::MemoryManager {
 public:
  explicit StatisticsMemoryManager(runtime::StatisticsAdaptor& stats) : stats_(stats) {}

  void Start() override;
  void Stop(Result& result) override;
  void Stop(Result* result) override { Stop(*result); }  // pre-1.7 entry point, still pure

 private:
  friend class MemoryPassWindow;
  void RestartWindow();
  void CloseWindow();

  runtime::StatisticsAdaptor& stats_;
  bool open_ = false;
  runtime::MemoryStats closed_;  // the window's counters once closed early
};

// Declared right before a benchmark's timed loop (after its fixture is built and warmed up, so
// destroyed before the fixture is): during a memory pass the window covers the loop alone, so
// allocs_per_iter counts the iterations, max_bytes_used is the peak above the bytes live at the
// loop's start (parameters and other persistent state excluded) and net_heap_growth is what the
// loop left behind. Outside a memory pass it does nothing.
class MemoryPassWindow {
 public:
  MemoryPassWindow();
  ~MemoryPassWindow();
  MemoryPassWindow(const MemoryPassWindow&) = delete;
  MemoryPassWindow& operator=(const MemoryPassWindow&) = delete;
};

}  // namespace leakbound::bench
