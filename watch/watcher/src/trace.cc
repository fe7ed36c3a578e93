// `leakbound watch`: the Trace of what a watched program sent. A program
// decides its own length, so the schedule is fitted afterwards: the last
// `blocks` x N samples are measured (N as large as the samples allow once
// warm-up is known) and everything before them is warm-up. Too few samples, or
// a program that crashed, is said in ended_early / error for Judge to report,
// never guessed around. Pure: no clocks, no I/O.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>

#include "leakbound/harness/cupti_probe.h"
#include "leakbound/harness/verdict.h"
#include "leakbound/watch/watcher.h"
#include "leakbound/watch/heap.h"

namespace leakbound::watch {

using namespace harness;  // NOLINT(google-build-using-namespace): Trace and its parts

namespace {

TraceCounter Counter(std::string name, std::string unit, bool judged, double baseline,
                     double final_value) {
  TraceCounter c;
  c.name = std::move(name);
  c.unit = std::move(unit);
  c.exact = true;
  c.judged = judged;
  c.probe = "host";
  c.baseline = baseline;
  c.final_value = final_value;
  return c;
}

// Warm-up steps given the measured-block length: detected from the judged exact
// series (first block boundary after which block min/max stop changing), or,
// when they never settle (a leak, or a foreign program's jitter), everything
// before the last `blocks` blocks.
int FitSchedule(const std::vector<TraceCounter> &counters, int samples, int blocks,
                int configured_warmup, bool *detected) {
  *detected = false;
  if (configured_warmup >= 0) return configured_warmup;
  const int block = samples / (blocks + 1);
  if (block < 1) return 0;
  std::vector<std::span<const double>> judged;
  for (const TraceCounter &c : counters) {
    if (c.judged) judged.emplace_back(c.values);
  }
  const int max_warmup_blocks = std::max(0, samples / block - blocks - kWarmupStableBlocks + 1);
  const int found = DetectWarmupEnd(judged, block, max_warmup_blocks);
  if (found >= 0) {
    *detected = true;
    return found;
  }
  return block;
}

// The cohorts of a census taken at sample `end` (a census point, else nullopt), from cohort
// `first` on, with the step each was born from: entries holds the non-empty cohorts (cohort
// index -> bytes, blocks). census_at: the process's census points (cohort k was born right after
// the k-th).
using CohortEntries = std::map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>>;
std::optional<std::vector<CensusCohort>> CohortsAt(const std::vector<int> &census_at, int end,
                                                   const CohortEntries &entries, size_t first) {
  const auto at = std::lower_bound(census_at.begin(), census_at.end(), end);
  if (at == census_at.end() || *at != end) return std::nullopt;
  const size_t index = static_cast<size_t>(at - census_at.begin());
  std::vector<CensusCohort> out;
  for (size_t k = first; k <= index && k < LEAKBOUND_HEAP_COHORTS; ++k) {
    CensusCohort cohort;
    cohort.born_step = k == 0 ? -1 : census_at[k - 1] + 1;
    const auto it = entries.find(static_cast<std::uint32_t>(k));
    if (it != entries.end()) {
      cohort.bytes = it->second.first;
      cohort.blocks = it->second.second;
    }
    out.push_back(cohort);
  }
  return out;
}

// A site's census at a block end (the sample index `end`), from the first cohort it books; empty
// when it has none there.
std::vector<CensusCohort> SiteCensusAt(const WatchRecording &recording,
                                       const std::vector<int> &census_at, int end,
                                       std::uint32_t site) {
  const auto &site_census = recording.samples[static_cast<size_t>(end)].DetailOrNone().site_census;
  const auto found = site_census.find(site);
  if (found == site_census.end()) return {};
  return CohortsAt(census_at, end, found->second.cohorts, found->second.first)
      .value_or(std::vector<CensusCohort>{});
}

// Call sites whose survivors grew from the first measured block end to the last, at every block
// end, or that have a census of their own, largest growth first.
void AddOutstanding(const WatchRecording &recording, const std::vector<int> &census_at,
                    Trace &trace) {
  const std::vector<int> ends =
      BlockEnds(Schedule{trace.warmup_steps, trace.blocks, trace.steps_per_block});
  if (ends.empty() || recording.site_updates.empty()) return;
  struct SiteState {
    std::uint64_t bytes = 0, allocations = 0;
    std::int64_t first_growth = -1, last_growth = -1;
  };
  // The sites by a dense index in the order they first appear, and their state at each block end
  // (at_end[b][i], for the sites that had appeared by then): a PyTorch process has ~15,000 sites,
  // and a map of them copied at every block end was ~10 ms of the watcher's exit.
  std::unordered_map<std::uint32_t, size_t> index;
  std::vector<std::uint32_t> sites;
  std::vector<SiteState> state;
  std::vector<std::vector<SiteState>> at_end;
  size_t next = 0;
  for (int end : ends) {
    while (next < recording.site_updates.size() &&
           recording.site_updates[next].before_sample <= static_cast<size_t>(end)) {
      const SiteUpdate &u = recording.site_updates[next++];
      const auto [at, fresh] = index.try_emplace(u.site, sites.size());
      if (fresh) {
        sites.push_back(u.site);
        state.emplace_back();
      }
      SiteState &s = state[at->second];
      const auto step = static_cast<std::int64_t>(u.before_sample);
      if (u.bytes > s.bytes && step >= trace.warmup_steps) {
        if (s.first_growth < 0) s.first_growth = step;
        s.last_growth = step;
      }
      s.bytes = u.bytes;
      s.allocations = u.allocations;
    }
    at_end.push_back(state);
  }
  const auto bytes_at = [&](size_t b, size_t i) -> std::uint64_t {
    return i < at_end[b].size() ? at_end[b][i].bytes : 0;
  };
  std::vector<std::pair<std::uint64_t, size_t>> growing;  // (growth, site's index)
  for (size_t i = 0; i < at_end.back().size(); ++i) {
    const std::uint64_t before = bytes_at(0, i), last = at_end.back()[i].bytes;
    bool rising = last > before;
    for (size_t b = 1; rising && b < at_end.size(); ++b) rising = bytes_at(b, i) >= bytes_at(b - 1, i);
    // A site with a census of its own is kept too: its live bytes may fall at a block end while
    // it leaks beside a working set (the judge reads its census).
    const bool has_census =
        !census_at.empty() &&
        recording.samples[static_cast<size_t>(ends.back())].DetailOrNone().site_census.contains(
            sites[i]);
    if (rising || has_census) growing.emplace_back(last > before ? last - before : 0, i);
  }
  // Largest growth first; among equal growths, the larger site id first.
  std::sort(growing.begin(), growing.end(), [&](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : sites[a.second] > sites[b.second];
  });
  for (size_t b = 0; b < ends.size(); ++b) {
    OutstandingSnapshot snapshot;
    snapshot.step = ends[b];
    for (const auto &[growth, i] : growing) {
      if (i >= at_end[b].size()) continue;
      const std::uint32_t site = sites[i];
      const SiteState &then = at_end[b][i];
      const auto name = recording.site_names.find(site);
      OutstandingRow row;
      row.op = name == recording.site_names.end() ? "site " + std::to_string(site) : name->second;
      row.role = recording.mapping_sites.contains(site)  ? "mapping"
                 : recording.device_sites.contains(site) ? "device"
                                                         : "heap";
      row.scope = "none";
      row.bytes = then.bytes;
      row.allocations = then.allocations;
      row.oldest_step = then.first_growth;
      row.newest_step = then.last_growth;
      row.census = SiteCensusAt(recording, census_at, ends[b], site);
      snapshot.rows.push_back(std::move(row));
    }
    trace.outstanding.push_back(std::move(snapshot));
  }
}

// The censuses at the block ends (each one a census point by construction), as cohorts with the
// step each was born from.
void AddCensus(const WatchRecording &recording, const std::vector<int> &census_at, Trace &trace) {
  for (int end : BlockEnds(Schedule{trace.warmup_steps, trace.blocks, trace.steps_per_block})) {
    auto cohorts =
        CohortsAt(census_at, end,
                  recording.samples[static_cast<size_t>(end)].DetailOrNone().census, 0);
    if (!cohorts) continue;
    CensusSnapshot snap;
    snap.counter = "host.heap_bytes";
    snap.step = end;
    snap.cohorts = std::move(*cohorts);
    trace.census.push_back(std::move(snap));
  }
}

// A series sampled at some steps only (device, framework): before its first
// value it is 0 (the ledger had seen nothing), afterwards the last value holds
// until the next.
TraceCounter Sparse(const CounterInfo &info, const std::string &probe,
                    const std::vector<std::optional<std::uint64_t>> &values) {
  TraceCounter c = Counter(info.name, info.unit, info.judged, 0, 0);
  c.exact = info.exact;
  c.probe = probe;
  double last = 0;
  for (const std::optional<std::uint64_t> &v : values) {
    if (v) last = static_cast<double>(*v);
    c.values.push_back(last);
  }
  c.final_value = last;
  return c;
}

// The CUPTI ledger's counters (names, units and judged flags are CuptiProbe's),
// with the probe state the injection reported, or why none reported. Only when
// a device side was expected or arrived.
void AddDeviceCounters(const WatchRecording &recording, Trace &trace) {
  const auto state = recording.probe_states.find("cupti");
  const bool any = std::any_of(recording.samples.begin(), recording.samples.end(),
                               [](const WatchSample &s) { return s.has_device; });
  if (state == recording.probe_states.end() && !any && !recording.device_expected) return;
  trace.probes.push_back({"cupti", state != recording.probe_states.end()
                                       ? state->second
                                       : "unavailable: " + recording.device_absent_reason});
  static const std::vector<CounterInfo> kInfos = CuptiProbe::LedgerCounters();
  for (size_t i = 0; i < kInfos.size() && i < LEAKBOUND_DEVICE_VALUE_COUNT; ++i) {
    std::vector<std::optional<std::uint64_t>> values;
    for (const WatchSample &s : recording.samples) {
      values.push_back(s.has_device ? std::optional<std::uint64_t>(s.DetailOrNone().device[i])
                                    : std::nullopt);
    }
    trace.counters.push_back(Sparse(kInfos[i], "cupti", values));
  }
}

// Exact counters a framework read at each step ("torch.allocated_bytes"), probe
// = the name's first component, state "active" unless the program said
// otherwise.
void AddFrameworkCounters(const WatchRecording &recording, Trace &trace) {
  std::set<std::string> names;
  for (const WatchSample &s : recording.samples) {
    for (const auto &[name, value] : s.DetailOrNone().framework) names.insert(name);
  }
  std::set<std::string> probes;
  for (const std::string &name : names) {
    const std::string probe = name.substr(0, name.find('.'));
    std::vector<std::optional<std::uint64_t>> values;
    for (const WatchSample &s : recording.samples) {
      const auto &framework = s.DetailOrNone().framework;
      const auto it = framework.find(name);
      values.push_back(it == framework.end() ? std::nullopt
                                               : std::optional<std::uint64_t>(it->second));
    }
    trace.counters.push_back(Sparse({name, "bytes", true, true, false}, probe, values));
    if (probes.insert(probe).second) {
      const auto state = recording.probe_states.find(probe);
      trace.probes.push_back(
          {probe, state == recording.probe_states.end() ? "active" : state->second});
    }
  }
}

// RSS and PSS as read by watch (WatchSample::has_private), each sample carrying the last value
// read (the first read before it): noisy, never judged (docs/watch.md, "Process trees").
void AddPrivateMemory(const WatchRecording &recording, Trace &trace) {
  const auto first = std::find_if(recording.samples.begin(), recording.samples.end(),
                                  [](const WatchSample &s) { return s.has_private; });
  if (first == recording.samples.end()) return;
  TraceCounter rss = Counter("process.rss_bytes", "bytes", false, double(first->rss_bytes),
                             double(first->rss_bytes));
  TraceCounter pss = Counter("process.pss_bytes", "bytes", false, double(first->pss_bytes),
                             double(first->pss_bytes));
  std::uint64_t last_rss = first->rss_bytes, last_pss = first->pss_bytes;
  for (const WatchSample &s : recording.samples) {
    if (s.has_private) {
      last_rss = s.rss_bytes;
      last_pss = s.pss_bytes;
    }
    rss.values.push_back(double(last_rss));
    pss.values.push_back(double(last_pss));
  }
  rss.final_value = rss.values.back();
  pss.final_value = pss.values.back();
  trace.counters.push_back(std::move(rss));
  trace.counters.push_back(std::move(pss));
}

// Whether the command is a Python interpreter told to ignore PYTHON* variables (-E, or -I:
// isolated mode), alone or in a cluster of short options ("-IB") before the script or -c/-m:
// then PYTHONPATH (leakbound's Python module, --step-on) and PYTHONMALLOC are not used. A
// command given as one string (a process of the job) is split at spaces.
bool IgnoresPythonEnvironment(const std::vector<std::string> &command) {
  std::vector<std::string> args;
  for (const std::string &part : command) {
    for (size_t at = 0; at < part.size();) {
      const size_t end = std::min(part.find(' ', at), part.size());
      if (end > at) args.push_back(part.substr(at, end - at));
      at = end + 1;
    }
  }
  if (args.empty()) return false;
  const std::string name = args.front().substr(args.front().rfind('/') + 1);
  if (name.rfind("python", 0) != 0) return false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a.size() < 2 || a[0] != '-' || a[1] == '-') return false;  // the script, or --long
    for (size_t k = 1; k < a.size(); ++k) {
      if (a[k] == 'I' || a[k] == 'E') return true;
      if (a[k] == 'c' || a[k] == 'm' || a[k] == 'W' || a[k] == 'X') return false;  // takes a value
    }
  }
  return false;
}

}  // namespace

Trace BuildWatchTrace(const WatchRecording &recording, const WatchOptions &options) {
  Trace trace;
  trace.subject.name = options.name;
  trace.subject.kind = "watched";
  trace.subject.expectation = reports::kPass;
  std::string command;
  for (const std::string &arg : options.command) command += (command.empty() ? "" : " ") + arg;
  trace.subject.description = "`" + command + "` (" + recording.Ending() + ")";
  const leakbound_watch_counters start = recording.at_start;
  const leakbound_watch_counters last =
      recording.samples.empty() ? start : recording.samples.back().counters;
  // HELLO carries the heap's state when the process began; a heap that could not record some
  // allocations later (tables full, or not mappable) is degraded from then on.
  std::string heap_state = recording.heap_state;
  if (heap_state == "active" && last.untracked_allocations > 0) {
    heap_state = "active, degraded: " + std::to_string(last.untracked_allocations) +
                 " allocations could not be recorded (untracked_allocations), the first after "
                 "the process began";
  }
  trace.probes.push_back({"host", heap_state});
  // Until the schedule is known: the state when the preload started and the
  // last sample.
  trace.counters = {
      Counter("host.heap_bytes", "bytes", true, start.heap_bytes, last.heap_bytes),
      Counter("host.heap_allocations", "count", true, start.heap_allocations,
              last.heap_allocations),
      Counter("host.mapped_bytes", "bytes", true, start.mapped_bytes, last.mapped_bytes),
      Counter("host.heap_peak_bytes", "bytes", false, start.heap_bytes, last.heap_peak_bytes),
      Counter("host.total_allocations", "count", false, start.total_allocations,
              last.total_allocations),
  };
  trace.counters[3].peak_of = "host.heap_bytes";
  std::uint64_t previous_ns = 0;
  for (const WatchSample &s : recording.samples) {
    const leakbound_watch_counters &c = s.counters;
    const double values[] = {double(c.heap_bytes), double(c.heap_allocations),
                             double(c.mapped_bytes), double(c.heap_peak_bytes),
                             double(c.total_allocations)};
    for (size_t i = 0; i < trace.counters.size(); ++i)
      trace.counters[i].values.push_back(values[i]);
    trace.step_ns.push_back(previous_ns == 0 ? 0.0 : double(s.time_ns - previous_ns));
    trace.probe_ns.push_back(0.0);
    previous_ns = s.time_ns;
  }
  AddDeviceCounters(recording, trace);
  AddFrameworkCounters(recording, trace);
  AddPrivateMemory(recording, trace);

  // Census points (docs/watch.md, "Census"): the judged window ends at the last one, and its
  // block ends are census points, i.e. multiples of the census unit then in effect.
  std::vector<int> census_at;
  for (size_t i = 0; i < recording.samples.size(); ++i) {
    if (recording.samples[i].has_census) census_at.push_back(static_cast<int>(i));
  }
  const bool census = recording.hello && recording.heap_state.rfind("active", 0) == 0 &&
                      !census_at.empty() && census_at.front() == 0;
  int unit = 1;
  int judged = static_cast<int>(recording.samples.size());
  if (census) {
    if (census_at.size() >= 2) unit = census_at.back() - census_at[census_at.size() - 2];
    judged = census_at.back() + 1;
    const int tail = static_cast<int>(recording.samples.size()) - judged;
    if (tail > 0) {
      trace.subject.description += "; judged up to step " + std::to_string(judged - 1) +
                                   ", the last census (the " + std::to_string(tail) +
                                   " later steps are shown, in no block)";
    }
  }
  const int samples = judged;
  const int blocks = options.blocks;
  const std::string unit_name =
      options.interval_ns > 0 || recording.at_clock ? "samples" : "steps";
  const int arrived = static_cast<int>(recording.samples.size());
  if (recording.term_signal != 0 && recording.Interruption() != recording.term_signal) {
    trace.error = "the program was " + recording.Ending() + " after " + std::to_string(arrived) +
                  " " + unit_name;
  } else if (recording.Interruption() != 0) {
    trace.ended_early = "interrupted (" + recording.Ending() + ") after " +
                        std::to_string(arrived) + " " + unit_name;
  }
  bool detected = false;
  int warmup =
      samples >= MinimumSamples(blocks)
          ? FitSchedule(trace.counters, samples, blocks, options.warmup_steps, &detected)
          : 0;
  int per_block = (samples - std::min(warmup, samples)) / blocks;
  if (census) {  // whole census units: warm-up rounded up, blocks rounded down
    warmup = (std::min(warmup, samples) + unit - 1) / unit * unit;
    per_block = std::max(0, samples - warmup) / (blocks * unit) * unit;
  }
  if (samples < MinimumSamples(blocks) || per_block < kMinStepsPerBlock) {
    if (trace.ended_early.empty()) {
      trace.ended_early =
          (samples < arrived ? "only " + std::to_string(samples) + " of the " +
                                   std::to_string(arrived) + " " + unit_name +
                                   " that arrived can be judged (those up to the last census)"
                             : "only " + std::to_string(samples) + " " + unit_name + " arrived") +
          "; judging needs at least " +
          std::to_string(options.warmup_steps > 0
                             ? options.warmup_steps + blocks * kMinStepsPerBlock
                             : MinimumSamples(blocks)) +
          " (warm-up, then " + std::to_string(blocks) + " blocks of " +
          std::to_string(kMinStepsPerBlock) + "): " +
          (recording.ChannelLost()
               ? "watch's channel closed before the program ended (see the notes), so later steps "
                 "were not seen"
           : !options.step_on.empty() && IgnoresPythonEnvironment(options.command)
               ? "python was started with -I or -E, which ignore PYTHONPATH and PYTHONMALLOC, so "
                 "leakbound's module that marks --step-on steps was never imported; drop -I/-E, "
                 "or import leakbound and call leakbound.step() in the script"
           : recording.at_clock
               ? "it marks no step of its own and was sampled at the job's steps; mark its "
                 "steps (LEAKBOUND_STEP() in C, --step-on) or run it longer"
           : options.interval_ns > 0 ? "run the program longer or shorten --interval"
                                     : "run the program for more steps, mark steps (LEAKBOUND_STEP() in C, "
                                       "--step-on, --step-range)" +
                                           std::string(blocks > 3 ? ", or lower --blocks (3 at least)"
                                                                  : ""));
    }
    trace.warmup_steps = static_cast<int>(recording.samples.size());
    trace.blocks = 0;
    trace.steps_per_block = 0;
    return trace;
  }
  trace.steps_per_block = per_block;
  trace.blocks = blocks;
  trace.warmup_steps = samples - blocks * per_block;  // the remainder goes to warm-up
  trace.tail_steps = static_cast<int>(recording.samples.size()) - samples;
  trace.warmup_detected = detected;
  // A program's exit is not a teardown and its start is not a setup
  // (interpreters build their world before the first step, fill free lists and
  // caches once, and leave it all to the OS at exit), so a watched trace has no
  // baseline to return to: baseline and final are both the last sample,
  // return-to-baseline is vacuous, and memory is judged on growth across blocks
  // only. A one-time rise stays visible in the series and the peak.
  // docs/watch.md, "Verdicts".
  for (TraceCounter &c : trace.counters) {
    if (!c.judged) continue;
    c.baseline = c.values.back();
    c.final_value = c.values.back();
  }
  AddOutstanding(recording, census ? census_at : std::vector<int>{}, trace);
  if (census) AddCensus(recording, census_at, trace);
  return trace;
}

}  // namespace leakbound::watch
