// WithStep / WithForward: release on every exit path, ownership (views, reused parameters),
// nesting rules, stale and foreign handles, the optimizer's all-or-nothing policy, threads.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>

#include "forwarding_backend.h"
#include "leakbound/runtime/ops.h"
#include "leakbound/runtime/scratch.h"
#include "leakbound/runtime/session.h"
#include "leakbound/runtime/trainer.h"

namespace leakbound::runtime {
namespace {

struct BodyFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ScopeTest : public ::testing::Test {
 protected:
  ScopeTest()
      : model_(session_, {8, 16, 4}, Activation::kRelu, 7),
        optimizer_(MakeOptimizer(OptimizerKind::kAdam, model_.params())),
        batch_(Batch::Random(6, 8, 4, 11)) {}

  std::vector<std::vector<float>> Snapshot() {
    std::vector<std::vector<float>> out;
    for (Param* p : model_.params()) out.push_back(session_.ReadParam(*p));
    return out;
  }
  // Records forward; throws at `stage` (0: mid-forward, 1: after forward, 2: after backward,
  // 3: after the optimizer); -1 never.
  float StepThrowingAt(int stage) {
    return session_.WithStep([&](Tape& tape) {
      TensorRef x = tape.Input(batch_.input_shape, batch_.inputs);
      TensorRef h = Linear(tape, x, tape.Use(*model_.params()[0]), tape.Use(*model_.params()[1]),
                           Activation::kRelu);
      if (stage == 0) throw BodyFailure("mid-forward");
      TensorRef logits =
          Linear(tape, h, tape.Use(*model_.params()[2]), tape.Use(*model_.params()[3]));
      TensorRef loss = SoftmaxCrossEntropy(tape, logits, tape.InputIds(batch_.labels));
      if (stage == 1) throw BodyFailure("after forward");
      tape.Backward(loss);
      if (stage == 2) throw BodyFailure("after backward");
      optimizer_->Apply(tape);
      if (stage == 3) throw BodyFailure("after optimizer");
      return tape.Scalar(loss);
    });
  }

  EagerSession session_;
  Mlp model_;
  std::unique_ptr<Optimizer> optimizer_;
  Batch batch_;
};

TEST_F(ScopeTest, WithStep_NormalExit_ReleasesEveryTapeBuffer) {
  StepThrowingAt(-1);  // first step allocates the optimizer state (persistent)
  const MemoryStats after_first = session_.stats();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(std::isfinite(StepThrowingAt(-1)));
  const MemoryStats after = session_.stats();
  EXPECT_EQ(after.live_bytes, after_first.live_bytes);
  EXPECT_EQ(after.live_allocations, after_first.live_allocations);
  // What is left is exactly parameters, their gradients and Adam's two moments.
  std::int64_t param_bytes = 0;
  for (Param* p : model_.params()) param_bytes += static_cast<std::int64_t>(p->bytes());
  EXPECT_EQ(after.live_bytes, 4 * param_bytes);
  EXPECT_EQ(session_.tracking()->outstanding_count(), 4 * model_.params().size());
}

TEST_F(ScopeTest, WithStep_ThrowAtEachStage_PropagatesUnchangedAndReleasesTape) {
  StepThrowingAt(-1);
  for (int stage : {0, 1, 2}) {
    const MemoryStats before = session_.stats();
    const auto params_before = Snapshot();
    try {
      StepThrowingAt(stage);
      FAIL() << "stage " << stage << " should throw";
    } catch (const BodyFailure& e) {
      EXPECT_STREQ(e.what(), stage == 0 ? "mid-forward"
                             : stage == 1 ? "after forward" : "after backward");
    }
    EXPECT_EQ(session_.stats().live_bytes, before.live_bytes) << "stage " << stage;
    EXPECT_EQ(session_.stats().live_allocations, before.live_allocations);
    EXPECT_EQ(Snapshot(), params_before) << "parameters must be untouched, stage " << stage;
    EXPECT_TRUE(std::isfinite(StepThrowingAt(-1)));  // the session works for the next step
  }
}

TEST_F(ScopeTest, WithStep_ThrowAfterOptimizer_KeepsTheCompletedUpdate) {
  StepThrowingAt(-1);
  const auto params_before = Snapshot();
  const MemoryStats before = session_.stats();
  EXPECT_THROW(StepThrowingAt(3), BodyFailure);
  EXPECT_NE(Snapshot(), params_before);
  EXPECT_EQ(session_.stats().live_bytes, before.live_bytes);
}

TEST_F(ScopeTest, WithStep_ErrorInOptimizerStateAllocation_LeavesEveryParameterUnchanged) {
  // Fresh optimizer: its first Apply must allocate 2 state slots for each of 4 parameters.
  // Fail each of those 8 allocations in turn: all-or-nothing means no parameter moves.
  for (int k = 1; k <= 8; ++k) {
    auto opt = MakeOptimizer(OptimizerKind::kAdam, model_.params());
    const auto params_before = Snapshot();
    const MemoryStats before = session_.stats();
    EXPECT_THROW(session_.WithStep([&](Tape& tape) {
      TensorRef loss = SoftmaxCrossEntropy(
          tape, model_.Forward(tape, tape.Input(batch_.input_shape, batch_.inputs)),
          tape.InputIds(batch_.labels));
      tape.Backward(loss);
      session_.faults().FailNthAllocation(static_cast<std::uint64_t>(k));
      opt->Apply(tape);
    }), OutOfMemoryError) << "k=" << k;
    session_.faults().Disarm();
    EXPECT_EQ(Snapshot(), params_before) << "k=" << k;
    // Optimizer state allocated before the failure is the parameter's, not a leak: it persists
    // with the parameter. Everything else came back.
    std::int64_t state_bytes = 0;
    for (Param* p : model_.params())
      state_bytes += static_cast<std::int64_t>(p->optimizer_state().size() * p->bytes());
    EXPECT_EQ(session_.stats().live_bytes - state_bytes,
              before.live_bytes - 0) << "k=" << k;
    for (Param* p : model_.params()) p->optimizer_state().clear();
  }
}

TEST_F(ScopeTest, WithStep_FailedAllocationMidForward_SurfacesTypedErrorAndRecovers) {
  StepThrowingAt(-1);
  const MemoryStats before = session_.stats();
  session_.faults().FailNthAllocation(3);
  EXPECT_THROW(StepThrowingAt(-1), OutOfMemoryError);
  EXPECT_EQ(session_.stats().live_bytes, before.live_bytes);
  EXPECT_TRUE(std::isfinite(StepThrowingAt(-1)));
}

TEST(Scopes, ViewOfParameterAndParameterUsedTwice_NeverFreeParameterStorage) {
  EagerSession session;
  const std::vector<float> values{1, 2, 3, 4, 5, 6};
  Param& w = session.CreateParam("w", Shape{2, 3}, values);
  const MemoryStats before = session.stats();
  session.WithStep([&](Tape& tape) {
    TensorRef a = tape.Use(w);
    TensorRef b = tape.Use(w);  // the same node: the storage is borrowed once
    EXPECT_EQ(a.index, b.index);
    TensorRef wt = Transpose(tape, a);  // a view of a parameter owns nothing
    TensorRef r = Reshape(tape, b, Shape{3, 2});
    TensorRef loss = Sum(tape, Add(tape, MatMul(tape, a, wt), MatMul(tape, a, r)));
    tape.Backward(loss);
  });
  EXPECT_EQ(session.stats().live_bytes, before.live_bytes);
  EXPECT_EQ(session.ReadParam(w), values);  // storage intact and readable
  // d/dw sum(w w^T + w reshape(w)): both uses accumulated into one gradient.
  EXPECT_NE(w.grad()[0], 0.0f);
}

TEST(Scopes, WithForward_ReturnsHostDataAndReleasesTemporaries) {
  EagerSession session;
  Mlp model(session, {4, 8, 3}, Activation::kGelu, 3);
  Evaluator eval(session, model);
  const Batch batch = Batch::Random(5, 4, 3, 1);
  const MemoryStats before = session.stats();
  const HostTensor logits = eval.Logits(batch);
  EXPECT_EQ(logits.shape, (Shape{5, 3}));
  EXPECT_EQ(logits.data.size(), 15u);
  EXPECT_EQ(session.stats().live_bytes, before.live_bytes);
  EXPECT_EQ(session.stats().live_allocations, before.live_allocations);
  EXPECT_EQ(eval.Logits(batch).data, logits.data);  // deterministic
}

// Issue 9: a body returning t.ReadFloats(...) passed the old deny-list and read freed memory.
// The scopes accept only host data (values that own their bytes); everything else, pointers and
// views included, fails the static_assert that the CompileFail ctests exercise.
TEST(Scopes, WithForward_ResultThatCouldPointIntoTheTape_IsRefusedAtCompileTime) {
  using NodeFloats = decltype(std::declval<Tape&>().ReadFloats(0, ""));
  struct PointerHolder {
    const float* values;
  };
  const float* raw = nullptr;
  auto closure = [raw] { return raw; };
  EXPECT_TRUE(kEscapesTape<NodeFloats>);
  EXPECT_TRUE(kEscapesTape<const std::int32_t*>);
  EXPECT_TRUE(kEscapesTape<std::span<const float>>);
  EXPECT_TRUE(kEscapesTape<std::string_view>);
  EXPECT_TRUE(kEscapesTape<std::vector<const float*>>);
  EXPECT_TRUE((kEscapesTape<std::pair<float, const float*>>));
  EXPECT_TRUE((kEscapesTape<std::tuple<HostTensor, std::span<float>>>));
  EXPECT_TRUE(kEscapesTape<PointerHolder>);
  EXPECT_TRUE(kEscapesTape<decltype(closure)>);
  EXPECT_TRUE(kEscapesTape<TensorRef>);
  EXPECT_TRUE(kEscapesTape<const HostTensor&>);
  EXPECT_FALSE(kEscapesTape<void>);
  EXPECT_FALSE(kEscapesTape<float>);
  EXPECT_FALSE(kEscapesTape<HostTensor>);
  EXPECT_FALSE(kEscapesTape<Shape>);
  EXPECT_FALSE(kEscapesTape<std::string>);
  EXPECT_FALSE(kEscapesTape<std::vector<float>>);
  EXPECT_FALSE((kEscapesTape<std::tuple<float, HostTensor, std::optional<Shape>>>));
  EXPECT_FALSE((kEscapesTape<std::pair<std::array<double, 2>, std::vector<std::int32_t>>>));
}

}  // namespace

// A result type of the test's own, declared host data: it owns all its bytes.
struct ForwardSummary {
  float loss = 0;
  std::vector<float> logits;
};
template <>
struct IsHostData<ForwardSummary> : std::true_type {};

namespace {

TEST(Scopes, WithForward_OwnResultTypeDeclaredHostData_IsReturned) {
  EagerSession session;
  const std::vector<float> values{1, 2};
  Param& w = session.CreateParam("w", Shape{2}, values);
  const ForwardSummary summary = session.WithForward([&](Tape& t) {
    TensorRef x = t.Use(w);
    return ForwardSummary{t.Scalar(Sum(t, x)), t.ToHost(x).data};
  });
  EXPECT_EQ(summary.loss, 3.0f);
  EXPECT_EQ(summary.logits, values);
}

TEST(Scopes, WithForward_RejectsBackward) {
  EagerSession session;
  Param& w = session.CreateParam("w", Shape{2}, 1.0f, 1);
  EXPECT_THROW(session.WithForward([&](Tape& tape) { tape.Backward(Sum(tape, tape.Use(w))); }),
               ScopeError);
  EXPECT_EQ(session.stats().live_bytes, static_cast<std::int64_t>(2 * w.bytes()));
}

TEST(Scopes, WithForwardInsideWithStep_WorksWithItsOwnTape) {
  EagerSession session;
  Mlp model(session, {4, 8, 3}, Activation::kTanh, 3);
  auto opt = MakeOptimizer(OptimizerKind::kSgd, model.params());
  const Batch batch = Batch::Random(5, 4, 3, 1);
  Trainer(session, model, *opt).Step(batch);
  const MemoryStats before = session.stats();
  double accuracy = -1;
  session.WithStep([&](Tape& tape) {
    TensorRef x = tape.Input(batch.input_shape, batch.inputs);
    TensorRef loss = SoftmaxCrossEntropy(tape, model.Forward(tape, x), tape.InputIds(batch.labels));
    accuracy = Evaluator(session, model).Accuracy(batch);  // nested evaluation
    // The outer handle is refused inside the nested scope, with a message that says why.
    try {
      session.WithForward([&](Tape& inner) { return inner.Scalar(loss); });
      ADD_FAILURE() << "outer handle accepted in nested scope";
    } catch (const StaleHandleError& e) {
      EXPECT_NE(std::string(e.what()).find("enclosing scope"), std::string::npos) << e.what();
    }
    tape.Backward(loss);  // the outer tape is intact after the nested pass
    opt->Apply(tape);
  });
  EXPECT_GE(accuracy, 0.0);
  EXPECT_EQ(session.stats().live_bytes, before.live_bytes);
}

TEST(Scopes, InvalidNestings_AreRejectedAndTheSessionStaysUsable) {
  EagerSession session;
  Param& w = session.CreateParam("w", Shape{3}, 1.0f, 1);
  EXPECT_THROW(session.WithStep([&](Tape&) { session.WithStep([](Tape&) {}); }), ScopeError);
  EXPECT_THROW(session.WithForward([&](Tape&) { session.WithStep([](Tape&) {}); }), ScopeError);
  EXPECT_THROW(session.WithForward([&](Tape&) { session.WithForward([](Tape&) {}); }),
               ScopeError);
  const float s = session.WithForward([&](Tape& t) { return t.Scalar(Sum(t, t.Use(w))); });
  EXPECT_TRUE(std::isfinite(s));
  EXPECT_EQ(session.stats().live_bytes, static_cast<std::int64_t>(2 * w.bytes()));
}

TEST(Scopes, StaleHandle_FromAnEndedStep_IsAClearError) {
  EagerSession session;
  const std::vector<float> v{1, 2};
  TensorRef kept;
  session.WithStep([&](Tape& tape) { kept = tape.Input(Shape{2}, v); });
  try {
    session.WithStep([&](Tape& tape) { Sum(tape, kept); });
    FAIL();
  } catch (const StaleHandleError& e) {
    EXPECT_NE(std::string(e.what()).find("generation " + std::to_string(kept.generation)),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ended"), std::string::npos) << e.what();
  }
}

TEST(Scopes, ForeignHandleAndForeignParam_AreClearErrors) {
  EagerSession a, b;
  Param& pa = a.CreateParam("pa", Shape{2}, 1.0f, 1);
  const std::vector<float> v{1, 2};
  a.WithStep([&](Tape& ta) {
    TensorRef ref = ta.Input(Shape{2}, v);
    b.WithStep([&](Tape& tb) {
      EXPECT_THROW(Sum(tb, ref), ForeignHandleError);
      EXPECT_THROW(tb.Use(pa), ForeignHandleError);
    });
  });
  EXPECT_EQ(b.stats().live_bytes, 0);
}

TEST(Scopes, ValuesReleasedByBackward_RaiseUnlessRetained) {
  EagerSession session;
  Param& w = session.CreateParam("w", Shape{2, 2}, 1.0f, 1);
  session.WithStep([&](Tape& tape) {
    TensorRef h = Tanh(tape, tape.Use(w));
    TensorRef kept = Relu(tape, tape.Use(w));
    tape.Retain(kept);
    TensorRef loss = Sum(tape, Add(tape, h, kept));
    tape.Backward(loss);
    EXPECT_THROW(tape.ToHost(h), ReleasedValueError);
    EXPECT_EQ(tape.ToHost(kept).data.size(), 4u);
    EXPECT_TRUE(std::isfinite(tape.Scalar(loss)));
    EXPECT_THROW(tape.Backward(loss), ScopeError);
  });
}

TEST(Scopes, IdsReleasedByBackward_AreRefusedNotReadAfterFree) {
  EagerSession session;
  Param& table = session.CreateParam("table", Shape{5, 3}, 1.0f, 1);
  const std::vector<std::int32_t> ids{1, 4, 2};
  session.WithStep([&](Tape& tape) {
    TensorRef i = tape.InputIds(ids);
    tape.Backward(Mean(tape, Embedding(tape, tape.Use(table), i)));
    EXPECT_THROW(Embedding(tape, tape.Use(table), i), ReleasedValueError);
  });
}

// Issue 9: the second Backward read the labels through a pointer the first had released.
// W = 0 gives uniform probabilities (1/3), so dL/dlogits = (1/3 - onehot) / 2 per loss and
// dW = x1^T g + x2^T g = (1 + 2) g with x1 = I, x2 = 2 I.
TEST(Scopes, Backward_TwoLossesShareInputIds_BothSucceed) {
  EagerSession session;
  Param& w = session.CreateParam("w", Shape{2, 3}, 0.0f, 1);
  const std::vector<std::int32_t> labels{0, 2};
  const std::vector<float> x1{1, 0, 0, 1};
  const std::vector<float> x2{2, 0, 0, 2};
  Tape& tape = session.ManualTape();
  TensorRef ids = tape.InputIds(labels);
  TensorRef in2 = tape.Input(Shape{2, 2}, x2);  // recorded before the first loss, used after it
  TensorRef l1 =
      SoftmaxCrossEntropy(tape, MatMul(tape, tape.Input(Shape{2, 2}, x1), tape.Use(w)), ids);
  TensorRef l2 = SoftmaxCrossEntropy(tape, MatMul(tape, in2, tape.Use(w)), ids);
  tape.Backward(l1);
  tape.Backward(l2);
  EXPECT_FLOAT_EQ(tape.Scalar(l1), std::log(3.0f));
  EXPECT_FLOAT_EQ(tape.Scalar(l2), std::log(3.0f));
  const std::vector<float> expected{-1.0f, 0.5f, 0.5f, 0.5f, 0.5f, -1.0f};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(w.grad()[i], expected[i], 1e-6f) << "dW[" << i << "]";
  }
  session.ResetManualTape();
  EXPECT_EQ(session.stats().live_bytes, static_cast<std::int64_t>(2 * w.bytes()));
}

// The same for an Embedding whose ids feed a later loss: the ids stay until the last consumer.
TEST(Scopes, Backward_EmbeddingIdsSharedWithALaterLoss_BothSucceed) {
  EagerSession session;
  const std::vector<float> table_values{1, 2, 3, 4, 5, 6};  // [3, 2]
  Param& table = session.CreateParam("table", Shape{3, 2}, table_values);
  const std::vector<std::int32_t> ids{2, 0};
  Tape& tape = session.ManualTape();
  TensorRef i = tape.InputIds(ids);
  TensorRef l1 = Sum(tape, Embedding(tape, tape.Use(table), i));
  TensorRef l2 = Sum(tape, Embedding(tape, tape.Use(table), i));
  tape.Backward(l1);
  tape.Backward(l2);
  EXPECT_EQ(tape.Scalar(l2), 5.0f + 6.0f + 1.0f + 2.0f);
  const std::vector<float> expected{2, 2, 0, 0, 2, 2};  // rows 0 and 2, once per loss
  EXPECT_EQ(std::vector<float>(table.grad(), table.grad() + 6), expected);
  session.ResetManualTape();
}

TEST(Scopes, ManualTape_LaterLossOnACoveredNode_IsRefused) {
  EagerSession session;
  Param& w = session.CreateParam("w", Shape{2}, 1.0f, 1);
  Tape& tape = session.ManualTape();
  TensorRef l1 = Sum(tape, Tanh(tape, tape.Use(w)));
  tape.Backward(l1);
  TensorRef l2 = Sum(tape, Relu(tape, tape.Use(w)));
  EXPECT_THROW(tape.Backward(Add(tape, l1, l2)), ScopeError);
  session.ResetManualTape();
  EXPECT_EQ(session.stats().live_bytes, static_cast<std::int64_t>(2 * w.bytes()));
}

TEST(Scopes, BadInput_ShapeErrorsLoseNothing) {
  EagerSession session;
  Param& w = session.CreateParam("w", Shape{3, 4}, 1.0f, 1);
  const MemoryStats before = session.stats();
  session.WithStep([&](Tape& tape) {
    EXPECT_THROW(MatMul(tape, tape.Use(w), tape.Use(w)), ShapeError);
    EXPECT_THROW(Reshape(tape, tape.Use(w), Shape{5, 5}), ShapeError);
    const std::vector<std::int32_t> bad_ids{0, 7};
    EXPECT_THROW(Embedding(tape, tape.Use(w), tape.InputIds(bad_ids)), ShapeError);
    EXPECT_THROW(tape.Input(Shape{2, 2}, std::vector<float>(3)), ShapeError);
    EXPECT_THROW(Mean(tape, tape.Input(Shape{0}, {})), ShapeError);
  });
  EXPECT_EQ(session.stats().live_bytes, before.live_bytes);
  EXPECT_THROW(Shape({-1, 2}), ShapeError);
  EXPECT_THROW(Shape({std::numeric_limits<std::int64_t>::max() / 2, 4}), ShapeError);
}

TEST(Scopes, NonFiniteInput_IsReportedNotACrash) {
  EagerSession session;
  const std::vector<float> v{1.0f, std::nanf(""), std::numeric_limits<float>::infinity()};
  session.WithForward([&](Tape& tape) {
    TensorRef x = tape.Input(Shape{3}, v);
    try {
      tape.CheckFinite(x);
      ADD_FAILURE();
    } catch (const NonFiniteError& e) {
      EXPECT_NE(std::string(e.what()).find("2 NaN/Inf"), std::string::npos) << e.what();
    }
  });
}

TEST(Scopes, CudaSessionOnThisMachine_IsRejectedWithTheCause) {
  SessionOptions options;
  options.device = Device::Cuda(0);
  try {
    EagerSession session(options);
    GTEST_SKIP() << "a CUDA device is present";
  } catch (const DeviceUnavailableError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("without CUDA") != std::string::npos ||
                what.find("driver") != std::string::npos ||
                what.find("no CUDA device") != std::string::npos)
        << what;
  }
}

// Issue 9: ~EagerSession synchronised and let a sticky device error escape the destructor,
// which terminates the process. Destructors must not throw: the error is counted and reported.
class StickyErrorBackend final : public testing::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void Synchronize() override { throw RuntimeError("cudaStreamSynchronize: sticky error (test)"); }
};

TEST(Scopes, Destructor_SynchronizeThrows_IsCountedNotRethrown) {
  SessionOptions options;
  options.wrap_backend = [](std::unique_ptr<Backend> inner) -> std::unique_ptr<Backend> {
    return std::make_unique<StickyErrorBackend>(std::move(inner));
  };
  const std::uint64_t before = EagerSession::destructor_errors();
  {
    EagerSession session(options);
    Param& w = session.CreateParam("w", Shape{2}, 1.0f, 1);
    session.WithStep([&](Tape& tape) { tape.Backward(Sum(tape, tape.Use(w))); });
    EXPECT_THROW(session.backend().Synchronize(), RuntimeError);
  }
  EXPECT_EQ(EagerSession::destructor_errors(), before + 1);
}

TEST(Scopes, ManualTape_HoldsEverythingUntilReset) {
  EagerSession session;
  const std::vector<float> v(16, 1.0f);
  Tape& tape = session.ManualTape();
  tape.Input(Shape{16}, v);
  tape.Input(Shape{16}, v);
  EXPECT_EQ(session.stats().live_bytes, 128);
  session.ResetManualTape();
  EXPECT_EQ(session.stats().live_bytes, 0);
}

TEST(Scopes, ReleaseThen_ReleasesScratchOnEveryExitPath) {
  EagerSession session;
  const AllocationTag tag{session.id(), 0, "reduction", Role::kScratch, ScopeKind::kNone};
  const float r = ReleaseThen(session.resource(), 256, tag, [&](Buffer& scratch) {
    EXPECT_EQ(session.stats().live_bytes, 256);
    scratch.floats()[0] = 2.5f;
    return scratch.floats()[0];
  });
  EXPECT_EQ(r, 2.5f);
  EXPECT_EQ(session.stats().live_bytes, 0);
  EXPECT_THROW(ReleaseManyThen<2>(session.resource(), {64, 32}, tag,
                                  [&](auto&) { throw BodyFailure("x"); }),
               BodyFailure);
  EXPECT_EQ(session.stats().live_bytes, 0);
  session.faults().FailNthAllocation(2);
  EXPECT_THROW(ReleaseManyThen<2>(session.resource(), {64, 32}, tag, [](auto&) {}),
               OutOfMemoryError);
  EXPECT_EQ(session.stats().live_bytes, 0);
}

TEST(Scopes, IndependentSessionsOnThreads_KeepProcessCountersExact) {
  const MemoryStats process_before = ProcessStats(Device::Cpu());
  std::vector<std::thread> threads;
  std::vector<std::int64_t> residue(4, -1);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &residue] {
      EagerSession session;
      Mlp model(session, {8, 16, 4}, Activation::kRelu, static_cast<std::uint64_t>(t));
      auto opt = MakeOptimizer(OptimizerKind::kSgd, model.params());
      Trainer trainer(session, model, *opt);
      const Batch batch = Batch::Random(4, 8, 4, static_cast<std::uint64_t>(t));
      trainer.Step(batch);
      const std::int64_t settled = session.stats().live_bytes;
      for (int i = 0; i < 50; ++i) trainer.Step(batch);
      residue[static_cast<std::size_t>(t)] = session.stats().live_bytes - settled;
    });
  }
  for (auto& th : threads) th.join();
  for (std::int64_t r : residue) EXPECT_EQ(r, 0);
  const MemoryStats process_after = ProcessStats(Device::Cpu());
  EXPECT_EQ(process_after.live_bytes, process_before.live_bytes);
  EXPECT_EQ(process_after.live_allocations, process_before.live_allocations);
}

}  // namespace
}  // namespace leakbound::runtime
