// The CUDA backend against the CPU reference, one test per Backend method, on random inputs of
// sizes that are and are not multiples of the 256-thread block, with rows longer than one block
// and more rows than the grid. Each test states its bound (see Close in cuda_test_support.h):
//   exact copies, fills, transposes, gathers                tol 0 (bitwise)
//   elementwise ops, optimizer updates, loss gradients      tol 1e-6
//   reductions, row-wise softmax / layer norm, atomics      tol 1e-5
//   Gemm                                                    tol 1e-4 * sqrt(k)
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cuda_test_support.h"

namespace leakbound::runtime::testing {
namespace {

constexpr double kExact = 0.0;
constexpr double kElementwiseTol = 1e-6;
constexpr double kReductionTol = 1e-5;

const std::vector<std::int64_t> kSizes = {1, 7, 255, 256, 1000, 70001};
struct RowShape {
  std::int64_t rows, cols;
};
// Rows shorter and longer than a block (256), and more rows than the row kernels' grid (8192).
const std::vector<RowShape> kRowShapes = {{1, 1},     {3, 5},    {17, 255}, {8, 1000},
                                          {64, 3000}, {5, 4097}, {9000, 3}};
const Activation kActivations[] = {Activation::kNone, Activation::kRelu, Activation::kGelu,
                                   Activation::kTanh};

std::string Label(const RowShape& s) {
  return std::to_string(s.rows) + "x" + std::to_string(s.cols);
}
std::vector<float> Zeros(std::int64_t n) { return std::vector<float>(static_cast<std::size_t>(n)); }

TEST_F(CudaTest, CopiesAndFill_AreExact) {
  for (std::int64_t n : kSizes) {
    Twin t(gpu(), device_memory());
    auto x = t.Floats(Random(n, 1));
    EXPECT_TRUE(Close(t.Download(x), Twin::Host(x), kExact)) << "round trip n=" << n;
    auto y = t.Floats(Zeros(n));
    gpu().Copy(y.gpu, x.gpu, static_cast<std::size_t>(n) * sizeof(float));
    EXPECT_TRUE(Close(t.Download(y), Twin::Host(x), kExact)) << "Copy n=" << n;
    cpu().Fill(y.cpu, -3.25f, n);
    gpu().Fill(y.gpu, -3.25f, n);
    EXPECT_TRUE(Close(t.Download(y), Twin::Host(y), kExact)) << "Fill n=" << n;
  }
}

TEST_F(CudaTest, Copy_OverlappingRanges_IsATypedError) {
  Twin t(gpu(), device_memory());
  auto x = t.Floats(Random(16, 2));
  EXPECT_THROW(gpu().Copy(x.gpu + 1, x.gpu, 8 * sizeof(float)), RuntimeError);
  gpu().Copy(x.gpu, x.gpu, 16 * sizeof(float));  // the same range is a no-op, as memmove
  EXPECT_TRUE(Close(t.Download(x), Twin::Host(x), kExact));
}

TEST_F(CudaTest, Gemm_EveryTransposeCombinationWithPaddedLeadingDims_MatchesCpu) {
  struct Case {
    std::int64_t m, n, k;
  };
  const Case cases[] = {{1, 1, 1},      {7, 5, 3},        {33, 65, 129},
                        {128, 96, 300}, {257, 130, 1000}, {1, 300, 17}};
  constexpr std::int64_t kPad = 3;
  for (const Case& g : cases) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (float beta : {0.0f, 0.5f}) {
          Twin t(gpu(), device_memory());
          const std::int64_t lda = (ta ? g.m : g.k) + kPad, a_rows = ta ? g.k : g.m;
          const std::int64_t ldb = (tb ? g.k : g.n) + kPad, b_rows = tb ? g.n : g.k;
          const std::int64_t ldc = g.n + kPad;
          auto a = t.Floats(Random(a_rows * lda, 3));
          auto b = t.Floats(Random(b_rows * ldb, 4));
          auto c = t.Floats(Random(g.m * ldc, 5));
          for (Backend* be : {&cpu(), &gpu()}) {
            const bool on_gpu = be == &gpu();
            be->Gemm(ta, tb, g.m, g.n, g.k, 0.75f, on_gpu ? a.gpu : a.cpu, lda,
                     on_gpu ? b.gpu : b.cpu, ldb, beta, on_gpu ? c.gpu : c.cpu, ldc);
          }
          EXPECT_TRUE(Close(t.Download(c), Twin::Host(c), 1e-4 * std::sqrt(double(g.k))))
              << "m=" << g.m << " n=" << g.n << " k=" << g.k << " ta=" << ta << " tb=" << tb
              << " beta=" << beta;
        }
      }
    }
  }
}

TEST_F(CudaTest, Gemm_KZero_ScalesCByBetaLikeTheCpu) {
  Twin t(gpu(), device_memory());
  auto c = t.Floats(Random(5 * 9, 6));  // m=5, n=7, ldc=9
  cpu().Gemm(false, false, 5, 7, 0, 1.0f, nullptr, 1, nullptr, 7, 0.5f, c.cpu, 9);
  gpu().Gemm(false, false, 5, 7, 0, 1.0f, nullptr, 1, nullptr, 7, 0.5f, c.gpu, 9);
  EXPECT_TRUE(Close(t.Download(c), Twin::Host(c), kExact));
}

// Issue 9: with beta == 0, C may be uninitialised; NaN * 0 left NaN where zeros belong.
TEST_F(CudaTest, Gemm_KZeroAndBetaZero_WritesZerosOverNanLikeTheCpu) {
  Twin t(gpu(), device_memory());
  auto c = t.Floats(std::vector<float>(5 * 9, std::nanf("")));  // m=5, n=7, ldc=9
  cpu().Gemm(false, false, 5, 7, 0, 1.0f, nullptr, 1, nullptr, 7, 0.0f, c.cpu, 9);
  gpu().Gemm(false, false, 5, 7, 0, 1.0f, nullptr, 1, nullptr, 7, 0.0f, c.gpu, 9);
  const std::vector<float> out = t.Download(c);
  for (std::int64_t r = 0; r < 5; ++r) {
    for (std::int64_t col = 0; col < 9; ++col) {
      const float v = out[static_cast<std::size_t>(r * 9 + col)];
      if (col < 7) {
        EXPECT_EQ(v, 0.0f) << "c[" << r << ", " << col << "]";
      } else {
        EXPECT_TRUE(std::isnan(v)) << "padding c[" << r << ", " << col << "] was written";
      }
    }
  }
  EXPECT_EQ(Twin::Host(c)[0], 0.0f);  // the CPU reference writes the same zeros
}

TEST_F(CudaTest, Gemm_DimensionPastInt32_IsAShapeErrorNamingItAndTheLimit) {
  Twin t(gpu(), device_memory());
  auto c = t.Floats(Zeros(1));
  const std::int64_t huge = std::int64_t{1} << 33;
  try {
    gpu().Gemm(false, false, 1, 1, huge, 1.0f, c.gpu, huge, c.gpu, 1, 0.0f, c.gpu, 1);
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("2147483647"), std::string::npos) << e.what();
  }
}

TEST_F(CudaTest, AxpyScaleAddMul_MatchCpu) {
  for (std::int64_t n : kSizes) {
    for (bool acc : {false, true}) {
      Twin t(gpu(), device_memory());
      auto x = t.Floats(Random(n, 7));
      auto z = t.Floats(Random(n, 8));
      auto axpy = t.Floats(Random(n, 9));
      auto scale = t.Floats(Random(n, 10));
      auto add = t.Floats(Random(n, 11));
      auto mul = t.Floats(Random(n, 12));
      cpu().Axpy(n, -1.5f, x.cpu, axpy.cpu);
      gpu().Axpy(n, -1.5f, x.gpu, axpy.gpu);
      cpu().Scale(n, 0.3f, x.cpu, scale.cpu, acc);
      gpu().Scale(n, 0.3f, x.gpu, scale.gpu, acc);
      cpu().Add(n, x.cpu, z.cpu, add.cpu);
      gpu().Add(n, x.gpu, z.gpu, add.gpu);
      cpu().Mul(n, x.cpu, z.cpu, mul.cpu, acc);
      gpu().Mul(n, x.gpu, z.gpu, mul.gpu, acc);
      const std::string what = " n=" + std::to_string(n) + " accumulate=" + std::to_string(acc);
      EXPECT_TRUE(Close(t.Download(axpy), Twin::Host(axpy), kElementwiseTol)) << "Axpy" << what;
      EXPECT_TRUE(Close(t.Download(scale), Twin::Host(scale), kElementwiseTol)) << "Scale" << what;
      EXPECT_TRUE(Close(t.Download(add), Twin::Host(add), kElementwiseTol)) << "Add" << what;
      EXPECT_TRUE(Close(t.Download(mul), Twin::Host(mul), kElementwiseTol)) << "Mul" << what;
    }
  }
}

TEST_F(CudaTest, BiasActivation_EachActivationWithAndWithoutBiasAndInPlace_MatchesCpu) {
  for (const RowShape& s : kRowShapes) {
    for (Activation act : kActivations) {
      Twin t(gpu(), device_memory());
      auto x = t.Floats(Random(s.rows * s.cols, 13, -4.0f, 4.0f));
      auto bias = t.Floats(Random(s.cols, 14));
      auto y = t.Floats(Zeros(s.rows * s.cols));
      cpu().BiasActivation(s.rows, s.cols, x.cpu, bias.cpu, act, y.cpu);
      gpu().BiasActivation(s.rows, s.cols, x.gpu, bias.gpu, act, y.gpu);
      const std::string what = Label(s) + " act=" + std::to_string(static_cast<int>(act));
      EXPECT_TRUE(Close(t.Download(y), Twin::Host(y), kElementwiseTol)) << what;
      cpu().BiasActivation(s.rows, s.cols, x.cpu, nullptr, act, x.cpu);  // in place, no bias
      gpu().BiasActivation(s.rows, s.cols, x.gpu, nullptr, act, x.gpu);
      EXPECT_TRUE(Close(t.Download(x), Twin::Host(x), kElementwiseTol)) << what << " in place";
    }
  }
}

TEST_F(CudaTest, ActivationBackward_EachActivation_MatchesCpu) {
  for (std::int64_t n : kSizes) {
    for (Activation act : kActivations) {
      for (bool acc : {false, true}) {
        std::vector<float> pre = Random(n, 15, -4.0f, 4.0f), out(pre.size());
        cpu().BiasActivation(1, n, pre.data(), nullptr, act, out.data());
        Twin t(gpu(), device_memory());
        auto p = t.Floats(pre);
        auto o = t.Floats(out);
        auto dy = t.Floats(Random(n, 16));
        auto dx = t.Floats(Random(n, 17));
        cpu().ActivationBackward(n, act, p.cpu, o.cpu, dy.cpu, dx.cpu, acc);
        gpu().ActivationBackward(n, act, p.gpu, o.gpu, dy.gpu, dx.gpu, acc);
        EXPECT_TRUE(Close(t.Download(dx), Twin::Host(dx), kElementwiseTol))
            << "n=" << n << " act=" << static_cast<int>(act) << " accumulate=" << acc;
      }
    }
  }
}

TEST_F(CudaTest, ColumnSum_MatchesCpu) {
  std::vector<RowShape> shapes = kRowShapes;
  shapes.push_back({1000, 3});
  shapes.push_back({0, 5});  // no rows: zeros, or the accumulator unchanged
  for (const RowShape& s : shapes) {
    for (bool acc : {false, true}) {
      Twin t(gpu(), device_memory());
      auto x = t.Floats(Random(s.rows * s.cols, 18));
      auto out = t.Floats(Random(s.cols, 19));
      cpu().ColumnSum(s.rows, s.cols, x.cpu, out.cpu, acc);
      gpu().ColumnSum(s.rows, s.cols, x.gpu, out.gpu, acc);
      EXPECT_TRUE(Close(t.Download(out), Twin::Host(out), kReductionTol))
          << Label(s) << " accumulate=" << acc;
    }
  }
}

TEST_F(CudaTest, Sum_IntoADeviceScalar_MatchesCpuRelativeToSumOfMagnitudes) {
  for (std::int64_t n : {0, 1, 7, 1024, 1025, 70001, 1 << 20}) {
    Twin t(gpu(), device_memory());
    auto x = t.Floats(Random(n, 20));
    auto out = t.Floats({123.0f});
    const float scale = 1.0f / static_cast<float>(std::max<std::int64_t>(n, 1));
    cpu().Sum(n, x.cpu, scale, out.cpu);
    gpu().Sum(n, x.gpu, scale, out.gpu);
    double magnitude = 0;
    for (std::int64_t i = 0; i < n; ++i) magnitude += std::fabs(x.cpu[i]) * scale;
    EXPECT_TRUE(Close(t.Download(out), Twin::Host(out), kReductionTol, magnitude)) << "n=" << n;
  }
}

TEST_F(CudaTest, BroadcastScalar_FromADeviceScalar_MatchesCpu) {
  for (std::int64_t n : kSizes) {
    for (bool acc : {false, true}) {
      Twin t(gpu(), device_memory());
      auto dy = t.Floats({1.7f});
      auto dx = t.Floats(Random(n, 21));
      cpu().BroadcastScalar(n, dy.cpu, -0.3f, dx.cpu, acc);
      gpu().BroadcastScalar(n, dy.gpu, -0.3f, dx.gpu, acc);
      EXPECT_TRUE(Close(t.Download(dx), Twin::Host(dx), kElementwiseTol))
          << "n=" << n << " accumulate=" << acc;
    }
  }
}

TEST_F(CudaTest, TransposeAndCopy2D_AreExact) {
  for (const RowShape& s : kRowShapes) {
    for (bool acc : {false, true}) {
      Twin t(gpu(), device_memory());
      auto src = t.Floats(Random(s.rows * s.cols, 22));
      auto dst = t.Floats(Random(s.rows * s.cols, 23));
      cpu().Transpose(s.rows, s.cols, src.cpu, dst.cpu, acc);
      gpu().Transpose(s.rows, s.cols, src.gpu, dst.gpu, acc);
      EXPECT_TRUE(Close(t.Download(dst), Twin::Host(dst), kExact))
          << "Transpose " << Label(s) << " accumulate=" << acc;
      const std::int64_t src_ld = s.cols + 2, dst_ld = s.cols + 5;
      auto strided = t.Floats(Random(s.rows * src_ld, 24));
      auto out = t.Floats(Random(s.rows * dst_ld, 25));
      cpu().Copy2D(s.rows, s.cols, strided.cpu, src_ld, out.cpu, dst_ld, acc);
      gpu().Copy2D(s.rows, s.cols, strided.gpu, src_ld, out.gpu, dst_ld, acc);
      EXPECT_TRUE(Close(t.Download(out), Twin::Host(out), kExact))
          << "Copy2D " << Label(s) << " accumulate=" << acc;
    }
  }
}

TEST_F(CudaTest, SoftmaxAndItsBackward_MatchCpu) {
  for (const RowShape& s : kRowShapes) {
    const std::int64_t n = s.rows * s.cols;
    Twin t(gpu(), device_memory());
    auto x = t.Floats(Random(n, 26, -8.0f, 8.0f));
    auto y = t.Floats(Zeros(n));
    cpu().Softmax(s.rows, s.cols, x.cpu, y.cpu);
    gpu().Softmax(s.rows, s.cols, x.gpu, y.gpu);
    EXPECT_TRUE(Close(t.Download(y), Twin::Host(y), kReductionTol)) << "Softmax " << Label(s);
    cpu().Softmax(s.rows, s.cols, x.cpu, x.cpu);
    gpu().Softmax(s.rows, s.cols, x.gpu, x.gpu);
    EXPECT_TRUE(Close(t.Download(x), Twin::Host(x), kReductionTol)) << "in place " << Label(s);
    for (bool acc : {false, true}) {
      auto probs = t.Floats(Twin::Host(y));  // the same forward output on both sides
      auto dy = t.Floats(Random(n, 27));
      auto dx = t.Floats(Random(n, 28));
      cpu().SoftmaxBackward(s.rows, s.cols, probs.cpu, dy.cpu, dx.cpu, acc);
      gpu().SoftmaxBackward(s.rows, s.cols, probs.gpu, dy.gpu, dx.gpu, acc);
      EXPECT_TRUE(Close(t.Download(dx), Twin::Host(dx), kReductionTol))
          << "SoftmaxBackward " << Label(s) << " accumulate=" << acc;
    }
  }
}

TEST_F(CudaTest, SoftmaxCrossEntropyAndItsBackward_MatchCpu) {
  for (const RowShape& s : kRowShapes) {
    const std::int64_t n = s.rows * s.cols;
    Twin t(gpu(), device_memory());
    auto logits = t.Floats(Random(n, 29, -6.0f, 6.0f));
    auto labels = t.Ints(RandomIds(s.rows, static_cast<std::int32_t>(s.cols), 30));
    auto probs = t.Floats(Zeros(n));
    auto loss = t.Floats({0.0f});
    cpu().SoftmaxCrossEntropy(s.rows, s.cols, logits.cpu, labels.cpu, probs.cpu, loss.cpu);
    gpu().SoftmaxCrossEntropy(s.rows, s.cols, logits.gpu, labels.gpu, probs.gpu, loss.gpu);
    EXPECT_TRUE(Close(t.Download(probs), Twin::Host(probs), kReductionTol)) << Label(s);
    EXPECT_TRUE(Close(t.Download(loss), Twin::Host(loss), kReductionTol)) << "loss " << Label(s);
    for (bool acc : {false, true}) {
      auto same_probs = t.Floats(Twin::Host(probs));
      auto dloss = t.Floats({0.7f});
      auto dlogits = t.Floats(Random(n, 31));
      cpu().SoftmaxCrossEntropyBackward(s.rows, s.cols, same_probs.cpu, labels.cpu, dloss.cpu,
                                        dlogits.cpu, acc);
      gpu().SoftmaxCrossEntropyBackward(s.rows, s.cols, same_probs.gpu, labels.gpu, dloss.gpu,
                                        dlogits.gpu, acc);
      EXPECT_TRUE(Close(t.Download(dlogits), Twin::Host(dlogits), kElementwiseTol))
          << "backward " << Label(s) << " accumulate=" << acc;
    }
  }
}

TEST_F(CudaTest, MseLossAndItsBackward_MatchCpu) {
  for (std::int64_t n : kSizes) {
    Twin t(gpu(), device_memory());
    auto pred = t.Floats(Random(n, 32));
    auto target = t.Floats(Random(n, 33));
    auto loss = t.Floats({0.0f});
    cpu().MseLoss(n, pred.cpu, target.cpu, loss.cpu);
    gpu().MseLoss(n, pred.gpu, target.gpu, loss.gpu);
    EXPECT_TRUE(Close(t.Download(loss), Twin::Host(loss), kReductionTol)) << "n=" << n;
    for (bool acc : {false, true}) {
      auto dloss = t.Floats({1.3f});
      auto dpred = t.Floats(Random(n, 34));
      cpu().MseLossBackward(n, pred.cpu, target.cpu, dloss.cpu, dpred.cpu, acc);
      gpu().MseLossBackward(n, pred.gpu, target.gpu, dloss.gpu, dpred.gpu, acc);
      EXPECT_TRUE(Close(t.Download(dpred), Twin::Host(dpred), kElementwiseTol))
          << "backward n=" << n << " accumulate=" << acc;
    }
  }
}

TEST_F(CudaTest, LayerNorm_OutputMeanAndRstd_MatchCpu) {
  for (const RowShape& s : kRowShapes) {
    const std::int64_t n = s.rows * s.cols;
    Twin t(gpu(), device_memory());
    auto x = t.Floats(Random(n, 35, 1.0f, 5.0f));  // a non-zero mean
    auto gamma = t.Floats(Random(s.cols, 36));
    auto beta = t.Floats(Random(s.cols, 37));
    auto y = t.Floats(Zeros(n));
    auto mean = t.Floats(Zeros(s.rows));
    auto rstd = t.Floats(Zeros(s.rows));
    for (Backend* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      be->LayerNorm(s.rows, s.cols, g ? x.gpu : x.cpu, g ? gamma.gpu : gamma.cpu,
                    g ? beta.gpu : beta.cpu, 1e-5f, g ? y.gpu : y.cpu, g ? mean.gpu : mean.cpu,
                    g ? rstd.gpu : rstd.cpu);
    }
    EXPECT_TRUE(Close(t.Download(y), Twin::Host(y), kReductionTol)) << "y " << Label(s);
    EXPECT_TRUE(Close(t.Download(mean), Twin::Host(mean), kReductionTol)) << "mean " << Label(s);
    EXPECT_TRUE(Close(t.Download(rstd), Twin::Host(rstd), kReductionTol)) << "rstd " << Label(s);
  }
}

TEST_F(CudaTest, LayerNormBackward_EveryOutputMayBeNullOrAccumulate_MatchesCpu) {
  struct Outputs {
    bool dx, dgamma, dbeta;
    bool accumulate;
  };
  const Outputs variants[] = {{true, true, true, false},   {true, true, true, true},
                              {false, true, true, false},  {true, false, true, true},
                              {true, false, false, false}, {false, true, false, true}};
  for (const RowShape& s : kRowShapes) {
    const std::int64_t n = s.rows * s.cols;
    std::vector<float> x = Random(n, 38, -1.0f, 3.0f), gamma = Random(s.cols, 39);
    std::vector<float> y(x.size()), mean(s.rows), rstd(s.rows), beta = Zeros(s.cols);
    cpu().LayerNorm(s.rows, s.cols, x.data(), gamma.data(), beta.data(), 1e-5f, y.data(),
                    mean.data(), rstd.data());
    for (const Outputs& v : variants) {
      Twin t(gpu(), device_memory());
      auto x_in = t.Floats(x);
      auto gamma_in = t.Floats(gamma);
      auto mean_in = t.Floats(mean);
      auto rstd_in = t.Floats(rstd);
      auto dy = t.Floats(Random(n, 40));
      auto dx = t.Floats(Random(n, 41));
      auto dgamma = t.Floats(Random(s.cols, 42));
      auto dbeta = t.Floats(Random(s.cols, 43));
      for (Backend* be : {&cpu(), &gpu()}) {
        const bool g = be == &gpu();
        be->LayerNormBackward(s.rows, s.cols, g ? x_in.gpu : x_in.cpu,
                              g ? gamma_in.gpu : gamma_in.cpu, g ? mean_in.gpu : mean_in.cpu,
                              g ? rstd_in.gpu : rstd_in.cpu, g ? dy.gpu : dy.cpu,
                              v.dx ? (g ? dx.gpu : dx.cpu) : nullptr, v.accumulate,
                              v.dgamma ? (g ? dgamma.gpu : dgamma.cpu) : nullptr, v.accumulate,
                              v.dbeta ? (g ? dbeta.gpu : dbeta.cpu) : nullptr, !v.accumulate);
      }
      const std::string what = Label(s) + " dx=" + std::to_string(v.dx) +
                               " dgamma=" + std::to_string(v.dgamma) +
                               " dbeta=" + std::to_string(v.dbeta) +
                               " accumulate dx,dgamma=" + std::to_string(v.accumulate) +
                               " dbeta=" + std::to_string(!v.accumulate);
      // A null output leaves its buffer untouched on both sides, so all three always compare.
      // dx is a difference of terms of size rstd * |dy * gamma| that cancel exactly for a single
      // column: judge it against that size, not against its own (possibly zero) values.
      double term = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const double g = double{dy.cpu[i]} * gamma[static_cast<std::size_t>(i % s.cols)];
        term = std::max(term, std::fabs(rstd[static_cast<std::size_t>(i / s.cols)] * g));
      }
      EXPECT_TRUE(Close(t.Download(dx), Twin::Host(dx), kReductionTol, term)) << "dx " << what;
      EXPECT_TRUE(Close(t.Download(dgamma), Twin::Host(dgamma), kReductionTol))
          << "dgamma " << what;
      EXPECT_TRUE(Close(t.Download(dbeta), Twin::Host(dbeta), kReductionTol)) << "dbeta " << what;
    }
  }
}

TEST_F(CudaTest, EmbeddingLookupAndBackwardWithRepeatedIds_MatchCpu) {
  constexpr std::int32_t kVocab = 50;
  for (std::int64_t dim : {1, 7, 300}) {
    for (std::int64_t n : {1, 100, 1000}) {
      Twin t(gpu(), device_memory());
      auto table = t.Floats(Random(kVocab * dim, 44));
      auto ids = t.Ints(RandomIds(n, kVocab, 45));
      auto out = t.Floats(Zeros(n * dim));
      cpu().EmbeddingLookup(n, dim, table.cpu, ids.cpu, out.cpu);
      gpu().EmbeddingLookup(n, dim, table.gpu, ids.gpu, out.gpu);
      EXPECT_TRUE(Close(t.Download(out), Twin::Host(out), kExact)) << "n=" << n << " dim=" << dim;
      auto dy = t.Floats(Random(n * dim, 46));
      auto dtable = t.Floats(Random(kVocab * dim, 47));
      cpu().EmbeddingBackward(n, dim, dy.cpu, ids.cpu, dtable.cpu);
      gpu().EmbeddingBackward(n, dim, dy.gpu, ids.gpu, dtable.gpu);
      EXPECT_TRUE(Close(t.Download(dtable), Twin::Host(dtable), kReductionTol))
          << "backward n=" << n << " dim=" << dim;
    }
  }
}

TEST_F(CudaTest, SgdMomentumAndAdam_UpdateEveryStateLikeTheCpu) {
  for (std::int64_t n : kSizes) {
    Twin t(gpu(), device_memory());
    auto grad = t.Floats(Random(n, 48));
    auto velocity = t.Floats(Random(n, 49));
    auto param = t.Floats(Random(n, 50));
    cpu().SgdMomentum(n, 0.05f, 0.9f, 1e-4f, grad.cpu, velocity.cpu, param.cpu);
    gpu().SgdMomentum(n, 0.05f, 0.9f, 1e-4f, grad.gpu, velocity.gpu, param.gpu);
    EXPECT_TRUE(Close(t.Download(velocity), Twin::Host(velocity), kElementwiseTol)) << n;
    EXPECT_TRUE(Close(t.Download(param), Twin::Host(param), kElementwiseTol)) << n;
    auto m = t.Floats(Random(n, 51));
    auto v = t.Floats(Random(n, 52, 0.0f, 1.0f));
    const float c1 = 1.0f - std::pow(0.9f, 3.0f), c2 = 1.0f - std::pow(0.999f, 3.0f);
    cpu().Adam(n, 1e-3f, 0.9f, 0.999f, 1e-8f, c1, c2, grad.cpu, m.cpu, v.cpu, param.cpu);
    gpu().Adam(n, 1e-3f, 0.9f, 0.999f, 1e-8f, c1, c2, grad.gpu, m.gpu, v.gpu, param.gpu);
    EXPECT_TRUE(Close(t.Download(m), Twin::Host(m), kElementwiseTol)) << "Adam m n=" << n;
    EXPECT_TRUE(Close(t.Download(v), Twin::Host(v), kElementwiseTol)) << "Adam v n=" << n;
    EXPECT_TRUE(Close(t.Download(param), Twin::Host(param), kElementwiseTol)) << "Adam n=" << n;
  }
}

TEST_F(CudaTest, CountNonFinite_CountsNanAndBothInfinitiesExactly) {
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  const float kInf = std::numeric_limits<float>::infinity();
  for (std::int64_t n : {0, 1, 1000, 70001}) {
    std::vector<float> values = Random(n, 53);
    std::int64_t planted = 0;
    for (std::int64_t i = 0; i < n; i += 97) {
      values[static_cast<std::size_t>(i)] = i % 3 == 0 ? kNan : (i % 3 == 1 ? kInf : -kInf);
      ++planted;
    }
    Twin t(gpu(), device_memory());
    auto x = t.Floats(values);
    EXPECT_EQ(cpu().CountNonFinite(n, x.cpu), planted);
    EXPECT_EQ(gpu().CountNonFinite(n, x.gpu), planted) << "n=" << n;
  }
}

}  // namespace
}  // namespace leakbound::runtime::testing
