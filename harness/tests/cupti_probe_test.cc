// CuptiProbe: counter names, flags and order, and a sample from an observer that is not
// collecting.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "leakbound/harness/cupti_probe.h"

namespace leakbound::harness {
namespace {

using cupti::CuptiObserver;

TEST(CuptiProbe, Counters_AreExactWithUnmatchedAndDroppedNotJudged) {
  CuptiObserver observer;
  CuptiProbe probe(observer);
  EXPECT_EQ(probe.Name(), "cupti");
  std::vector<std::string> names;
  for (const CounterInfo& counter : probe.Counters()) {
    names.push_back(counter.name);
    EXPECT_TRUE(counter.exact) << counter.name;
    const bool informational =
        counter.name == "cupti.unmatched_releases" || counter.name == "cupti.dropped_records";
    EXPECT_EQ(counter.judged, !informational) << counter.name;
    EXPECT_EQ(counter.unit, counter.name.ends_with("_bytes") ? "bytes" : "count") << counter.name;
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "cupti.device_bytes", "cupti.pool_bytes", "cupti.pool_reserved_bytes",
                "cupti.static_bytes", "cupti.managed_bytes", "cupti.pinned_bytes",
                "cupti.live_allocations", "cupti.unmatched_releases", "cupti.dropped_records"}));
}

TEST(CuptiProbe, SampleFromAnObserverNotCollecting_AppendsZerosAndSaysWhy) {
  CuptiObserver observer;
  CuptiProbe probe(observer);
  std::vector<double> out;
  probe.Sample(out);
  EXPECT_EQ(out, std::vector<double>(probe.Counters().size(), 0.0));
  EXPECT_EQ(probe.State(), "disabled");
}

}  // namespace
}  // namespace leakbound::harness
