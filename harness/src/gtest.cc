// GoogleTest integration: run one workload, turn its result into an AssertionResult.
#include "leakbound/harness/gtest.h"

#include <sstream>
#include <stdexcept>

#include "leakbound/reports/format.h"

namespace leakbound::harness {
namespace {

class Adapter final : public workloads::Workload {
 public:
  explicit Adapter(const LambdaWorkload& w) : w_(w) {}
  void Setup(const workloads::WorkloadContext& context) override {
    if (w_.setup_with_context) {
      w_.setup_with_context(context);
    } else {
      w_.setup();
    }
  }
  void Step(std::int64_t step) override { w_.step(step); }
  void Teardown() override { w_.teardown(); }
  std::vector<runtime::EagerSession*> Sessions() override { return w_.sessions(); }

 private:
  const LambdaWorkload& w_;
};

::testing::AssertionResult ToAssertion(const reports::WorkloadResult& r) {
  if (r.verdict == reports::kPass) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << Explain(r);
}

}  // namespace

std::string Explain(const reports::WorkloadResult& r) {
  std::ostringstream out;
  out << "workload '" << r.name << "' is not leak-bound: " << r.verdict << "\n  " << r.evidence
      << "\n  schedule: warm-up " << r.warmup_steps << " steps, " << r.blocks << " blocks of "
      << r.steps_per_block << " steps\n";
  for (const auto& c : r.counters) {
    if (c.verdict == reports::kPass) continue;
    out << "  counter " << c.counter << ": " << c.verdict << " (" << c.evidence << ")\n";
  }
  if (!r.attribution.empty()) out << "  outstanding at the last block end (grown first):\n";
  for (const auto& a : r.attribution) {
    out << "    " << a.op << " / " << a.role << " / " << a.scope << ": "
        << reports::FormatBytes(static_cast<double>(a.bytes)) << " in " << a.allocations
        << " allocations, ages " << a.newest_age_steps << ".." << a.oldest_age_steps << " steps\n";
  }
  return out.str();
}

reports::WorkloadResult RunLeakCheck(const std::string& workload_name, const RunOptions& options) {
  const workloads::Registration* reg = workloads::FindWorkload(workload_name);
  if (reg == nullptr) {
    throw std::invalid_argument("unknown workload '" + workload_name +
                                "' (see `leakbound list`)");
  }
  workloads::Registration clean = *reg;
  clean.info.expectation = reports::kPass;
  return Runner(options).Run(clean);
}

reports::WorkloadResult RunLeakCheck(const LambdaWorkload& workload, const RunOptions& options) {
  workloads::Registration reg;
  reg.info.name = workload.name;
  reg.info.description = "user workload";
  reg.info.kind = workloads::Kind::kClean;
  reg.info.expectation = reports::kPass;
  reg.info.period_steps = workload.period_steps;
  reg.make = [&workload] { return std::make_unique<Adapter>(workload); };
  return Runner(options).Run(reg);
}

::testing::AssertionResult IsLeakBound(const std::string& workload_name, const RunOptions& options) {
  if (workloads::FindWorkload(workload_name) == nullptr) {
    return ::testing::AssertionFailure() << "unknown workload '" << workload_name << "'";
  }
  return ToAssertion(RunLeakCheck(workload_name, options));
}

::testing::AssertionResult IsLeakBound(const LambdaWorkload& workload, const RunOptions& options) {
  return ToAssertion(RunLeakCheck(workload, options));
}

}  // namespace leakbound::harness
