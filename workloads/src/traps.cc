// Traps: workloads whose memory changes in ways that look like leaks to a naive check but are
// bounded: growth that stops during warm-up, a sawtooth, lazy optimizer state, a one-time
// large allocation and a capped cache. The harness must judge every one PASS once warm-up is
// detected. Each trains the small MLP besides, so its tape traffic is realistic.
#include <array>

#include "common.h"

namespace leakbound::workloads::internal {
namespace {

using runtime::Buffer;
using runtime::OptimizerKind;
using runtime::Role;

MlpRig::Config TrapMlp() {
  MlpRig::Config config;
  config.optimizer = OptimizerKind::kSgd;
  config.seed_offset = 31;
  return config;
}

// Builds a lookup table in slices over the first 10 steps, then only reads it: live bytes rise
// for 10 steps and are flat from then on.
class WarmupGrowth final : public MlpWorkload {
 public:
  static constexpr std::int64_t kGrowthSteps = 10;
  static constexpr std::size_t kSliceBytes = 4096;

  WarmupGrowth() : MlpWorkload(TrapMlp()) {}
  void Step(std::int64_t step) override {
    if (step < kGrowthSteps) {
      Buffer& slice = slices_[static_cast<std::size_t>(step)];
      slice = Buffer(rig_.session().resource(), kSliceBytes,
                     UserTag(rig_.session(), "warmup_table_slice"));
      FillBuffer(rig_.session(), slice, static_cast<float>(step));
    }
    rig_.TrainStep();
    rig_.Quiesce();
  }
  void Teardown() override {
    for (Buffer& slice : slices_) slice.Reset();  // before the session's resource goes away
    MlpWorkload::Teardown();
  }

 private:
  std::array<Buffer, kGrowthSteps> slices_;
};

// Stages 16 KiB on odd steps and frees it on even ones: period 2, bounded whatever the parity
// of the warm-up and of the block length.
class Sawtooth final : public MlpWorkload {
 public:
  static constexpr std::size_t kStagingBytes = 16384;

  Sawtooth() : MlpWorkload(TrapMlp()) {}
  void Step(std::int64_t step) override {
    if (step % 2 == 1) {
      staging_ = Buffer(rig_.session().resource(), kStagingBytes,
                        UserTag(rig_.session(), "sawtooth_staging", Role::kScratch));
      FillBuffer(rig_.session(), staging_, 1.0f);
    } else {
      staging_.Reset();
    }
    rig_.TrainStep();
    rig_.Quiesce();
  }
  void Teardown() override {
    staging_.Reset();
    MlpWorkload::Teardown();
  }

 private:
  Buffer staging_;
};

// Adam on a wide MLP (64-512-512-10): the first step allocates two moment buffers per
// parameter (~2.3 MiB, several times the tape's working set); they persist with the
// parameters, so live bytes jump once at step 0 and stay.
class LazyOptimizerState final : public MlpWorkload {
 public:
  LazyOptimizerState() : MlpWorkload(Config()) {}
  void Step(std::int64_t) override {
    rig_.TrainStep();  // Adam::Apply allocates its state on first use (optimizer.h)
    rig_.Quiesce();
  }

 private:
  static MlpRig::Config Config() {
    MlpRig::Config config;
    config.sizes = {64, 512, 512, 10};
    config.optimizer = OptimizerKind::kAdam;
    config.batch = 16;
    config.seed_offset = 32;
    return config;
  }
};

// One 8 MiB allocation at step 3 (a late, lazily built buffer), held until Teardown.
class OneTimeLarge final : public MlpWorkload {
 public:
  static constexpr std::int64_t kAllocationStep = 3;
  static constexpr std::size_t kBytes = 8u << 20;

  OneTimeLarge() : MlpWorkload(TrapMlp()) {}
  void Step(std::int64_t step) override {
    if (step == kAllocationStep) {
      large_ = Buffer(rig_.session().resource(), kBytes,
                      UserTag(rig_.session(), "one_time_large_table"));
      FillBuffer(rig_.session(), large_, 0.5f);
    }
    rig_.TrainStep();
    rig_.Quiesce();
  }
  void Teardown() override {
    large_.Reset();
    MlpWorkload::Teardown();
  }

 private:
  Buffer large_;
};

// A least-recently-used cache of per-key device buffers with a fixed capacity of 12 entries.
// Each step inserts a new key (a miss) and reuses the key of two steps back (a hit, which
// refreshes its recency). Until the cache is full it grows by one entry per step; then each
// insert evicts the least recently used entry, so live bytes stay constant. Entries live in a
// fixed array: the cache never touches the malloc heap.
class CappedCache final : public MlpWorkload {
 public:
  static constexpr std::size_t kCapacity = 12;
  static constexpr std::size_t kEntryBytes = 8192;

  CappedCache() : MlpWorkload(TrapMlp()) {}
  void Step(std::int64_t step) override {
    MarkUsed(step - 2);
    Insert(step);
    rig_.TrainStep();
    rig_.Quiesce();
  }
  void Teardown() override {
    for (Entry& entry : entries_) entry = Entry{};
    MlpWorkload::Teardown();
  }

 private:
  struct Entry {
    std::int64_t key = -1;
    std::int64_t last_used = -1;
    Buffer value;  // empty: the slot is free
  };

  void MarkUsed(std::int64_t key) {
    for (Entry& entry : entries_)
      if (entry.value && entry.key == key) entry.last_used = ++clock_;
  }
  void Insert(std::int64_t key) {
    Entry* slot = &entries_[0];
    for (Entry& entry : entries_) {  // a free slot, else the least recently used entry
      if (!entry.value) {
        slot = &entry;
        break;
      }
      if (entry.last_used < slot->last_used) slot = &entry;
    }
    slot->value.Reset();  // eviction frees before the new entry is allocated
    slot->value = Buffer(rig_.session().resource(), kEntryBytes,
                         UserTag(rig_.session(), "capped_cache_entry"));
    FillBuffer(rig_.session(), slot->value, static_cast<float>(key));
    slot->key = key;
    slot->last_used = ++clock_;
  }

  std::array<Entry, kCapacity> entries_;
  std::int64_t clock_ = 0;
};

}  // namespace

void AddTrapWorkloads(std::vector<Registration>& out) {
  auto trap = [](std::string name, std::string description) {
    return Info(Kind::kTrap, std::move(name), std::move(description));
  };
  out.push_back(Register<WarmupGrowth>(
      trap("trap_warmup_growth",
           "Trains an MLP and allocates a 4 KiB table slice per step for the "
           "first 10 steps only, all held until Teardown: growth that stops.")));
  out.push_back(Register<Sawtooth>(
      trap("trap_sawtooth",
           "Trains an MLP and allocates a 16 KiB staging buffer on odd steps that "
           "it frees on even steps: a bounded sawtooth of period 2.")));
  out.back().info.period_steps = 2;
  out.push_back(
      Register<LazyOptimizerState>(trap("trap_lazy_optimizer_state",
                                        "Trains a 64-512-512-10 MLP with Adam, whose ~2.3 MiB of "
                                        "moment buffers are allocated lazily at the first step and "
                                        "persist with the parameters.")));
  out.push_back(
      Register<OneTimeLarge>(trap("trap_one_time_large",
                                  "Trains an MLP and makes one 8 MiB allocation at step 3 that it "
                                  "holds until Teardown.")));
  out.push_back(Register<CappedCache>(
      trap("trap_capped_cache",
           "Trains an MLP beside an LRU cache of 8 KiB device buffers that gains "
           "one entry per step up to 12 entries, then evicts the least recently "
           "used one per insert.")));
}

}  // namespace leakbound::workloads::internal
