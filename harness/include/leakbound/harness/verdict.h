// Verdict logic: turns one counter's per-step series into a reports::CounterVerdict, plus the
// pure helpers the Runner needs around it (schedule checks, warm-up detection, Theil-Sen slopes,
// noise-floor calibration). No I/O, no clocks, no probes: every rule is tested on synthetic
// series. The rules are specified in docs/verdicts.md; keep the two in step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "leakbound/harness/probe.h"
#include "leakbound/reports/report.h"

namespace leakbound::harness {

// How a workload run is laid out: W warm-up steps, then B measured blocks of N steps. values[i]
// is the sample after step i, so a run has exactly W + B*N samples; block b covers samples
// [W + b*N, W + (b+1)*N).
// Trade-off: N must be at least the workload's own period (a sawtooth of period 2 needs N >= 2),
// and a leak that rises less often than once every B*N - 1 steps can fall outside the window.
struct Schedule {
  int warmup_steps = 0;
  int blocks = 0;
  int steps_per_block = 0;

  int MeasuredSteps() const { return blocks * steps_per_block; }
  int TotalSteps() const { return warmup_steps + MeasuredSteps(); }
};

// Throws std::invalid_argument unless blocks >= 2, steps_per_block >= 1, warmup_steps >= 0 and
// sample_count == W + B*N (the message names the field, its value and what is required).
void ValidateSchedule(const Schedule& schedule, std::size_t sample_count);

// Sample index of the last step of each measured block (WorkloadResult::block_ends).
std::vector<int> BlockEnds(const Schedule& schedule);

// The floor a noisy counter's slope must clear to count as growth. Growth needs BOTH
// slope > slope_per_step and slope * (B*N) > total_growth; the second is an absolute minimum
// over the window (e.g. one page for RSS, which moves in page quanta).
struct NoiseFloor {
  double slope_per_step = 0;
  double total_growth = 0;
  bool operator==(const NoiseFloor&) const = default;
};

// ---- The census rule (docs/verdicts.md, "Census") ------------------------------------------
// One cohort of a census: the bytes and blocks born from sample `born_step` (the step during which
// they were allocated; -1: before the first step, i.e. setup or start-up) up to the next cohort's
// born_step, and still live when the census was taken.
struct CensusCohort {
  std::int64_t born_step = -1;
  std::uint64_t bytes = 0;
  std::uint64_t blocks = 0;
  bool operator==(const CensusCohort&) const = default;
};

enum class CensusOutcome {
  kBounded,       // no aged survivors in two blocks: bounded
  kGrowth,        // survivors from every aged block: a leak
  kRecurring,     // survivors in two or more aged blocks with an empty block between, alike in
                  // amount: a leak that fires less often than once a block
  kSettling,      // survivors from every aged block, shrinking block after block: still filling
  kThinning,      // survivors growing with newness, older blocks' thinned out: a slow turnover
                  // (bounded; a leak whose rate grows 4x within the window reads the same)
  kOneTime,       // survivors from one aged block only: a one-time event (or a rarer leak)
  kTooFewBlocks,  // fewer than kCensusMinAgedBlocks aged blocks: the census cannot decide
};

// A survivor is "aged" when it was born in a block that is not the last: at the last block end it
// is at least one block (N steps) old, older than any bounded structure whose period is shorter
// than a block. The rule needs this many aged blocks (B >= 3).
inline constexpr int kCensusMinAgedBlocks = 2;
// Bytes a block's survivors must reach to count, per step of the block (so a 1 B/step leak counts
// and a stray 32-byte survivor of a 100-step block does not), and never less than 1 byte.
inline constexpr double kCensusFloorBytesPerStep = 0.5;
// Settling: every aged block has survivors, never more than the block before, and the newest aged
// block holds less than 1/kCensusSettlingRatio of the oldest. Thinning is the mirror image (the
// oldest holds less than 1/ratio of the newest). Steady growth needs alike amounts: the least
// aged block at least 1/ratio of the largest.
inline constexpr double kCensusSettlingRatio = 4.0;
// Recurring survivors: the least event block holds at least 1/this of the largest (a periodic
// leak firing once or twice a block leaves 1 or 2 firings' worth).
inline constexpr double kCensusRecurringRatio = 2.0;
// Decay: survivors of aged blocks freed over the last block. A recycling runtime (CPython's free
// lists keep reusing memory born blocks ago) frees an old block's survivors by 6-25% a block; a
// leak frees none; a one-off free (a grown array moved) hits one block once. decay_pace is the
// median share lost. With one block to learn from (3 blocks), that block counts what
// kCensusDecayBlocks more blocks at its pace would leave; with more, turnover decides.
inline constexpr double kCensusDecayBlocks = 4.0;
// Turnover: what becomes aged at each block end (block k's survivors one block later, "arrived")
// against what older than it was freed over that block ("departed": the warm-up's and older
// blocks' survivors that went). A leak adds aged bytes and frees none but for a one-off free;
// a structure that turns over (CPython's free lists reusing old memory, a cache whose entries
// outlive a block) frees older survivors as fast as new ones age. Turnover needs, in bytes and in
// allocations alike: departed >= kCensusTurnoverShare x arrived over the transitions, and
// departed >= arrived / kCensusTurnoverSteady in more than half of them (so one large free, a
// start-up cache dropped, is not a turnover), with kCensusMinTurnoverTransitions transitions
// whose arrivals reach the floor; and some of what departed was born in the measured blocks (a
// leak's blocks keep all theirs while the program frees warm-up memory beside it: a hook kept per
// step in a PyTorch run, beside its dict's resize, read as a turnover; docs/verdicts.md).
inline constexpr double kCensusTurnoverShare = 0.5;
inline constexpr double kCensusTurnoverSteady = 4.0;
inline constexpr int kCensusMinTurnoverTransitions = 2;

struct CensusJudgement {
  CensusOutcome outcome = CensusOutcome::kBounded;
  std::vector<double> survivor_bytes;   // per measured block: born in it, live at the census
  std::vector<double> survivor_blocks;  // the same, in blocks
  std::vector<double> persistent;       // per measured block: what the rule counted (decay taken off)
  double before_bytes = 0;              // born before the measured blocks (setup, warm-up)
  double floor_bytes = 0;               // what a block's survivors must reach to count
  double decay_pace = 0;                // median share of its survivors an aged block lost
  double decay_ahead = 0;               // blocks ahead the decay was taken off (0: none)
  // Turnover (block ends to block ends, bytes): summed over the transitions read. arrived: what
  // became aged; departed: what older was freed meanwhile. transitions: those read (arrivals at
  // the floor or above); steady: those that freed at least 1/kCensusTurnoverSteady of arrivals.
  double arrived_bytes = 0;
  double departed_bytes = 0;
  double departed_measured_bytes = 0;  // of departed: born in the measured blocks
  int turnover_transitions = 0;
  int turnover_steady = 0;
  bool turnover = false;  // a turnover in bytes and in allocations: bounded
  double rate_per_step = 0;             // growth: median aged survivors / N
  int census_step = 0;                  // sample index of the census
  std::string sentence;                 // evidence, naming the census
};

// Judges growth of one exact counter from the census taken at the last measured block end.
// `cohorts` must be in born_step order. Cohorts are assigned to the block that holds their
// born_step; a cohort born before the warm-up ends counts as "before".
// count: judge the blocks of each cohort (a live-allocation counter) instead of its bytes, with a
// floor of one block. `previous`: the census one block earlier (at the end of block B-1), empty
// when there is none. A block older than that whose survivors are still being freed (fewer now
// than then) counts only what would be left after kCensusDecayBlocks more blocks at that pace:
// the free lists and caches of a runtime (CPython's) release old blocks slowly, a leak never.
// `block_ends`: the censuses at the ends of blocks 1..B-1 (index k: the end of block k+1; an
// empty vector where none was taken), read for turnover (kCensusTurnoverShare); the census at
// the end of the last block is `cohorts`.
CensusJudgement JudgeCensus(const std::string& counter, std::span<const CensusCohort> cohorts,
                            int census_step, const Schedule& schedule, bool count = false,
                            std::span<const CensusCohort> previous = {},
                            std::span<const std::vector<CensusCohort>> block_ends = {});

struct JudgeOptions {
  // Only read for noisy counters (CounterInfo::exact == false). A zero floor flags any positive
  // slope, so noisy counters should be judged against CalibrateNoiseFloor's result.
  NoiseFloor noise;
  // Absolute level of the counter (not relative to baseline) the peak may not exceed.
  std::optional<double> peak_budget;
  // A high-water mark seen between samples (e.g. the max of a "runtime.peak_bytes" counter); the
  // peak is max(samples, baseline, final, observed_peak).
  std::optional<double> observed_peak;
  // False for a program leakbound did not start and stop (a watched process: its world is built
  // before the first step and handed to the OS at exit): the residue is reported, not judged.
  bool judge_return_to_baseline = true;
  // The census of survivors (exact heap counters with records): when set and decisive
  // (outcome != kTooFewBlocks), it decides growth and the block-range trend is supporting
  // evidence. `census_can_confirm` false (a watched program: nobody can run confirmation
  // blocks) makes a one-time outcome inconclusive instead of bounded.
  std::optional<CensusJudgement> census;
  bool census_can_confirm = true;
};

// Judges one counter. `values` is the whole run (warm-up included) and must match `schedule`;
// `baseline` is the sample before setup, `final_value` the sample after teardown.
// Precedence: unbounded-growth > not-returned-to-baseline > peak-over-budget > PASS; a verdict's
// evidence also names any lower-precedence finding. Counters with judged == false are always
// PASS but still carry slope and peak. Throws std::invalid_argument on a bad schedule or a
// non-finite sample.
reports::CounterVerdict JudgeCounter(const CounterInfo& info, std::span<const double> values,
                                     const Schedule& schedule, double baseline, double final_value,
                                     const JudgeOptions& options = {});

// True when an exact counter's block floor or ceiling rose at exactly one block transition (net
// of the window) and not at two: a rise that must recur in confirmation blocks before it is
// called growth. Throws std::invalid_argument on a bad schedule.
bool NeedsConfirmation(std::span<const double> values, const Schedule& schedule);

// Smallest block length the Runner accepts: a block must hold a workload's period, and a block
// of one step cannot tell a sawtooth from a leak.
inline constexpr int kMinStepsPerBlock = 4;

// Theil-Sen slope of y against x = 0, 1, ..., n-1: the median of all pairwise slopes (the mean
// of the two middle ones for an even count). Robust to up to ~29% outliers, where least squares
// is dragged by a single one. Returns 0 for n < 2.
// Cost: exact for n <= kTheilSenExactMaxPoints (all n(n-1)/2 pairs, 8 bytes of scratch each,
// ~16 MiB at the limit); above it, the median of kTheilSenSampledPairs pairs drawn by a
// fixed-seed generator: an estimate, but deterministic for a given input. Throws
// std::invalid_argument on a non-finite y.
double TheilSenSlope(std::span<const double> y);

// Same, for explicit abscissae (e.g. time instead of step index). Pairs with equal x are skipped.
// Throws std::invalid_argument if the sizes differ or all x are equal (with n >= 2).
double TheilSenSlopeAt(std::span<const double> y, std::span<const double> x);

inline constexpr std::size_t kTheilSenExactMaxPoints = 2048;
inline constexpr std::size_t kTheilSenSampledPairs = std::size_t{1} << 21;

// Number of consecutive stable blocks DetectWarmupEnd requires.
inline constexpr int kWarmupStableBlocks = 2;

// Returns the number of warm-up steps: the smallest k*N (k = 0..max_warmup_blocks) such that
// every series has identical per-block min and max over the kWarmupStableBlocks blocks starting
// at sample k*N ([k*N, (k+1)*N), [(k+1)*N, (k+2)*N)); -1 if there is none (or the series are too
// short to test any k). Call it again as the run grows; it only reads what it is given.
// Pass the judged exact counters only: an informational counter such as a cumulative allocation
// count never settles and would make the answer -1. With no series at all the answer is 0.
// Throws std::invalid_argument if steps_per_block < 1, max_warmup_blocks < 0 or the series
// differ in length.
int DetectWarmupEnd(const std::vector<std::span<const double>>& exact_series, int steps_per_block,
                    int max_warmup_blocks);

struct CalibrationOptions {
  double safety_factor = 2.0;     // multiplies the largest |slope| seen on clean windows
  double sigma_multiplier = 4.0;  // slope standard errors added on top
  double min_slope_per_step = 0;  // lower bound on slope_per_step (unit per step)
  double min_total_growth = 0;    // e.g. the page size (4096) for RSS; see docs/verdicts.md
};

// Noise floor for one noisy counter from its measured windows in runs known to be clean. Per
// window: Theil-Sen slope s, robust residual spread sigma = 1.4826 * MAD(y_i - s*i) and the
// slope's standard error se = sigma * sqrt(12 / (n (n^2 - 1))). Then
//   slope_per_step = max(min_slope_per_step, safety_factor * max|s| + sigma_multiplier * max se)
//   total_growth   = min_total_growth
// Calibrate on windows as long as the measured window being judged (se shrinks as n^-1.5).
// Throws std::invalid_argument if there is no window or a window has fewer than 3 samples.
NoiseFloor CalibrateNoiseFloor(const std::vector<std::span<const double>>& clean_windows,
                               const CalibrationOptions& options = {});

}  // namespace leakbound::harness
