// Reliability under load: eight sessions on eight threads with a concurrent sampler (counters
// exact, verdict PASS, no race under TSan); a long soak far beyond the suite's block sizes; and
// a report writer killed mid-write never leaves a half-written report behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "leakbound/harness/gtest.h"
#include "leakbound/reports/json.h"
#include "leakbound/runtime/trainer.h"

namespace leakbound::harness {
namespace {

struct Worker {
  std::unique_ptr<runtime::EagerSession> session;
  std::unique_ptr<runtime::Mlp> model;
  std::unique_ptr<runtime::Optimizer> opt;
  runtime::Batch batch;
};

void MakeWorker(Worker& w, int index) {
  w.session = std::make_unique<runtime::EagerSession>();
  w.model = std::make_unique<runtime::Mlp>(*w.session, std::vector<std::int64_t>{16, 32, 4},
                                           runtime::Activation::kRelu, static_cast<std::uint64_t>(index));
  w.opt = runtime::MakeOptimizer(index % 2 ? runtime::OptimizerKind::kAdam : runtime::OptimizerKind::kSgd,
                                 w.model->params());
  w.batch = runtime::Batch::Random(8, 16, 4, static_cast<std::uint64_t>(index));
}

TEST(Concurrency, EightThreadsFiveHundredStepsWithASampler_CountersExactAndLeakBound) {
  constexpr int kThreads = 8;
  constexpr int kSteps = 500;
  const runtime::MemoryStats before = runtime::ProcessStats(runtime::Device::Cpu());
  std::atomic<bool> done{false};
  std::atomic<long long> samples{0};
  std::atomic<bool> sampled_negative{false};
  std::thread sampler([&] {
    while (!done.load()) {
      const runtime::MemoryStats s = runtime::ProcessStats(runtime::Device::Cpu());
      if (s.live_bytes < 0 || s.live_allocations < 0) sampled_negative = true;
      samples.fetch_add(1);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  std::vector<std::int64_t> drift(kThreads, -1);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &drift] {
      Worker w;
      MakeWorker(w, t);
      runtime::Trainer trainer(*w.session, *w.model, *w.opt);
      trainer.Step(w.batch);
      const std::int64_t settled = w.session->stats().live_bytes;
      for (int i = 1; i < kSteps; ++i) trainer.Step(w.batch);
      drift[static_cast<std::size_t>(t)] = w.session->stats().live_bytes - settled;
    });
  }
  for (auto& th : threads) th.join();
  done = true;
  sampler.join();
  const runtime::MemoryStats after = runtime::ProcessStats(runtime::Device::Cpu());
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(drift[static_cast<std::size_t>(t)], 0) << "thread " << t;
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  EXPECT_EQ(after.live_allocations, before.live_allocations);
  EXPECT_EQ(after.allocation_count - before.allocation_count, after.free_count - before.free_count);
  EXPECT_FALSE(sampled_negative.load());
  EXPECT_GT(samples.load(), 0);
  std::printf("[figures] concurrency: %d threads x %d steps, %lld concurrent samples, %lld "
              "allocations, residue %lld B\n",
              kThreads, kSteps, samples.load(),
              static_cast<long long>(after.allocation_count - before.allocation_count),
              static_cast<long long>(after.live_bytes - before.live_bytes));

  // The harness's verdict on the same load: eight workers stepped together per harness step.
  std::vector<Worker> workers(kThreads);
  LambdaWorkload lw;
  lw.name = "eight_sessions";
  lw.setup = [&] {
    for (int t = 0; t < kThreads; ++t) MakeWorker(workers[static_cast<std::size_t>(t)], t);
  };
  lw.step = [&](std::int64_t) {
    std::vector<std::thread> step_threads;
    for (auto& w : workers) {
      step_threads.emplace_back([&w] { runtime::Trainer(*w.session, *w.model, *w.opt).Step(w.batch); });
    }
    for (auto& th : step_threads) th.join();
  };
  lw.teardown = [&] {
    for (auto& w : workers) {
      w.opt.reset();
      w.model.reset();
      w.session.reset();
    }
  };
  lw.sessions = [&] {
    std::vector<runtime::EagerSession*> out;
    for (auto& w : workers) out.push_back(w.session.get());
    return out;
  };
  RunOptions options;
  options.blocks = 5;
  options.steps_per_block = 100;  // 500 harness steps x 8 sessions
  EXPECT_LEAK_BOUND(lw, options);
}

TEST(Soak, TwentyThousandStepsOfTheMlpWorkloadStayFlat) {
  RunOptions options;
  options.blocks = 10;
  options.steps_per_block = 2000;
  const workloads::Registration* reg = workloads::FindWorkload("mlp_sgd");
  ASSERT_NE(reg, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const reports::WorkloadResult r = Runner(options).Run(*reg);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.verdict, reports::kPass) << Explain(r);
  EXPECT_EQ(r.series[0].values.size(), static_cast<std::size_t>(r.warmup_steps + 20000));
  EXPECT_EQ(r.final_live_bytes, 0);
  std::printf("[figures] soak: %d steps (+%d warm-up) of mlp_sgd in %.1f s, steady %.0f B above "
              "baseline, verdict %s\n",
              20000, r.warmup_steps, seconds, r.steady_live_bytes, reports::ToString(r.verdict).c_str());
}

TEST(AtomicWrite, WriterKilledMidWrite_NeverLeavesAHalfWrittenReport) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("leakbound-kill-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path target = dir / "report.json";
  reports::Report report;
  report.meta.device_class = "cpu";
  reports::WorkloadResult w;
  w.name = "big";
  reports::CounterSeries s;
  s.name = "runtime.live_bytes";
  s.values.assign(400000, 123456.789);  // several MB of JSON: the write takes a while
  w.series.push_back(s);
  report.workloads.push_back(w);
  reports::WriteReportAtomically(report, target);  // a complete previous version exists
  int kills = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (;;) reports::WriteReportAtomically(report, target);
    }
    ::usleep(static_cast<useconds_t>(20000 + attempt * 13000));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    kills += WIFSIGNALED(status) ? 1 : 0;
    const reports::Report loaded = reports::LoadReport(target);  // throws if half-written
    ASSERT_EQ(loaded.workloads.size(), 1u);
    EXPECT_EQ(loaded.workloads[0].series[0].values.size(), 400000u);
  }
  EXPECT_EQ(kills, 5);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace leakbound::harness
