// The census rule measured in-process (docs/verdicts.md, "Measured"): every class of the seeded
// program families (watch/tests/programs/census_family.h) through the Runner, at 3, 5 and 8
// blocks of 32 steps. Targets: unbounded-growth on at most 0.5% of a bounded class's seeds,
// detection of at least 99% of a leak class's. LEAKBOUND_PROPERTY_SEEDS sets the seeds per class
// and schedule (CI: 25; ci/census-property.sh runs the long variant with 200 or more);
// LEAKBOUND_PROPERTY_OUT names a file for the table (Markdown).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "census_family.h"
#include "leakbound/harness/gtest.h"

namespace leakbound::harness {
namespace {

int Seeds() {
  const char* text = std::getenv("LEAKBOUND_PROPERTY_SEEDS");
  const int n = text ? std::atoi(text) : 25;
  return n > 0 ? n : 25;
}

struct Tally {
  int runs = 0, growth = 0, inconclusive = 0, other = 0;
  std::string first_growth;  // an example for the failure message
  std::string first_miss;
};

Tally RunClass(const std::string& cls, int blocks, int seeds) {
  Tally t;
  constexpr int kSteps = 32;
  for (int seed = 1; seed <= seeds; ++seed) {
    census_family* family = nullptr;
    std::string described;
    LambdaWorkload w;
    w.name = cls;
    w.setup = [&] { family = census_family_make(cls.c_str(), std::uint64_t(seed), (blocks + 1) * kSteps); };
    w.step = [&](std::int64_t step) { census_family_step(family, static_cast<int>(step)); };
    w.teardown = [&] {
      described = census_family_describe(family);
      census_family_free(family);
      family = nullptr;
    };
    RunOptions options;
    options.blocks = blocks;
    options.steps_per_block = kSteps;
    const reports::WorkloadResult r = RunLeakCheck(w, options);
    ++t.runs;
    const std::string line = cls + " seed " + std::to_string(seed) + " (" +
                             std::to_string(blocks) + " blocks): " + ToString(r.verdict) + ": " +
                             r.evidence;
    if (r.verdict == reports::kUnboundedGrowth) {
      ++t.growth;
      if (t.first_growth.empty()) t.first_growth = line;
    } else {
      if (r.verdict == reports::kInconclusive) ++t.inconclusive; else ++t.other;
      if (t.first_miss.empty()) {
        t.first_miss = line + " [" + described.c_str() + "]";
        for (const reports::CounterVerdict& v : r.counters)
          if (v.counter == "host.heap_bytes") t.first_miss += "; " + v.evidence;
      }
    }
  }
  return t;
}

TEST(CensusProperty, EveryClassMeetsItsTarget_InProcess) {
  const int seeds = Seeds();
  std::ostringstream table;
  table << "| class | kind | blocks | seeds | unbounded-growth | inconclusive | other |\n"
           "|---|---|---|---|---|---|---|\n";
  for (const char* const* name = census_family_classes(); *name; ++name) {
    const bool leaks = census_family_leaks(*name) == 1;
    for (int blocks : {3, 5, 8}) {
      const Tally t = RunClass(*name, blocks, seeds);
      table << "| " << *name << " | " << (leaks ? "leak" : "bounded") << " | " << blocks << " | "
            << t.runs << " | " << t.growth << " | " << t.inconclusive << " | " << t.other
            << " |\n";
      if (leaks) {
        const int allowed_misses = static_cast<int>(std::floor(0.01 * t.runs));
        EXPECT_LE(t.runs - t.growth, allowed_misses) << "detection below 99%: " << t.first_miss;
      } else {
        const int allowed = static_cast<int>(std::floor(0.005 * t.runs));
        EXPECT_LE(t.growth, allowed) << "false positives above 0.5%: " << t.first_growth;
      }
    }
  }
  std::cout << table.str();
  if (const char* out = std::getenv("LEAKBOUND_PROPERTY_OUT")) std::ofstream(out) << table.str();
}

// The power curve (docs/verdicts.md, "Power"): detected fraction against leak rate and working-set
// noise, at 3 blocks of 32 steps. Runs only when LEAKBOUND_POWER_OUT names a CSV to write
// (ci/census-property.sh; watch/tests/census_power_svg.py draws it).
TEST(CensusProperty, PowerCurve) {
  const char* out = std::getenv("LEAKBOUND_POWER_OUT");
  if (out == nullptr) GTEST_SKIP() << "set LEAKBOUND_POWER_OUT=FILE.csv to measure the power curve";
  const int seeds = Seeds();
  std::ofstream csv(out);
  csv << "rate_bytes_per_step,noise_kib,seeds,detected\n";
  for (int noise : {0, 16, 100, 256}) {
    for (double rate : {0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0}) {
      int detected = 0;
      for (int seed = 1; seed <= seeds; ++seed) {
        census_family* family = nullptr;
        LambdaWorkload w;
        w.setup = [&] { family = census_family_make_power(std::uint64_t(seed), 4 * 32, rate, noise); };
        w.step = [&](std::int64_t step) { census_family_step(family, static_cast<int>(step)); };
        w.teardown = [&] { census_family_free(family); };
        RunOptions options;
        options.blocks = 3;
        options.steps_per_block = 32;
        if (RunLeakCheck(w, options).verdict == reports::kUnboundedGrowth) ++detected;
      }
      csv << rate << "," << noise << "," << seeds << "," << detected << "\n";
    }
  }
}

}  // namespace
}  // namespace leakbound::harness
