// Verdict classes: the one vocabulary workloads (expectations), the harness
// (Judge) and reports (JSON, Markdown, HTML, diff) share. Strings exist only at
// the edges: JSON and rendered text.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace leakbound::reports {

enum class VerdictClass : std::uint8_t {
  kPass, // bounded: flat across blocks, back at baseline, peak within budget
  kPeakOverBudget, // the high-water mark exceeds the workload's declared budget
  kNotReturnedToBaseline, // flat while running, but teardown leaves memory
                          // behind
  kPoolFragmentation, // a pool reserves more each block while the bytes in use
                      // stay flat
  kUnboundedGrowth,   // the floor rises block after block (confirmed)
  kInconclusive,      // too few steps to judge (watch: the program ended early)
  kError,             // the workload or a probe failed; no verdict on memory
};

// Short names for code that reads like the reports do: `v.verdict == kPass`.
inline constexpr VerdictClass kPass = VerdictClass::kPass;
inline constexpr VerdictClass kPeakOverBudget = VerdictClass::kPeakOverBudget;
inline constexpr VerdictClass kNotReturnedToBaseline =
    VerdictClass::kNotReturnedToBaseline;
inline constexpr VerdictClass kPoolFragmentation =
    VerdictClass::kPoolFragmentation;
inline constexpr VerdictClass kUnboundedGrowth = VerdictClass::kUnboundedGrowth;
inline constexpr VerdictClass kInconclusive = VerdictClass::kInconclusive;
inline constexpr VerdictClass kError = VerdictClass::kError;

inline constexpr std::pair<VerdictClass, std::string_view> kVerdictSpellings[] =
    {
        {VerdictClass::kPass, "PASS"},
        {VerdictClass::kPeakOverBudget, "peak-over-budget"},
        {VerdictClass::kNotReturnedToBaseline, "not-returned-to-baseline"},
        {VerdictClass::kPoolFragmentation, "pool-fragmentation"},
        {VerdictClass::kUnboundedGrowth, "unbounded-growth"},
        {VerdictClass::kInconclusive, "inconclusive"},
        {VerdictClass::kError, "error"},
};

// "PASS", "unbounded-growth", ... (the JSON and report spelling).
constexpr std::string_view VerdictName(VerdictClass verdict) {
  for (const auto &[v, name] : kVerdictSpellings)
    if (v == verdict)
      return name;
  return "error";
}
inline std::string ToString(VerdictClass verdict) {
  return std::string(VerdictName(verdict));
}

inline std::ostream &operator<<(std::ostream &os, VerdictClass verdict) {
  return os << VerdictName(verdict);
}

// The inverse of VerdictName; nullopt for anything else.
constexpr std::optional<VerdictClass> ParseVerdictClass(std::string_view name) {
  for (const auto &[v, spelling] : kVerdictSpellings)
    if (spelling == name)
      return v;
  return std::nullopt;
}

// Every spelling, comma-separated, for error messages ("expected one of ...").
inline constexpr std::string_view kVerdictNames =
    "PASS, peak-over-budget, not-returned-to-baseline, pool-fragmentation, "
    "unbounded-growth, "
    "inconclusive, error";

// Which class wins when counters disagree: error > growth > fragmentation >
// not-returned > peak > inconclusive > PASS.
constexpr int Severity(VerdictClass verdict) {
  switch (verdict) {
  case VerdictClass::kPass:
    return 0;
  case VerdictClass::kInconclusive:
    return 1;
  case VerdictClass::kPeakOverBudget:
    return 2;
  case VerdictClass::kNotReturnedToBaseline:
    return 3;
  case VerdictClass::kPoolFragmentation:
    return 4;
  case VerdictClass::kUnboundedGrowth:
    return 5;
  case VerdictClass::kError:
    return 6;
  }
  return 6;
}

} // namespace leakbound::reports
