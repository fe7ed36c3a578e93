// BuildWatchTrace on recordings made here: what the report says of the heap comes from the whole
// run, not only from the HELLO that began it.
#include <gtest/gtest.h>

#include <string>

#include "leakbound/watch/watcher.h"

namespace leakbound::watch {
namespace {

WatchRecording Recording(std::uint64_t untracked_at_end) {
  WatchRecording r;
  r.hello = true;
  r.heap_state = "active";  // what HELLO said when the process began
  for (std::uint64_t i = 0; i < 64; ++i) {
    WatchSample s;
    s.seq = i + 1;
    s.time_ns = 1000 * (i + 1);
    s.counters.heap_bytes = 4096;
    s.counters.untracked_allocations = i == 63 ? untracked_at_end : 0;
    r.samples.push_back(std::move(s));
  }
  return r;
}

std::string HostState(const Trace& trace) {
  for (const auto& p : trace.probes)
    if (p.name == "host") return p.state;
  return "(no host probe)";
}

TEST(WatchTrace, HeapThatStopsRecordingLater_IsActiveDegraded) {
  WatchOptions options;
  options.command = {"prog"};
  const Trace trace = BuildWatchTrace(Recording(5), options);
  EXPECT_EQ(HostState(trace).rfind("active, degraded: 5 allocations could not be recorded", 0), 0u)
      << HostState(trace);
  EXPECT_EQ(HostState(BuildWatchTrace(Recording(0), options)), "active");
}

}  // namespace
}  // namespace leakbound::watch
