// The leak zoo's GPU shapes, produced by a simulated process through a real MemoryLedger and
// classified at block ends: each is detected on a leaking sequence and silent on a clean one.
#include "leakbound/cupti/classify.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "leakbound/reports/report.h"
#include "synthetic.h"

namespace leakbound::cupti {
namespace {

using testing::kMiB;
using testing::SyntheticProcess;

constexpr int kWarmup = 3;
constexpr int kBlocks = 4;
constexpr int kStepsPerBlock = 5;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The runtime allocator's own live bytes: flat at `bytes` for every block end.
std::vector<std::uint64_t> Flat(std::uint64_t bytes) {
  return std::vector<std::uint64_t>(kBlocks, bytes);
}

// Every step: the runtime's own temporaries come and go through the device bucket.
void RuntimeStep(SyntheticProcess& process) {
  const std::uint64_t scratch = process.Allocate(MemoryBucket::kDevice, 3 * kMiB);
  process.Free(scratch, 3 * kMiB, MemoryBucket::kDevice);
}

TEST(ClassifyBlockEnds, RawCudaMallocEveryStep_IsUnboundedGrowthNamingTheDeviceBucket) {
  SyntheticProcess process;
  process.Allocate(MemoryBucket::kDevice, 16 * kMiB);  // parameters, held by the runtime
  const auto block_ends = process.Run(kWarmup, kBlocks, kStepsPerBlock, [&](int) {
    RuntimeStep(process);
    process.Allocate(MemoryBucket::kDevice, kMiB);  // the bypass: never freed
  });

  const Classification result = ClassifyBlockEnds(block_ends, Flat(16 * kMiB));
  ASSERT_TRUE(result.judged);
  EXPECT_EQ(result.verdict, reports::kUnboundedGrowth);
  ASSERT_EQ(result.findings.size(), 1u);
  const Finding& finding = result.findings[0];
  EXPECT_EQ(finding.kind, FindingKind::kAllocatorBypass);
  EXPECT_EQ(finding.series, "device");
  EXPECT_EQ(finding.bytes_per_block, static_cast<double>(kStepsPerBlock * kMiB));
  EXPECT_EQ(finding.allocations_per_block, kStepsPerBlock);
  EXPECT_TRUE(Contains(finding.evidence, "device bucket grew from 25165824 to 40894464 bytes"))
      << finding.evidence;
  EXPECT_TRUE(Contains(finding.evidence, "not seen by the runtime allocator")) << finding.evidence;
  EXPECT_EQ(result.evidence, finding.evidence);
}

TEST(ClassifyBlockEnds, DeviceAllocationsFreedEveryStep_Pass) {
  SyntheticProcess process;
  process.Allocate(MemoryBucket::kDevice, 16 * kMiB);
  const auto block_ends = process.Run(kWarmup, kBlocks, kStepsPerBlock, [&](int) {
    RuntimeStep(process);
    const std::uint64_t raw = process.Allocate(MemoryBucket::kDevice, kMiB);
    process.Free(raw, kMiB, MemoryBucket::kDevice);
  });

  const Classification result = ClassifyBlockEnds(block_ends, Flat(16 * kMiB));
  EXPECT_TRUE(result.judged);
  EXPECT_EQ(result.verdict, reports::kPass);
  EXPECT_TRUE(result.findings.empty());
  EXPECT_TRUE(Contains(result.evidence, "bounded over 4 block ends: device 16777216"))
      << result.evidence;
}

TEST(ClassifyBlockEnds, GrowthMatchedByTheRuntimeAllocator_IsTheRuntimesOwnLeak) {
  SyntheticProcess process;
  std::vector<std::uint64_t> runtime;
  std::uint64_t runtime_live = 0;
  const auto block_ends = process.Run(0, kBlocks, kStepsPerBlock, [&](int) {
    process.Allocate(MemoryBucket::kDevice, kMiB);
    runtime_live += kMiB;
  });
  for (int block = 1; block <= kBlocks; ++block) {
    runtime.push_back(static_cast<std::uint64_t>(block * kStepsPerBlock) * kMiB);
  }

  const Classification result = ClassifyBlockEnds(block_ends, runtime);
  EXPECT_EQ(result.verdict, reports::kUnboundedGrowth);
  ASSERT_EQ(result.findings.size(), 1u);
  EXPECT_EQ(result.findings[0].kind, FindingKind::kRuntimeGrowth);
  EXPECT_TRUE(Contains(result.findings[0].evidence, "see runtime.live_bytes"));
  EXPECT_EQ(runtime_live, runtime.back());
}

TEST(ClassifyBlockEnds, OneLateAllocationThenFlat_IsNotGrowth) {
  SyntheticProcess process;
  const auto block_ends = process.Run(0, kBlocks, kStepsPerBlock, [&](int step) {
    if (step == kStepsPerBlock + 1) process.Allocate(MemoryBucket::kDevice, 8 * kMiB);
    RuntimeStep(process);
  });
  const Classification result = ClassifyBlockEnds(block_ends);
  EXPECT_EQ(result.verdict, reports::kPass) << result.evidence;
}

TEST(ClassifyBlockEnds, PoolReserveGrowingWhileUseIsFlat_IsPoolFragmentation) {
  SyntheticProcess process;
  std::uint64_t reserved = 0;
  const auto block_ends = process.Run(kWarmup, kBlocks, kStepsPerBlock, [&](int) {
    // Each step's temporaries no longer fit the holes the pool keeps: it reserves 2 MiB more.
    reserved += 2 * kMiB;
    const std::uint64_t a = process.PoolAllocate(kMiB, reserved);
    const std::uint64_t b = process.PoolAllocate(512 * 1024, reserved);
    process.PoolFree(a, kMiB, reserved);
    process.PoolFree(b, 512 * 1024, reserved);
  });

  const Classification result = ClassifyBlockEnds(block_ends, Flat(0));
  EXPECT_EQ(result.verdict, reports::kPoolFragmentation);
  ASSERT_EQ(result.findings.size(), 1u);
  const Finding& finding = result.findings[0];
  EXPECT_EQ(finding.kind, FindingKind::kPoolFragmentation);
  EXPECT_EQ(finding.series, "pool_reserved");
  EXPECT_EQ(finding.bytes_per_block, static_cast<double>(kStepsPerBlock * 2 * kMiB));
  EXPECT_TRUE(Contains(finding.evidence, "pool reserved bytes grew from 16777216 to 48234496"))
      << finding.evidence;
  EXPECT_TRUE(Contains(finding.evidence, "utilised bytes stayed bounded (0 then 0)"))
      << finding.evidence;
}

TEST(ClassifyBlockEnds, PoolReserveGrowingOnlyDuringWarmup_Passes) {
  SyntheticProcess process;
  std::uint64_t reserved = 0;
  const auto block_ends = process.Run(kWarmup, kBlocks, kStepsPerBlock, [&](int step) {
    if (step < kWarmup) reserved += 2 * kMiB;  // the pool grows to its working set, then holds
    const std::uint64_t a = process.PoolAllocate(kMiB, reserved);
    process.PoolFree(a, kMiB, reserved);
  });

  const Classification result = ClassifyBlockEnds(block_ends, Flat(0));
  EXPECT_EQ(result.verdict, reports::kPass) << result.evidence;
  EXPECT_EQ(block_ends.back().pool_reserved_bytes, 6 * kMiB);
}

TEST(ClassifyBlockEnds, PoolAllocationsNeverFreed_AreGrowthNotFragmentation) {
  SyntheticProcess process;
  std::uint64_t reserved = 0;
  const auto block_ends = process.Run(0, kBlocks, kStepsPerBlock, [&](int) {
    reserved += 2 * kMiB;
    process.PoolAllocate(2 * kMiB, reserved);
  });

  const Classification result = ClassifyBlockEnds(block_ends, Flat(0));
  EXPECT_EQ(result.verdict, reports::kUnboundedGrowth);
  ASSERT_EQ(result.findings.size(), 1u);
  EXPECT_EQ(result.findings[0].kind, FindingKind::kAllocatorBypass);
  EXPECT_EQ(result.findings[0].series, "pool");
}

// cublasCreate() each step: a small device allocation for the handle's state plus module/static
// memory the library loads for it; neither is ever released because the handle is not destroyed.
void CublasHandleCreate(SyntheticProcess& process) {
  process.Allocate(MemoryBucket::kDevice, 64 * 1024);
  process.Allocate(MemoryBucket::kStatic, 256 * 1024);
}

TEST(ClassifyBlockEnds, CublasHandleCreatedEveryStep_IsUnboundedGrowthNamingLibraryHandles) {
  SyntheticProcess process;
  const auto block_ends = process.Run(kWarmup, kBlocks, kStepsPerBlock, [&](int) {
    CublasHandleCreate(process);
    RuntimeStep(process);
  });

  const Classification result = ClassifyBlockEnds(block_ends, Flat(0));
  EXPECT_EQ(result.verdict, reports::kUnboundedGrowth);
  ASSERT_EQ(result.findings.size(), 1u);  // device growth is explained by the handles
  const Finding& finding = result.findings[0];
  EXPECT_EQ(finding.kind, FindingKind::kLibraryHandles);
  EXPECT_EQ(finding.series, "static");
  EXPECT_EQ(finding.bytes_per_block, kStepsPerBlock * (64.0 + 256.0) * 1024);
  EXPECT_EQ(finding.allocations_per_block, kStepsPerBlock);
  EXPECT_TRUE(Contains(finding.evidence, "static +1310720 bytes/block")) << finding.evidence;
  EXPECT_TRUE(Contains(finding.evidence, "device +327680 bytes/block in +5 allocations/block"))
      << finding.evidence;
  EXPECT_TRUE(Contains(finding.evidence, "cuBLAS handle")) << finding.evidence;
}

TEST(ClassifyBlockEnds, CublasWorkspaceAllocatedOnceAtWarmup_Passes) {
  SyntheticProcess process;
  const auto block_ends = process.Run(kWarmup, kBlocks, kStepsPerBlock, [&](int step) {
    if (step == 0) {
      CublasHandleCreate(process);
      process.Allocate(MemoryBucket::kDevice, 4 * kMiB);  // the handle's workspace
    }
    RuntimeStep(process);
  });

  const Classification result = ClassifyBlockEnds(block_ends, Flat(0));
  EXPECT_EQ(result.verdict, reports::kPass) << result.evidence;
  EXPECT_TRUE(result.findings.empty());
}

TEST(ClassifyBlockEnds, DroppedRecords_AreMentionedInTheEvidence) {
  SyntheticProcess process;
  process.ledger().NoteDropped(12);
  const auto block_ends = process.Run(0, kBlocks, 1, [&](int) { RuntimeStep(process); });
  const Classification result = ClassifyBlockEnds(block_ends);
  EXPECT_EQ(result.verdict, reports::kPass);
  EXPECT_TRUE(Contains(result.evidence, "CUPTI dropped 12 records")) << result.evidence;
}

TEST(ClassifyBlockEnds, FewerThanThreeBlockEnds_IsNotJudged) {
  SyntheticProcess process;
  const auto block_ends =
      process.Run(0, 2, 1, [&](int) { process.Allocate(MemoryBucket::kDevice, kMiB); });
  const Classification result = ClassifyBlockEnds(block_ends);
  EXPECT_FALSE(result.judged);
  EXPECT_EQ(result.verdict, reports::kPass);
  EXPECT_EQ(result.evidence, "too few block ends to judge the CUPTI ledger (got 2, need 3)");
}

TEST(ClassifyBlockEnds, RuntimeSeriesOfAnotherLength_IsRejected) {
  const std::vector<LedgerSnapshot> block_ends(4);
  const std::vector<std::uint64_t> runtime(3, 0);
  try {
    ClassifyBlockEnds(block_ends, runtime);
    FAIL() << "expected ClassificationError";
  } catch (const ClassificationError& error) {
    EXPECT_EQ(std::string(error.what()),
              "runtime_live_bytes has 3 values but there are 4 ledger snapshots; pass one "
              "runtime sample per block end, or none");
  }
}

TEST(Reconcile, OwnedByOthersFlatAfterWarmup_IsFlat) {
  SyntheticProcess process;
  std::vector<LedgerSnapshot> snapshots;
  std::vector<std::uint64_t> runtime;
  std::uint64_t runtime_live = 0;
  for (int step = 0; step < 6; ++step) {
    if (step == 0) process.Allocate(MemoryBucket::kStatic, kMiB);      // CUDA context, modules
    if (step == 1) process.Allocate(MemoryBucket::kDevice, 4 * kMiB);  // cuBLAS workspace
    process.Allocate(MemoryBucket::kDevice, 2 * kMiB);                 // runtime-owned activations
    runtime_live += 2 * kMiB;
    process.Allocate(MemoryBucket::kPinnedHost, kMiB);  // not device-resident: ignored
    snapshots.push_back(process.Snapshot());
    runtime.push_back(runtime_live);
  }

  const Reconciliation result = Reconcile(snapshots, runtime, 2);
  constexpr std::int64_t kMiBSigned = 1 << 20;
  EXPECT_EQ(result.owned_by_others_bytes,
            (std::vector<std::int64_t>{1 * kMiBSigned, 5 * kMiBSigned, 5 * kMiBSigned,
                                       5 * kMiBSigned, 5 * kMiBSigned, 5 * kMiBSigned}));
  EXPECT_TRUE(result.flat_after_warmup);
  EXPECT_EQ(result.drift_bytes, 0);
  EXPECT_EQ(result.evidence,
            "memory owned by others (ledger minus runtime) flat at 5242880 bytes after 2 warm-up "
            "snapshots");
}

TEST(Reconcile, OwnedByOthersGrowingAfterWarmup_IsNotFlat) {
  SyntheticProcess process;
  std::vector<LedgerSnapshot> snapshots;
  std::vector<std::uint64_t> runtime;
  for (int step = 0; step < 5; ++step) {
    process.Allocate(MemoryBucket::kDevice, kMiB);  // a raw cudaMalloc the runtime never sees
    snapshots.push_back(process.Snapshot());
    runtime.push_back(8 * kMiB);
  }
  const Reconciliation result = Reconcile(snapshots, runtime, 1);
  EXPECT_FALSE(result.flat_after_warmup);
  EXPECT_EQ(result.owned_by_others_bytes.front(), -7 * static_cast<std::int64_t>(kMiB));
  EXPECT_EQ(result.drift_bytes, 3 * static_cast<std::int64_t>(kMiB));
  EXPECT_TRUE(Contains(result.evidence, "moved from -6291456 to -3145728 bytes"))
      << result.evidence;
}

TEST(Reconcile, WarmupCoveringEverySnapshot_IsRejected) {
  const std::vector<LedgerSnapshot> snapshots(2);
  const std::vector<std::uint64_t> runtime(2, 0);
  EXPECT_THROW(Reconcile(snapshots, runtime, 2), ClassificationError);
  EXPECT_THROW(Reconcile(snapshots, std::vector<std::uint64_t>(1, 0), 0), ClassificationError);
}

}  // namespace
}  // namespace leakbound::cupti
