// Sample reports for the reports tests and for reports_render_sample: realistic shapes (warm-up
// ramp, flat clean run, planted growth, a missed zoo entry, a 5,000-step run with one spike,
// single-sample and constant series) with exact, hand-checkable summary figures.
#pragma once

#include <string>

#include "leakbound/reports/report.h"

namespace leakbound::reports::testing {

inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kKiB = 1024.0;

// A clean workload that passed: warm-up 10, 4 blocks x 50 steps (210 samples), live bytes
// 1.50 MiB flat after warm-up, peak 2.00 MiB, 12 allocations/step, 1.2 ms/step.
WorkloadResult MakeCleanWorkload(const std::string& name);

// A zoo entry planting unbounded growth of 64 KiB/step that was detected (met expectation).
WorkloadResult MakeDetectedZooWorkload(const std::string& name);

// A zoo entry planting not-returned-to-baseline that the harness missed (verdict PASS).
WorkloadResult MakeMissedZooWorkload(const std::string& name);

// A trap workload with a constant series and a single-sample series.
WorkloadResult MakeTrapWorkload(const std::string& name);

// A clean workload of 5,000 steps with one spike at step 3,100 that was flagged peak-over-budget
// (a false positive: expectation PASS not met).
WorkloadResult MakeLongSpikyWorkload(const std::string& name);

// Metadata of a CPU run (device class "cpu", commit "4598ec4").
RunMetadata MakeCpuMetadata();

// All of the above, plus two benchmark figures.
Report MakeSampleReport();

}  // namespace leakbound::reports::testing
