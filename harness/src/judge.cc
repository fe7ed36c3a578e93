// Judge: the verdict of one Trace, computed from the trace alone (docs/verdicts.md). Derived
// counters are computed here, once, and only from probes that were active: a reconciliation of
// the CUPTI ledger against the runtime when CUPTI saw the run, the block-end classification of
// the ledger (allocator bypass, library handles, pool fragmentation) through cupti/classify.h.
#include "leakbound/harness/judge.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "leakbound/cupti/classify.h"
#include "leakbound/cupti/counters.h"
#include "leakbound/cupti/observer.h"
#include "leakbound/reports/format.h"

namespace leakbound::harness {
namespace {

using reports::VerdictClass;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

bool ProbeActive(const Trace& trace, const std::string& probe) {
  for (const ProbeState& p : trace.probes)
    if (p.name == probe) return p.active();
  return false;
}

std::string ProbeStateOf(const Trace& trace, const std::string& probe) {
  for (const ProbeState& p : trace.probes)
    if (p.name == probe) return p.state;
  return "not recorded";
}

// The CUPTI ledger as its counters recorded it at sample i (bucket bytes and pool reserve; the
// per-bucket allocation counts are not sampled, so the ledger's total stands in for the device
// bucket's).
cupti::LedgerSnapshot LedgerAt(const Trace& trace, std::size_t i, bool baseline, bool final) {
  cupti::LedgerSnapshot s;
  auto value = [&](const char* name) -> std::uint64_t {
    const TraceCounter* c = trace.Find(name);
    if (c == nullptr) return 0;
    const double v = baseline ? c->baseline : final ? c->final_value : c->values[i];
    return v > 0 ? static_cast<std::uint64_t>(v) : 0;
  };
  auto set = [&](cupti::MemoryBucket bucket, std::uint64_t bytes) {
    s.buckets[static_cast<std::size_t>(bucket)].live_bytes = bytes;
  };
  set(cupti::MemoryBucket::kDevice, value(cupti::kDeviceBytesCounter));
  set(cupti::MemoryBucket::kPool, value(cupti::kPoolBytesCounter));
  set(cupti::MemoryBucket::kStatic, value(cupti::kStaticBytesCounter));
  set(cupti::MemoryBucket::kManaged, value(cupti::kManagedBytesCounter));
  set(cupti::MemoryBucket::kPinnedHost, value(cupti::kPinnedBytesCounter));
  s.buckets[static_cast<std::size_t>(cupti::MemoryBucket::kDevice)].live_allocations =
      value(cupti::kLiveAllocationsCounter);
  s.pool_reserved_bytes = value(cupti::kPoolReservedBytesCounter);
  s.pool_utilized_bytes = value(cupti::kPoolBytesCounter);
  for (const auto& b : s.buckets) {
    s.live_bytes += b.live_bytes;
    s.live_allocations += b.live_allocations;
  }
  return s;
}

std::uint64_t NonNegative(double v) { return v > 0 ? static_cast<std::uint64_t>(v) : 0; }

// Reconciliation: ledger device-resident bytes minus what an allocator says it holds (the
// runtime's live bytes, or PyTorch's reserved bytes under `watch`), per sample, as a derived exact
// counter: memory owned by someone else. Only when CUPTI and the allocator's probe were active.
std::optional<TraceCounter> Reconciliation(const Trace& trace, const std::string& allocator_counter,
                                           const std::string& derived_name) {
  const TraceCounter* runtime_live = trace.Find(allocator_counter);
  if (!ProbeActive(trace, "cupti") || runtime_live == nullptr ||
      trace.Find(cupti::kDeviceBytesCounter) == nullptr ||
      (!runtime_live->probe.empty() && !ProbeActive(trace, runtime_live->probe))) {
    return std::nullopt;
  }
  const std::size_t n = runtime_live->values.size();
  std::vector<cupti::LedgerSnapshot> snapshots;
  std::vector<std::uint64_t> runtime;
  snapshots.reserve(n + 2);
  snapshots.push_back(LedgerAt(trace, 0, true, false));
  runtime.push_back(NonNegative(runtime_live->baseline));
  for (std::size_t i = 0; i < n; ++i) {
    snapshots.push_back(LedgerAt(trace, i, false, false));
    runtime.push_back(NonNegative(runtime_live->values[i]));
  }
  snapshots.push_back(LedgerAt(trace, 0, false, true));
  runtime.push_back(NonNegative(runtime_live->final_value));
  const cupti::Reconciliation r =
      cupti::Reconcile(snapshots, runtime, static_cast<std::size_t>(trace.warmup_steps) + 1);
  TraceCounter c;
  c.name = derived_name;
  c.unit = "bytes";
  c.exact = true;
  c.judged = true;
  c.probe = "cupti";
  c.baseline = static_cast<double>(r.owned_by_others_bytes.front());
  c.final_value = static_cast<double>(r.owned_by_others_bytes.back());
  for (std::size_t i = 1; i + 1 < r.owned_by_others_bytes.size(); ++i) {
    c.values.push_back(static_cast<double>(r.owned_by_others_bytes[i]));
  }
  return c;
}

CounterInfo InfoOf(const TraceCounter& c) {
  return {c.name, c.unit, c.exact, c.judged, false, c.peak_of};
}

// The census rule's outcomes as the report names them.
std::string CensusOutcomeName(CensusOutcome outcome) {
  switch (outcome) {
    case CensusOutcome::kBounded: return "bounded";
    case CensusOutcome::kGrowth: return "growth";
    case CensusOutcome::kRecurring: return "recurring";
    case CensusOutcome::kSettling: return "settling";
    case CensusOutcome::kThinning: return "thinning";
    case CensusOutcome::kOneTime: return "one-time";
    case CensusOutcome::kTooFewBlocks: return "too few blocks";
  }
  return "bounded";
}

// The census of the rows of one key in a snapshot (call sites sharing a name summed), from the
// latest first cohort among them; empty when a row of the key has none.
std::vector<CensusCohort> RowCensus(const OutstandingSnapshot& snapshot,
                                    const std::tuple<std::string, std::string, std::string>& k) {
  std::map<std::int64_t, CensusCohort> by_step;
  std::int64_t from = -2;
  for (const OutstandingRow& row : snapshot.rows) {
    if (std::tie(row.op, row.role, row.scope) != std::tie(std::get<0>(k), std::get<1>(k),
                                                          std::get<2>(k)))
      continue;
    if (row.census.empty()) return {};
    from = std::max(from, row.census.front().born_step);
    for (const CensusCohort& c : row.census) {
      CensusCohort& into = by_step[c.born_step];
      into.born_step = c.born_step;
      into.bytes += c.bytes;
      into.blocks += c.blocks;
    }
  }
  std::vector<CensusCohort> out;
  for (const auto& [step, cohort] : by_step)
    if (step >= from) out.push_back(cohort);
  return out;
}

// A row's own census judged as the exact counters' are (docs/verdicts.md, "Census"), over the
// measured blocks it covers whole: a call site's census starts when watch first asked for its
// callers, and the blocks before that are "before". Nothing when it has no census at the last
// block end, or covers fewer than kCensusMinAgedBlocks + 1 blocks.
std::optional<CensusJudgement> JudgeRowCensus(
    const Trace& trace, const std::tuple<std::string, std::string, std::string>& k) {
  const auto n = static_cast<std::size_t>(std::max(trace.steps_per_block, 1));
  if (trace.outstanding.size() != static_cast<std::size_t>(trace.blocks) || trace.blocks < 1)
    return std::nullopt;
  const std::vector<CensusCohort> final_census = RowCensus(trace.outstanding.back(), k);
  if (final_census.empty()) return std::nullopt;
  // Blocks whose every cohort it books: from the first block starting at or after its first
  // cohort's birth (the warm-up's cohorts count as before).
  int skip = 0;
  const std::int64_t from = final_census.front().born_step;
  while (skip < trace.blocks &&
         trace.warmup_steps + static_cast<std::int64_t>(skip) * static_cast<std::int64_t>(n) <
             from)
    ++skip;
  const Schedule schedule{trace.warmup_steps + skip * static_cast<int>(n), trace.blocks - skip,
                          static_cast<int>(n)};
  if (schedule.blocks < kCensusMinAgedBlocks + 1) return std::nullopt;
  std::vector<std::vector<CensusCohort>> block_ends(static_cast<std::size_t>(schedule.blocks - 1));
  for (int b = 0; b + 1 < schedule.blocks; ++b) {
    block_ends[static_cast<std::size_t>(b)] =
        RowCensus(trace.outstanding[static_cast<std::size_t>(skip + b)], k);
  }
  return JudgeCensus("call site", final_census, trace.outstanding.back().step, schedule, false,
                     block_ends.back(), block_ends);
}

// The rows of the last measured block end, with how each grew across the block ends: first those
// that rose at every block end (survivors kept from every block; fastest growth first), then those
// that grew from the first block end to the last without rising at every one (a start-up cache
// filled late, one large allocation), then at most six steady ones, largest first.
std::vector<reports::Attribution> Attribute(const Trace& trace) {
  std::vector<reports::Attribution> growing, grew, steady;
  if (trace.outstanding.empty()) return growing;
  using Key = std::tuple<std::string, std::string, std::string>;
  auto key = [](const OutstandingRow& r) { return Key{r.op, r.role, r.scope}; };
  std::vector<std::map<Key, std::uint64_t>> bytes_at;  // each block end's rows, by key
  for (const OutstandingSnapshot& snapshot : trace.outstanding) {
    std::map<Key, std::uint64_t>& rows = bytes_at.emplace_back();
    for (const OutstandingRow& row : snapshot.rows) rows[key(row)] += row.bytes;
  }
  auto bytes_in = [&](std::size_t end, const Key& k) -> std::uint64_t {
    const auto found = bytes_at[end].find(k);
    return found == bytes_at[end].end() ? 0 : found->second;
  };
  const OutstandingSnapshot& first = trace.outstanding.front();
  const OutstandingSnapshot& last = trace.outstanding.back();
  // One row per key at the last block end (two call sites can share a name: two return
  // addresses on one source line): bytes and allocations summed, the widest age range.
  std::vector<OutstandingRow> merged;
  std::map<Key, std::size_t> index;
  for (const OutstandingRow& row : last.rows) {
    const auto [at, added] = index.emplace(key(row), merged.size());
    if (added) {
      merged.push_back(row);
      continue;
    }
    OutstandingRow& into = merged[at->second];
    into.bytes += row.bytes;
    into.allocations += row.allocations;
    if (row.oldest_step >= 0 && (into.oldest_step < 0 || row.oldest_step < into.oldest_step))
      into.oldest_step = row.oldest_step;
    into.newest_step = std::max(into.newest_step, row.newest_step);
  }
  for (const OutstandingRow& row : merged) {
    reports::Attribution a;
    a.op = row.op;
    a.role = row.role;
    a.scope = row.scope;
    a.bytes = row.bytes;
    a.allocations = row.allocations;
    // Ages in steps at the last block end: an allocation made in step s is (end - s) steps old.
    a.oldest_age_steps = last.step - std::max<std::int64_t>(row.oldest_step, 0);
    a.newest_age_steps = last.step - std::max<std::int64_t>(row.newest_step, 0);
    const Key k = key(row);
    a.transitions = static_cast<int>(bytes_at.size()) - 1;
    for (std::size_t end = 1; end < bytes_at.size(); ++end) {
      a.rose_at += bytes_in(end, k) > bytes_in(end - 1, k) ? 1 : 0;
    }
    const double growth = static_cast<double>(row.bytes) - static_cast<double>(bytes_in(0, k));
    if (last.step > first.step) a.bytes_per_step = growth / (last.step - first.step);
    bool grows = a.transitions > 0 && a.rose_at == a.transitions;
    const std::optional<CensusJudgement> census = JudgeRowCensus(trace, k);
    if (census && census->outcome != CensusOutcome::kTooFewBlocks) {
      // Its own census decides (docs/watch.md, "Growing"): survivors from every aged block.
      a.census = CensusOutcomeName(census->outcome);
      a.survivor_bytes = census->survivor_bytes;
      a.census_from_block = trace.blocks - static_cast<int>(census->survivor_bytes.size()) + 1;
      grows = census->outcome == CensusOutcome::kGrowth ||
              census->outcome == CensusOutcome::kRecurring;
      if (grows) a.bytes_per_step = census->rate_per_step;
    }
    if (grows && a.bytes_per_step > 0) {
      growing.push_back(a);
    } else {
      (growth > 0 ? grew : steady).push_back(a);
    }
  }
  auto by_rate = [](const auto& a, const auto& b) {
    return a.bytes_per_step != b.bytes_per_step ? a.bytes_per_step > b.bytes_per_step
                                                : a.bytes > b.bytes;
  };
  auto by_bytes = [](const auto& a, const auto& b) { return a.bytes > b.bytes; };
  std::stable_sort(growing.begin(), growing.end(), by_rate);
  std::stable_sort(grew.begin(), grew.end(), by_rate);
  std::stable_sort(steady.begin(), steady.end(), by_bytes);
  if (steady.size() > 6) steady.resize(6);
  growing.insert(growing.end(), grew.begin(), grew.end());
  growing.insert(growing.end(), steady.begin(), steady.end());
  return growing;
}

// Findings of the ledger's block-end classification, attached to the CUPTI counters they name.
void ClassifyLedger(const Trace& trace, const Schedule& schedule,
                    std::vector<reports::CounterVerdict>& verdicts) {
  if (!ProbeActive(trace, "cupti") || trace.Find(cupti::kDeviceBytesCounter) == nullptr) return;
  std::vector<cupti::LedgerSnapshot> ends;
  std::vector<std::uint64_t> runtime;
  const TraceCounter* runtime_live = trace.Find("runtime.live_bytes");
  for (int end : BlockEnds(schedule)) {
    ends.push_back(LedgerAt(trace, static_cast<std::size_t>(end), false, false));
    if (runtime_live != nullptr)
      runtime.push_back(NonNegative(runtime_live->values[static_cast<std::size_t>(end)]));
  }
  const cupti::Classification classification = cupti::ClassifyBlockEnds(ends, runtime);
  static const std::map<std::string, std::string> kCounterOf = {
      {"device", cupti::kDeviceBytesCounter},
      {"pool", cupti::kPoolBytesCounter},
      {"static", cupti::kStaticBytesCounter},
      {"other", cupti::kStaticBytesCounter},
      {"managed", cupti::kManagedBytesCounter},
      {"pinned_host", cupti::kPinnedBytesCounter},
      {"pool_reserved", cupti::kPoolReservedBytesCounter}};
  for (const cupti::Finding& f : classification.findings) {
    const auto it = kCounterOf.find(f.series);
    if (it == kCounterOf.end()) continue;
    for (reports::CounterVerdict& v : verdicts) {
      if (v.counter != it->second || !v.judged) continue;
      v.evidence += "; " + std::string(cupti::FindingKindName(f.kind)) + ": " + f.evidence;
      if (f.kind == cupti::FindingKind::kPoolFragmentation &&
          v.verdict == reports::kUnboundedGrowth)
        v.verdict = reports::kPoolFragmentation;
    }
  }
}

}  // namespace

TraceSubject SubjectOf(const workloads::WorkloadInfo& info) {
  TraceSubject s;
  s.name = info.name;
  s.description = info.description;
  s.kind = workloads::KindName(info.kind);
  s.expectation = info.expectation;
  s.detected_by = info.detected_by;
  s.peak_budget_bytes = info.peak_budget_bytes;
  s.period_steps = info.period_steps;
  return s;
}

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
        used->verdict == reports::kPass && used->judged) {
      reserved->verdict = reports::kPoolFragmentation;
      reserved->evidence += "; bytes in use (" + used_name +
                            ") stay flat: the pool reserves "
                            "memory it does not reuse";
    }
  }
}

namespace {

// The top line of a PASS says only what was judged: "back at its baseline" only where return to
// baseline was judged, "flat" only where every judged counter was flat.
std::string BoundedSummary(const TraceSubject& subject, const reports::WorkloadResult& result) {
  bool all_flat = true, census = false;
  for (const reports::CounterVerdict& v : result.counters) {
    if (!v.judged) continue;
    if (v.evidence.find(" flat over ") == std::string::npos) all_flat = false;
    if (!v.survivor_bytes.empty()) census = true;
  }
  std::string line = all_flat ? "every judged counter is flat across blocks"
                              : std::string("no judged counter grows across blocks") +
                                    (census ? " (census of survivors by birth block)" : "");
  line += subject.kind == "watched" ? "; return to baseline not judged (a watched program)"
                                    : " and each is back at its baseline";
  return line;
}

}  // namespace

void CombineVerdicts(const TraceSubject& subject, reports::WorkloadResult& result) {
  const reports::CounterVerdict* worst = nullptr;
  const reports::CounterVerdict* expected_counter = nullptr;
  const reports::CounterVerdict* unsettled = nullptr;  // a census that cannot decide yet
  for (const reports::CounterVerdict& v : result.counters) {
    if (v.counter == subject.detected_by) expected_counter = &v;
    if (v.verdict == reports::kPass) continue;
    if (v.verdict == reports::kInconclusive) {
      if (unsettled == nullptr) unsettled = &v;
      continue;
    }
    // Prefer the counter the zoo entry names when it carries the worst class.
    if (worst == nullptr || reports::Severity(v.verdict) > reports::Severity(worst->verdict) ||
        (reports::Severity(v.verdict) == reports::Severity(worst->verdict) &&
         v.counter == subject.detected_by)) {
      worst = &v;
    }
  }
  if (worst == nullptr && unsettled != nullptr) worst = unsettled;  // any finding beats "not yet"
  if (result.verdict != reports::kError && result.verdict != reports::kInconclusive) {
    result.verdict = worst == nullptr ? reports::kPass : worst->verdict;
    result.evidence = worst == nullptr ? BoundedSummary(subject, result) : worst->evidence;
    if (worst == nullptr) {
      // A PASS after a one-time rise says so: the reader sees what rose and that it did not recur.
      for (const reports::CounterVerdict& v : result.counters) {
        if (v.judged && v.survivor_bytes.empty() &&
            v.evidence.find("one-time rise") != std::string::npos) {
          result.evidence = "bounded: " + v.evidence;
          break;
        }
      }
    }
  }
  bool met = result.verdict == subject.expectation;
  if (met && subject.kind == "zoo" && !subject.detected_by.empty()) {
    met = expected_counter != nullptr && expected_counter->verdict == subject.expectation;
  }
  result.met_expectation = met;
}

reports::WorkloadResult Judge(const Trace& trace, const JudgeSettings& settings) {
  reports::WorkloadResult result;
  result.name = trace.subject.name;
  result.description = trace.subject.description;
  result.kind = trace.subject.kind;
  result.expectation = trace.subject.expectation;
  result.warmup_steps = trace.warmup_steps;
  result.blocks = trace.blocks;
  result.steps_per_block = trace.steps_per_block;
  for (const TraceCounter& c : trace.counters) {
    result.series.push_back({c.name, c.unit, c.exact, c.values});
  }
  auto fail = [&](VerdictClass verdict, const std::string& evidence) {
    result.verdict = verdict;
    result.evidence = evidence;
    if (!trace.error.empty() && verdict == reports::kInconclusive) {  // a judged failed recording
      result.verdict = reports::kError;
      result.evidence = trace.error + "; no verdict on what arrived (" + evidence + ")";
    }
    CombineVerdicts(trace.subject, result);
    return result;
  };
  const std::int64_t total = trace.TotalSteps();
  const bool complete =
      trace.blocks >= 2 && trace.steps_per_block >= 1 && trace.warmup_steps >= 0 &&
      !trace.counters.empty() &&
      std::all_of(trace.counters.begin(), trace.counters.end(), [&](const TraceCounter& c) {
        return static_cast<std::int64_t>(c.values.size()) == trace.SampleCount();
      });
  // A watched program killed by a signal is judged on what arrived when that fills its
  // schedule: a leak it shows is a finding whatever the ending (the leaking program is the one
  // the kernel kills); anything else stays an error that names the ending. A Runner's failed
  // recording (a workload or its teardown threw) is an error, never judged: its final sample
  // may come from a teardown cut short.
  const bool watched = trace.subject.kind == "watched";
  const bool judge_failed = watched && complete;
  if (!trace.error.empty() && !judge_failed) {
    return fail(reports::kError, watched
                                     ? trace.error + "; the series are what arrived"
                                     : trace.error);
  }
  if (!complete) {
    if (!trace.ended_early.empty()) return fail(reports::kInconclusive, trace.ended_early);
    return fail(reports::kError, "the trace holds " + std::to_string(trace.blocks) +
                                     " measured blocks (at least 2 are needed) or series "
                                     "shorter than its schedule");
  }
  const Schedule schedule{trace.warmup_steps, trace.blocks, trace.steps_per_block};
  result.block_ends = BlockEnds(schedule);

  std::vector<TraceCounter> counters = trace.counters;
  for (const auto& [allocator, name] :
       {std::pair<std::string, std::string>{"runtime.live_bytes", "reconcile.owned_by_others_bytes"},
        {"torch.reserved_bytes", "reconcile.outside_torch_bytes"}}) {
    if (std::optional<TraceCounter> derived = Reconciliation(trace, allocator, name)) {
      result.series.push_back({derived->name, derived->unit, derived->exact, derived->values});
      counters.push_back(std::move(*derived));
    }
  }

  // The summary's steady / peak / final figures: the runtime's live bytes when the runtime ran,
  // else the exact host heap (a watched program).
  const TraceCounter* live = trace.Find("runtime.live_bytes");
  if (live == nullptr) live = trace.Find("host.heap_bytes");
  try {
    for (const TraceCounter& c : counters) {
      JudgeOptions judge;
      CounterInfo info = InfoOf(c);
      std::string unavailable;
      if (!c.probe.empty() && !ProbeActive(trace, c.probe) &&
          std::any_of(trace.probes.begin(), trace.probes.end(),
                      [&](const ProbeState& p) { return p.name == c.probe; })) {
        unavailable = ProbeStateOf(trace, c.probe);
        info.judged = false;
      }
      if (!c.exact && info.judged) {
        const auto it = settings.noise_floors.find(c.name);
        if (it == settings.noise_floors.end()) {
          info.missing_noise_floor = true;
          info.judged = false;
        } else {
          judge.noise = it->second;
        }
      }
      judge.judge_return_to_baseline = trace.subject.kind != "watched";
      if (c.name == "runtime.live_bytes" && trace.subject.peak_budget_bytes) {
        // The budget is what the workload may hold above its baseline.
        judge.peak_budget = c.baseline + *trace.subject.peak_budget_bytes;
      }
      for (const TraceCounter& p : counters) {
        if (p.peak_of != c.name) continue;
        judge.observed_peak =
            std::max(*std::max_element(p.values.begin(), p.values.end()), p.final_value);
      }
      // The census at the last measured block end decides growth (docs/verdicts.md, "Census").
      const int last_end = schedule.TotalSteps() - 1;
      // A live-allocation counter is judged on the blocks of its bytes counter's census.
      const bool count = c.name == "host.heap_allocations" || c.name == "runtime.live_allocations";
      const std::string source = c.name == "host.heap_allocations"      ? "host.heap_bytes"
                                 : c.name == "runtime.live_allocations" ? "runtime.live_bytes"
                                                                        : c.name;
      const CensusSnapshot* final_census = nullptr;
      const CensusSnapshot* previous_census = nullptr;
      // The censuses at the ends of blocks 1..B-1 (turnover); empty where none was taken.
      std::vector<std::vector<CensusCohort>> block_ends(
          static_cast<std::size_t>(std::max(schedule.blocks - 1, 0)));
      for (const CensusSnapshot& snap : trace.census) {
        if (snap.counter != source) continue;
        if (snap.step == last_end) final_census = &snap;
        if (snap.step == last_end - schedule.steps_per_block) previous_census = &snap;
        const int from_first = snap.step - (schedule.warmup_steps + schedule.steps_per_block - 1);
        if (from_first >= 0 && from_first % schedule.steps_per_block == 0 &&
            from_first / schedule.steps_per_block < schedule.blocks - 1) {
          block_ends[static_cast<std::size_t>(from_first / schedule.steps_per_block)] = snap.cohorts;
        }
      }
      std::string uncovered;  // a census that does not account for the counter is not used
      if (final_census != nullptr && source == "runtime.live_bytes") {
        if (const TraceCounter* bytes_counter = trace.Find(source)) {
          double held = 0;
          for (const CensusCohort& k : final_census->cohorts) held += static_cast<double>(k.bytes);
          const double counted =
              bytes_counter->values[static_cast<std::size_t>(final_census->step)] -
              bytes_counter->baseline;
          if (held != counted) {
            uncovered = "; no census: the tracked sessions hold " + reports::FormatBytes(held) +
                        " of the " + reports::FormatBytes(counted) + " " + source +
                        " counts (untracked or unlisted sessions), so growth is judged on block "
                        "ranges";
            final_census = nullptr;
          }
        }
      }
      if (final_census != nullptr) {
        const auto previous = previous_census
                                  ? std::span<const CensusCohort>(previous_census->cohorts)
                                  : std::span<const CensusCohort>();
        judge.census = JudgeCensus(c.name, final_census->cohorts, final_census->step, schedule,
                                   count, previous, block_ends);
        if (count) {
          // A count grows only with its bytes: a runtime's free lists leave a few old blocks in
          // every block, which only their (small) bytes put in proportion.
          const CensusJudgement bytes =
              JudgeCensus(source, final_census->cohorts, final_census->step, schedule, false,
                          previous, block_ends);
          const auto grows = [](CensusOutcome o) {
            return o == CensusOutcome::kGrowth || o == CensusOutcome::kRecurring;
          };
          if (!grows(bytes.outcome) && judge.census->outcome != bytes.outcome) {
            // The bytes decide: stray old blocks too small to count in bytes do not make a
            // count grow, settle or look one-time.
            judge.census->outcome = bytes.outcome;
            judge.census->rate_per_step = 0;
            judge.census->sentence += "; judged as its bytes: " + bytes.sentence;
          }
        }
      }
      judge.census_can_confirm = trace.subject.kind != "watched";
      reports::CounterVerdict v =
          JudgeCounter(info, std::span<const double>(c.values).first(static_cast<std::size_t>(total)),
                       schedule, c.baseline, c.final_value, judge);
      // 6: a census that could not decide (too few blocks) decides nothing, and says so only.
      if (judge.census && judge.census->outcome != CensusOutcome::kTooFewBlocks) {
        v.survivor_bytes = judge.census->survivor_bytes;
      }
      if (!uncovered.empty() && info.judged) v.evidence += uncovered;
      if (!judge.census && c.exact && info.judged && trace.schema_version < 2 &&
          (c.name == "host.heap_bytes" || c.name == "runtime.live_bytes")) {
        v.evidence += " (a schema-1 trace has no census: growth judged on block ranges)";
      }
      if (!unavailable.empty()) {
        v.evidence = c.name + " is not judged: its probe '" + c.probe + "' was " + unavailable;
      }
      result.counters.push_back(std::move(v));
    }
  } catch (const std::exception& e) {  // e.g. a probe returned a non-finite sample
    result.counters.clear();
    return fail(reports::kError, (trace.error.empty() ? "" : trace.error + "; ") +
                                     "cannot judge the trace: " + e.what());
  }
  if (std::none_of(result.counters.begin(), result.counters.end(),
                   [](const reports::CounterVerdict& v) { return v.judged; })) {
    std::string states;
    for (const ProbeState& p : trace.probes) {
      states += (states.empty() ? "" : "; ") + p.name + ": " + p.state;
    }
    return fail(reports::kInconclusive,
                "no counter could be judged (" + (states.empty() ? "no probes" : states) + ")");
  }
  ClassifyLedger(trace, schedule, result.counters);
  ClassifyPoolFragmentation(result.counters);

  // Steady, final and peak are reported above the baseline.
  const std::size_t last = static_cast<std::size_t>(total - 1);
  const std::size_t first_measured = static_cast<std::size_t>(trace.warmup_steps);
  if (live != nullptr) {
    // A watched program had no "before" leakbound saw: its figures are what it holds.
    const double base = trace.subject.kind == "watched" ? 0.0 : live->baseline;
    result.baseline_live_bytes = base;
    result.steady_live_bytes = live->values[last] - base;
    result.final_live_bytes = live->final_value - base;
    result.peak_bytes = *std::max_element(live->values.begin(), live->values.end()) - base;
    for (const TraceCounter& p : trace.counters) {
      if (p.peak_of == live->name) {
        result.peak_bytes = *std::max_element(p.values.begin(), p.values.end()) - base;
      }
    }
  }
  result.peak_bound_bytes = trace.peak_bound_bytes;
  // The runtime's count when it has one; a watched program's allocations are the interposer's
  // running total (every malloc it made), the figure `run` reports for its workloads' runtime.
  const TraceCounter* a = trace.Find("runtime.allocation_count");
  if (a == nullptr && trace.subject.kind == "watched") a = trace.Find("host.total_allocations");
  if (a != nullptr) {
    const double before = first_measured == 0 ? a->values[0] : a->values[first_measured - 1];
    const double steps = static_cast<double>(last - first_measured + (first_measured == 0 ? 0 : 1));
    result.allocations_per_step = steps > 0 ? (a->values[last] - before) / steps : 0;
  }
  auto measured_median = [&](const std::vector<double>& v) {
    if (v.size() <= first_measured) return 0.0;
    return Median({v.begin() + static_cast<std::ptrdiff_t>(first_measured), v.end()});
  };
  result.step_time_ns = measured_median(trace.step_ns);
  result.probe_time_ns = measured_median(trace.probe_ns);
  result.attribution = Attribute(trace);
  CombineVerdicts(trace.subject, result);
  if (trace.confirmation_blocks > 0) {
    result.evidence += " (" + std::to_string(trace.confirmation_blocks) +
                       " confirmation blocks run after a one-time rise)";
  }
  // A watched program that allocated nothing in its measured steps has nothing there to leak:
  // a PASS that says so (an allocation optimised away, memory from an allocator watch does not
  // see) rather than one that reads like a finding about the program's memory.
  if (watched && result.verdict == reports::kPass &&
      trace.Find("host.total_allocations") != nullptr && result.allocations_per_step == 0) {
    result.evidence += "; no allocation was seen in the measured steps, so nothing there could "
                       "leak (watch sees glibc's malloc family, operator new and anonymous "
                       "mmap: check that the program's allocations go through them)";
  }
  if (!trace.error.empty()) {
    if (reports::IsMemoryFinding(result.verdict)) {
      result.evidence = trace.error + "; judged on what arrived: " + result.evidence;
    } else {  // no leak in what arrived: the ending is the finding
      const bool judged = result.verdict != reports::kInconclusive;
      result.verdict = reports::kError;
      result.evidence = trace.error +
                        (judged ? "; no leak in what arrived (" : "; no verdict on what arrived (") +
                        result.evidence + "); the series are what arrived";
      result.met_expectation = result.verdict == trace.subject.expectation;
    }
  }
  return result;
}

reports::Report JudgeTraceFile(const TraceFile& file) {
  reports::Report report;
  report.meta = file.meta;
  JudgeSettings settings;
  settings.noise_floors = file.noise_floors;
  for (const Trace& t : file.traces) report.workloads.push_back(Judge(t, settings));
  return report;
}

}  // namespace leakbound::harness
