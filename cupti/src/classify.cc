// Block-end classification of ledger snapshots. Exact counters: growth is judged on the values
// themselves, no noise floor. The rules are deliberately few so that evidence reads as the rule.
#include "leakbound/cupti/classify.h"

#include <cmath>
#include <cstdio>

#include "leakbound/reports/report.h"

namespace leakbound::cupti {
namespace {

struct Growth {
  bool growing = false;
  double per_block = 0;
  std::uint64_t first = 0;
  std::uint64_t last = 0;
};

template <typename Value>
Growth GrowthOf(std::size_t count, const Value& value_at) {
  Growth growth;
  growth.first = value_at(0);
  growth.last = value_at(count - 1);
  std::size_t rises = 0;
  for (std::size_t i = 1; i < count; ++i) {
    if (value_at(i) > value_at(i - 1)) ++rises;
  }
  const std::size_t transitions = count - 1;
  growth.growing = growth.last > growth.first && 2 * rises > transitions;
  growth.per_block = (static_cast<double>(growth.last) - static_cast<double>(growth.first)) /
                     static_cast<double>(transitions);
  return growth;
}

std::string Number(std::uint64_t value) { return std::to_string(value); }

std::string Number(double value) {
  char text[64];
  if (std::floor(value) == value) {
    std::snprintf(text, sizeof(text), "%.0f", value);
  } else {
    std::snprintf(text, sizeof(text), "%.1f", value);
  }
  return text;
}

std::string Join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string joined;
  for (const std::string& part : parts) {
    if (!joined.empty()) joined += separator;
    joined += part;
  }
  return joined;
}

}  // namespace

std::string_view FindingKindName(FindingKind kind) {
  switch (kind) {
    case FindingKind::kAllocatorBypass:
      return "allocator-bypass";
    case FindingKind::kRuntimeGrowth:
      return "runtime-growth";
    case FindingKind::kLibraryHandles:
      return "library-handles";
    case FindingKind::kPoolFragmentation:
      return "pool-fragmentation";
  }
  return "allocator-bypass";
}

Classification ClassifyBlockEnds(std::span<const LedgerSnapshot> block_ends,
                                 std::span<const std::uint64_t> runtime_live_bytes) {
  const std::size_t count = block_ends.size();
  if (!runtime_live_bytes.empty() && runtime_live_bytes.size() != count) {
    throw ClassificationError("runtime_live_bytes has " +
                              std::to_string(runtime_live_bytes.size()) + " values but there are " +
                              std::to_string(count) +
                              " ledger snapshots; pass one runtime sample per block end, or none");
  }
  Classification result;
  result.verdict = reports::kPass;
  if (count < kMinBlockEnds) {
    result.evidence = "too few block ends to judge the CUPTI ledger (got " + std::to_string(count) +
                      ", need " + std::to_string(kMinBlockEnds) + ")";
    return result;
  }
  result.judged = true;
  const std::size_t blocks = count;
  auto bucket_bytes = [&](MemoryBucket bucket) {
    return GrowthOf(blocks, [&](std::size_t i) { return block_ends[i].bucket(bucket).live_bytes; });
  };
  auto bucket_allocations = [&](MemoryBucket bucket) {
    return GrowthOf(blocks,
                    [&](std::size_t i) { return block_ends[i].bucket(bucket).live_allocations; });
  };
  const bool have_runtime = !runtime_live_bytes.empty();
  Growth runtime;
  if (have_runtime)
    runtime = GrowthOf(blocks, [&](std::size_t i) { return runtime_live_bytes[i]; });
  const std::string over = " over " + std::to_string(blocks) + " block ends";

  // (c) Library handles: static/other memory only grows when modules or library state are
  // created again; a raw cudaMalloc never produces it.
  std::vector<std::string> library_parts;
  for (MemoryBucket bucket : {MemoryBucket::kStatic, MemoryBucket::kOther}) {
    const Growth growth = bucket_bytes(bucket);
    if (growth.growing) {
      library_parts.push_back(std::string(BucketName(bucket)) + " +" + Number(growth.per_block) +
                              " bytes/block");
    }
  }
  const bool library_handles = !library_parts.empty();
  if (library_handles) {
    const Growth device = bucket_bytes(MemoryBucket::kDevice);
    const Growth device_allocations = bucket_allocations(MemoryBucket::kDevice);
    Finding finding;
    finding.kind = FindingKind::kLibraryHandles;
    finding.verdict = reports::kUnboundedGrowth;
    finding.series = bucket_bytes(MemoryBucket::kStatic).growing ? "static" : "other";
    finding.bytes_per_block = bucket_bytes(MemoryBucket::kStatic).per_block +
                              bucket_bytes(MemoryBucket::kOther).per_block;
    if (device.growing) {
      library_parts.push_back("device +" + Number(device.per_block) + " bytes/block in +" +
                              Number(device_allocations.per_block) + " allocations/block");
      finding.bytes_per_block += device.per_block;
      finding.allocations_per_block = device_allocations.per_block;
    }
    finding.evidence = "library handle growth: " + Join(library_parts, ", ") + over +
                       "; static/other memory grows only when library or module state is created "
                       "again (e.g. a cuBLAS handle created every step and never destroyed)";
    result.findings.push_back(std::move(finding));
  }

  // (a) Buckets a raw allocation call can grow. Device growth is already explained above when a
  // library handle is growing.
  for (MemoryBucket bucket : {MemoryBucket::kDevice, MemoryBucket::kPool, MemoryBucket::kManaged,
                              MemoryBucket::kPinnedHost}) {
    if (bucket == MemoryBucket::kDevice && library_handles) continue;
    const Growth growth = bucket_bytes(bucket);
    if (!growth.growing) continue;
    const Growth allocations = bucket_allocations(bucket);
    Finding finding;
    finding.verdict = reports::kUnboundedGrowth;
    finding.series = std::string(BucketName(bucket));
    finding.bytes_per_block = growth.per_block;
    finding.allocations_per_block = allocations.per_block;
    const std::string what = finding.series + " bucket grew from " + Number(growth.first) + " to " +
                             Number(growth.last) + " bytes (+" + Number(growth.per_block) +
                             " bytes/block, +" + Number(allocations.per_block) +
                             " allocations/block)" + over;
    if (have_runtime && runtime.growing && runtime.per_block >= growth.per_block) {
      finding.kind = FindingKind::kRuntimeGrowth;
      finding.evidence = what + ", matched by the runtime allocator's own growth (+" +
                         Number(runtime.per_block) +
                         " bytes/block): the runtime leaks; see runtime.live_bytes";
    } else {
      finding.kind = FindingKind::kAllocatorBypass;
      finding.evidence =
          what +
          (have_runtime ? ", not seen by the runtime allocator (its live bytes went from " +
                              Number(runtime.first) + " to " + Number(runtime.last) + ")"
                        : ", with no runtime series to reconcile against") +
          ": memory allocated around the runtime allocator (e.g. a raw cudaMalloc every step)";
    }
    result.findings.push_back(std::move(finding));
  }

  // (b) Pool fragmentation: reserve grows, use does not.
  const Growth reserved =
      GrowthOf(blocks, [&](std::size_t i) { return block_ends[i].pool_reserved_bytes; });
  const Growth utilized =
      GrowthOf(blocks, [&](std::size_t i) { return block_ends[i].pool_utilized_bytes; });
  const Growth pool_live = bucket_bytes(MemoryBucket::kPool);
  if (reserved.growing && !utilized.growing && !pool_live.growing &&
      !(have_runtime && runtime.growing)) {
    Finding finding;
    finding.kind = FindingKind::kPoolFragmentation;
    finding.verdict = reports::kPoolFragmentation;
    finding.series = "pool_reserved";
    finding.bytes_per_block = reserved.per_block;
    finding.evidence = "pool reserved bytes grew from " + Number(reserved.first) + " to " +
                       Number(reserved.last) + " (+" + Number(reserved.per_block) +
                       " bytes/block)" + over + " while utilised bytes stayed bounded (" +
                       Number(utilized.first) + " then " + Number(utilized.last) +
                       ") and live pool allocations held " + Number(pool_live.last) +
                       " bytes: the pool cannot reuse what it holds (fragmentation)";
    result.findings.push_back(std::move(finding));
  }

  std::vector<std::string> sentences;
  for (const Finding& finding : result.findings) {
    if (finding.verdict == reports::kUnboundedGrowth) result.verdict = reports::kUnboundedGrowth;
    if (finding.verdict == reports::kPoolFragmentation && result.verdict == reports::kPass) {
      result.verdict = reports::kPoolFragmentation;
    }
    sentences.push_back(finding.evidence);
  }
  if (sentences.empty()) {
    const LedgerSnapshot& last = block_ends[count - 1];
    sentences.push_back("CUPTI ledger bounded" + over + ": device " +
                        Number(last.bucket(MemoryBucket::kDevice).live_bytes) + ", pool " +
                        Number(last.bucket(MemoryBucket::kPool).live_bytes) + " (reserved " +
                        Number(last.pool_reserved_bytes) + "), static " +
                        Number(last.bucket(MemoryBucket::kStatic).live_bytes) + " bytes");
  }
  const std::uint64_t dropped = block_ends[count - 1].dropped_records;
  if (dropped > 0) {
    sentences.push_back("CUPTI dropped " + std::to_string(dropped) +
                        " records, so the ledger may undercount");
  }
  result.evidence = Join(sentences, "; ");
  return result;
}

Reconciliation Reconcile(std::span<const LedgerSnapshot> snapshots,
                         std::span<const std::uint64_t> runtime_live_bytes,
                         std::size_t warmup_snapshots) {
  if (runtime_live_bytes.size() != snapshots.size()) {
    throw ClassificationError("runtime_live_bytes has " +
                              std::to_string(runtime_live_bytes.size()) + " values but there are " +
                              std::to_string(snapshots.size()) +
                              " ledger snapshots; sample both at the same points");
  }
  if (warmup_snapshots >= snapshots.size()) {
    throw ClassificationError("warm-up of " + std::to_string(warmup_snapshots) +
                              " snapshots leaves none of the " + std::to_string(snapshots.size()) +
                              " to reconcile; pass a warm-up shorter than the series");
  }
  Reconciliation result;
  result.warmup_snapshots = warmup_snapshots;
  for (std::size_t i = 0; i < snapshots.size(); ++i) {
    result.owned_by_others_bytes.push_back(
        static_cast<std::int64_t>(snapshots[i].DeviceResidentBytes()) -
        static_cast<std::int64_t>(runtime_live_bytes[i]));
  }
  const std::int64_t first = result.owned_by_others_bytes[warmup_snapshots];
  const std::int64_t last = result.owned_by_others_bytes.back();
  result.drift_bytes = last - first;
  result.flat_after_warmup = true;
  for (std::size_t i = warmup_snapshots; i < snapshots.size(); ++i) {
    if (result.owned_by_others_bytes[i] != first) result.flat_after_warmup = false;
  }
  const std::string after = " after " + std::to_string(warmup_snapshots) + " warm-up snapshots";
  if (result.flat_after_warmup) {
    result.evidence = "memory owned by others (ledger minus runtime) flat at " +
                      std::to_string(first) + " bytes" + after;
  } else {
    result.evidence = "memory owned by others (ledger minus runtime) moved from " +
                      std::to_string(first) + " to " + std::to_string(last) + " bytes" + after +
                      " (drift " + std::to_string(result.drift_bytes) +
                      " bytes): something outside the runtime allocator holds a changing amount";
  }
  return result;
}

}  // namespace leakbound::cupti
