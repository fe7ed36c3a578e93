// reports/series/<samples>: a document of nine series of <samples> numbers each (a watched
// program's trace: seven counters, step and probe times) written by DumpJson, its series packed
// (reports::PackedNumbers, what the trace and report writers use) against spelled out as arrays
// of JSON numbers (what they used before), alternating. Each side builds the document, writes it
// and destroys it: the watcher's work after a program ends (docs/watch.md, "Overhead").
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "benchmarks.h"
#include "fixtures.h"
#include "leakbound/reports/json.h"

namespace leakbound::bench {
namespace {

constexpr int kSeries = 9;

// Byte counts and step times as a watched program's are: whole numbers, some large.
std::vector<std::vector<double>> SeriesOf(std::int64_t samples) {
  std::vector<std::vector<double>> series(kSeries);
  for (int s = 0; s < kSeries; ++s) {
    series[static_cast<std::size_t>(s)].reserve(static_cast<std::size_t>(samples));
    for (std::int64_t i = 0; i < samples; ++i) {
      series[static_cast<std::size_t>(s)].push_back(
          static_cast<double>((s + 1) * 1000003 + (i * 7919) % 65536));
    }
  }
  return series;
}

double WriteOnce(const std::vector<std::vector<double>>& series, bool packed) {
  const Clock::time_point start = Clock::now();
  std::size_t size = 0;
  {
    nlohmann::json document = nlohmann::json::object();
    nlohmann::json counters = nlohmann::json::array();
    for (const std::vector<double>& values : series) {
      counters.push_back({{"name", "host.heap_bytes"},
                          {"values", packed ? reports::PackedNumbers(values)
                                            : nlohmann::json(values)}});
    }
    document["counters"] = std::move(counters);
    const std::string text = reports::DumpJson(document, 1);
    size = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  benchmark::DoNotOptimize(size);
  return Nanoseconds(Clock::now() - start);
}

void SeriesWrite(benchmark::State& state) {
  const std::vector<std::vector<double>> series = SeriesOf(state.range(0));
  WriteOnce(series, true);  // warm-up: the allocator's pages
  WriteOnce(series, false);
  PairedTimes pairs;
  for (auto _ : state) {
    const auto [packed, spelled] =
        pairs.InTurn([&] { return WriteOnce(series, true); }, [&] { return WriteOnce(series, false); });
    pairs.Add(packed, spelled);
    state.SetIterationTime(packed * 1e-9);
  }
  pairs.Report(state, "packed_ns", "spelled_ns", "packed_over_spelled");
}

}  // namespace

void RegisterReportsBenchmarks() {
  benchmark::RegisterBenchmark("reports/series", SeriesWrite)
      ->Arg(1500)
      ->Arg(20000)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace leakbound::bench
