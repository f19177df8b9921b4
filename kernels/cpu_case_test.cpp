// The CPU kernel cases: the blocked GEMM against ref::gemm, every class's case
// against its reference on the case's own buffers, the scenario coverage and
// the errors.
#include "kernels/cpu_case.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "calib/shapes.h"
#include "kernels/ref_activations.h"
#include "kernels/ref_attention.h"
#include "kernels/ref_cross_entropy.h"
#include "kernels/ref_gemm.h"
#include "kernels/ref_norms.h"
#include "sim/core/error.h"
#include "tools/cli/scenario_shapes.h"

namespace lacuna::kernels {
namespace {

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const float mag = 0.5f + static_cast<float>(s % 1000) / 1000.0f;
    x = (s >> 32) & 1 ? mag : -mag;
  }
  return v;
}

// ‖a − b‖ / ‖b‖.
double rel_error(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

ir::Compute op(ir::OpClass c, ir::KernelVariant v, std::vector<int64_t> shape) {
  ir::Compute k;
  k.set_op_class(c);
  k.set_variant(v);
  for (int64_t d : shape) k.add_shape(d);
  return k;
}

CpuCaseOptions small_options() {
  CpuCaseOptions o;
  o.max_sets = 2;
  return o;
}

TEST(CpuCase, BlockedGemmMatchesReferenceForEveryTransposeAndOddSizes) {
  struct Dims {
    int64_t m, n, k;
  };
  // Sizes that do and do not divide the register tile (4 × 16) and the blocks
  // (MC 128, KC 256, NC 1024).
  for (Dims d : {Dims{1, 1, 1}, Dims{5, 17, 3}, Dims{37, 53, 300}, Dims{130, 33, 257}, Dims{3, 1030, 7}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const ref::GemmShape s{d.m, d.n, d.k, ta, tb};
        const auto a = random_floats(static_cast<size_t>(d.m * d.k), 1);
        const auto b = random_floats(static_cast<size_t>(d.k * d.n), 2);
        std::vector<float> want(static_cast<size_t>(d.m * d.n)), got(want.size(), 99.0f);
        ref::gemm<float>(a, b, s, want);
        blocked_gemm(a, b, s, got);
        EXPECT_LT(rel_error(got, want), 1e-5) << d.m << "x" << d.n << "x" << d.k << " ta=" << ta << " tb=" << tb;
      }
    }
  }
}

TEST(CpuCase, BlockedGemmRejectsWrongSizes) {
  std::vector<float> a(5), b(6), c(4);
  EXPECT_THROW(blocked_gemm(a, b, {2, 2, 3, false, false}, c), Error);
  EXPECT_THROW(blocked_gemm(a, b, {0, 2, 3, false, false}, c), Error);
}

TEST(CpuCase, GemmVariantsComputeTheirProducts) {
  const int64_t m = 9, n = 20, k = 13;
  {
    auto c = make_cpu_case(op(ir::GEMM, ir::VARIANT_FORWARD, {m, n, k}), small_options());
    c->run_once_ns();
    std::vector<float> want(m * n);
    ref::gemm<float>(c->buffer("x"), c->buffer("w"), {m, n, k, false, false}, want);
    EXPECT_LT(rel_error(c->buffer("y"), want), 1e-5);
  }
  {
    auto c = make_cpu_case(op(ir::GEMM, ir::VARIANT_BACKWARD_INPUT, {m, n, k}), small_options());
    c->run_once_ns();
    std::vector<float> want(m * n);
    ref::gemm<float>(c->buffer("dy"), c->buffer("w"), {m, n, k, false, true}, want);  // dY·Wᵀ
    EXPECT_LT(rel_error(c->buffer("dx"), want), 1e-5);
  }
  {
    auto c = make_cpu_case(op(ir::GEMM, ir::VARIANT_BACKWARD_WEIGHT, {m, n, k}), small_options());
    c->run_once_ns();
    std::vector<float> want(m * n);
    ref::gemm<float>(c->buffer("x"), c->buffer("dy"), {m, n, k, true, false}, want);  // Xᵀ·dY
    EXPECT_LT(rel_error(c->buffer("dw"), want), 1e-5);
  }
  {  // batched: each batch entry its own product
    const int64_t batch = 3;
    auto c = make_cpu_case(op(ir::GEMM, ir::VARIANT_FORWARD, {m, n, k, batch}), small_options());
    c->run_once_ns();
    const auto x = c->buffer("x"), w = c->buffer("w"), y = c->buffer("y");
    ASSERT_EQ(y.size(), size_t(batch * m * n));
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<float> want(m * n);
      ref::gemm<float>(x.subspan(b * m * k, m * k), w.subspan(b * k * n, k * n), {m, n, k, false, false}, want);
      EXPECT_LT(rel_error(y.subspan(b * m * n, m * n), want), 1e-5) << "batch " << b;
    }
  }
}

TEST(CpuCase, AttentionMatchesTheNaiveReference) {
  AttentionShape s;
  s.batch = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.seq_q = 70;
  s.seq_kv = 70;
  s.head_dim = 16;
  s.causal = true;
  const std::vector<int64_t> shape = {2, 4, 70, 70, 16, 1, 2};
  {
    auto c = make_cpu_case(op(ir::ATTENTION, ir::VARIANT_FORWARD, shape), small_options());
    c->run_once_ns();
    const auto want = attention_forward_naive<float>(s, c->buffer("q"), c->buffer("k"), c->buffer("v"));
    EXPECT_LT(rel_error(c->buffer("out"), want.out), 1e-5);
    EXPECT_LT(rel_error(c->buffer("lse"), want.lse), 1e-5);
  }
  {
    auto c = make_cpu_case(op(ir::ATTENTION, ir::VARIANT_BACKWARD_INPUT, shape), small_options());
    c->run_once_ns();
    const auto g = attention_backward_naive<float>(s, c->buffer("q"), c->buffer("k"), c->buffer("v"),
                                                   c->buffer("out"), c->buffer("dout"));
    EXPECT_LT(rel_error(c->buffer("dq"), g.dq), 1e-4);
    EXPECT_LT(rel_error(c->buffer("dk"), g.dk), 1e-4);
    EXPECT_LT(rel_error(c->buffer("dv"), g.dv), 1e-4);
    // The saved O is the forward of these inputs.
    const auto f = attention_forward_naive<float>(s, c->buffer("q"), c->buffer("k"), c->buffer("v"));
    EXPECT_LT(rel_error(c->buffer("out"), f.out), 1e-5);
  }
}

TEST(CpuCase, NormsMatchTheReference) {
  const int64_t t = 6, h = 40;
  const ref::NormShape ns{t, h};
  {
    auto c = make_cpu_case(op(ir::LAYERNORM, ir::VARIANT_FORWARD, {t, h}), small_options());
    c->run_once_ns();
    std::vector<float> y(t * h), mean(t), rstd(t);
    ref::layernorm_forward<float>(c->buffer("x"), c->buffer("gamma"), c->buffer("beta"), ns, 1e-5, y, mean, rstd);
    EXPECT_EQ(copy(c->buffer("y")), y);
    EXPECT_EQ(copy(c->buffer("rstd")), rstd);
  }
  {
    auto c = make_cpu_case(op(ir::LAYERNORM, ir::VARIANT_BACKWARD_INPUT, {t, h}), small_options());
    c->run_once_ns();
    std::vector<float> dx(t * h), dg(h), db(h);
    ref::layernorm_backward<float>(c->buffer("x"), c->buffer("gamma"), c->buffer("dy"), c->buffer("mean"),
                                   c->buffer("rstd"), ns, dx, dg, db);
    EXPECT_EQ(copy(c->buffer("dx")), dx);
    EXPECT_EQ(copy(c->buffer("dgamma")), dg);
    EXPECT_EQ(copy(c->buffer("dbeta")), db);
    // The saved statistics are the forward's on x (not random numbers).
    std::vector<float> y(t * h), mean(t), rstd(t), beta(h, 0.0f);
    ref::layernorm_forward<float>(c->buffer("x"), c->buffer("gamma"), beta, ns, 1e-5, y, mean, rstd);
    EXPECT_EQ(copy(c->buffer("mean")), mean);
    EXPECT_EQ(copy(c->buffer("rstd")), rstd);
  }
  {
    auto c = make_cpu_case(op(ir::RMSNORM, ir::VARIANT_FORWARD, {t, h}), small_options());
    c->run_once_ns();
    std::vector<float> y(t * h), rstd(t);
    ref::rmsnorm_forward<float>(c->buffer("x"), c->buffer("gamma"), ns, 1e-5, y, rstd);
    EXPECT_EQ(copy(c->buffer("y")), y);
  }
  {
    auto c = make_cpu_case(op(ir::RMSNORM, ir::VARIANT_BACKWARD_INPUT, {t, h}), small_options());
    c->run_once_ns();
    std::vector<float> dx(t * h), dg(h);
    ref::rmsnorm_backward<float>(c->buffer("x"), c->buffer("gamma"), c->buffer("dy"), c->buffer("rstd"), ns, dx, dg);
    EXPECT_EQ(copy(c->buffer("dx")), dx);
    EXPECT_EQ(copy(c->buffer("dgamma")), dg);
  }
}

TEST(CpuCase, ActivationsResidualAndCrossEntropyMatchTheReference) {
  {
    auto c = make_cpu_case(op(ir::GELU, ir::VARIANT_FORWARD, {100}), small_options());
    c->run_once_ns();
    std::vector<float> y(100);
    ref::gelu_forward<float>(c->buffer("x"), ref::GeluKind::kTanh, y);
    EXPECT_EQ(copy(c->buffer("y")), y);
  }
  {
    auto c = make_cpu_case(op(ir::GELU, ir::VARIANT_BACKWARD_INPUT, {100}), small_options());
    c->run_once_ns();
    std::vector<float> dx(100);
    ref::gelu_backward<float>(c->buffer("x"), c->buffer("dy"), ref::GeluKind::kTanh, dx);
    EXPECT_EQ(copy(c->buffer("dx")), dx);
  }
  {
    auto c = make_cpu_case(op(ir::SWIGLU, ir::VARIANT_FORWARD, {5, 12}), small_options());
    c->run_once_ns();
    ASSERT_EQ(c->buffer("x").size(), 120u);
    std::vector<float> y(60);
    ref::swiglu_forward<float>(c->buffer("x"), 5, 12, y);
    EXPECT_EQ(copy(c->buffer("y")), y);
  }
  {
    auto c = make_cpu_case(op(ir::SWIGLU, ir::VARIANT_BACKWARD_INPUT, {5, 12}), small_options());
    c->run_once_ns();
    std::vector<float> dx(120);
    ref::swiglu_backward<float>(c->buffer("x"), c->buffer("dy"), 5, 12, dx);
    EXPECT_EQ(copy(c->buffer("dx")), dx);
  }
  for (auto v : {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT}) {
    auto c = make_cpu_case(op(ir::RESIDUAL_ADD, v, {77}), small_options());
    c->run_once_ns();
    const auto a = c->buffer("a"), b = c->buffer("b"), out = c->buffer("out");
    for (size_t i = 0; i < 77; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
  }
  {
    auto c = make_cpu_case(op(ir::CROSS_ENTROPY, ir::VARIANT_FORWARD, {4, 50}), small_options());
    c->run_once_ns();
    const auto logits = c->buffer("logits"), loss = c->buffer("loss");
    ASSERT_EQ(loss.size(), 4u);
    for (int i = 0; i < 4; ++i) {
      // loss = logsumexp − logit[target] lies in (0, log V + range of the logits].
      EXPECT_GT(loss[i], 0.0f);
      EXPECT_LT(loss[i], std::log(50.0f) + 3.0f);
      double lse = 0;
      for (int j = 0; j < 50; ++j) lse += std::exp(double(logits[i * 50 + j]));
      EXPECT_LE(loss[i], std::log(lse) - (-1.5) + 1e-5);
    }
  }
  {
    auto c = make_cpu_case(op(ir::CROSS_ENTROPY, ir::VARIANT_BACKWARD_INPUT, {4, 50}), small_options());
    c->run_once_ns();
    const auto d = c->buffer("dlogits");
    // Each row of the mean-loss gradient is (softmax − onehot)/t: it sums to 0
    // and has exactly one negative entry (the target).
    for (int i = 0; i < 4; ++i) {
      double sum = 0;
      int negative = 0;
      for (int j = 0; j < 50; ++j) {
        sum += d[i * 50 + j];
        negative += d[i * 50 + j] < 0;
      }
      EXPECT_NEAR(sum, 0.0, 1e-6);
      EXPECT_EQ(negative, 1);
    }
  }
}

TEST(CpuCase, SoftmaxDropoutEmbeddingAndAdamDoTheirMath) {
  {
    std::vector<float> x = {1, 2, 3, -1, 0, 1}, y(6);
    softmax_forward(x, 2, 3, 0.5f, y);
    const double e0 = std::exp(0.5), e1 = std::exp(1.0), e2 = std::exp(1.5);
    EXPECT_NEAR(y[0], e0 / (e0 + e1 + e2), 1e-6);
    EXPECT_NEAR(y[2], e2 / (e0 + e1 + e2), 1e-6);
    EXPECT_NEAR(y[3] + y[4] + y[5], 1.0, 1e-6);
    std::vector<float> dy = {1, 0, 0, 0, 0, 0}, dx(6);
    softmax_backward(y, dy, 2, 3, 0.5f, dx);
    // d/dx_j of y_0 = scale · y_0 (δ_0j − y_j).
    EXPECT_NEAR(dx[0], 0.5 * y[0] * (1 - y[0]), 1e-6);
    EXPECT_NEAR(dx[1], -0.5 * y[0] * y[1], 1e-6);
    EXPECT_NEAR(dx[3], 0.0, 1e-7);
  }
  {
    std::vector<float> x = {1, 2, 3, 4}, y(4);
    std::vector<uint8_t> mask = {1, 0, 1, 0};
    dropout_apply(x, mask, 0.5f, y);
    EXPECT_EQ(y, (std::vector<float>{2, 0, 6, 0}));
  }
  {
    std::vector<float> table = {0, 1, 10, 11, 20, 21}, out(4);
    std::vector<int32_t> ids = {2, 0};
    embedding_forward(table, ids, 2, out);
    EXPECT_EQ(out, (std::vector<float>{20, 21, 0, 1}));
    std::vector<float> dtable(6, 0.0f), dy = {1, 2, 3, 4};
    std::vector<int32_t> same = {1, 1};
    embedding_backward(dy, same, 2, dtable);
    EXPECT_EQ(dtable, (std::vector<float>{0, 0, 4, 6, 0, 0}));
    std::vector<int32_t> bad = {3, 0};
    EXPECT_THROW(embedding_forward(table, bad, 2, out), Error);
  }
  {
    std::vector<float> p = {1.0f}, g = {0.5f}, m = {0.0f}, v = {0.0f};
    AdamConfig cfg;
    cfg.lr = 0.1f;
    adam_step(p, g, m, v, cfg);
    // Step 1 with zero moments: the bias-corrected update is lr · sign(g).
    EXPECT_NEAR(m[0], 0.05f, 1e-7);
    EXPECT_NEAR(v[0], 0.05f * 0.25f, 1e-8);
    EXPECT_NEAR(p[0], 1.0f - 0.1f, 1e-5);
  }
}

TEST(CpuCase, CasesOfTheSmallLoopsUseTheirBuffers) {
  {
    auto c = make_cpu_case(op(ir::SOFTMAX, ir::VARIANT_FORWARD, {3, 20}), small_options());
    c->run_once_ns();
    std::vector<float> y(60);
    softmax_forward(c->buffer("x"), 3, 20, 0.125f, y);
    EXPECT_EQ(copy(c->buffer("y")), y);
  }
  {
    auto c = make_cpu_case(op(ir::SOFTMAX, ir::VARIANT_BACKWARD_INPUT, {3, 20}), small_options());
    c->run_once_ns();
    const auto y = c->buffer("y");
    double row = 0;
    for (int j = 0; j < 20; ++j) row += y[j];
    EXPECT_NEAR(row, 1.0, 1e-5);  // y is a softmax output
    std::vector<float> dx(60);
    softmax_backward(y, c->buffer("dy"), 3, 20, 0.125f, dx);
    EXPECT_EQ(copy(c->buffer("dx")), dx);
  }
  for (auto v : {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT}) {
    auto c = make_cpu_case(op(ir::ELEMENTWISE, v, {1000}), small_options());
    c->run_once_ns();
    const auto in = c->buffer(v == ir::VARIANT_FORWARD ? "x" : "dy");
    const auto out = c->buffer(v == ir::VARIANT_FORWARD ? "y" : "dx");
    int dropped = 0;
    for (size_t i = 0; i < 1000; ++i) {
      if (out[i] == 0.0f) {
        ++dropped;
      } else {
        EXPECT_NEAR(out[i], in[i] / 0.9f, 1e-6);
      }
    }
    EXPECT_GT(dropped, 50);  // p = 0.1
    EXPECT_LT(dropped, 150);
  }
  {
    auto c = make_cpu_case(op(ir::EMBEDDING, ir::VARIANT_FORWARD, {7, 8, 30}), small_options());
    c->run_once_ns();
    const auto table = c->buffer("table"), out = c->buffer("out");
    // Every output row is some row of the table.
    for (int i = 0; i < 7; ++i) {
      bool found = false;
      for (int r = 0; r < 30 && !found; ++r)
        found = std::equal(out.begin() + i * 8, out.begin() + i * 8 + 8, table.begin() + r * 8);
      EXPECT_TRUE(found) << "row " << i;
    }
  }
  {
    auto c = make_cpu_case(op(ir::EMBEDDING, ir::VARIANT_BACKWARD_WEIGHT, {7, 8, 30}), small_options());
    const auto before = copy(c->buffer("dtable"));
    c->run_once_ns();
    const auto dy = c->buffer("dy"), after = c->buffer("dtable");
    double added = 0, dy_sum = 0;
    for (size_t i = 0; i < after.size(); ++i) added += double(after[i]) - before[i];
    for (float g : dy) dy_sum += g;
    EXPECT_NEAR(added, dy_sum, 1e-4);  // scatter-add moves every gradient row into the table
  }
  {
    auto c = make_cpu_case(op(ir::OPTIMIZER, ir::VARIANT_FORWARD, {64}), small_options());
    auto p = copy(c->buffer("params"));
    const auto g = copy(c->buffer("grads"));
    auto m = copy(c->buffer("m"));
    auto v = copy(c->buffer("v"));
    c->run_once_ns();
    adam_step(p, g, m, v, AdamConfig{});
    EXPECT_EQ(copy(c->buffer("params")), p);
    EXPECT_EQ(copy(c->buffer("m")), m);
    EXPECT_EQ(copy(c->buffer("v")), v);
  }
}

TEST(CpuCase, RotatesInputSetsAndReportsResidentBytes) {
  CpuCaseOptions o;
  o.cache_bytes = 1 << 20;  // 1 MiB "cache": a 64 KiB set needs all 4 sets
  auto small = make_cpu_case(op(ir::RESIDUAL_ADD, ir::VARIANT_FORWARD, {5000}), o);
  EXPECT_EQ(small->sets(), 4);
  o.cache_bytes = 1 << 10;  // sets beyond 2× the cache are not needed
  auto one = make_cpu_case(op(ir::RESIDUAL_ADD, ir::VARIANT_FORWARD, {4096}), o);
  EXPECT_EQ(one->sets(), 1);
  EXPECT_EQ(one->resident_bytes(), 3 * 4096 * 4);
  // Consecutive runs use different sets: different inputs, different outputs.
  auto c = make_cpu_case(op(ir::RESIDUAL_ADD, ir::VARIANT_FORWARD, {8}), CpuCaseOptions{});
  ASSERT_GE(c->sets(), 2);
  c->run_once_ns();
  const auto first = copy(c->buffer("a"));
  EXPECT_GE(c->run_once_ns(), 0.0);
  EXPECT_NE(copy(c->buffer("a")), first);
  // Inputs are never zero.
  for (float x : c->buffer("a")) EXPECT_NE(x, 0.0f);
  // The memory limit is enforced.
  CpuCaseOptions tight;
  tight.max_resident_bytes = 1000;
  EXPECT_THROW(make_cpu_case(op(ir::GELU, ir::VARIANT_FORWARD, {1000}), tight), Error);
}

TEST(CpuCase, UnsupportedCombinationsNameClassVariantAndShape) {
  const auto expect_error = [](const ir::Compute& k, const std::string& must_contain) {
    try {
      make_cpu_case(k);
      ADD_FAILURE() << "no error for " << k.ShortDebugString();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(must_contain), std::string::npos) << e.what();
    }
  };
  expect_error(op(ir::OPTIMIZER, ir::VARIANT_BACKWARD_INPUT, {10}), "OPTIMIZER bwd-input [10]");
  expect_error(op(ir::ATTENTION, ir::VARIANT_BACKWARD_WEIGHT, {1, 2, 8, 8, 4, 0, 2}), "ATTENTION bwd-weight");
  expect_error(op(ir::EMBEDDING, ir::VARIANT_BACKWARD_INPUT, {4, 8, 16}), "EMBEDDING bwd-input [4,8,16]");
  expect_error(op(ir::GEMM, ir::VARIANT_FORWARD, {4, 8}), "GEMM fwd [4,8]");
  expect_error(op(ir::GEMM, ir::VARIANT_FORWARD, {4, -8, 2}), "> 0");
  expect_error(op(ir::OP_CLASS_UNSPECIFIED, ir::VARIANT_FORWARD, {4}), "no CPU kernel");
  expect_error(op(ir::ATTENTION, ir::VARIANT_FORWARD, {1, 3, 8, 8, 4, 0, 2}), "kv_heads");
  EXPECT_FALSE(cpu_case_supported(ir::OPTIMIZER, ir::VARIANT_BACKWARD_INPUT));
  EXPECT_TRUE(cpu_case_supported(ir::GEMM, ir::VARIANT_BACKWARD_WEIGHT));
}

TEST(CpuCase, EveryKernelOfTheCpuScenarioHasACase) {
  const auto shapes =
      cli::extract_shapes_from_scenario(std::string(LACUNA_SOURCE_DIR) + "/scenarios/cpu/tiny-mllm-cpu-8rank.pbtxt");
  ASSERT_FALSE(shapes.empty());
  std::map<std::pair<int, int>, int> classes;
  CpuCaseOptions o;
  o.max_sets = 1;
  for (const auto& [key, use] : shapes) {
    EXPECT_TRUE(cpu_case_supported(key.op_class, key.variant)) << calibrate::describe(key);
    ir::Compute k = op(key.op_class, key.variant, key.shape);
    std::unique_ptr<CpuCase> c;
    ASSERT_NO_THROW(c = make_cpu_case(k, o)) << calibrate::describe(key);
    EXPECT_GE(c->run_once_ns(), 0.0);
    ++classes[{key.op_class, key.variant}];
  }
  // The multimodal program runs GEMMs in all three variants, attention both ways, the norms, the loss, ...
  EXPECT_TRUE(classes.count({ir::GEMM, ir::VARIANT_BACKWARD_WEIGHT}));
  EXPECT_TRUE(classes.count({ir::ATTENTION, ir::VARIANT_BACKWARD_INPUT}));
  EXPECT_TRUE(classes.count({ir::CROSS_ENTROPY, ir::VARIANT_FORWARD}));
  EXPECT_TRUE(classes.count({ir::OPTIMIZER, ir::VARIANT_FORWARD}));
}

TEST(CpuCase, LastLevelCacheIsPositive) { EXPECT_GT(last_level_cache_bytes(), 0); }

}  // namespace
}  // namespace lacuna::kernels
