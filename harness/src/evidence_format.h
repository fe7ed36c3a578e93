// Formatting for verdict evidence, shared by verdict.cc and census_rule.cc (internal).
#pragma once

#include <string>

namespace leakbound::harness::detail {

// A level in the counter's unit ("1.50 MiB", "12"): the report layer's formatter.
std::string FormatAmount(double value, const std::string& unit);
// A per-step rate: "1 B/step", "2.67 B/step", "0.508/step".
std::string FormatRate(double per_step, const std::string& unit);

}  // namespace leakbound::harness::detail
