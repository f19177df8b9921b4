// make_gpu_case: every class and variant the simulator emits builds, runs and
// returns a positive time; unsupported combinations are errors naming the op.
// Skips where there is no GPU, no cuBLAS or no CUDA in the build.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/gpu_case.h"
#include "sim/core/error.h"

namespace lacuna::kernels {
namespace {

#define LACUNA_SKIP_WITHOUT_GPU() \
  if (!gpu_available()) GTEST_SKIP() << gpu_unavailable_reason()

gpu::Context& ctx() {
  static gpu::Context* c = new gpu::Context(0);  // never destroyed (see gpu_kernels_test.cpp)
  return *c;
}

ir::Compute op(ir::OpClass c, ir::KernelVariant v, std::initializer_list<int64_t> shape) {
  ir::Compute o;
  o.set_op_class(c);
  o.set_variant(v);
  for (int64_t d : shape) o.add_shape(d);
  return o;
}

constexpr auto kF = ir::VARIANT_FORWARD;
constexpr auto kB = ir::VARIANT_BACKWARD_INPUT;
constexpr auto kW = ir::VARIANT_BACKWARD_WEIGHT;

TEST(GpuCase, EveryClassAndVariantRunsWithAPositiveTime) {
  LACUNA_SKIP_WITHOUT_GPU();
  const std::vector<ir::Compute> ops = {
      op(ir::GEMM, kF, {512, 768, 256}),
      op(ir::GEMM, kB, {512, 256, 768}),
      op(ir::GEMM, kW, {256, 768, 512}),
      op(ir::GEMM, kF, {128, 128, 64, 8}),  // unfused attention's batched products
      op(ir::GEMM, kB, {128, 64, 128, 8}),
      op(ir::ATTENTION, kF, {2, 8, 256, 256, 128, 1, 2}),
      op(ir::ATTENTION, kB, {2, 8, 256, 256, 128, 1, 2}),
      op(ir::ATTENTION, kF, {1, 4, 128, 512, 64, 0, 4}),
      op(ir::ATTENTION, kB, {1, 4, 128, 512, 64, 0, 4}),
      op(ir::LAYERNORM, kF, {1024, 1024}),
      op(ir::LAYERNORM, kB, {1024, 1024}),
      op(ir::RMSNORM, kF, {1024, 1024}),
      op(ir::RMSNORM, kB, {1024, 1024}),
      op(ir::GELU, kF, {1 << 20}),
      op(ir::GELU, kB, {1 << 20}),
      op(ir::SWIGLU, kF, {512, 1376}),
      op(ir::SWIGLU, kB, {512, 1376}),
      op(ir::RESIDUAL_ADD, kF, {1 << 20}),
      op(ir::RESIDUAL_ADD, kB, {1 << 20}),
      op(ir::CROSS_ENTROPY, kF, {256, 32000}),
      op(ir::CROSS_ENTROPY, kB, {256, 32000}),
      op(ir::SOFTMAX, kF, {4096, 512}),
      op(ir::SOFTMAX, kB, {4096, 512}),
      op(ir::ELEMENTWISE, kF, {1 << 20}),
      op(ir::ELEMENTWISE, kB, {1 << 20}),
      op(ir::EMBEDDING, kF, {1024, 1024, 32000}),
      op(ir::EMBEDDING, kW, {1024, 1024, 32000}),
      op(ir::OPTIMIZER, kF, {1 << 22}),
  };
  for (const ir::Compute& o : ops) {
    std::unique_ptr<KernelCase> c = make_gpu_case(o, ctx());
    const std::string d = c->describe();
    EXPECT_FALSE(d.empty());
    EXPECT_GT(c->resident_bytes(), 0) << d;
    for (int i = 0; i < 3; ++i) {  // more than one set is visited
      const double ns = c->run_once_ns();
      EXPECT_TRUE(ns > 0.0) << d << ": " << ns;
    }
  }
}

TEST(GpuCase, RotatingSetsExceedTwiceL2) {
  LACUNA_SKIP_WITHOUT_GPU();
  // A small GEMM: one set is far below L2, so 8 sets (or as many as exceed 2·L2).
  auto c = make_gpu_case(op(ir::GEMM, kF, {256, 256, 256}), ctx());
  const int64_t per_set = 3 * 256 * 256 * 2;
  const int sets = gpu_case_set_count(per_set, ctx().l2_cache_bytes(), int64_t{1} << 40);
  EXPECT_EQ(c->resident_bytes(), per_set * sets);
  EXPECT_TRUE(sets == 8 || per_set * sets > 2 * ctx().l2_cache_bytes());
}

// Pure arithmetic: runs everywhere, GPU or not.
TEST(GpuCase, SetCountRule) {
  EXPECT_EQ(gpu_case_set_count(100, 1000, 1 << 20), 8);     // capped at 8
  EXPECT_EQ(gpu_case_set_count(1000, 1000, 1 << 20), 3);    // 3·1000 > 2·1000
  EXPECT_EQ(gpu_case_set_count(3000, 1000, 1 << 20), 1);    // one set already exceeds 2·L2
  EXPECT_EQ(gpu_case_set_count(1000, 100000, 2500), 2);     // the budget caps it
  EXPECT_THROW(gpu_case_set_count(3000, 1000, 2000), Error);  // one set does not fit
}

// Pure: one set's bytes in closed form, as the executor's memory bound uses them.
TEST(GpuCase, SetBytesInClosedForm) {
  // GEMM [m, n, k]: X [m, k], W [k, n], Y [m, n], bf16.
  EXPECT_EQ(gpu_case_set_bytes(op(ir::GEMM, kF, {512, 768, 256})), 2 * (512 * 256 + 256 * 768 + 512 * 768));
  // Batched: every operand times the batch.
  EXPECT_EQ(gpu_case_set_bytes(op(ir::GEMM, kB, {128, 64, 128, 8})), 8 * 2 * (128 * 128 + 128 * 64 + 128 * 64));
  // Attention backward [b, h, sq, skv, d, causal, kv]: q, o, dO, dq bf16 [b, sq, h, d]; k, v, dk, dv bf16
  // [b, skv, kv, d]; lse and the workspace f32 [b, h, sq].
  const int64_t q = 2 * 256 * 8 * 128, kv = 2 * 256 * 2 * 128, lse = 2 * 8 * 256;
  EXPECT_EQ(gpu_case_set_bytes(op(ir::ATTENTION, kB, {2, 8, 256, 256, 128, 1, 2})),
            2 * (4 * q + 4 * kv) + 4 * (2 * lse));
  EXPECT_THROW(gpu_case_set_bytes(op(ir::GEMM, kF, {1, 2})), Error);  // unsupported, as make_gpu_case
}

TEST(GpuCase, OneSetAllocatesWhatSetBytesSays) {
  LACUNA_SKIP_WITHOUT_GPU();
  for (const ir::Compute& o : {op(ir::GEMM, kF, {512, 768, 256}), op(ir::ATTENTION, kB, {2, 8, 256, 256, 128, 1, 2}),
                               op(ir::CROSS_ENTROPY, kF, {256, 32000}), op(ir::OPTIMIZER, kF, {1 << 20})}) {
    GpuCaseOptions one;
    one.max_sets = 1;
    const auto c = make_gpu_enqueue_case(o, ctx(), one);
    EXPECT_EQ(c->resident_bytes(), gpu_case_set_bytes(o)) << c->describe();
  }
}

TEST(GpuCase, UnsupportedCombinationsAreErrorsNamingTheOp) {
  LACUNA_SKIP_WITHOUT_GPU();
  const std::vector<ir::Compute> bad = {
      op(ir::GELU, kW, {1024}),                           // no weight gradient
      op(ir::GEMM, kF, {16, 16}),                         // rank 2
      op(ir::GEMM, kF, {16, 0, 16}),                      // empty
      op(ir::ATTENTION, kF, {1, 1, 16, 16, 512, 0, 1}),   // head_dim > 256
      op(ir::ATTENTION, kF, {1, 4, 16, 16, 64, 0, 3}),    // kv_heads does not divide heads
      op(ir::ATTENTION, kF, {1, 4, 32, 16, 64, 1, 4}),    // causal with s_q > s_kv
      op(ir::OPTIMIZER, kB, {1024}),
      op(ir::EMBEDDING, kB, {16, 16, 16}),
      op(ir::OP_CLASS_UNSPECIFIED, kF, {16}),
  };
  for (const ir::Compute& o : bad) {
    try {
      make_gpu_case(o, ctx());
      ADD_FAILURE() << "no error for " << o.ShortDebugString();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no GPU kernel for"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lacuna::kernels
