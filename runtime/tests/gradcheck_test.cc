// Every op's backward checked against central finite differences of its forward, on random
// inputs. The loss is a random projection of the op's output so no gradient is uniform.
// Also the CPU Gemm's edge cases (k == 0, dimensions past BLAS's integer).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "leakbound/runtime/ops.h"
#include "leakbound/runtime/session.h"

namespace leakbound::runtime {
namespace {

using Builder = std::function<TensorRef(Tape&, const std::vector<TensorRef>&)>;

// Sum(op_output * R) with a fixed random R of the output's shape.
TensorRef Project(Tape& tape, TensorRef y, std::uint64_t seed) {
  const Shape shape = tape.ShapeOf(y);
  std::vector<float> r(static_cast<std::size_t>(shape.numel()));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : r) v = dist(rng);
  if (shape.numel() == 1) return Mul(tape, y, tape.Input(shape, r));
  return Sum(tape, Mul(tape, y, tape.Input(shape, r)));
}

void GradCheck(const std::vector<Shape>& shapes, const Builder& op, float value_scale = 1.0f) {
  EagerSession session;
  std::vector<Param*> params;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    std::string name = "p";  // appended, not "p" + ...: GCC 12's -Wrestrict false positive
    name += std::to_string(i);
    params.push_back(&session.CreateParam(name, shapes[i], value_scale, 1234 + i));
  }
  auto loss_of = [&](Tape& tape) {
    std::vector<TensorRef> refs;
    for (Param* p : params) refs.push_back(tape.Use(*p));
    return Project(tape, op(tape, refs), 99);
  };
  session.WithStep([&](Tape& tape) { tape.Backward(loss_of(tape)); });
  for (Param* p : params) {
    const std::vector<float> analytic(p->grad(), p->grad() + p->shape().numel());
    const std::int64_t n = p->shape().numel();
    const std::int64_t stride = std::max<std::int64_t>(1, n / 16);  // sample up to ~16 entries
    for (std::int64_t j = 0; j < n; j += stride) {
      const float eps = 3e-3f;
      const float saved = p->data()[j];
      p->data()[j] = saved + eps;
      const float plus = session.WithForward([&](Tape& t) { return t.Scalar(loss_of(t)); });
      p->data()[j] = saved - eps;
      const float minus = session.WithForward([&](Tape& t) { return t.Scalar(loss_of(t)); });
      p->data()[j] = saved;
      const float numeric = (plus - minus) / (2 * eps);
      const float a = analytic[static_cast<std::size_t>(j)];
      const float tol = 2e-2f * std::max({1.0f, std::fabs(a), std::fabs(numeric)});
      EXPECT_NEAR(a, numeric, tol) << "param " << p->name() << " element " << j;
    }
  }
}

TEST(GradCheck, MatMul) {
  GradCheck({Shape{3, 4}, Shape{4, 5}},
            [](Tape& t, const auto& p) { return MatMul(t, p[0], p[1]); });
}

TEST(GradCheck, MatMulOfTransposedViews) {
  GradCheck({Shape{4, 3}, Shape{5, 4}}, [](Tape& t, const auto& p) {
    return MatMul(t, Transpose(t, p[0]), Transpose(t, p[1]));
  });
}

TEST(GradCheck, AddSameShapeAndBiasBroadcast) {
  GradCheck({Shape{3, 4}, Shape{3, 4}}, [](Tape& t, const auto& p) { return Add(t, p[0], p[1]); });
  GradCheck({Shape{3, 4}, Shape{4}}, [](Tape& t, const auto& p) { return Add(t, p[0], p[1]); });
}

TEST(GradCheck, LinearWithEachActivation) {
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu,
                         Activation::kTanh}) {
    GradCheck({Shape{3, 4}, Shape{4, 5}, Shape{5}},
              [act](Tape& t, const auto& p) { return Linear(t, p[0], p[1], p[2], act); });
  }
}

TEST(GradCheck, Mul) {
  GradCheck({Shape{2, 5}, Shape{2, 5}}, [](Tape& t, const auto& p) { return Mul(t, p[0], p[1]); });
}

TEST(GradCheck, ReluGeluTanhScale) {
  GradCheck({Shape{4, 6}}, [](Tape& t, const auto& p) { return Relu(t, p[0]); });
  GradCheck({Shape{4, 6}}, [](Tape& t, const auto& p) { return Gelu(t, p[0]); });
  GradCheck({Shape{4, 6}}, [](Tape& t, const auto& p) { return Tanh(t, p[0]); });
  GradCheck({Shape{4, 6}}, [](Tape& t, const auto& p) { return Scale(t, p[0], -0.7f); });
}

TEST(GradCheck, SumAndMean) {
  GradCheck({Shape{3, 7}}, [](Tape& t, const auto& p) { return Sum(t, p[0]); });
  GradCheck({Shape{3, 7}}, [](Tape& t, const auto& p) { return Mean(t, p[0]); });
}

TEST(GradCheck, SoftmaxCrossEntropy) {
  GradCheck({Shape{4, 5}}, [](Tape& t, const auto& p) {
    const std::vector<std::int32_t> labels{0, 3, 4, 1};
    return SoftmaxCrossEntropy(t, p[0], t.InputIds(labels));
  });
}

TEST(GradCheck, Mse) {
  GradCheck({Shape{3, 4}}, [](Tape& t, const auto& p) {
    std::vector<float> target(12, 0.25f);
    return Mse(t, p[0], t.Input(Shape{3, 4}, target));
  });
}

TEST(GradCheck, MseWithBothSidesTrainable) {
  GradCheck({Shape{3, 4}, Shape{3, 4}},
            [](Tape& t, const auto& p) { return Mse(t, Tanh(t, p[0]), p[1]); });
}

TEST(GradCheck, LayerNorm) {
  GradCheck({Shape{3, 6}, Shape{6}, Shape{6}},
            [](Tape& t, const auto& p) { return LayerNorm(t, p[0], p[1], p[2]); });
}

TEST(GradCheck, EmbeddingWithRepeatedIds) {
  GradCheck({Shape{5, 3}}, [](Tape& t, const auto& p) {
    const std::vector<std::int32_t> ids{4, 0, 4, 2};
    return Embedding(t, p[0], t.InputIds(ids));
  });
}

TEST(GradCheck, Concat) {
  GradCheck({Shape{3, 2}, Shape{3, 4}},
            [](Tape& t, const auto& p) { return Concat(t, p[0], p[1]); });
}

TEST(GradCheck, Softmax) {
  GradCheck({Shape{3, 5}}, [](Tape& t, const auto& p) { return Softmax(t, p[0]); });
}

TEST(GradCheck, ReshapeAndTransposeViewsFeedingElementwiseOps) {
  GradCheck({Shape{2, 6}}, [](Tape& t, const auto& p) {
    return Tanh(t, Reshape(t, p[0], Shape{3, 4}));
  });
  GradCheck({Shape{3, 4}}, [](Tape& t, const auto& p) { return Tanh(t, Transpose(t, p[0])); });
  GradCheck({Shape{3, 4}}, [](Tape& t, const auto& p) {
    return Tanh(t, Transpose(t, Transpose(t, p[0])));
  });
}

TEST(GradCheck, ParameterUsedTwiceAccumulates) {
  GradCheck({Shape{3, 3}}, [](Tape& t, const auto& p) {
    return MatMul(t, p[0], t.Use(*const_cast<Param*>(t.node(p[0].index).param)));
  });
}

TEST(GradCheck, AttentionBlock) {
  // softmax(Q K^T / sqrt(d)) V with Q, K, V projections of one input.
  GradCheck({Shape{4, 6}, Shape{6, 3}, Shape{6, 3}, Shape{6, 3}}, [](Tape& t, const auto& p) {
    TensorRef q = MatMul(t, p[0], p[1]);
    TensorRef k = MatMul(t, p[0], p[2]);
    TensorRef v = MatMul(t, p[0], p[3]);
    TensorRef scores = Scale(t, MatMul(t, q, Transpose(t, k)), 1.0f / std::sqrt(3.0f));
    return MatMul(t, Softmax(t, scores), v);
  });
}

// Issue 9: Gemm with k == 0 multiplied the output by beta = 0, so uninitialised (here NaN)
// memory stayed NaN. BLAS semantics: beta == 0 means C is written, never read.
TEST(CpuBackend, Gemm_InnerDimensionZeroAndBetaZero_WritesZerosOverGarbage) {
  const std::unique_ptr<Backend> cpu = MakeCpuBackend();
  std::vector<float> c(2 * 4, std::nanf(""));  // m = 2, n = 3, ldc = 4
  cpu->Gemm(false, false, 2, 3, 0, 1.0f, nullptr, 1, nullptr, 3, 0.0f, c.data(), 4);
  for (std::size_t i : {0u, 1u, 2u, 4u, 5u, 6u}) EXPECT_EQ(c[i], 0.0f) << "c[" << i << "]";
  EXPECT_TRUE(std::isnan(c[3]));  // padding past n is not touched
  EXPECT_TRUE(std::isnan(c[7]));
  std::vector<float> scaled{2, 4, 6, 8};
  cpu->Gemm(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, scaled.data(), 2);
  EXPECT_EQ(scaled, (std::vector<float>{1, 2, 3, 4}));
}

TEST(Ops, MatMulAndLinear_InnerDimensionZero_GiveZerosAndTheBias) {
  EagerSession session;
  const std::vector<float> bias{1.5f, -2.0f, 3.0f};
  Param& w = session.CreateParam("w", Shape{0, 3}, std::vector<float>{});
  Param& b = session.CreateParam("b", Shape{3}, bias);
  {  // leave NaN in the freed block the outputs are likely to reuse
    Buffer dirty(session.resource(), 6 * sizeof(float), AllocationTag{});
    std::fill_n(dirty.floats(), 6, std::nanf(""));
  }
  const HostTensor product = session.WithForward([&](Tape& t) {
    return t.ToHost(MatMul(t, t.Input(Shape{2, 0}, {}), t.Use(w)));
  });
  EXPECT_EQ(product.shape, (Shape{2, 3}));
  EXPECT_EQ(product.data, std::vector<float>(6, 0.0f));
  const HostTensor linear = session.WithForward([&](Tape& t) {
    return t.ToHost(Linear(t, t.Input(Shape{2, 0}, {}), t.Use(w), t.Use(b)));
  });
  EXPECT_EQ(linear.data, (std::vector<float>{1.5f, -2.0f, 3.0f, 1.5f, -2.0f, 3.0f}));
}

// Issue 9: the CPU Gemm cast dimensions to blasint unchecked: k = 2^32 + 1 became k = 1 and
// produced a silently wrong product. Refused like the CUDA backend, naming the dimension.
TEST(CpuBackend, Gemm_DimensionPastBlasInt_IsAShapeErrorNamingItAndTheLimit) {
  const std::unique_ptr<Backend> cpu = MakeCpuBackend();
  const std::int64_t huge = (std::int64_t{1} << 32) + 1;
  std::vector<float> a{2.0f}, b{3.0f}, c{-1.0f};
  try {
    cpu->Gemm(false, false, 1, 1, huge, 1.0f, a.data(), huge, b.data(), 1, 0.0f, c.data(), 1);
    ADD_FAILURE() << "no error; c = " << c[0];
  } catch (const ShapeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("k = 4294967297"), std::string::npos) << what;
    EXPECT_NE(what.find("2147483647"), std::string::npos) << what;
  }
  EXPECT_EQ(c[0], -1.0f);  // nothing was computed
}

}  // namespace
}  // namespace leakbound::runtime
