// Clean workloads around the MLP rig: training with SGD and Adam, evaluation, an evaluation
// nested in a training step, a body that throws, and four sessions on persistent threads.
// Each must stay leak-bound: nothing persists per step, on the device or on the malloc heap.
#include <array>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "common.h"

namespace leakbound::workloads::internal {
namespace {

using runtime::OptimizerKind;
using runtime::Tape;
using runtime::TensorRef;

MlpRig::Config SmallMlp(OptimizerKind optimizer) {
  MlpRig::Config config;
  config.optimizer = optimizer;
  return config;
}

class MlpTraining final : public MlpWorkload {
 public:
  explicit MlpTraining(OptimizerKind optimizer) : MlpWorkload(SmallMlp(optimizer)) {}
  void Step(std::int64_t) override {
    rig_.TrainStep();
    rig_.Quiesce();
  }
};

// Inference only: one WithForward per step; the logits come back as host data and every
// forward temporary is released when the pass ends.
class MlpEval final : public MlpWorkload {
 public:
  MlpEval() : MlpWorkload(SmallMlp(OptimizerKind::kSgd)) {}
  void Setup(const WorkloadContext& context) override {
    MlpWorkload::Setup(context);
    evaluator_ = std::make_unique<runtime::Evaluator>(rig_.session(), rig_.model());
  }
  void Step(std::int64_t) override {
    evaluator_->Accuracy(rig_.batch());
    rig_.Quiesce();
  }
  void Teardown() override {
    evaluator_.reset();
    MlpWorkload::Teardown();
  }

 private:
  std::unique_ptr<runtime::Evaluator> evaluator_;
};

// A training step that evaluates a held-out batch between forward and backward: the nested
// WithForward has its own tape and releases it before the outer step continues.
class EvalInsideTrain final : public MlpWorkload {
 public:
  EvalInsideTrain() : MlpWorkload(SmallMlp(OptimizerKind::kAdam)) {}
  void Setup(const WorkloadContext& context) override {
    MlpWorkload::Setup(context);
    evaluator_ = std::make_unique<runtime::Evaluator>(rig_.session(), rig_.model());
    const auto& sizes = config_.sizes;
    held_out_ = runtime::Batch::Random(16, sizes.front(), sizes.back(), context.seed + 77);
  }
  void Step(std::int64_t) override {
    rig_.session().WithStep([&](Tape& tape) {
      const runtime::Batch& batch = rig_.batch();
      TensorRef x = tape.Input(batch.input_shape, batch.inputs);
      TensorRef loss = runtime::SoftmaxCrossEntropy(tape, rig_.model().Forward(tape, x),
                                                    tape.InputIds(batch.labels));
      last_accuracy_ = evaluator_->Accuracy(held_out_);
      tape.Backward(loss);
      rig_.optimizer().Apply(tape);
      return tape.Scalar(loss);
    });
    rig_.Quiesce();
  }
  void Teardown() override {
    evaluator_.reset();
    held_out_ = runtime::Batch{};
    MlpWorkload::Teardown();
  }

 private:
  std::unique_ptr<runtime::Evaluator> evaluator_;
  runtime::Batch held_out_;
  double last_accuracy_ = 0;
};

// Thrown by ThrowsEveryK's body; a type of its own so that only the planned error is caught.
class PlannedInterruption : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every 5th step the body throws after Backward and before the optimizer. The scope's error
// path releases the tape; the parameters keep their values (their gradients of that
// generation are never applied, since the optimizer only applies the current generation's).
class ThrowsEveryK final : public MlpWorkload {
 public:
  static constexpr std::int64_t kPeriod = 5;
  ThrowsEveryK() : MlpWorkload(SmallMlp(OptimizerKind::kSgd)) {}
  void Step(std::int64_t step) override {
    try {
      rig_.session().WithStep([&](Tape& tape) {
        TensorRef loss = rig_.ForwardBackward(tape);
        if (step % kPeriod == kPeriod - 1) throw PlannedInterruption("planned interruption");
        rig_.optimizer().Apply(tape);
        return tape.Scalar(loss);
      });
    } catch (const PlannedInterruption&) {
      ++interruptions_;
    }
    rig_.Quiesce();
  }

 private:
  std::int64_t interruptions_ = 0;
};

// Four sessions, each trained by its own persistent worker thread. Threads are created in
// Setup and joined in Teardown (a thread per step would churn stacks and malloc arenas); a
// step releases every worker for one training step and waits until all have finished, so the
// device is quiesced when Step returns. A worker's exception is rethrown by Step.
class ThreadedSessions final : public Workload {
 public:
  static constexpr int kWorkers = 4;

  void Setup(const WorkloadContext& context) override {
    for (int i = 0; i < kWorkers; ++i) {
      MlpRig::Config config = SmallMlp(i % 2 == 0 ? OptimizerKind::kSgd : OptimizerKind::kAdam);
      config.seed_offset = static_cast<std::uint64_t>(i) + 1;
      rigs_[static_cast<std::size_t>(i)].Setup(context, config);
    }
    stop_ = false;
    round_ = 0;
    threads_.reserve(kWorkers);
    for (int i = 0; i < kWorkers; ++i) threads_.emplace_back([this, i] { WorkerLoop(i); });
  }

  void Step(std::int64_t) override {
    std::exception_ptr error;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++round_;
      pending_ = kWorkers;
      start_.notify_all();
      done_.wait(lock, [&] { return pending_ == 0; });
      error = std::exchange(error_, nullptr);
    }
    if (error) std::rethrow_exception(error);
    Quiesce(Sessions());
  }

  void Teardown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    start_.notify_all();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
    threads_.shrink_to_fit();
    for (MlpRig& rig : rigs_) rig.Teardown();
  }

  std::vector<runtime::EagerSession*> Sessions() override {
    std::vector<runtime::EagerSession*> out;
    for (MlpRig& rig : rigs_)
      for (runtime::EagerSession* session : rig.Sessions()) out.push_back(session);
    return out;
  }

 private:
  void WorkerLoop(int index) {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        start_.wait(lock, [&] { return stop_ || round_ != seen; });
        if (stop_) return;
        seen = round_;
      }
      std::exception_ptr error;
      try {
        rigs_[static_cast<std::size_t>(index)].TrainStep();
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (error && !error_) error_ = error;
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::array<MlpRig, kWorkers> rigs_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable start_;  // a new round (or stop) for the workers
  std::condition_variable done_;   // the last worker of a round finished
  std::uint64_t round_ = 0;        // guarded by mutex_
  int pending_ = 0;                // workers still running this round; guarded by mutex_
  bool stop_ = false;              // guarded by mutex_
  std::exception_ptr error_;       // first worker error of the round; guarded by mutex_
};

}  // namespace

void AddCleanWorkloads(std::vector<Registration>& out) {
  auto clean = [](std::string name, std::string description) {
    return Info(Kind::kClean, std::move(name), std::move(description));
  };
  out.push_back({clean("mlp_sgd",
                       "Trains a 64-128-10 ReLU MLP (batch 32) with SGD and "
                       "momentum, one WithStep per step through runtime::Trainer."),
                 [] { return std::make_unique<MlpTraining>(OptimizerKind::kSgd); }});
  out.push_back({clean("mlp_adam",
                       "Trains a 64-128-10 ReLU MLP (batch 32) with Adam, one "
                       "WithStep per step through runtime::Trainer; Adam's moments "
                       "are allocated lazily at step 0."),
                 [] { return std::make_unique<MlpTraining>(OptimizerKind::kAdam); }});
  out.push_back(Register<MlpEval>(
      clean("mlp_eval",
            "Evaluates a 64-128-10 MLP on a batch of 32, one WithForward per step through "
            "runtime::Evaluator.")));
  AddModelWorkloads(out);
  out.push_back(Register<EvalInsideTrain>(
      clean("eval_inside_train",
            "Trains an MLP with Adam and, inside each WithStep between forward "
            "and backward, evaluates a held-out batch in a nested WithForward.")));
  out.push_back(Register<ThrowsEveryK>(
      clean("throws_every_k",
            "Trains an MLP with SGD whose step body throws a custom exception every "
            "5th step after backward and before the optimizer; the workload catches "
            "it and the scope's error path releases the tape.")));
  WorkloadInfo threaded = clean("threaded_sessions",
                                "Trains four MLP sessions (SGD and Adam) on four persistent worker "
                                "threads; each step runs one training step on every worker and "
                                "waits for all of them.");
  threaded.peak_depends_on_schedule = true;
  out.push_back(Register<ThreadedSessions>(std::move(threaded)));
}

}  // namespace leakbound::workloads::internal
