#include "sim/cost/kernel_efficiency.h"

#include <cstdint>
#include <random>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace lacuna::cost {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

scenario::KernelShapeModel one_tile(int64_t m, int64_t n, int64_t ctas_per_sm, double k_overhead, int64_t max_split) {
  scenario::KernelShapeModel s;
  auto* t = s.add_gemm_tiles();
  t->set_m(m);
  t->set_n(n);
  t->set_ctas_per_sm(ctas_per_sm);
  s.set_gemm_k_overhead(k_overhead);
  s.set_gemm_max_split_k(max_split);
  return s;
}

scenario::KernelShapeModel attention_model(int64_t block_q, double kv_overhead, double head_dim_overhead) {
  scenario::KernelShapeModel s;
  s.set_attention_block_q(block_q);
  s.set_attention_kv_overhead(kv_overhead);
  s.set_attention_head_dim_overhead(head_dim_overhead);
  return s;
}

// The shape of a preset-like model: three large tiles, a K ramp, split-K, an
// attention block (values of the same order as the presets', not theirs).
scenario::KernelShapeModel full_model() {
  scenario::KernelShapeModel s = attention_model(128, 184, 23);
  for (auto [m, n, c] : {std::tuple{256, 128, 1}, std::tuple{128, 256, 1}, std::tuple{128, 128, 2}}) {
    auto* t = s.add_gemm_tiles();
    t->set_m(m);
    t->set_n(n);
    t->set_ctas_per_sm(c);
  }
  s.set_gemm_ctas_per_sm(1);
  s.set_gemm_k_overhead(217);
  s.set_gemm_max_split_k(2);
  return s;
}

ir::Compute compute(ir::OpClass cls, std::vector<int64_t> shape) {
  ir::Compute c;
  c.set_op_class(cls);
  for (int64_t d : shape) c.add_shape(d);
  c.set_flops(1e9);
  return c;
}

// 12 × 11 tiles of 128×128 fill the 132 SMs exactly: nothing is lost. One
// more row of tiles needs a second wave that is 12/132 full.
TEST(GemmShape, ExactlyOneWaveVersusOneTileMore) {
  const KernelEfficiency e(one_tile(128, 128, 1, 0, 1), 132);
  const GemmShapeFactor full = e.gemm(128 * 12, 128 * 11, 4096);
  EXPECT_EQ(full.ctas, 132);
  EXPECT_DOUBLE_EQ(full.factor, 1.0);
  const GemmShapeFactor more = e.gemm(128 * 13, 128 * 11, 4096);
  EXPECT_EQ(more.ctas, 143);
  EXPECT_DOUBLE_EQ(more.wave_fill, 143.0 / 264.0);
  EXPECT_DOUBLE_EQ(more.factor, 143.0 / 264.0);
  // One row more than a full wave, but only one element of it: the edge
  // tile computes 128 rows for 1, and the wave is still 143/264 full.
  const GemmShapeFactor edge = e.gemm(128 * 12 + 1, 128 * 11, 4096);
  EXPECT_DOUBLE_EQ(edge.tile_fill, (128.0 * 12 + 1) / (128.0 * 13));
  EXPECT_DOUBLE_EQ(edge.factor, edge.tile_fill * 143.0 / 264.0);
}

// Two CTAs per SM double the wave: 264 tiles still fit in one.
TEST(GemmShape, CtasPerSmWidenTheWave) {
  const KernelEfficiency e(one_tile(128, 128, 2, 0, 1), 132);
  EXPECT_DOUBLE_EQ(e.gemm(128 * 24, 128 * 11, 1024).factor, 1.0);
  EXPECT_DOUBLE_EQ(e.gemm(128 * 25, 128 * 11, 1024).factor, 275.0 / 528.0);
}

// The main loop runs at K / (K + k_overhead): K = k_overhead is half speed.
TEST(GemmShape, ReductionRamp) {
  const KernelEfficiency e(one_tile(128, 128, 1, 64, 1), 132);
  EXPECT_DOUBLE_EQ(e.gemm(128 * 12, 128 * 11, 64).factor, 0.5);
  EXPECT_DOUBLE_EQ(e.gemm(128 * 12, 128 * 11, 192).factor, 0.75);
}

// One output tile on 132 SMs: split-K spreads K over more CTAs, each paying
// its own prologue and epilogue. K = 512, k_overhead 128: split 4 gives
// 4/132 × 128/256, better than 3/132 × 170.7/298.7 and 1/132 × 512/640.
TEST(GemmShape, SplitKFillsAnEmptyGpu) {
  const KernelEfficiency e(one_tile(128, 128, 1, 128, 4), 132);
  const GemmShapeFactor g = e.gemm(128, 128, 512);
  EXPECT_EQ(g.split_k, 4);
  EXPECT_EQ(g.ctas, 4);
  EXPECT_DOUBLE_EQ(g.factor, 4.0 / 132.0 * 128.0 / 256.0);
  // A wave's worth of tiles is never split.
  EXPECT_EQ(e.gemm(128 * 12, 128 * 11, 512).split_k, 1);
}

// A batched GEMM launches tiles × batch CTAs.
TEST(GemmShape, BatchMultipliesTheCtas) {
  const KernelEfficiency e(one_tile(128, 128, 1, 0, 1), 132);
  EXPECT_EQ(e.gemm(128, 128, 64, 132).ctas, 132);
  EXPECT_DOUBLE_EQ(e.gemm(128, 128, 64, 132).factor, 1.0);
  EXPECT_DOUBLE_EQ(e.gemm(128, 128, 64, 133).factor, 133.0 / 264.0);
}

// The library takes the best tile: 1792² on 108 SMs is one wave of 256×128
// tiles (7 × 14 = 98), 2048² needs 128 tiles, i.e. two waves of any tile.
TEST(GemmShape, PicksTheBestTileAndShowsTheWaveDip) {
  const KernelEfficiency e(full_model(), 108);
  const GemmShapeFactor a = e.gemm(1792, 1792, 1792);
  const GemmShapeFactor b = e.gemm(2048, 2048, 2048);
  EXPECT_EQ(a.tile, 0);
  EXPECT_DOUBLE_EQ(a.wave_fill, 98.0 / 108.0);
  EXPECT_DOUBLE_EQ(b.wave_fill, 128.0 / 216.0);
  EXPECT_GT(a.factor, b.factor);
}

// Random shapes: the factor is in (0, 1]; a longer reduction never lowers it
// (each candidate's ramp grows with K and the candidates do not depend on K).
TEST(GemmShape, PropertiesOverRandomShapes) {
  const KernelEfficiency e(full_model(), 132);
  std::mt19937_64 rng(20240611);
  std::uniform_int_distribution<int64_t> dim(1, 40000), kdim(1, 30000), batch(1, 64);
  for (int i = 0; i < 3000; ++i) {
    const int64_t m = dim(rng), n = dim(rng), k = kdim(rng), b = i % 4 == 0 ? batch(rng) : 1;
    const double f = e.gemm(m, n, k, b).factor;
    ASSERT_GT(f, 0.0) << m << "x" << n << "x" << k;
    ASSERT_LE(f, 1.0) << m << "x" << n << "x" << k;
    ASSERT_GE(e.gemm(m, n, k + 1 + k / 3, b).factor, f) << m << "x" << n << "x" << k;
  }
}

// Whole waves beat partial ones at equal tiles: adding tiles up to a full
// wave never lowers the wave fill, and one tile past it always does.
TEST(GemmShape, FullWavesBeatPartialWaves) {
  const KernelEfficiency e(one_tile(128, 128, 1, 0, 1), 132);
  for (int64_t tiles = 1; tiles <= 4 * 132; ++tiles) {
    const double f = e.gemm(128 * tiles, 128, 1024).factor;
    if (tiles % 132 == 0) {
      EXPECT_DOUBLE_EQ(f, 1.0);
      EXPECT_LT(e.gemm(128 * (tiles + 1), 128, 1024).factor, f);
    } else {
      EXPECT_LT(f, 1.0);
    }
  }
}

// 4 CTAs on 4 SMs, each visiting 256 keys and paying 64 more: 256/320 of
// the time is useful; the head-dim ramp is 128/(128+32).
TEST(AttentionShape, NonCausalOneWaveClosedForm) {
  const KernelEfficiency e(attention_model(128, 64, 32), 4);
  const AttentionShapeFactor a = e.attention(1, 2, 256, 256, 128, false);
  EXPECT_EQ(a.ctas, 4);
  EXPECT_DOUBLE_EQ(a.block_fill, 256.0 / 320.0);
  EXPECT_DOUBLE_EQ(a.head_dim_ramp, 128.0 / 160.0);
  EXPECT_DOUBLE_EQ(a.factor, 0.8 * 0.8);
}

// Causal, 2 query blocks of 128 on 2 SMs: the blocks visit 128 and 256 keys
// (the diagonal block whole) while the queries attend 256·257/2 pairs, i.e.
// 257 key·blocks; the longer CTA sets the makespan.
TEST(AttentionShape, CausalClosedForm) {
  const KernelEfficiency e(attention_model(128, 10, 0), 2);
  const AttentionShapeFactor a = e.attention(1, 1, 256, 256, 64, true);
  EXPECT_DOUBLE_EQ(a.block_fill, 257.0 / (2.0 * (256 + 10)));
  EXPECT_DOUBLE_EQ(a.factor, a.block_fill);
}

// A sliding window of 128 over 512 causal keys: every block but the first
// visits window + block − 1 = 255 keys (its first query sees 128 keys back).
TEST(AttentionShape, SlidingWindowVisitsOnlyTheBand) {
  const KernelEfficiency e(attention_model(128, 0, 0), 4);
  const AttentionShapeFactor a = e.attention(1, 1, 512, 512, 128, true, 128);
  // Useful: 128·129/2 in block 0, 128·128 in the others = 8256 + 3·16384 pairs.
  const double useful = (8256.0 + 3 * 16384.0) / 128.0;
  EXPECT_DOUBLE_EQ(a.block_fill, useful / (4.0 * 255.0));
  // The window's shape is the 8th entry of the IR shape.
  EXPECT_DOUBLE_EQ(e.factor(compute(ir::ATTENTION, {1, 1, 512, 512, 128, 1, 1, 128})), a.factor);
  // A window as wide as the keys is full attention.
  EXPECT_DOUBLE_EQ(e.attention(1, 1, 512, 512, 128, true, 512).factor,
                   e.attention(1, 1, 512, 512, 128, true).factor);
}

// FlashAttention's benchmarks keep batch × seq = 16k tokens: the CTA count
// is constant and longer sequences amortise each CTA's overhead, so the
// efficiency never falls with the sequence (causal or not); more keys per
// query block never lower it either.
TEST(AttentionShape, LongerSequencesNeverLowerEfficiency) {
  const KernelEfficiency e(attention_model(128, 184, 23), 108);
  for (bool causal : {false, true}) {
    for (int64_t d : {64, 128}) {
      double last = 0;
      for (int64_t seq = 256; seq <= 16384; seq *= 2) {
        const double f = e.attention(16384 / seq, 2048 / d, seq, seq, d, causal).factor;
        EXPECT_GE(f, last) << "seq " << seq << " causal " << causal << " d " << d;
        EXPECT_GT(f, 0.0);
        EXPECT_LE(f, 1.0);
        last = f;
      }
    }
  }
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> b(1, 8), h(1, 64), blocks(1, 64), keys(1, 20000);
  for (int i = 0; i < 300; ++i) {
    const int64_t bb = b(rng), hh = h(rng), sq = 128 * blocks(rng), skv = keys(rng);
    const double f = e.attention(bb, hh, sq, skv, 128, false).factor;
    ASSERT_GT(f, 0.0);
    ASSERT_LE(f, 1.0);
    ASSERT_GE(e.attention(bb, hh, sq, skv + 1 + skv / 2, 128, false).factor, f);
  }
}

// Random attention shapes, causal or not, windowed or not: always in (0, 1].
TEST(AttentionShape, FactorIsAFraction) {
  const KernelEfficiency e(attention_model(128, 300, 44), 132);
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> b(1, 4), h(1, 48), seq(1, 9000), d(16, 256), w(0, 4000);
  for (int i = 0; i < 500; ++i) {
    const int64_t sq = seq(rng), skv = sq + (i % 3 == 0 ? seq(rng) : 0);
    const double f = e.attention(b(rng), h(rng), sq, skv, d(rng), i % 2 == 0, i % 5 == 0 ? w(rng) : 0).factor;
    ASSERT_GT(f, 0.0);
    ASSERT_LE(f, 1.0);
  }
}

// The switches: `flat`, classes without shape terms, and shapes too short
// to read all leave the class efficiency alone.
TEST(KernelEfficiency, FlatAndUnshapedKernelsAreFactorOne) {
  scenario::KernelShapeModel flat = full_model();
  flat.set_flat(true);
  const KernelEfficiency f(flat, 132);
  EXPECT_DOUBLE_EQ(f.factor(compute(ir::GEMM, {100, 100, 100})), 1.0);
  EXPECT_DOUBLE_EQ(f.factor(compute(ir::ATTENTION, {1, 1, 300, 300, 64, 1, 1})), 1.0);
  const KernelEfficiency e(full_model(), 132);
  EXPECT_LT(e.factor(compute(ir::GEMM, {100, 100, 100})), 1.0);
  EXPECT_DOUBLE_EQ(e.factor(compute(ir::LAYERNORM, {4096, 8192})), 1.0);
  EXPECT_DOUBLE_EQ(e.factor(compute(ir::ELEMENTWISE, {100})), 1.0);
  EXPECT_DOUBLE_EQ(e.factor(compute(ir::GEMM, {100, 100})), 1.0);
  EXPECT_DOUBLE_EQ(e.factor(compute(ir::GEMM, {0, 100, 100})), 1.0);
  // An empty model (no tiles, no attention block) has no shape terms.
  const KernelEfficiency none(scenario::KernelShapeModel(), 0);
  EXPECT_DOUBLE_EQ(none.factor(compute(ir::GEMM, {100, 100, 100})), 1.0);
  EXPECT_DOUBLE_EQ(none.factor(compute(ir::ATTENTION, {1, 1, 300, 300, 64, 1, 1})), 1.0);
}

TEST(KernelEfficiency, RejectsBadFieldsNamingThem) {
  auto field_of = [](const scenario::KernelShapeModel& s, int64_t sms) {
    try {
      KernelEfficiency e(s, sms);
    } catch (const Error& err) {
      return err.where().field;
    }
    return std::string("no error");
  };
  scenario::KernelShapeModel s = full_model();
  s.mutable_gemm_tiles(1)->set_n(0);
  EXPECT_EQ(field_of(s, 132), "cluster.gpu.shape_model.gemm_tiles[1]");
  s = full_model();
  s.set_gemm_k_overhead(-1);
  EXPECT_EQ(field_of(s, 132), "cluster.gpu.shape_model.gemm_k_overhead");
  s = full_model();
  s.set_gemm_max_split_k(0);
  EXPECT_EQ(field_of(s, 132), "cluster.gpu.shape_model.gemm_max_split_k");
  s = full_model();
  s.set_attention_block_q(0);
  EXPECT_EQ(field_of(s, 132), "cluster.gpu.shape_model.attention_block_q");
  s = full_model();
  s.set_attention_kv_overhead(std::nan(""));
  EXPECT_EQ(field_of(s, 132), "cluster.gpu.shape_model.attention_kv_overhead");
  EXPECT_EQ(field_of(full_model(), 0), "cluster.gpu.num_sms");
  EXPECT_THAT([] { KernelEfficiency(full_model(), 0); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr("num_sms"), HasSubstr("flat: true"))));
}

// Results do not depend on call order or on the memo (a copy shares it).
TEST(KernelEfficiency, DeterministicAndCopyable) {
  const KernelEfficiency e(full_model(), 132);
  const double first = e.attention(2, 16, 4096, 4096, 128, true).factor;
  const KernelEfficiency copy = e;
  EXPECT_DOUBLE_EQ(copy.attention(2, 16, 4096, 4096, 128, true).factor, first);
  const KernelEfficiency fresh(full_model(), 132);
  EXPECT_DOUBLE_EQ(fresh.attention(2, 16, 4096, 4096, 128, true).factor, first);
}

}  // namespace
}  // namespace lacuna::cost
