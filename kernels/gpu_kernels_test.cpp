// The CUDA kernels and cuBLAS GEMM against the CPU references (ref_*.h,
// float64), on random non-zero bf16-representable inputs, at shapes that are
// and are not multiples of the kernels' tiles. Error: ‖gpu − ref‖ / ‖ref‖,
// written `EXPECT_TRUE(err < tol)` so that a NaN fails. bf16 outputs < 1e-2;
// fp32 outputs (mean, rstd, LSE, loss, fp32 gradients) < 1e-3. Every test
// skips where there is no GPU, no cuBLAS or no CUDA in the build.
#include <gtest/gtest.h>

#include <ostream>

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/gpu_kernels.h"
#include "kernels/ref_activations.h"
#include "kernels/ref_attention.h"
#include "kernels/ref_test_support.h"
#include "kernels/ref_cross_entropy.h"
#include "kernels/ref_gemm.h"
#include "kernels/ref_norms.h"
#include "sim/core/error.h"

// Readable, stable ctest names for the parameterised cases (the default
// prints raw bytes, padding included).
namespace lacuna::kernels::ref {
void PrintTo(const NormShape& s, std::ostream* os) { *os << "t" << s.t << "_h" << s.h; }
}  // namespace lacuna::kernels::ref

namespace lacuna::kernels {
void PrintTo(const AttentionShape& s, std::ostream* os) {
  *os << "b" << s.batch << "_h" << s.heads << "_kv" << s.kv_heads << "_sq" << s.seq_q << "_skv" << s.seq_kv << "_d"
      << s.head_dim << (s.causal ? "_causal" : "_full");
}

namespace {

using ref::testing::attention_shape;
using ref::testing::describe;

namespace g = gpu;
using g::DType;

#define LACUNA_SKIP_WITHOUT_GPU() \
  if (!g::gpu_available()) GTEST_SKIP() << g::gpu_unavailable_reason()

constexpr double kBf16Tol = 1e-2;
constexpr double kF32Tol = 1e-3;

// One context for the whole binary, never destroyed: tearing CUDA objects
// down in static destructors races the runtime's own shutdown.
g::Context& ctx() {
  static g::Context* c = new g::Context(0);
  return *c;
}

// Magnitudes in [0.5, 1.5], random sign (or positive), rounded to bf16 so the
// reference sees exactly what the device holds.
std::vector<float> host_random(size_t n, uint64_t seed, bool positive = false) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> mag(0.5f, 1.5f);
  std::vector<float> v(n);
  for (float& x : v) x = g::round_to_bf16(((rng() & 1) && !positive ? -1.0f : 1.0f) * mag(rng));
  return v;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<float> narrow_f32(const std::vector<double>& v) { return {v.begin(), v.end()}; }

std::vector<float> narrow_bf16(const std::vector<double>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = g::round_to_bf16(static_cast<float>(v[i]));
  return out;
}

// ‖got − want‖ / ‖want‖; NaN (or a zero reference) gives NaN / inf, which fails `err < tol`.
double rel_err(const std::vector<float>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return std::nan("");
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  return std::sqrt(num) / std::sqrt(den);
}

g::DeviceBuffer upload(DType t, const std::vector<float>& v) {
  g::DeviceBuffer b(ctx(), t, static_cast<int64_t>(v.size()));
  b.upload(std::span<const float>(v));
  return b;
}

g::DeviceBuffer upload_i32(const std::vector<int32_t>& v) {
  g::DeviceBuffer b(ctx(), DType::kI32, static_cast<int64_t>(v.size()));
  b.upload(std::span<const int32_t>(v));
  return b;
}

g::DeviceBuffer alloc(DType t, int64_t n) { return g::DeviceBuffer(ctx(), t, n); }

template <typename T>
std::span<const T> cs(const std::vector<T>& v) {
  return std::span<const T>(v);
}

// ---------------------------------------------------------------- buffers

TEST(GpuBuffer, RoundTripsAndFillsDeterministicNonZero) {
  LACUNA_SKIP_WITHOUT_GPU();
  const std::vector<float> v = host_random(1000, 1);
  EXPECT_EQ(upload(DType::kBf16, v).download(), v);  // bf16-representable: exact
  EXPECT_EQ(upload(DType::kF32, v).download(), v);
  g::DeviceBuffer a = alloc(DType::kBf16, 100001), b = alloc(DType::kBf16, 100001);
  a.fill_random(7, 0.5f, 1.5f);
  b.fill_random(7, 0.5f, 1.5f);
  const std::vector<float> x = a.download();
  EXPECT_EQ(x, b.download());
  int negative = 0;
  for (float f : x) {
    ASSERT_TRUE(std::abs(f) >= 0.5f && std::abs(f) <= 1.5f) << f;
    negative += f < 0;
  }
  EXPECT_GT(negative, 40000);
  EXPECT_LT(negative, 60000);
  g::DeviceBuffer ids = alloc(DType::kI32, 5000);
  ids.fill_indices(3, 17);
  for (int32_t i : ids.download_i32()) ASSERT_TRUE(i >= 0 && i < 17) << i;
}

TEST(GpuBuffer, WrongDtypeOrSizeIsAnError) {
  LACUNA_SKIP_WITHOUT_GPU();
  g::DeviceBuffer f32 = alloc(DType::kF32, 10), bf = alloc(DType::kBf16, 10), small = alloc(DType::kBf16, 9);
  EXPECT_THROW(g::gelu_forward(ctx(), f32, bf), Error);
  EXPECT_THROW(g::gelu_forward(ctx(), bf, small), Error);
  EXPECT_THROW(g::DeviceBuffer(ctx(), DType::kBf16, 0), Error);
  EXPECT_THROW(bf.fill_random(1, 0.0f, 1.0f), Error);  // lo = 0 could give zeros
}

// ---------------------------------------------------------------- norms

class GpuNorms : public ::testing::TestWithParam<ref::NormShape> {};

TEST_P(GpuNorms, LayerNormMatchesReference) {
  LACUNA_SKIP_WITHOUT_GPU();
  const ref::NormShape s = GetParam();
  const size_t n = static_cast<size_t>(s.t * s.h), t = static_cast<size_t>(s.t), h = static_cast<size_t>(s.h);
  const auto x = host_random(n, 1), gamma = host_random(h, 2), beta = host_random(h, 3), dy = host_random(n, 4);
  const double eps = 1e-5;
  std::vector<double> y(n), mean(t), rstd(t);
  ref::layernorm_forward<double>(cs(widen(x)), cs(widen(gamma)), cs(widen(beta)), s, eps, y, mean, rstd);

  auto dx_ = upload(DType::kBf16, x), dg = upload(DType::kBf16, gamma), db = upload(DType::kBf16, beta);
  auto dyo = alloc(DType::kBf16, s.t * s.h), dmean = alloc(DType::kF32, s.t), drstd = alloc(DType::kF32, s.t);
  g::layernorm_forward(ctx(), dx_, dg, db, s, eps, dyo, dmean, drstd);
  EXPECT_TRUE(rel_err(dyo.download(), y) < kBf16Tol);
  EXPECT_TRUE(rel_err(dmean.download(), mean) < kF32Tol);
  EXPECT_TRUE(rel_err(drstd.download(), rstd) < kF32Tol);

  // Backward from the reference statistics rounded to f32 (what the device holds).
  const auto mean_f = narrow_f32(mean), rstd_f = narrow_f32(rstd);
  std::vector<double> dx(n), dgamma(h), dbeta(h);
  ref::layernorm_backward<double>(cs(widen(x)), cs(widen(gamma)), cs(widen(dy)), cs(widen(mean_f)),
                                  cs(widen(rstd_f)), s, dx, dgamma, dbeta);
  auto ddy = upload(DType::kBf16, dy), m2 = upload(DType::kF32, mean_f), r2 = upload(DType::kF32, rstd_f);
  auto gdx = alloc(DType::kBf16, s.t * s.h), gdg = alloc(DType::kF32, s.h), gdb = alloc(DType::kF32, s.h);
  g::layernorm_backward(ctx(), dx_, dg, ddy, m2, r2, s, gdx, gdg, gdb);
  EXPECT_TRUE(rel_err(gdx.download(), dx) < kBf16Tol);
  EXPECT_TRUE(rel_err(gdg.download(), dgamma) < kF32Tol);
  EXPECT_TRUE(rel_err(gdb.download(), dbeta) < kF32Tol);
}

TEST_P(GpuNorms, RmsNormMatchesReference) {
  LACUNA_SKIP_WITHOUT_GPU();
  const ref::NormShape s = GetParam();
  const size_t n = static_cast<size_t>(s.t * s.h), t = static_cast<size_t>(s.t), h = static_cast<size_t>(s.h);
  const auto x = host_random(n, 11), gamma = host_random(h, 12), dy = host_random(n, 13);
  const double eps = 1e-6;
  std::vector<double> y(n), rstd(t);
  ref::rmsnorm_forward<double>(cs(widen(x)), cs(widen(gamma)), s, eps, y, rstd);

  auto dx_ = upload(DType::kBf16, x), dg = upload(DType::kBf16, gamma);
  auto dyo = alloc(DType::kBf16, s.t * s.h), drstd = alloc(DType::kF32, s.t);
  g::rmsnorm_forward(ctx(), dx_, dg, s, eps, dyo, drstd);
  EXPECT_TRUE(rel_err(dyo.download(), y) < kBf16Tol);
  EXPECT_TRUE(rel_err(drstd.download(), rstd) < kF32Tol);

  const auto rstd_f = narrow_f32(rstd);
  std::vector<double> dx(n), dgamma(h);
  ref::rmsnorm_backward<double>(cs(widen(x)), cs(widen(gamma)), cs(widen(dy)), cs(widen(rstd_f)), s, dx, dgamma);
  auto ddy = upload(DType::kBf16, dy), r2 = upload(DType::kF32, rstd_f);
  auto gdx = alloc(DType::kBf16, s.t * s.h), gdg = alloc(DType::kF32, s.h);
  g::rmsnorm_backward(ctx(), dx_, dg, ddy, r2, s, gdx, gdg);
  EXPECT_TRUE(rel_err(gdx.download(), dx) < kBf16Tol);
  EXPECT_TRUE(rel_err(gdg.download(), dgamma) < kF32Tol);
}

INSTANTIATE_TEST_SUITE_P(GpuShapes, GpuNorms,
                         ::testing::Values(ref::NormShape{1, 64}, ref::NormShape{7, 1000}, ref::NormShape{33, 4096},
                                           ref::NormShape{70, 257}, ref::NormShape{3, 12288}));

// ---------------------------------------------------------------- activations

TEST(GpuActivations, GeluTanhMatchesReference) {
  LACUNA_SKIP_WITHOUT_GPU();
  for (size_t n : {size_t{1}, size_t{1000}, size_t{65537}}) {
    const auto x = host_random(n, 21), dy = host_random(n, 22);
    std::vector<double> y(n), dx(n);
    ref::gelu_forward<double>(cs(widen(x)), ref::GeluKind::kTanh, y);
    ref::gelu_backward<double>(cs(widen(x)), cs(widen(dy)), ref::GeluKind::kTanh, dx);
    auto gx = upload(DType::kBf16, x), gdy = upload(DType::kBf16, dy);
    auto gy = alloc(DType::kBf16, static_cast<int64_t>(n)), gdx = alloc(DType::kBf16, static_cast<int64_t>(n));
    g::gelu_forward(ctx(), gx, gy);
    g::gelu_backward(ctx(), gx, gdy, gdx);
    EXPECT_TRUE(rel_err(gy.download(), y) < kBf16Tol) << n;
    EXPECT_TRUE(rel_err(gdx.download(), dx) < kBf16Tol) << n;
  }
}

TEST(GpuActivations, SwigluMatchesReference) {
  LACUNA_SKIP_WITHOUT_GPU();
  for (auto [t, f] : {std::pair<int64_t, int64_t>{1, 1}, {3, 100}, {64, 1376}}) {
    const size_t n = static_cast<size_t>(t * f);
    const auto x = host_random(2 * n, 31), dy = host_random(n, 32);
    std::vector<double> y(n), dx(2 * n);
    ref::swiglu_forward<double>(cs(widen(x)), t, f, y);
    ref::swiglu_backward<double>(cs(widen(x)), cs(widen(dy)), t, f, dx);
    auto gx = upload(DType::kBf16, x), gdy = upload(DType::kBf16, dy);
    auto gy = alloc(DType::kBf16, t * f), gdx = alloc(DType::kBf16, 2 * t * f);
    g::swiglu_forward(ctx(), gx, t, f, gy);
    g::swiglu_backward(ctx(), gx, gdy, t, f, gdx);
    EXPECT_TRUE(rel_err(gy.download(), y) < kBf16Tol) << t << "x" << f;
    EXPECT_TRUE(rel_err(gdx.download(), dx) < kBf16Tol) << t << "x" << f;
  }
}

TEST(GpuActivations, ResidualAddMatchesReferenceAndMayAlias) {
  LACUNA_SKIP_WITHOUT_GPU();
  for (size_t n : {size_t{1}, size_t{4097}}) {
    const auto a = host_random(n, 41), b = host_random(n, 42);
    std::vector<double> out(n);
    ref::residual_add<double>(cs(widen(a)), cs(widen(b)), out);
    auto ga = upload(DType::kBf16, a), gb = upload(DType::kBf16, b), go = alloc(DType::kBf16, static_cast<int64_t>(n));
    g::residual_add(ctx(), ga, gb, go);
    EXPECT_TRUE(rel_err(go.download(), out) < kBf16Tol) << n;
    g::residual_add(ctx(), ga, gb, ga);  // in place
    EXPECT_TRUE(rel_err(ga.download(), out) < kBf16Tol) << n;
  }
}

// ---------------------------------------------------------------- cross-entropy

TEST(GpuCrossEntropy, MatchesReference) {
  LACUNA_SKIP_WITHOUT_GPU();
  for (ref::CeShape s : {ref::CeShape{1, 1}, ref::CeShape{4, 10}, ref::CeShape{17, 50257}}) {
    const size_t n = static_cast<size_t>(s.t * s.v), t = static_cast<size_t>(s.t);
    auto logits = host_random(n, 51);
    for (float& l : logits) l = g::round_to_bf16(4.0f * l);  // a peakier softmax than ±1.5
    std::vector<int64_t> targets(t);
    std::vector<int32_t> targets32(t);
    for (size_t i = 0; i < t; ++i) targets32[i] = static_cast<int32_t>(targets[i] = (i * 7919) % s.v);
    const auto dloss = host_random(t, 52, true);
    std::vector<double> loss(t), dlogits(n);
    ref::cross_entropy_forward<double>(cs(widen(logits)), cs(targets), s, loss);
    ref::cross_entropy_backward<double>(cs(widen(logits)), cs(targets), cs(widen(dloss)), s, dlogits);

    auto gl = upload(DType::kBf16, logits), gt = upload_i32(targets32), gdl = upload(DType::kF32, dloss);
    auto gloss = alloc(DType::kF32, s.t), glse = alloc(DType::kF32, s.t), gd = alloc(DType::kBf16, s.t * s.v);
    g::cross_entropy_forward(ctx(), gl, gt, s, gloss, glse);
    g::cross_entropy_backward(ctx(), gl, gt, glse, gdl, s, gd);
    if (s.v == 1) {  // one class: loss and gradient are exactly 0 (‖ref‖ = 0, no relative error)
      EXPECT_EQ(gloss.download(), std::vector<float>(t, 0.0f));
      EXPECT_EQ(gd.download(), std::vector<float>(n, 0.0f));
      continue;
    }
    EXPECT_TRUE(rel_err(gloss.download(), loss) < kF32Tol) << s.t << "x" << s.v;
    EXPECT_TRUE(rel_err(gd.download(), dlogits) < kBf16Tol) << s.t << "x" << s.v;
  }
}

// ---------------------------------------------------------------- attention


class GpuAttention : public ::testing::TestWithParam<AttentionShape> {};

TEST_P(GpuAttention, ForwardAndBackwardMatchReference) {
  LACUNA_SKIP_WITHOUT_GPU();
  const AttentionShape s = GetParam();
  const auto nq = static_cast<size_t>(s.q_elements()), nkv = static_cast<size_t>(s.kv_elements());
  const auto q = host_random(nq, 61), k = host_random(nkv, 62), v = host_random(nkv, 63), dout = host_random(nq, 64);
  const auto ref_fwd = attention_forward_naive<double>(s, cs(widen(q)), cs(widen(k)), cs(widen(v)));

  auto gq = upload(DType::kBf16, q), gk = upload(DType::kBf16, k), gv = upload(DType::kBf16, v);
  auto go = alloc(DType::kBf16, s.q_elements()), glse = alloc(DType::kF32, s.lse_elements());
  g::attention_forward(ctx(), s, gq, gk, gv, go, glse);
  EXPECT_TRUE(rel_err(go.download(), ref_fwd.out) < kBf16Tol) << describe(s);
  EXPECT_TRUE(rel_err(glse.download(), ref_fwd.lse) < kF32Tol) << describe(s);

  // Backward from the reference O (rounded to bf16, as the device holds it)
  // and LSE (rounded to f32); the reference sees the same rounded O.
  const auto o_bf = narrow_bf16(ref_fwd.out), lse_f = narrow_f32(ref_fwd.lse);
  const auto ref_bwd =
      attention_backward_naive<double>(s, cs(widen(q)), cs(widen(k)), cs(widen(v)), cs(widen(o_bf)), cs(widen(dout)));
  auto go2 = upload(DType::kBf16, o_bf), glse2 = upload(DType::kF32, lse_f), gdo = upload(DType::kBf16, dout);
  auto gdq = alloc(DType::kBf16, s.q_elements()), gdk = alloc(DType::kBf16, s.kv_elements()),
       gdv = alloc(DType::kBf16, s.kv_elements());
  auto ws = alloc(DType::kF32, g::attention_backward_workspace_elements(s));
  g::attention_backward(ctx(), s, gq, gk, gv, go2, glse2, gdo, gdq, gdk, gdv, ws);
  EXPECT_TRUE(rel_err(gdq.download(), ref_bwd.dq) < kBf16Tol) << describe(s);
  EXPECT_TRUE(rel_err(gdk.download(), ref_bwd.dk) < kBf16Tol) << describe(s);
  EXPECT_TRUE(rel_err(gdv.download(), ref_bwd.dv) < kBf16Tol) << describe(s);
}

INSTANTIATE_TEST_SUITE_P(
    GpuShapes, GpuAttention,
    ::testing::Values(attention_shape(1, 2, 2, 64, 64, 64, false),     // tile multiples, MHA
                      attention_shape(1, 2, 2, 64, 64, 64, true),      //   causal
                      attention_shape(2, 4, 2, 77, 77, 64, true),      // GQA, ragged tiles
                      attention_shape(1, 4, 1, 33, 100, 128, true),    // MQA, s_q < s_kv (bottom-right causal)
                      attention_shape(1, 4, 1, 33, 100, 128, false),   //   non-causal
                      attention_shape(1, 2, 2, 50, 37, 80, false),     // s_q > s_kv, head_dim not a power of 2
                      attention_shape(1, 3, 3, 19, 19, 32, true),      // smallest column capacity
                      attention_shape(1, 2, 1, 40, 45, 256, true),     // largest head_dim
                      attention_shape(1, 1, 1, 1, 3, 7, false),        // one row, odd head_dim
                      attention_shape(1, 8, 2, 130, 130, 96, false)));  // several blocks per head

TEST(GpuAttentionErrors, HeadDimAbove256IsAnError) {
  LACUNA_SKIP_WITHOUT_GPU();
  const AttentionShape s = attention_shape(1, 1, 1, 4, 4, 288, false);
  auto q = alloc(DType::kBf16, s.q_elements()), k = alloc(DType::kBf16, s.kv_elements()),
       v = alloc(DType::kBf16, s.kv_elements()), o = alloc(DType::kBf16, s.q_elements());
  auto lse = alloc(DType::kF32, s.lse_elements());
  EXPECT_THROW(g::attention_forward(ctx(), s, q, k, v, o, lse), Error);
}

// ---------------------------------------------------------------- GEMM

struct GemmCase {
  int64_t m, n, k;
  bool ta, tb;
  int64_t batch;
};

void PrintTo(const GemmCase& c, std::ostream* os) {
  *os << c.m << "x" << c.n << "x" << c.k << (c.ta ? "_ta" : "") << (c.tb ? "_tb" : "") << "_batch" << c.batch;
}

class GpuGemm : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GpuGemm, MatchesReference) {
  LACUNA_SKIP_WITHOUT_GPU();
  const GemmCase c = GetParam();
  const ref::GemmShape s{c.m, c.n, c.k, c.ta, c.tb};
  const auto na = static_cast<size_t>(c.m * c.k), nb = static_cast<size_t>(c.k * c.n),
             nc = static_cast<size_t>(c.m * c.n), batch = static_cast<size_t>(c.batch);
  const auto a = host_random(na * batch, 71), b = host_random(nb * batch, 72);
  std::vector<double> want(nc * batch);
  const auto a64 = widen(a), b64 = widen(b);
  for (size_t i = 0; i < batch; ++i)
    ref::gemm<double>(std::span<const double>(a64).subspan(i * na, na), std::span<const double>(b64).subspan(i * nb, nb),
                      s, std::span<double>(want).subspan(i * nc, nc));
  auto ga = upload(DType::kBf16, a), gb = upload(DType::kBf16, b), gc = alloc(DType::kBf16, c.m * c.n * c.batch);
  if (c.batch == 1)
    g::gemm(ctx(), ga, gb, s, gc);
  else
    g::gemm_batched(ctx(), ga, gb, s, c.batch, gc);
  EXPECT_TRUE(rel_err(gc.download(), want) < kBf16Tol)
      << c.m << "x" << c.n << "x" << c.k << " ta " << c.ta << " tb " << c.tb << " batch " << c.batch;
}

// Forward X·W (NN), dgrad dY·Wᵀ (NT), wgrad Xᵀ·dY (TN), and TT; batched.
INSTANTIATE_TEST_SUITE_P(GpuShapes, GpuGemm,
                         ::testing::Values(GemmCase{1, 1, 1, false, false, 1}, GemmCase{17, 33, 65, false, false, 1},
                                           GemmCase{17, 33, 65, false, true, 1}, GemmCase{17, 33, 65, true, false, 1},
                                           GemmCase{17, 33, 65, true, true, 1},
                                           GemmCase{128, 96, 200, false, false, 1},
                                           GemmCase{128, 96, 200, false, true, 1},
                                           GemmCase{128, 96, 200, true, false, 1},
                                           GemmCase{3, 1000, 7, false, false, 1},
                                           GemmCase{31, 17, 45, false, false, 3},
                                           GemmCase{31, 17, 45, false, true, 3}, GemmCase{31, 17, 45, true, false, 3},
                                           GemmCase{64, 64, 64, true, true, 5}));

// ---------------------------------------------------------------- misc kernels

TEST(GpuMisc, SoftmaxMatchesDoubleReference) {
  LACUNA_SKIP_WITHOUT_GPU();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {5, 77}, {9, 4096}}) {
    const float scale = 0.7f;
    const size_t n = static_cast<size_t>(rows * cols);
    const auto x = host_random(n, 81), dy = host_random(n, 82);
    std::vector<double> y(n), dx(n);
    for (int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY, sum = 0.0, dot = 0.0;
      for (int64_t c = 0; c < cols; ++c) m = std::max(m, scale * static_cast<double>(x[r * cols + c]));
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(scale * static_cast<double>(x[r * cols + c]) - m);
      for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = std::exp(scale * static_cast<double>(x[r * cols + c]) - m) / sum;
      // The backward runs on the device's bf16 y; the reference uses the same.
      for (int64_t c = 0; c < cols; ++c) dot += dy[r * cols + c] * static_cast<double>(g::round_to_bf16(static_cast<float>(y[r * cols + c])));
      for (int64_t c = 0; c < cols; ++c) {
        const double yb = g::round_to_bf16(static_cast<float>(y[r * cols + c]));
        dx[r * cols + c] = scale * yb * (dy[r * cols + c] - dot);
      }
    }
    auto gx = upload(DType::kBf16, x), gdy = upload(DType::kBf16, dy);
    auto gy = alloc(DType::kBf16, rows * cols), gdx = alloc(DType::kBf16, rows * cols);
    g::softmax_forward(ctx(), gx, rows, cols, scale, gy);
    g::softmax_backward(ctx(), gy, gdy, rows, cols, scale, gdx);
    EXPECT_TRUE(rel_err(gy.download(), y) < kBf16Tol) << rows << "x" << cols;
    if (cols > 1) {  // one column: y = 1 and dx = 0 exactly, no relative error to take
      EXPECT_TRUE(rel_err(gdx.download(), dx) < kBf16Tol) << rows << "x" << cols;
    }
  }
}

TEST(GpuMisc, ScaleCopyMatchesReference) {
  LACUNA_SKIP_WITHOUT_GPU();
  const auto x = host_random(3001, 91);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = 1.25 * x[i];
  auto gx = upload(DType::kBf16, x), gy = alloc(DType::kBf16, 3001);
  g::scale_copy(ctx(), gx, 1.25f, gy);
  EXPECT_TRUE(rel_err(gy.download(), y) < kBf16Tol);
}

TEST(GpuMisc, AdamStepMatchesDoubleReference) {
  LACUNA_SKIP_WITHOUT_GPU();
  const size_t n = 10007;
  const auto p = host_random(n, 101), gr = host_random(n, 102), m = host_random(n, 103),
             v = host_random(n, 104, true);
  g::AdamParams ap;
  ap.lr = 1e-2f;  // a step large enough that its f32 rounding is far below the tolerance
  ap.step = 3;
  std::vector<double> dp(n), m2(n), v2(n), p2(n);
  const double b1 = ap.beta1, b2 = ap.beta2;
  for (size_t i = 0; i < n; ++i) {
    m2[i] = b1 * m[i] + (1 - b1) * gr[i];
    v2[i] = b2 * v[i] + (1 - b2) * gr[i] * gr[i];
    const double upd = (m2[i] / (1 - std::pow(b1, 3))) / (std::sqrt(v2[i] / (1 - std::pow(b2, 3))) + ap.eps);
    dp[i] = -ap.lr * (upd + ap.weight_decay * p[i]);
    p2[i] = p[i] + dp[i];
  }
  auto gp = upload(DType::kF32, p), gg = upload(DType::kF32, gr), gm = upload(DType::kF32, m),
       gv = upload(DType::kF32, v), gw = alloc(DType::kBf16, static_cast<int64_t>(n));
  g::adam_step(ctx(), gp, gg, gm, gv, ap, gw);
  std::vector<float> delta = gp.download();
  for (size_t i = 0; i < n; ++i) delta[i] -= p[i];  // the update itself, not p + update
  EXPECT_TRUE(rel_err(delta, dp) < kF32Tol);
  EXPECT_TRUE(rel_err(gm.download(), m2) < kF32Tol);
  EXPECT_TRUE(rel_err(gv.download(), v2) < kF32Tol);
  EXPECT_TRUE(rel_err(gw.download(), p2) < kBf16Tol);
}

TEST(GpuMisc, EmbeddingGatherAndScatterAdd) {
  LACUNA_SKIP_WITHOUT_GPU();
  const int64_t tokens = 100, hidden = 72, vocab = 13;
  std::vector<int32_t> ids(tokens);
  for (int64_t i = 0; i < tokens; ++i) ids[i] = static_cast<int32_t>((i * 5) % vocab);  // repeats
  ids[3] = -1;     // outside this rank's vocabulary shard: a zero row, no gradient
  ids[4] = vocab;  //   likewise
  const auto table = host_random(static_cast<size_t>(vocab * hidden), 111);
  const auto dy = host_random(static_cast<size_t>(tokens * hidden), 112);
  std::vector<double> out(static_cast<size_t>(tokens * hidden), 0.0), dtable(static_cast<size_t>(vocab * hidden), 0.0);
  for (int64_t i = 0; i < tokens; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) continue;
    for (int64_t c = 0; c < hidden; ++c) {
      out[i * hidden + c] = table[ids[i] * hidden + c];
      dtable[ids[i] * hidden + c] += dy[i * hidden + c];
    }
  }
  auto gids = upload_i32(ids), gt = upload(DType::kBf16, table), gdy = upload(DType::kBf16, dy);
  auto gout = alloc(DType::kBf16, tokens * hidden), gdt = alloc(DType::kF32, vocab * hidden);
  g::embedding_forward(ctx(), gids, gt, tokens, hidden, vocab, gout);
  gdt.zero();
  g::embedding_backward(ctx(), gids, gdy, tokens, hidden, vocab, gdt);
  EXPECT_TRUE(rel_err(gout.download(), out) < kBf16Tol);
  EXPECT_TRUE(rel_err(gdt.download(), dtable) < kF32Tol);
}

}  // namespace
}  // namespace lacuna::kernels
