// Runner: records one workload into a Trace (baseline sample, setup, warm-up, measured blocks,
// confirmation blocks after a one-time rise, teardown, final sample). Judging is Judge's
// (judge.h): Run() is Record() then Judge(). Everything the runner allocates for itself happens
// inside a heap exclusion, so the exact host heap sees only the workload.
#include "leakbound/harness/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>

#include "leakbound/harness/device_probes.h"
#include "leakbound/harness/judge.h"
#include "leakbound/watch/heap.h"

namespace leakbound::harness {
namespace {

using Clock = std::chrono::steady_clock;
using watch::HeapExclusion;

// Tape generation at the end of every step, per live session: turns an allocation's tag (the
// generation it was made in) into the step it was made in. Sessions that are gone are dropped,
// so a workload that makes a session per step does not grow this record.
class StepClock {
 public:
  void Record(const std::vector<runtime::EagerSession*>& sessions) {
    std::erase_if(ends_, [&](const auto& e) {
      return std::none_of(sessions.begin(), sessions.end(), [&](runtime::EagerSession* s) {
        return s != nullptr && s->id() == e.first;
      });
    });
    for (runtime::EagerSession* s : sessions) {
      if (s == nullptr) continue;
      auto it = std::find_if(ends_.begin(), ends_.end(),
                             [&](const auto& e) { return e.first == s->id(); });
      if (it == ends_.end()) {
        ends_.emplace_back(s->id(), std::vector<std::uint64_t>(steps_, 0));
        it = ends_.end() - 1;
      }
      it->second.push_back(s->generation());
    }
    ++steps_;
  }
  // The step (0-based) in which generation `g` of `session` was live; -1 for setup.
  std::int64_t StepOf(std::uint64_t session, std::uint64_t g) const {
    for (const auto& [id, ends] : ends_) {
      if (id != session) continue;
      if (g == 0) return -1;
      return std::lower_bound(ends.begin(), ends.end(), g) - ends.begin();
    }
    return -1;
  }

 private:
  std::size_t steps_ = 0;
  std::vector<std::pair<std::uint64_t, std::vector<std::uint64_t>>> ends_;
};

OutstandingSnapshot Outstanding(workloads::Workload& workload, const StepClock& clock, int step) {
  struct Key {
    std::string op, role, scope;
    bool operator<(const Key& o) const {
      return std::tie(op, role, scope) < std::tie(o.op, o.role, o.scope);
    }
  };
  std::map<Key, OutstandingRow> rows;
  for (runtime::EagerSession* s : workload.Sessions()) {
    if (s == nullptr || s->tracking() == nullptr) continue;
    for (const runtime::OutstandingGroup& g : s->tracking()->OutstandingByTag()) {
      const Key key{g.op, runtime::RoleName(g.role), runtime::ScopeName(g.scope)};
      OutstandingRow& r = rows[key];
      const std::int64_t oldest = clock.StepOf(s->id(), g.oldest_step);
      const std::int64_t newest = clock.StepOf(s->id(), g.newest_step);
      r.oldest_step = r.allocations == 0 ? oldest : std::min(r.oldest_step, oldest);
      r.newest_step = r.allocations == 0 ? newest : std::max(r.newest_step, newest);
      r.op = key.op;
      r.role = key.role;
      r.scope = key.scope;
      r.bytes += g.bytes;
      r.allocations += g.allocations;
    }
  }
  OutstandingSnapshot snapshot;
  snapshot.step = step;
  for (auto& [key, row] : rows) snapshot.rows.push_back(std::move(row));
  return snapshot;
}

// The cohorts of one recording and the censuses taken at its block ends (docs/verdicts.md,
// "Census"). Cohort 0 is setup; a new cohort starts with the first step, at the end of a
// configured warm-up and after every block end. The host heap's census comes from the
// interposer's running sums; the runtime's from the tracking adaptor's records, by the step each
// allocation was made in.
class CensusBook {
 public:
  void Start() {
    heap_ = leakbound_heap_active() != 0;
    if (heap_) leakbound_heap_census_start();
    born_ = {-1};
    starts_.clear();
  }
  // A new cohort from sample `first_step` on. The runtime's cohorts are cut by each tracking
  // adaptor's allocation sequence (not by tape generation, which a tape that is never reset
  // keeps forever).
  void NextCohort(workloads::Workload& workload, int first_step) {
    // Past the heap's last cohort its survivors could no longer be dated by block: the host
    // census stops (that counter is then judged on block ranges).
    if (born_.size() + 1 >= LEAKBOUND_HEAP_COHORTS) heap_ = false;
    if (heap_) leakbound_heap_next_cohort();
    born_.push_back(first_step);
    for (runtime::EagerSession* s : workload.Sessions()) {
      if (s == nullptr || s->tracking() == nullptr) continue;
      starts_[s->id()].emplace_back(born_.size() - 1, s->tracking()->next_sequence());
    }
  }
  void Take(workloads::Workload& workload, int step, std::vector<CensusSnapshot>& out) const {
    if (heap_) {
      std::vector<leakbound_heap_cohort> sums(LEAKBOUND_HEAP_COHORTS);
      const int n = std::min(leakbound_heap_census(sums.data(), LEAKBOUND_HEAP_COHORTS),
                             static_cast<int>(born_.size()));
      CensusSnapshot host{"host.heap_bytes", step, {}};
      for (std::size_t k = 0; k < static_cast<std::size_t>(n); ++k) {
        host.cohorts.push_back({born_[k], static_cast<std::uint64_t>(sums[k].bytes),
                                static_cast<std::uint64_t>(sums[k].blocks)});
      }
      out.push_back(std::move(host));
    }
    CensusSnapshot runtime{"runtime.live_bytes", step, {}};
    for (std::int64_t born : born_) runtime.cohorts.push_back({born, 0, 0});
    bool tracked = false;
    for (runtime::EagerSession* s : workload.Sessions()) {
      if (s == nullptr || s->tracking() == nullptr) continue;
      tracked = true;
      const auto it = starts_.find(s->id());
      for (const runtime::OutstandingAllocation& a : s->tracking()->Outstanding()) {
        // The cohort current when the allocation was made: the last start at or before its
        // sequence; before the session's first start, the cohort before it (it was made then).
        std::size_t k = 0;
        if (it != starts_.end() && !it->second.empty()) {
          k = it->second.front().first > 0 ? it->second.front().first - 1 : 0;
          for (const auto& [cohort, sequence] : it->second) {
            if (sequence <= a.sequence) k = cohort;
          }
        } else {
          k = born_.size() - 1;  // a session made since the last cohort began
        }
        runtime.cohorts[k].bytes += a.bytes;
        runtime.cohorts[k].blocks += 1;
      }
    }
    if (tracked) out.push_back(std::move(runtime));
  }

 private:
  bool heap_ = false;
  std::vector<std::int64_t> born_;
  std::map<std::uint64_t, std::vector<std::pair<std::size_t, std::uint64_t>>> starts_;
};

std::string What(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "a non-standard exception";
  }
}

}  // namespace

void ValidateRunOptions(const RunOptions& o) {
  auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  if (o.blocks < 2)
    bad("blocks must be at least 2 (flatness compares blocks), got " + std::to_string(o.blocks));
  if (o.blocks > 1000) bad("blocks must be at most 1000, got " + std::to_string(o.blocks));
  if (o.steps_per_block < kMinStepsPerBlock) {
    bad("steps per block must be at least " + std::to_string(kMinStepsPerBlock) +
        " (a shorter block cannot tell a sawtooth from a leak), got " +
        std::to_string(o.steps_per_block) + "; pass --steps " + std::to_string(kMinStepsPerBlock) +
        " or more");
  }
  if (o.steps_per_block > 100000)
    bad("steps per block must be at most 100000, got " + std::to_string(o.steps_per_block));
  if (o.warmup_steps < -1)
    bad("warm-up must be -1 (auto) or >= 0, got " + std::to_string(o.warmup_steps));
  if (o.warmup_steps > 1000000) bad("warm-up must be at most 1000000 steps");
  if (o.max_warmup_blocks < 0 || o.max_warmup_blocks > 1000)
    bad("max warm-up blocks must be in [0, 1000]");
  if (o.confirm_blocks < -1 || o.confirm_blocks > 1000) {
    bad("confirmation blocks must be -1 (as many as --blocks), 0 (none) or at most 1000, got " +
        std::to_string(o.confirm_blocks));
  }
  if (o.confirm_blocks == 0 && o.blocks < 3) {
    bad("with no confirmation blocks, 2 blocks have one transition, so a rise could never recur "
        "and no leak would be called growth; pass --blocks 3 or more, or leave --confirm-blocks "
        "at -1");
  }
}

void ValidateScheduleFor(const RunOptions& o, const workloads::WorkloadInfo& info) {
  if (o.steps_per_block < info.period_steps) {
    throw std::invalid_argument("workload '" + info.name + "' repeats every " +
                                std::to_string(info.period_steps) + " steps, so a block of " +
                                std::to_string(o.steps_per_block) +
                                " steps cannot tell its cycle from growth; pass --steps " +
                                std::to_string(info.period_steps) + " or more");
  }
}

Runner::Runner(RunOptions options) : options_(std::move(options)) { ValidateRunOptions(options_); }

Trace Runner::Record(const workloads::Registration& registration,
                     const ProgressFn& progress) const {
  ValidateScheduleFor(options_, registration.info);
  try {
    return RecordOrThrow(registration, progress);
  } catch (...) {  // the workload's factory or a probe's construction failed: an error result
    HeapExclusion harness_scope;
    Trace trace;
    trace.subject = SubjectOf(registration.info);
    trace.error = "setting up the run failed: " + What(std::current_exception());
    return trace;
  }
}

Trace Runner::RecordOrThrow(const workloads::Registration& registration,
                            const ProgressFn& progress) const {
  HeapExclusion harness_scope;  // lifted around the workload's own code below
  const workloads::WorkloadInfo& info = registration.info;
  Trace trace;
  trace.subject = SubjectOf(info);

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
  for (const auto& p : probes) {
    trace.probes.push_back({p->Name(), p->State()});
    for (const CounterInfo& c : p->Counters()) {
      TraceCounter tc;
      tc.name = c.name;
      tc.unit = c.unit;
      tc.exact = c.exact;
      tc.judged = c.judged;
      tc.probe = p->Name();
      tc.peak_of = c.peak_of;
      trace.counters.push_back(std::move(tc));
    }
  }
  const std::size_t n_counters = trace.counters.size();
  const int n = options_.steps_per_block;
  const int confirm_blocks =
      options_.confirm_blocks < 0 ? options_.blocks : options_.confirm_blocks;
  const int max_steps =
      (options_.warmup_steps >= 0 ? options_.warmup_steps
                                  : (options_.max_warmup_blocks + kWarmupStableBlocks) * n) +
      (options_.blocks + confirm_blocks) * n;
  for (auto& c : trace.counters) c.values.reserve(static_cast<std::size_t>(max_steps));
  trace.step_ns.reserve(static_cast<std::size_t>(max_steps));
  trace.probe_ns.reserve(static_cast<std::size_t>(max_steps));
  std::vector<double> sample;
  sample.reserve(n_counters);
  auto take_sample = [&](std::vector<double>& out) {
    out.clear();
    for (auto& p : probes) p->Sample(out);
    if (out.size() != n_counters) {
      throw std::logic_error("a probe appended " + std::to_string(out.size()) + " values for " +
                             std::to_string(n_counters) + " counters");
    }
    for (std::size_t c = 0; c < n_counters; ++c) {
      if (!std::isfinite(out[c])) {
        throw std::runtime_error("probe '" + trace.counters[c].probe + "' reported " +
                                 std::to_string(out[c]) + " for " + trace.counters[c].name +
                                 "; a probe must report a number for every sample");
      }
    }
  };

  workloads::WorkloadContext context;
  context.device = options_.device;
  context.blas_threads = options_.blas_threads;
  context.seed = options_.seed;

  int warmup = options_.warmup_steps;
  int blocks = options_.blocks;
  int planned =
      warmup >= 0 ? warmup + blocks * n : (options_.max_warmup_blocks + kWarmupStableBlocks) * n;
  bool confirmation_considered = false;
  std::vector<OutstandingSnapshot> block_end_snapshots;
  std::vector<CensusSnapshot> block_end_census;
  CensusBook census;
  StepClock clock;
  std::exception_ptr error;
  try {
    if (options_.prime) {
      // One setup, one step and one teardown before the baseline: what a process initialises
      // once for its lifetime (locale and iostream state, BLAS buffers, glibc's caches) is then
      // in place, and is not the workload's residue. A leak per setup/teardown cycle or per step
      // still shows in the measured run.
      leakbound_heap_exclude_end();
      struct Reenter {
        ~Reenter() { leakbound_heap_exclude_begin(); }
      } reenter;
      std::unique_ptr<workloads::Workload> primer = registration.make();
      primer->Setup(context);
      primer->Step(0);
      primer->Teardown();
    }
    runtime::ResetProcessPeak(options_.device);
    leakbound_heap_reset_peak();
    take_sample(sample);
    for (std::size_t c = 0; c < n_counters; ++c) trace.counters[c].baseline = sample[c];
    census.Start();
    {
      leakbound_heap_exclude_end();  // the workload's own code is what the heap counts
      struct Reenter {
        ~Reenter() { leakbound_heap_exclude_begin(); }
      } reenter;
      workload->Setup(context);
    }
    live = true;
    for (int step = 0; step < planned; ++step) {
      if (options_.stop != nullptr && options_.stop->load() != 0) {
        trace.ended_early = "interrupted by signal " + std::to_string(options_.stop->load()) +
                            " after " + std::to_string(step) + " steps";
        break;
      }
      if (step == 0) census.NextCohort(*workload, 0);
      Clock::time_point t0, t1;
      {
        leakbound_heap_exclude_end();
        struct Reenter {
          ~Reenter() { leakbound_heap_exclude_begin(); }
        } reenter;
        t0 = Clock::now();
        workload->Step(step);
        t1 = Clock::now();
      }
      take_sample(sample);
      const auto t2 = Clock::now();
      for (std::size_t c = 0; c < n_counters; ++c) trace.counters[c].values.push_back(sample[c]);
      trace.step_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
      trace.probe_ns.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count());
      const int done = step + 1;
      clock.Record(workload->Sessions());
      const int configured = options_.warmup_steps;
      const bool block_end =
          configured >= 0 ? done > configured && (done - configured) % n == 0 : done % n == 0;
      if (block_end) {
        block_end_snapshots.push_back(Outstanding(*workload, clock, step));
        census.Take(*workload, step, block_end_census);
      }
      if (block_end || (configured > 0 && done == configured)) census.NextCohort(*workload, done);
      if (warmup < 0 && block_end) {
        std::vector<std::span<const double>> exact;
        for (const TraceCounter& c : trace.counters)
          if (c.exact && c.judged) exact.emplace_back(c.values);
        const int detected = DetectWarmupEnd(exact, n, options_.max_warmup_blocks);
        if (detected >= 0) {
          warmup = detected;
        } else if (done >= (options_.max_warmup_blocks + kWarmupStableBlocks) * n) {
          warmup = options_.max_warmup_blocks * n;  // never settled: measure what follows
        }
        if (warmup >= 0) {
          trace.warmup_detected = true;
          planned = warmup + blocks * n;
        }
      }
      // The planned blocks are done: a one-time rise of an exact counter must recur in
      // confirmation blocks before Judge may call it growth.
      if (done == planned && warmup >= 0 && !confirmation_considered && confirm_blocks > 0) {
        confirmation_considered = true;
        const Schedule schedule{warmup, blocks, n};
        bool confirm =
            std::any_of(trace.counters.begin(), trace.counters.end(), [&](const TraceCounter& c) {
              return c.exact && c.judged && NeedsConfirmation(c.values, schedule);
            });
        // A census that saw survivors from one block only asks for the same confirmation.
        for (const CensusSnapshot& snap : block_end_census) {
          if (snap.step == step && JudgeCensus(snap.counter, snap.cohorts, snap.step, schedule)
                                           .outcome == CensusOutcome::kOneTime) {
            confirm = true;
          }
        }
        if (confirm) {
          blocks += confirm_blocks;
          trace.confirmation_blocks = confirm_blocks;
          planned = warmup + blocks * n;
        }
      }
      if (progress) progress(info.name, done, planned);
    }
    if (info.peak_depends_on_schedule) {
      // Each session steps on one thread, so its own high-water mark does not depend on the
      // schedule; their sum bounds what the sessions can hold at once, however they interleave.
      double bound = 0;
      for (runtime::EagerSession* s : workload->Sessions())
        if (s != nullptr) bound += static_cast<double>(s->stats().peak_bytes);
      trace.peak_bound_bytes = bound;
    }
  } catch (...) {
    error = std::current_exception();
  }
  try {
    live = false;
    leakbound_heap_exclude_end();
    struct Reenter {
      ~Reenter() { leakbound_heap_exclude_begin(); }
    } reenter;
    workload->Teardown();
    workload.reset();
  } catch (...) {
    if (!error) {
      try {
        throw std::runtime_error("teardown: " + What(std::current_exception()));
      } catch (...) {
        error = std::current_exception();
      }
    }
  }
  try {
    take_sample(sample);
    for (std::size_t c = 0; c < n_counters; ++c) trace.counters[c].final_value = sample[c];
  } catch (...) {
    if (!error) error = std::current_exception();
  }
  trace.warmup_steps = std::max(warmup, 0);
  trace.blocks = blocks;
  trace.steps_per_block = n;
  for (OutstandingSnapshot& s : block_end_snapshots) {
    const int measured = s.step + 1 - trace.warmup_steps;
    if (measured > 0 && measured % n == 0) trace.outstanding.push_back(std::move(s));
  }
  for (CensusSnapshot& s : block_end_census) {
    const int measured = s.step + 1 - trace.warmup_steps;
    if (measured > 0 && measured % n == 0) trace.census.push_back(std::move(s));
  }
  if (error) {
    trace.error = "the workload threw: " + What(error);
  } else if (trace.ended_early.empty() &&
             static_cast<int>(trace.step_ns.size()) != trace.TotalSteps()) {
    trace.error = "the run ended early";
  }
  return trace;
}

reports::WorkloadResult Runner::Run(const workloads::Registration& registration,
                                    const ProgressFn& progress) const {
  const Trace trace = Record(registration, progress);
  HeapExclusion harness_scope;
  JudgeSettings settings;
  settings.noise_floors = options_.noise_floors;
  return Judge(trace, settings);
}

std::map<std::string, NoiseFloor> Runner::Calibrate(const std::vector<std::string>& clean_workloads,
                                                    int runs) const {
  HeapExclusion harness_scope;
  std::map<std::string, std::vector<std::vector<double>>> windows;
  Runner plain(options_);
  plain.options_.noise_floors.clear();
  for (int r = 0; r < runs; ++r) {
    for (const std::string& name : clean_workloads) {
      const workloads::Registration* reg = workloads::FindWorkload(name);
      if (reg == nullptr)
        throw std::invalid_argument("calibration workload '" + name + "' is unknown");
      const Trace trace = plain.Record(*reg);
      if (!trace.error.empty() || !trace.ended_early.empty()) {
        throw std::runtime_error("calibration run of '" + name + "' failed: " + trace.error +
                                 trace.ended_early);
      }
      for (const TraceCounter& c : trace.counters) {
        if (c.exact || c.values.size() <= static_cast<std::size_t>(trace.warmup_steps)) continue;
        const auto begin = c.values.begin() + trace.warmup_steps;
        windows[c.name].emplace_back(begin, c.values.end());
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
