// A consumer's own tests with EXPECT_LEAK_BOUND: two clean loops that must pass and two leaking
// loops that must fail with the class ("unbounded-growth") in the message. The suites are named
// Clean* and Leaking* so that ci/consumer.sh can run each kind and check the outcome.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "leakbound/harness/gtest.h"
#include "leakbound/runtime/session.h"
#include "leakbound/watch/heap.h"

namespace {

using leakbound::harness::LambdaWorkload;

constexpr std::size_t kLeakBytes = 16 * 1024;

// Plain host code: 16 KiB per step with `new`. Clean frees it within the step; Leaking keeps
// it in a vector until teardown (reachable all along, so LeakSanitizer would stay silent).
struct HostLoop {
  std::vector<std::unique_ptr<char[]>> kept;
  bool leaky = false;

  LambdaWorkload AsWorkload() {
    LambdaWorkload w;
    w.name = leaky ? "host_new_leak" : "host_new_clean";
    w.setup = [this] { kept.reserve(4096); };
    w.step = [this](std::int64_t step) {
      std::unique_ptr<char[]> block(new char[kLeakBytes]);
      block[static_cast<std::size_t>(step) % kLeakBytes] = 1;
      if (leaky) kept.push_back(std::move(block));
    };
    // Not kept.clear(): it keeps the capacity, which the exact host heap reports as a residue
    // after teardown (not-returned-to-baseline).
    w.teardown = [this] { std::vector<std::unique_ptr<char[]>>().swap(kept); };
    return w;
  }
};

// Through a leakbound runtime session's memory resource: what the session's exact tracking
// sees, attributed by tag ("consumer_cache" in the failure message).
struct SessionLoop {
  std::unique_ptr<leakbound::runtime::EagerSession> session;
  std::vector<leakbound::runtime::Buffer> cache;
  bool leaky = false;

  LambdaWorkload AsWorkload() {
    LambdaWorkload w;
    w.name = leaky ? "session_cache_leak" : "session_scratch_clean";
    w.setup = [this] {
      session = std::make_unique<leakbound::runtime::EagerSession>();
      cache.reserve(4096);
    };
    w.step = [this](std::int64_t) {
      leakbound::runtime::Buffer entry(
          session->resource(), kLeakBytes,
          leakbound::runtime::AllocationTag{session->id(), session->generation(), "consumer_cache",
                                            leakbound::runtime::Role::kUser,
                                            leakbound::runtime::ScopeKind::kNone});
      if (leaky) cache.push_back(std::move(entry));
    };
    w.teardown = [this] {
      std::vector<leakbound::runtime::Buffer>().swap(cache);  // frees the capacity too
      session.reset();
    };
    w.sessions = [this] {
      return std::vector<leakbound::runtime::EagerSession*>{session.get()};
    };
    return w;
  }
};

TEST(Clean, HostNewFreedEachStepIsLeakBound) {
  HostLoop loop;
  EXPECT_LEAK_BOUND(loop.AsWorkload());
}

TEST(Clean, SessionScratchFreedEachStepIsLeakBound) {
  SessionLoop loop;
  EXPECT_LEAK_BOUND(loop.AsWorkload());
}

// Expected to FAIL: 16 KiB per step kept with `new`, caught by the exact host-heap counter,
// which counts only when the interposer (leakbound::heap, linked in through the harness) owns
// malloc; without it there is nothing exact to judge `new` by, and the test says so.
TEST(Leaking, HostNewKeptEachStepIsCaught) {
  if (!leakbound_heap_active()) {
    GTEST_SKIP() << "the exact host heap is not counting: " << leakbound_heap_state();
  }
  HostLoop loop;
  loop.leaky = true;
  EXPECT_LEAK_BOUND(loop.AsWorkload());
}

// Expected to FAIL: 16 KiB per step kept through the session's memory resource.
TEST(Leaking, SessionCacheKeptEachStepIsCaught) {
  SessionLoop loop;
  loop.leaky = true;
  EXPECT_LEAK_BOUND(loop.AsWorkload());
}

}  // namespace
