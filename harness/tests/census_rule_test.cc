// The census rule (docs/verdicts.md, "Census") at each of its boundaries: which block a cohort
// belongs to, the size floor, "every aged block", the settling and thinning ratios, recurrence
// and its likeness ratio, the decay taken off blocks still being freed, and how JudgeCounter
// turns an outcome into a verdict. Each test sits on one side of one threshold, so changing a
// comparison (> for >=) or a block edge by one sample fails one of them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "leakbound/harness/verdict.h"

namespace leakbound::harness {
namespace {

// 3 blocks of 100 steps after 100 warm-up steps: blocks start at samples 100, 200, 300.
const Schedule kThree{100, 3, 100};
const Schedule kFive{100, 5, 100};

// One cohort per block (born at the block's first step) with the given bytes, plus a warm-up one.
std::vector<CensusCohort> PerBlock(const Schedule& s, const std::vector<std::uint64_t>& bytes,
                                   std::uint64_t warmup_bytes = 0) {
  std::vector<CensusCohort> out{{-1, warmup_bytes, warmup_bytes ? 1u : 0u}};
  for (std::size_t k = 0; k < bytes.size(); ++k) {
    out.push_back({s.warmup_steps + static_cast<std::int64_t>(k) * s.steps_per_block, bytes[k],
                   bytes[k] / 8 + (bytes[k] ? 1 : 0)});
  }
  return out;
}

// Cohorts per block with their allocation counts given (PerBlock makes one per 8 bytes).
std::vector<CensusCohort> Counted(const Schedule& s, const std::vector<std::uint64_t>& bytes,
                                  const std::vector<std::uint64_t>& blocks) {
  std::vector<CensusCohort> out{{-1, 0, 0}};
  for (std::size_t k = 0; k < bytes.size(); ++k) {
    out.push_back({s.warmup_steps + static_cast<std::int64_t>(k) * s.steps_per_block, bytes[k],
                   blocks[k]});
  }
  return out;
}

CensusOutcome Outcome(const Schedule& s, const std::vector<std::uint64_t>& bytes) {
  return JudgeCensus("host.heap_bytes", PerBlock(s, bytes), s.TotalSteps() - 1, s).outcome;
}

TEST(CensusRule, CohortOnABlocksFirstStep_BelongsToThatBlock_OneEarlierToTheOneBefore) {
  // Born at sample 200 (block 2's first step) vs 199 (block 1's last).
  const std::vector<CensusCohort> at{{-1, 0, 0}, {200, 800, 1}};
  const std::vector<CensusCohort> before{{-1, 0, 0}, {199, 800, 1}};
  EXPECT_EQ(JudgeCensus("c", at, 399, kThree).survivor_bytes, (std::vector<double>{0, 800, 0}));
  EXPECT_EQ(JudgeCensus("c", before, 399, kThree).survivor_bytes,
            (std::vector<double>{800, 0, 0}));
}

TEST(CensusRule, CohortBornInWarmup_CountsAsBefore_NotInBlockOne) {
  const std::vector<CensusCohort> cohorts{{-1, 10, 1}, {99, 500, 1}, {100, 7, 1}};
  const CensusJudgement j = JudgeCensus("c", cohorts, 399, kThree);
  EXPECT_EQ(j.before_bytes, 510);
  EXPECT_EQ(j.survivor_bytes[0], 7);
}

TEST(CensusRule, SurvivorsFromEveryAgedBlock_AtTheFloor_AreGrowth_OneByteLessAreNot) {
  // Floor: 0.5 B/step x 100 steps = 50 B.
  EXPECT_EQ(Outcome(kThree, {50, 50, 50}), CensusOutcome::kGrowth);
  EXPECT_EQ(Outcome(kThree, {50, 49, 0}), CensusOutcome::kOneTime);   // block 2 below: block 1 only
  EXPECT_EQ(Outcome(kThree, {49, 50, 0}), CensusOutcome::kOneTime);  // the newest aged block only
}

TEST(CensusRule, TheLastBlock_IsNotAged_ItsSurvivorsNeverMakeGrowth) {
  EXPECT_EQ(Outcome(kThree, {0, 0, 1 << 20}), CensusOutcome::kBounded);
  EXPECT_EQ(Outcome(kThree, {800, 800, 800}), CensusOutcome::kGrowth);
}

TEST(CensusRule, ALeakLeavesTheNewestBlockItsShareToo_FarFewerAfterSlowingIsGrowthThatStopped) {
  // Block ends are census points, so the newest block holds whole cohorts: a leak leaves it a
  // block's worth like every other block. A cache that filled late in the run, already slowing
  // in the aged blocks, leaves it none.
  EXPECT_EQ(Outcome(kThree, {800, 700, 0}), CensusOutcome::kSettling);
  EXPECT_EQ(Outcome(kThree, {800, 700, 174}), CensusOutcome::kSettling);
  EXPECT_EQ(Outcome(kThree, {800, 700, 175}), CensusOutcome::kGrowth);  // a quarter of 700: alike
  const CensusJudgement j = JudgeCensus("c", PerBlock(kThree, {24576, 15872, 0}), 399, kThree);
  EXPECT_EQ(j.outcome, CensusOutcome::kSettling);
  EXPECT_NE(j.sentence.find("the newest 0 B: growth that slowed or stopped"), std::string::npos)
      << j.sentence;
  // Aged blocks alike to the last: a leak that stopped in the last block looks so too: growth.
  EXPECT_EQ(Outcome(kThree, {800, 800, 0}), CensusOutcome::kGrowth);
  EXPECT_EQ(Outcome(kFive, {700, 800, 800, 800, 0}), CensusOutcome::kGrowth);
  // A census before the newest block ended cannot say what that block keeps: as before.
  EXPECT_EQ(JudgeCensus("c", PerBlock(kThree, {800, 700, 0}), 350, kThree).outcome,
            CensusOutcome::kGrowth);
  // The allocation census alike: one leaked allocation a block, none in the newest, is growth.
  std::vector<CensusCohort> counts{{-1, 0, 0}, {100, 0, 1}, {200, 0, 1}, {300, 0, 0}};
  EXPECT_EQ(JudgeCensus("host.heap_allocations", counts, 399, kThree, true).outcome,
            CensusOutcome::kGrowth);
}

TEST(CensusRule, GrowthRate_IsTheMedianAgedBlockOverItsSteps) {
  const CensusJudgement j =
      JudgeCensus("c", PerBlock(kFive, {2400, 2400, 2500, 2400, 90000}), 599, kFive);
  EXPECT_EQ(j.outcome, CensusOutcome::kGrowth);
  EXPECT_DOUBLE_EQ(j.rate_per_step, 24.0);
}

TEST(CensusRule, TwoBlocks_LeaveOneAgedBlock_TooFewToDecide) {
  const Schedule two{0, 2, 100};
  EXPECT_EQ(Outcome(two, {800, 800}), CensusOutcome::kTooFewBlocks);
}

TEST(CensusRule, Settling_ShrinkingBelowAQuarter_ButAQuarterIsStillGrowthOrUnlike) {
  EXPECT_EQ(Outcome(kFive, {4000, 2000, 1000, 999, 0}), CensusOutcome::kSettling);
  // 1000 is exactly a quarter of 4000: not settling; and alike enough for growth.
  EXPECT_EQ(Outcome(kFive, {4000, 2000, 1000, 1000, 1000}), CensusOutcome::kGrowth);
  // Not shrinking everywhere (one block rises): not settling, and too unlike for growth.
  EXPECT_EQ(Outcome(kFive, {4000, 900, 1000, 999, 0}), CensusOutcome::kOneTime);
}

TEST(CensusRule, Thinning_GrowingPastFourTimes_IsBounded_FourTimesIsGrowth) {
  EXPECT_EQ(Outcome(kFive, {999, 2000, 3000, 4000, 0}), CensusOutcome::kThinning);
  EXPECT_EQ(Outcome(kFive, {1000, 2000, 3000, 4000, 4000}), CensusOutcome::kGrowth);
}

TEST(CensusRule, Recurring_AlikeSurvivorsAfterAnEmptyBlock_AreGrowth) {
  EXPECT_EQ(Outcome(kFive, {800, 0, 800, 0, 0}), CensusOutcome::kRecurring);
  // Half is still alike (one firing vs two); less than half is not.
  EXPECT_EQ(Outcome(kFive, {800, 0, 400, 0, 0}), CensusOutcome::kRecurring);
  EXPECT_EQ(Outcome(kFive, {800, 0, 399, 0, 0}), CensusOutcome::kOneTime);
}

TEST(CensusRule, Recurring_ALeakThatBeganAfterBlockOne_IsGrowth) {
  EXPECT_EQ(Outcome(kFive, {0, 800, 800, 800, 0}), CensusOutcome::kRecurring);
}

// Alike survivors in a run of blocks that stops before the newest aged one: growth that stopped
// or a leak slower than a block, not told apart here; the evidence says so, not "one-time".
TEST(CensusRule, RunOfBlocksThatStops_IsOneTime_AndSaysThenNone) {
  const CensusJudgement run = JudgeCensus("c", PerBlock(kFive, {930, 930, 930, 0, 0}), 399, kFive);
  EXPECT_EQ(run.outcome, CensusOutcome::kOneTime);
  EXPECT_TRUE(run.sentence.find("blocks 1, 2, 3 only, then none: growth that stopped") !=
              std::string::npos)
      << run.sentence;
  const CensusJudgement one = JudgeCensus("c", PerBlock(kFive, {930, 0, 0, 0, 0}), 399, kFive);
  EXPECT_TRUE(one.sentence.find("block 1 only, unlike a steady leak: a one-time event") !=
              std::string::npos)
      << one.sentence;
}

TEST(CensusRule, NewestAgedBlockOnly_IsBoundedOnlyWhenOlderBlocksAreBeingFreed) {
  const std::vector<CensusCohort> now = PerBlock(kThree, {40, 900, 0});
  EXPECT_EQ(JudgeCensus("c", now, 399, kThree, false, PerBlock(kThree, {60, 5000, 0})).outcome,
            CensusOutcome::kBounded);  // block 1 went 60 -> 40 B: the program turns over
  EXPECT_EQ(JudgeCensus("c", now, 399, kThree, false, PerBlock(kThree, {40, 5000, 0})).outcome,
            CensusOutcome::kOneTime);  // block 1 kept what it had: an unexplained event
  // A block is read for its pace from the floor (50 B) up, a block ago: 50 -> 40 B is read,
  // 49 -> 40 B is not (too little then to tell a pace from a stray survivor).
  EXPECT_EQ(JudgeCensus("c", now, 399, kThree, false, PerBlock(kThree, {50, 5000, 0})).outcome,
            CensusOutcome::kBounded);
  EXPECT_EQ(JudgeCensus("c", now, 399, kThree, false, PerBlock(kThree, {49, 5000, 0})).outcome,
            CensusOutcome::kOneTime);
}

TEST(CensusRule, SurvivorsUpToTheNewestAfterEmptyBlocks_ThinningOnlyPastFourTimes) {
  // Empty first aged block, then survivors growing to the newest: thinning (bounded) only when
  // the oldest of them holds less than a quarter of the newest; alike within 2x is recurring;
  // in between, one-time (left to confirmation).
  const Schedule four{100, 4, 100};
  EXPECT_EQ(Outcome(four, {0, 64, 512, 0}), CensusOutcome::kThinning);
  EXPECT_EQ(Outcome(four, {0, 200, 512, 0}), CensusOutcome::kOneTime);  // 2.56x: neither
  EXPECT_EQ(Outcome(four, {0, 300, 512, 0}), CensusOutcome::kRecurring);  // within 2x, to the end
}

TEST(CensusRule, OneTime_SurvivorsFromOneOlderBlockOnly) {
  EXPECT_EQ(Outcome(kFive, {0, 8 << 20, 0, 0, 0}), CensusOutcome::kOneTime);
  EXPECT_EQ(Outcome(kFive, {8 << 20, 4096, 0, 0, 0}), CensusOutcome::kOneTime);  // not to the end
}

TEST(CensusRule, OneBlockStillBeingFreed_CountsWhatFourMoreBlocksWouldLeave) {
  // Three blocks: block 1 alone was aged a block ago. 1000 B in 100 blocks then, 900 B in 90 now:
  // 10% a block, so 4 more blocks leave 60% of it.
  const CensusJudgement j =
      JudgeCensus("c", Counted(kThree, {900, 500, 500}, {90, 50, 50}), 399, kThree, false,
                  Counted(kThree, {1000, 9000, 0}, {100, 900, 0}));
  EXPECT_DOUBLE_EQ(j.persistent[0], 540);
  EXPECT_EQ(j.persistent[1], 500);  // the newest aged block has no aged census before: as is
  EXPECT_EQ(j.decay_ahead, kCensusDecayBlocks);
  EXPECT_EQ(j.outcome, CensusOutcome::kGrowth);
  // Freed faster (25% a block): 4 more blocks leave nothing of block 1.
  const CensusJudgement fast =
      JudgeCensus("c", Counted(kThree, {900, 500, 0}, {90, 50, 0}), 399, kThree, false,
                  Counted(kThree, {1200, 9000, 0}, {120, 900, 0}));
  EXPECT_EQ(fast.persistent[0], 0);
  EXPECT_NE(fast.outcome, CensusOutcome::kGrowth);
}

TEST(CensusRule, TheOnlyBlockToLearnFrom_IsTheOneDiscounted) {
  // Five blocks, but blocks 1 and 3 were under the floor a block ago: block 2 alone gives a pace
  // (25%), and it is block 2, not block 1, that 4 more blocks at that pace take to nothing.
  const CensusJudgement j =
      JudgeCensus("c", Counted(kFive, {10, 300, 20, 500, 0}, {1, 30, 2, 50, 0}), 599, kFive,
                  false, Counted(kFive, {10, 400, 20, 9000, 0}, {1, 40, 2, 900, 0}));
  EXPECT_DOUBLE_EQ(j.decay_pace, 0.25);
  EXPECT_EQ(j.persistent[0], 10);
  EXPECT_EQ(j.persistent[1], 0);
  EXPECT_EQ(j.persistent[3], 500);
}

TEST(CensusRule, AGrownArrayMoved_IsOneAllocationNotAPace) {
  // A vector of leaked pointers: block 1 held 64 leaked 24-byte blocks and the vector's 2 KiB
  // array; the array moved (realloc) in block 3. 57% of the bytes but 1 of 65 allocations:
  // the pace is the smaller share, so the leak stays growth (it was called bounded).
  const CensusJudgement j =
      JudgeCensus("c", Counted(kThree, {1536, 1536, 5648}, {64, 64, 65}), 287, kThree, false,
                  Counted(kThree, {3600, 1536, 0}, {65, 64, 0}));
  EXPECT_NEAR(j.decay_pace, 1.0 / 65, 1e-12);
  EXPECT_EQ(j.outcome, CensusOutcome::kGrowth);
}

TEST(CensusRule, BlocksFreedAlike_AreNotDiscountedByTheirPace_TurnoverDecides) {
  // Five blocks, three learnt from: 10%, 10% and 20% lost. A share of a block cannot tell a
  // runtime's recycled bytes from a leak beside them, so with more than one block to learn from
  // nothing is taken off (the pace is reported); without the block ends, this is growth.
  const std::vector<CensusCohort> then = PerBlock(kFive, {1000, 500, 500, 9000, 0});
  const CensusJudgement j =
      JudgeCensus("c", PerBlock(kFive, {900, 450, 400, 500, 500}), 599, kFive, false, then);
  EXPECT_DOUBLE_EQ(j.decay_pace, 0.1);
  EXPECT_EQ(j.decay_ahead, 0);
  EXPECT_EQ(j.persistent[0], 900);
  EXPECT_EQ(j.outcome, CensusOutcome::kGrowth);
}

TEST(CensusRule, AOneOffFreeInOneBlock_IsNotAPace) {
  // Block 3 lost 20% once (a grown array moved); the median block lost nothing: nothing is
  // taken off, the leak stays growth.
  const CensusJudgement j =
      JudgeCensus("c", PerBlock(kFive, {500, 500, 400, 500, 500}), 599, kFive, false,
                  PerBlock(kFive, {500, 500, 500, 9000, 0}));
  EXPECT_EQ(j.decay_ahead, 0);
  EXPECT_EQ(j.persistent[2], 400);
  EXPECT_EQ(j.outcome, CensusOutcome::kGrowth);
}

TEST(CensusRule, ThinningByHalf_IsBoundedOnlyWhileSurvivorsAreBeingFreed) {
  // Older blocks keep fewer (300 < 400 < 500 < 700) by less than 4x: growth when nothing is
  // being freed; bounded thinning when every block loses 2% a block (the oldest is under half
  // the newest).
  const std::vector<CensusCohort> now = PerBlock(kFive, {300, 400, 500, 700, 700});
  EXPECT_EQ(JudgeCensus("c", now, 599, kFive, false, PerBlock(kFive, {300, 400, 500, 9000, 0}))
                .outcome,
            CensusOutcome::kGrowth);
  const CensusJudgement freed =
      JudgeCensus("c", Counted(kFive, {300, 400, 500, 700, 0}, {30, 40, 50, 70, 0}), 599, kFive,
                  false, Counted(kFive, {306, 408, 510, 9000, 0}, {31, 41, 51, 900, 0}));
  EXPECT_NEAR(freed.decay_pace, 6.0 / 306, 1e-12);  // bytes: the smaller share in each block
  EXPECT_EQ(freed.outcome, CensusOutcome::kThinning);
}

TEST(CensusRule, CountCensus_JudgesBlocksWithAFloorOfOne) {
  std::vector<CensusCohort> cohorts{{-1, 0, 0}, {100, 0, 1}, {200, 0, 1}, {300, 0, 1}};
  const CensusJudgement j = JudgeCensus("host.heap_allocations", cohorts, 399, kThree, true);
  EXPECT_EQ(j.floor_bytes, 1);
  EXPECT_EQ(j.outcome, CensusOutcome::kGrowth);
}

// JudgeCounter with a census: the census decides, the curve is evidence.
reports::CounterVerdict WithCensus(const std::vector<std::uint64_t>& bytes, bool can_confirm,
                          const std::vector<double>& values) {
  JudgeOptions o;
  o.census = JudgeCensus("host.heap_bytes", PerBlock(kThree, bytes), 399, kThree);
  o.census_can_confirm = can_confirm;
  return JudgeCounter({"host.heap_bytes", "bytes", true, true, false, ""}, values, kThree, values.front(),
                      values.front(), o);
}

TEST(CensusRule, JudgeCounter_CensusGrowth_BeatsAFlatCurve) {
  const std::vector<double> flat(400, 1000.0);
  const reports::CounterVerdict v = WithCensus({800, 800, 800}, true, flat);
  EXPECT_EQ(v.verdict, reports::kUnboundedGrowth);
  EXPECT_DOUBLE_EQ(v.slope_per_step, 8.0);
  EXPECT_NE(v.evidence.find("born in blocks 1-3"), std::string::npos) << v.evidence;
  EXPECT_NE(v.evidence.find("[curve: "), std::string::npos) << v.evidence;
}

TEST(CensusRule, JudgeCounter_CensusBounded_BeatsARisingCurve) {
  std::vector<double> rising;
  for (int i = 0; i < 400; ++i) rising.push_back(1000.0 + 10 * (i / 100));
  const reports::CounterVerdict v = WithCensus({0, 0, 50000}, true, rising);
  EXPECT_EQ(v.verdict, reports::kPass);
}

TEST(CensusRule, JudgeCounter_OneTime_IsInconclusiveOnlyWhereNothingCanConfirmIt) {
  const std::vector<double> flat(400, 1000.0);
  EXPECT_EQ(WithCensus({4096, 0, 0}, false, flat).verdict, reports::kInconclusive);
  EXPECT_EQ(WithCensus({4096, 0, 0}, true, flat).verdict, reports::kPass);
}

TEST(CensusRule, JudgeCounter_WatchedOneTime_SmallBesideTheNewestBlock_IsBounded) {
  const std::vector<double> flat(400, 1000.0);
  // 336 B from block 1 beside 11.5 KiB in the newest block (a real PyTorch run): bounded; at
  // exactly a quarter still bounded; above it, inconclusive.
  EXPECT_EQ(WithCensus({336, 0, 11812}, false, flat).verdict, reports::kPass);
  EXPECT_EQ(WithCensus({1000, 0, 4000}, false, flat).verdict, reports::kPass);
  EXPECT_EQ(WithCensus({1001, 0, 4000}, false, flat).verdict, reports::kInconclusive);
}

// ---- Turnover (block end to block end) -----------------------------------------------------

// One census: `before` bytes / blocks born before the measured blocks, then per block.
std::vector<CensusCohort> At(const Schedule& s, std::uint64_t before, std::uint64_t before_blocks,
                             const std::vector<std::uint64_t>& bytes,
                             const std::vector<std::uint64_t>& blocks) {
  std::vector<CensusCohort> out = Counted(s, bytes, blocks);
  out.front() = {-1, before, before_blocks};
  return out;
}

// Allocations as bytes / 10 (alike to the bytes, so the bytes decide).
std::vector<std::uint64_t> Tenth(const std::vector<std::uint64_t>& bytes) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t b : bytes) out.push_back(b / 10);
  return out;
}

std::vector<CensusCohort> AtB(const Schedule& s, std::uint64_t before,
                              const std::vector<std::uint64_t>& bytes) {
  return At(s, before, before / 10, bytes, Tenth(bytes));
}

// Three blocks whose aged survivors (1000 B arriving at each block end) replace older ones:
// `freed1`, `freed2` bytes go at the two block ends, at the second 10 B / 1 block of them from
// block 1 (a turnover recycles what the measured blocks left too), the rest from the warm-up.
// measured_freed 0: block 1 keeps its 1000 B, all of it from the warm-up.
CensusJudgement ThreeReplacing(std::uint64_t freed1, std::uint64_t freed2,
                               std::uint64_t freed1_blocks = 0, std::uint64_t freed2_blocks = 0,
                               std::uint64_t measured_freed = 10) {
  const std::uint64_t measured_freed_n = measured_freed ? 1 : 0;
  const std::uint64_t b0 = 20000, b1 = b0 - freed1, b2 = b1 - freed2 + measured_freed;
  const std::uint64_t n0 = 2000, n1 = n0 - (freed1_blocks ? freed1_blocks : freed1 / 10),
                      n2 = n1 - (freed2_blocks ? freed2_blocks : freed2 / 10) + measured_freed_n;
  const std::vector<std::vector<CensusCohort>> ends{At(kThree, b0, n0, {5000, 0, 0}, {500, 0, 0}),
                                                    At(kThree, b1, n1, {1000, 5000, 0},
                                                       {100, 500, 0})};
  return JudgeCensus("c",
                     At(kThree, b2, n2, {1000 - measured_freed, 1000, 5000},
                        {100 - measured_freed_n, 100, 500}),
                     399, kThree, false, ends.back(), ends);
}

TEST(CensusRule, Turnover_AgedSurvivorsReplacingOlderOnes_IsBounded_WithoutBlockEndsGrowth) {
  // A Python-like heap: each block leaves 1000 B a block later, fading (750, 700, 690 B), while
  // the warm-up's recycled memory goes at the same pace. The last census alone: growth.
  const std::vector<std::vector<CensusCohort>> ends{
      AtB(kFive, 10000, {5000, 0, 0, 0, 0}), AtB(kFive, 9400, {1000, 5000, 0, 0, 0}),
      AtB(kFive, 9000, {750, 1000, 5000, 0, 0}), AtB(kFive, 8700, {700, 750, 1000, 5000, 0})};
  const std::vector<CensusCohort> last = AtB(kFive, 8300, {690, 700, 750, 1000, 5000});
  EXPECT_EQ(JudgeCensus("c", last, 599, kFive, false, ends.back()).outcome,
            CensusOutcome::kGrowth);
  const CensusJudgement j = JudgeCensus("c", last, 599, kFive, false, ends.back(), ends);
  EXPECT_EQ(j.outcome, CensusOutcome::kBounded) << j.sentence;
  EXPECT_TRUE(j.turnover);
  EXPECT_EQ(j.turnover_transitions, 4);
  EXPECT_EQ(j.turnover_steady, 4);
  EXPECT_EQ(j.arrived_bytes, 4000);
  EXPECT_EQ(j.departed_bytes, 600 + 650 + 600 + 710);
  EXPECT_NE(j.sentence.find("replace older ones"), std::string::npos) << j.sentence;
}

TEST(CensusRule, Turnover_ALeakBesideIt_IsStillGrowth) {
  // The same heap plus 2000 B/block kept: 3000 B arrive per block end, 800 go.
  const std::vector<std::vector<CensusCohort>> ends{
      AtB(kFive, 10000, {7000, 0, 0, 0, 0}), AtB(kFive, 9400, {3000, 7000, 0, 0, 0}),
      AtB(kFive, 9000, {2600, 3000, 7000, 0, 0}), AtB(kFive, 8700, {2500, 2600, 3000, 7000, 0})};
  const CensusJudgement j = JudgeCensus("c", AtB(kFive, 8400, {2450, 2500, 2600, 3000, 7000}), 599,
                                        kFive, false, ends.back(), ends);
  EXPECT_FALSE(j.turnover);
  EXPECT_EQ(j.outcome, CensusOutcome::kGrowth) << j.sentence;
}

TEST(CensusRule, Turnover_NeedsHalfOfWhatArrivedFreed_InBytes) {
  EXPECT_TRUE(ThreeReplacing(500, 500).turnover);   // 1000 of 2000: exactly half
  EXPECT_FALSE(ThreeReplacing(500, 490).turnover);  // 990 of 2000
  EXPECT_EQ(ThreeReplacing(500, 490).outcome, CensusOutcome::kGrowth);
}

TEST(CensusRule, Turnover_NeedsTheMeasuredBlocksFreedToo) {
  // The same arithmetic, but every byte that went was the warm-up's: the measured blocks keep
  // all they left, as a leak does beside a program freeing old memory (a hook kept per step in a
  // PyTorch run, beside its dict's resize and CPython's free lists).
  EXPECT_TRUE(ThreeReplacing(500, 500).turnover);
  const CensusJudgement j = ThreeReplacing(500, 500, 0, 0, 0);
  EXPECT_FALSE(j.turnover);
  EXPECT_EQ(j.departed_bytes, 1000);
  EXPECT_EQ(j.departed_measured_bytes, 0);
  EXPECT_EQ(j.outcome, CensusOutcome::kGrowth) << j.sentence;
}

TEST(CensusRule, Turnover_NeedsHalfInAllocationsToo) {
  // Bytes replace alike; allocations: 100 of 200 arrived freed (half) vs 99.
  EXPECT_TRUE(ThreeReplacing(500, 500, 50, 50).turnover);
  EXPECT_FALSE(ThreeReplacing(500, 500, 50, 49).turnover);
}

TEST(CensusRule, Turnover_NeedsAQuarterFreedAtMoreThanHalfTheBlockEnds) {
  // One large free at one block end (a start-up cache dropped) is not a turnover: each block end
  // must free at least a quarter of what aged (250 of 1000), at more than half of them (2 of 2).
  EXPECT_TRUE(ThreeReplacing(250, 1000).turnover);
  EXPECT_FALSE(ThreeReplacing(240, 1000).turnover);
  // The whole warm-up freed at the second block end (19,990 of its 20,000 B; until 2026-12-07
  // this read 1,000,000, which wrapped the unsigned census to a huge cohort: nothing departed).
  EXPECT_FALSE(ThreeReplacing(0, 19990).turnover);
  EXPECT_EQ(ThreeReplacing(0, 19990).departed_bytes, 19990);
  EXPECT_EQ(ThreeReplacing(0, 19990).turnover_steady, 1);
  EXPECT_EQ(ThreeReplacing(0, 19990).outcome, CensusOutcome::kGrowth);
  EXPECT_EQ(ThreeReplacing(250, 1000).turnover_steady, 2);
  EXPECT_EQ(ThreeReplacing(240, 1000).turnover_steady, 1);
}

// Five blocks, 4 block ends; at each, 1000 B in 100 allocations become a block old while
// freed_bytes[t] / freed_blocks[t] (t = 0..3) of older memory go: the warm-up's, but for 10 B in
// 1 allocation of block 1's at the last block end (a turnover recycles the measured blocks' too).
CensusJudgement FiveFreeing(const std::vector<std::uint64_t>& freed_bytes,
                            const std::vector<std::uint64_t>& freed_blocks) {
  std::vector<std::vector<CensusCohort>> ends;
  std::uint64_t before = 100000, before_n = 10000;
  std::vector<std::uint64_t> bytes{5000, 0, 0, 0, 0}, blocks{500, 0, 0, 0, 0};
  ends.push_back(At(kFive, before, before_n, bytes, blocks));
  for (std::size_t t = 1; t < 5; ++t) {
    before -= freed_bytes[t - 1];
    before_n -= freed_blocks[t - 1];
    bytes[t - 1] = 1000;
    bytes[t] = 5000;
    blocks[t - 1] = 100;
    blocks[t] = 500;
    if (t == 4) {
      bytes[0] -= 10;
      blocks[0] -= 1;
      before += 10;
      before_n += 1;
    }
    ends.push_back(At(kFive, before, before_n, bytes, blocks));
  }
  const std::vector<CensusCohort> last = ends.back();
  ends.pop_back();
  return JudgeCensus("c", last, 599, kFive, false, ends.back(), ends);
}

TEST(CensusRule, Turnover_MoreThanHalfTheBlockEnds_NotHalf) {
  // 1000 B freed at `steady` block ends, 100 (under a quarter) at the others; allocations alike.
  EXPECT_TRUE(FiveFreeing({1000, 1000, 1000, 100}, {100, 100, 100, 10}).turnover);
  // 2 of 4, and 2200 of 4000 freed: half the block ends is not more than half.
  EXPECT_FALSE(FiveFreeing({1000, 1000, 100, 100}, {100, 100, 10, 10}).turnover);
}

TEST(CensusRule, Turnover_BytesFreedAtHalfTheBlockEnds_IsNotOneEvenWhenAllocationsAre) {
  const CensusJudgement j = FiveFreeing({1000, 1000, 100, 100}, {100, 100, 100, 100});
  EXPECT_EQ(j.turnover_steady, 2);
  EXPECT_FALSE(j.turnover);
}

TEST(CensusRule, Turnover_AllocationsToo_FreedAtMoreThanHalfTheBlockEnds) {
  // Bytes: 1000 of 1000 freed at each block end; allocations at 4, 3, 2 of them (10 elsewhere).
  EXPECT_TRUE(FiveFreeing({1000, 1000, 1000, 1000}, {100, 100, 100, 100}).turnover);
  EXPECT_TRUE(FiveFreeing({1000, 1000, 1000, 1000}, {100, 100, 100, 10}).turnover);
  const CensusJudgement two = FiveFreeing({1000, 1000, 1000, 1000}, {100, 100, 10, 10});
  EXPECT_FALSE(two.turnover);  // 220 of 400 freed (over half) but at 2 of 4 block ends
  EXPECT_EQ(two.turnover_steady, 4);  // the bytes were steady at every one
}

TEST(CensusRule, Turnover_NeedsTwoBlockEndsRead_AndArrivalsAtTheFloor) {
  // The census at the end of block 1 missing: one block end to read, not a turnover.
  const std::vector<std::vector<CensusCohort>> missing{{}, At(kThree, 19000, 1900, {1000, 5000, 0},
                                                            {100, 500, 0})};
  const CensusJudgement j = JudgeCensus("c", At(kThree, 18000, 1800, {1000, 1000, 5000},
                                                {100, 100, 500}),
                                        399, kThree, false, missing.back(), missing);
  EXPECT_EQ(j.turnover_transitions, 1);
  EXPECT_FALSE(j.turnover);
  // Arrivals under the floor (50 B for 100-step blocks) are not read: 49 B aging is no turnover.
  const std::vector<std::vector<CensusCohort>> small{
      At(kThree, 20000, 2000, {5000, 0, 0}, {500, 0, 0}),
      At(kThree, 19000, 1900, {49, 5000, 0}, {5, 500, 0})};
  EXPECT_EQ(JudgeCensus("c", At(kThree, 18000, 1800, {49, 1000, 5000}, {5, 100, 500}), 399, kThree,
                        false, small.back(), small)
                .turnover_transitions,
            1);
  // At the floor exactly (50 B), it is read.
  const std::vector<std::vector<CensusCohort>> at_floor{
      At(kThree, 20000, 2000, {5000, 0, 0}, {500, 0, 0}),
      At(kThree, 19000, 1900, {50, 5000, 0}, {5, 500, 0})};
  EXPECT_EQ(JudgeCensus("c", At(kThree, 18000, 1800, {50, 1000, 5000}, {5, 100, 500}), 399, kThree,
                        false, at_floor.back(), at_floor)
                .turnover_transitions,
            2);
  // A block-end list of the wrong length is not read at all.
  EXPECT_EQ(ThreeReplacing(500, 500).turnover_transitions, 2);
  const std::vector<std::vector<CensusCohort>> short_list{At(kThree, 20000, 2000, {5000, 0, 0},
                                                               {500, 0, 0})};
  EXPECT_EQ(JudgeCensus("c", At(kThree, 18000, 1800, {1000, 1000, 5000}, {100, 100, 500}), 399,
                        kThree, false, {}, short_list)
                .turnover_transitions,
            0);
}

// A settling census (4000, 2000, 1000, 500 B) on a flat 5-block run, ending at `final_value`.
reports::CounterVerdict Settling(double final_value) {
  const std::vector<double> flat(600, 1000.0);
  JudgeOptions o;
  o.census = JudgeCensus("host.heap_bytes", PerBlock(kFive, {4000, 2000, 1000, 500, 0}), 599, kFive);
  return JudgeCounter({"host.heap_bytes", "bytes", true, true, false, ""}, flat, kFive, 1000,
                      final_value, o);
}

TEST(CensusRule, JudgeCounter_SettlingWithATeardownResidue_IsTheResidue) {
  const reports::CounterVerdict v = Settling(1500);
  EXPECT_EQ(v.verdict, reports::kNotReturnedToBaseline) << v.evidence;
}

TEST(CensusRule, JudgeCounter_Settling_IsInconclusiveAndSaysHowLongToRun) {
  const reports::CounterVerdict v = Settling(1000);
  EXPECT_EQ(v.verdict, reports::kInconclusive);
  EXPECT_NE(v.evidence.find("run longer than 1200 steps"), std::string::npos) << v.evidence;
}

}  // namespace
}  // namespace leakbound::harness
