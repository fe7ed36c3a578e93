// Runner: the sampling loop, warm-up detection, verdicts and attribution.
#include "leakbound/harness/runner.h"

#include "leakbound/harness/device_probes.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace leakbound::harness {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

int Precedence(reports::VerdictClass verdict) { return reports::Severity(verdict); }

int index_of_counter(const std::vector<CounterInfo>& counters, const std::string& name) {
  for (std::size_t c = 0; c < counters.size(); ++c)
    if (counters[c].name == name) return static_cast<int>(c);
  return -1;
}

}  // namespace

// A pool whose reserved bytes grow while the bytes in use stay flat is fragmenting (or never
// trimming): its own class, so a reader does not hunt for a leak in the runtime's tensors.
void ClassifyPoolFragmentation(std::vector<reports::CounterVerdict>& verdicts) {
  auto find = [&](const std::string& name) -> reports::CounterVerdict* {
    for (auto& v : verdicts)
      if (v.counter == name) return &v;
    return nullptr;
  };
  for (const auto& [reserved_name, used_name] :
       {std::pair<std::string, std::string>{"cuda.pool_reserved_bytes", "cuda.pool_used_bytes"},
        {"cupti.pool_reserved_bytes", "cupti.pool_bytes"}}) {
    reports::CounterVerdict* reserved = find(reserved_name);
    reports::CounterVerdict* used = find(used_name);
    if (reserved != nullptr && used != nullptr && reserved->verdict == reports::kUnboundedGrowth &&
        used->verdict == reports::kPass) {
      reserved->verdict = reports::kPoolFragmentation;
      reserved->evidence += "; bytes in use (" + used_name + ") stay flat: the pool reserves "
                            "memory it does not reuse";
    }
  }
}

namespace {

struct OutstandingKey {
  std::string op, role, scope;
  bool operator<(const OutstandingKey& o) const {
    return std::tie(op, role, scope) < std::tie(o.op, o.role, o.scope);
  }
};

struct OutstandingRow {
  std::uint64_t bytes = 0, allocations = 0;
  std::int64_t oldest_age = 0, newest_age = 0;
};

// Tape generation at the end of every step, per session: turns an allocation's tag (the
// generation it was made in) into the step it was made in, so ages are in harness steps even
// when a step opens several scopes. Pre-reserved: recording does not allocate per step.
class StepClock {
 public:
  explicit StepClock(std::size_t max_steps) : max_steps_(max_steps) {}
  void Record(const std::vector<runtime::EagerSession*>& sessions) {
    for (runtime::EagerSession* s : sessions) {
      if (s == nullptr) continue;
      auto it = std::find_if(ends_.begin(), ends_.end(),
                             [&](const auto& e) { return e.first == s->id(); });
      if (it == ends_.end()) {
        ends_.emplace_back(s->id(), std::vector<std::uint64_t>{});
        ends_.back().second.reserve(max_steps_);
        it = ends_.end() - 1;
      }
      it->second.push_back(s->generation());
    }
  }
  // The step (0-based) in which generation `g` of `session` was live; 0 for setup.
  std::int64_t StepOf(std::uint64_t session, std::uint64_t g) const {
    for (const auto& [id, ends] : ends_) {
      if (id != session) continue;
      return std::lower_bound(ends.begin(), ends.end(), g) - ends.begin();
    }
    return 0;
  }

 private:
  std::size_t max_steps_;
  std::vector<std::pair<std::uint64_t, std::vector<std::uint64_t>>> ends_;
};

std::map<OutstandingKey, OutstandingRow> Outstanding(workloads::Workload& workload,
                                                     const StepClock& clock, std::int64_t now) {
  std::map<OutstandingKey, OutstandingRow> rows;
  for (runtime::EagerSession* s : workload.Sessions()) {
    if (s == nullptr || s->tracking() == nullptr) continue;
    for (const runtime::OutstandingGroup& g : s->tracking()->OutstandingByTag()) {
      OutstandingRow& r = rows[{g.op, runtime::RoleName(g.role), runtime::ScopeName(g.scope)}];
      const std::int64_t oldest = now - clock.StepOf(s->id(), g.oldest_step);
      const std::int64_t newest = now - clock.StepOf(s->id(), g.newest_step);
      r.oldest_age = r.allocations == 0 ? oldest : std::max(r.oldest_age, oldest);
      r.newest_age = r.allocations == 0 ? newest : std::min(r.newest_age, newest);
      r.bytes += g.bytes;
      r.allocations += g.allocations;
    }
  }
  return rows;
}

// Rows that grew between the first and the last measured block end come first (those are the
// leak); the rest is the steady state (parameters, state), largest first, a few of them.
std::vector<reports::Attribution> Attribute(const std::map<OutstandingKey, OutstandingRow>& first,
                                            const std::map<OutstandingKey, OutstandingRow>& last) {
  std::vector<reports::Attribution> grew, steady;
  for (const auto& [key, row] : last) {
    reports::Attribution a;
    a.op = key.op;
    a.role = key.role;
    a.scope = key.scope;
    a.bytes = row.bytes;
    a.allocations = row.allocations;
    a.oldest_age_steps = row.oldest_age;
    a.newest_age_steps = row.newest_age;
    auto it = first.find(key);
    const bool grown = it == first.end() ? row.bytes > 0 : row.bytes > it->second.bytes;
    (grown ? grew : steady).push_back(a);
  }
  auto by_bytes = [](const auto& a, const auto& b) { return a.bytes > b.bytes; };
  std::sort(grew.begin(), grew.end(), by_bytes);
  std::sort(steady.begin(), steady.end(), by_bytes);
  if (steady.size() > 6) steady.resize(6);
  grew.insert(grew.end(), steady.begin(), steady.end());
  return grew;
}

}  // namespace

void ValidateRunOptions(const RunOptions& o) {
  auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  if (o.blocks < 2) bad("blocks must be at least 2 (flatness compares blocks), got " + std::to_string(o.blocks));
  if (o.blocks > 1000) bad("blocks must be at most 1000, got " + std::to_string(o.blocks));
  if (o.steps_per_block < 1) bad("steps per block must be at least 1, got " + std::to_string(o.steps_per_block));
  if (o.steps_per_block > 100000) bad("steps per block must be at most 100000, got " + std::to_string(o.steps_per_block));
  if (o.warmup_steps < -1) bad("warm-up must be -1 (auto) or >= 0, got " + std::to_string(o.warmup_steps));
  if (o.warmup_steps > 1000000) bad("warm-up must be at most 1000000 steps");
  if (o.max_warmup_blocks < 0 || o.max_warmup_blocks > 1000) bad("max warm-up blocks must be in [0, 1000]");
}

Runner::Runner(RunOptions options) : options_(std::move(options)) { ValidateRunOptions(options_); }

void CombineVerdicts(const workloads::WorkloadInfo& info, reports::WorkloadResult& result) {
  const reports::CounterVerdict* worst = nullptr;
  const reports::CounterVerdict* expected_counter = nullptr;
  for (const reports::CounterVerdict& v : result.counters) {
    if (v.counter == info.detected_by) expected_counter = &v;
    if (v.verdict == reports::kPass) continue;
    // Prefer the counter the zoo entry names when it carries the worst class.
    if (worst == nullptr || Precedence(v.verdict) > Precedence(worst->verdict) ||
        (Precedence(v.verdict) == Precedence(worst->verdict) && v.counter == info.detected_by)) {
      worst = &v;
    }
  }
  if (result.verdict != reports::kError) {
    result.verdict = worst == nullptr ? reports::kPass : worst->verdict;
    result.evidence = worst == nullptr ? "every judged counter is flat across blocks and back at "
                                         "its baseline"
                                       : worst->evidence;
  }
  bool met = result.verdict == info.expectation;
  if (met && info.kind == workloads::Kind::kZoo && !info.detected_by.empty()) {
    met = expected_counter != nullptr && expected_counter->verdict == info.expectation;
  }
  result.met_expectation = met;
}

reports::WorkloadResult Runner::Run(const workloads::Registration& registration,
                                    const ProgressFn& progress) const {
  const workloads::WorkloadInfo& info = registration.info;
  reports::WorkloadResult result;
  result.name = info.name;
  result.description = info.description;
  result.kind = workloads::KindName(info.kind);
  result.expectation = info.expectation;

  std::unique_ptr<workloads::Workload> workload = registration.make();
  bool live = false;  // between Setup and Teardown
  auto sessions = [&]() {
    return live ? workload->Sessions() : std::vector<runtime::EagerSession*>{};
  };
  std::vector<std::unique_ptr<Probe>> probes = DefaultProbes(options_.device, sessions);
  for (auto& p : DeviceProbes(options_.device)) probes.push_back(std::move(p));
  if (options_.extra_probes) {
    for (auto& p : options_.extra_probes()) probes.push_back(std::move(p));
  }
  std::vector<CounterInfo> counters;
  for (const auto& p : probes)
    for (const CounterInfo& c : p->Counters()) counters.push_back(c);
  std::size_t n_counters = counters.size();

  const int n = options_.steps_per_block;
  const int max_steps =
      (options_.warmup_steps >= 0 ? options_.warmup_steps
                                  : (options_.max_warmup_blocks + kWarmupStableBlocks) * n) +
      options_.blocks * n;
  std::vector<std::vector<double>> series(n_counters);
  for (auto& s : series) s.reserve(static_cast<std::size_t>(max_steps));
  std::vector<double> step_ns, probe_ns, sample;
  step_ns.reserve(static_cast<std::size_t>(max_steps));
  probe_ns.reserve(static_cast<std::size_t>(max_steps));
  sample.reserve(n_counters);

  auto take_sample = [&](std::vector<double>& out) {
    out.clear();
    for (auto& p : probes) p->Sample(out);
  };

  runtime::ResetProcessPeak(options_.device);
  std::vector<double> baseline;
  take_sample(baseline);

  workloads::WorkloadContext context;
  context.device = options_.device;
  context.blas_threads = options_.blas_threads;
  context.seed = options_.seed;

  int warmup = options_.warmup_steps;
  int planned = warmup >= 0 ? warmup + options_.blocks * n
                            : (options_.max_warmup_blocks + kWarmupStableBlocks) * n;
  // Outstanding allocations at the end of the first measured block. Until warm-up is known,
  // the snapshot of the latest block end is kept: detection settles one block after it.
  std::map<OutstandingKey, OutstandingRow> at_first_block_end, at_last_block_end, at_block_end;
  bool have_first_block_end = false;
  StepClock clock(static_cast<std::size_t>(max_steps));
  std::optional<double> peak_bound;  // only for info.peak_depends_on_schedule
  std::string error;
  try {
    workload->Setup(context);
    live = true;
    for (int step = 0; step < planned; ++step) {
      const auto t0 = Clock::now();
      workload->Step(step);
      const auto t1 = Clock::now();
      take_sample(sample);
      const auto t2 = Clock::now();
      for (std::size_t c = 0; c < n_counters; ++c) series[c].push_back(sample[c]);
      step_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
      probe_ns.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count());
      const int done = step + 1;
      clock.Record(workload->Sessions());
      const int configured = options_.warmup_steps;
      const bool block_end = configured >= 0 ? done > configured && (done - configured) % n == 0
                                             : done % n == 0;
      std::map<OutstandingKey, OutstandingRow> previous_block_end;
      if (block_end && !have_first_block_end) {
        previous_block_end = std::move(at_block_end);
        at_block_end = Outstanding(*workload, clock, step);
      }
      if (warmup < 0 && block_end) {
        std::vector<std::span<const double>> exact;
        for (std::size_t c = 0; c < n_counters; ++c)
          if (counters[c].exact && counters[c].judged) exact.emplace_back(series[c]);
        const int detected = DetectWarmupEnd(exact, n, options_.max_warmup_blocks);
        if (detected >= 0) {
          warmup = detected;
          planned = warmup + options_.blocks * n;
        } else if (done >= (options_.max_warmup_blocks + kWarmupStableBlocks) * n) {
          warmup = options_.max_warmup_blocks * n;  // never settled: measure what follows
          planned = warmup + options_.blocks * n;
        }
      }
      if (warmup >= 0 && !have_first_block_end && done >= warmup + n) {
        at_first_block_end = done == warmup + n ? std::move(at_block_end) : std::move(previous_block_end);
        have_first_block_end = true;
      }
      if (progress) progress(info.name, done, planned);
    }
    at_last_block_end = Outstanding(*workload, clock, planned - 1);
    if (info.peak_depends_on_schedule) {
      // Each session steps on one thread, so its own high-water mark does not depend on the
      // schedule; their sum bounds what the sessions can hold at once, however they interleave.
      double bound = 0;
      for (runtime::EagerSession* s : workload->Sessions())
        if (s != nullptr) bound += static_cast<double>(s->stats().peak_bytes);
      peak_bound = bound;
    }
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "a non-standard exception";
  }
  try {
    live = false;
    workload->Teardown();
  } catch (const std::exception& e) {
    if (error.empty()) error = std::string("teardown: ") + e.what();
  } catch (...) {
    if (error.empty()) error = "teardown: a non-standard exception";
  }
  std::vector<double> final_sample;
  take_sample(final_sample);

  const Schedule schedule{std::max(warmup, 0), options_.blocks, n};
  result.warmup_steps = schedule.warmup_steps;
  result.blocks = schedule.blocks;
  result.steps_per_block = n;
  for (std::size_t c = 0; c < n_counters; ++c) {
    reports::CounterSeries s;
    s.name = counters[c].name;
    s.unit = counters[c].unit;
    s.exact = counters[c].exact;
    s.values = series[c];
    result.series.push_back(std::move(s));
  }
  if (!error.empty() || static_cast<int>(series[0].size()) != schedule.TotalSteps()) {
    result.verdict = reports::kError;
    result.evidence = error.empty() ? "the run ended early" : "the workload threw: " + error;
    CombineVerdicts(info, result);
    return result;
  }
  result.block_ends = BlockEnds(schedule);

  auto index_of = [&](const std::string& name) -> int {
    for (std::size_t c = 0; c < n_counters; ++c)
      if (counters[c].name == name) return static_cast<int>(c);
    return -1;
  };
  const int live_bytes = index_of("runtime.live_bytes");
  const int peak_bytes = index_of("runtime.peak_bytes");
  const int alloc_count = index_of("runtime.allocation_count");

  // Reconciliation (CUDA with CUPTI): device bytes the CUPTI ledger sees minus the runtime's
  // own live bytes is memory owned by others (cuBLAS workspace, raw cudaMalloc). It is judged
  // as an exact counter of its own: it must be flat after warm-up too.
  const int cupti_device = index_of_counter(counters, "cupti.device_bytes");
  const int cupti_pool = index_of_counter(counters, "cupti.pool_bytes");
  if (cupti_device >= 0 && cupti_pool >= 0 && index_of_counter(counters, "runtime.live_bytes") >= 0) {
    const auto runtime_live = static_cast<std::size_t>(index_of_counter(counters, "runtime.live_bytes"));
    auto others = [&](const std::vector<double>& v) {
      return v[static_cast<std::size_t>(cupti_device)] + v[static_cast<std::size_t>(cupti_pool)] - v[runtime_live];
    };
    std::vector<double> derived;
    for (std::size_t i = 0; i < series[runtime_live].size(); ++i) {
      derived.push_back(series[static_cast<std::size_t>(cupti_device)][i] +
                        series[static_cast<std::size_t>(cupti_pool)][i] - series[runtime_live][i]);
    }
    counters.push_back({"reconcile.owned_by_others_bytes", "bytes", true, true});
    series.push_back(std::move(derived));
    baseline.push_back(others(baseline));
    final_sample.push_back(others(final_sample));
    reports::CounterSeries s;
    s.name = counters.back().name;
    s.unit = "bytes";
    s.exact = true;
    s.values = series.back();
    result.series.push_back(std::move(s));
  }
  const std::size_t n_judged = counters.size();
  for (std::size_t c = 0; c < n_judged; ++c) {
    JudgeOptions judge;
    CounterInfo counter = counters[c];
    if (!counter.exact) {
      auto it = options_.noise_floors.find(counter.name);
      if (it == options_.noise_floors.end()) {
        if (counter.judged) counter.missing_noise_floor = true;
        counter.judged = false;  // no calibrated floor: report, do not judge
      } else {
        judge.noise = it->second;
      }
    }
    if (static_cast<int>(c) == live_bytes && info.peak_budget_bytes) {
      // The budget is what the workload may hold above its baseline: earlier workloads in the
      // same process (e.g. the zoo's unreachable leaks) do not count against it.
      judge.peak_budget = baseline[c] + *info.peak_budget_bytes;
      if (peak_bytes >= 0) {
        judge.observed_peak = std::max(
            *std::max_element(series[peak_bytes].begin(), series[peak_bytes].end()),
            final_sample[static_cast<std::size_t>(peak_bytes)]);
      }
    }
    try {
      result.counters.push_back(
          JudgeCounter(counter, series[c], schedule, baseline[c], final_sample[c], judge));
    } catch (const std::exception& e) {  // e.g. a probe returned a non-finite sample
      result.verdict = reports::kError;
      result.evidence = std::string("cannot judge ") + counter.name + ": " + e.what();
    }
  }

  ClassifyPoolFragmentation(result.counters);
  const std::size_t last = static_cast<std::size_t>(schedule.TotalSteps() - 1);
  const std::size_t first_measured = static_cast<std::size_t>(schedule.warmup_steps);
  // Steady, final and peak are reported above the baseline: what this workload holds, whatever
  // earlier workloads in the same process left behind.
  double base_live = 0;
  if (live_bytes >= 0) {
    base_live = baseline[static_cast<std::size_t>(live_bytes)];
    result.baseline_live_bytes = base_live;
    result.steady_live_bytes = series[static_cast<std::size_t>(live_bytes)][last] - base_live;
    result.final_live_bytes = final_sample[static_cast<std::size_t>(live_bytes)] - base_live;
  }
  if (peak_bytes >= 0) {
    result.peak_bytes =
        *std::max_element(series[peak_bytes].begin(), series[peak_bytes].end()) - base_live;
  }
  result.peak_bound_bytes = peak_bound;
  if (alloc_count >= 0) {
    const auto& a = series[static_cast<std::size_t>(alloc_count)];
    const double before = first_measured == 0 ? a[0] : a[first_measured - 1];
    const double steps = static_cast<double>(last - first_measured + (first_measured == 0 ? 0 : 1));
    result.allocations_per_step = steps > 0 ? (a[last] - before) / steps : 0;
  }
  result.step_time_ns = Median({step_ns.begin() + static_cast<std::ptrdiff_t>(first_measured), step_ns.end()});
  result.probe_time_ns = Median({probe_ns.begin() + static_cast<std::ptrdiff_t>(first_measured), probe_ns.end()});
  result.attribution = Attribute(at_first_block_end, at_last_block_end);
  CombineVerdicts(info, result);
  return result;
}

std::map<std::string, NoiseFloor> Runner::Calibrate(const std::vector<std::string>& clean_workloads,
                                                    int runs) const {
  std::map<std::string, std::vector<std::vector<double>>> windows;
  Runner plain(options_);
  plain.options_.noise_floors.clear();
  for (int r = 0; r < runs; ++r) {
    for (const std::string& name : clean_workloads) {
      const workloads::Registration* reg = workloads::FindWorkload(name);
      if (reg == nullptr) throw std::invalid_argument("calibration workload '" + name + "' is unknown");
      const reports::WorkloadResult result = plain.Run(*reg);
      if (result.verdict == reports::kError) {
        throw std::runtime_error("calibration run of '" + name + "' failed: " + result.evidence);
      }
      for (const reports::CounterSeries& s : result.series) {
        if (s.exact || s.values.size() <= static_cast<std::size_t>(result.warmup_steps)) continue;
        const auto begin = s.values.begin() + result.warmup_steps;
        windows[s.name].emplace_back(begin, s.values.end());
      }
    }
  }
  std::map<std::string, NoiseFloor> floors;
  for (const auto& [name, list] : windows) {
    std::vector<std::span<const double>> spans(list.begin(), list.end());
    CalibrationOptions calibration;
    // One 64 KiB region of growth over the window is the least this harness calls a leak on a
    // noisy byte counter; the slope floor comes from the clean runs themselves.
    calibration.min_total_growth = 64.0 * 1024;
    calibration.min_slope_per_step = 64.0;
    floors[name] = CalibrateNoiseFloor(spans, calibration);
  }
  return floors;
}

}  // namespace leakbound::harness
