// Megatron-LM's bucketed DP overlap: gradients reduced bucket by bucket
// during the chunk's last backward, parameters gathered bucket by bucket.
#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/compiler/stage_plan.h"
#include "sim/compiler/stage_program.h"
#include "sim/engine/simulator.h"
#include "sim/model/accounting.h"
#include "sim/model/layer_shape.h"

namespace lacuna::compiler {
namespace {

using testing::find_stream;
using testing::make_scenario;
using testing::Small;

constexpr int64_t kHuge = std::numeric_limits<int64_t>::max() / 4;

Small eight_layers(scenario::ScheduleKind kind = scenario::ONE_F_ONE_B) {
  Small s;
  s.layers = 8;
  s.schedule = kind;
  return s;
}

StageInputs inputs(const Small& s, int64_t bucket_size) {
  const auto ls = make_scenario(s);
  StageInputs in;
  in.shape = model::layer_shape(ls.spec);
  in.pipeline = {static_cast<int32_t>(s.pp), static_cast<int32_t>(s.v),
                 static_cast<int32_t>(s.global_batch / (s.micro_batch * s.dp))};
  in.stages = plan_stages(ls);
  in.dp_cp = s.dp * s.cp;
  in.distributed_optimizer = s.distributed_optimizer;
  in.overlap_grad_reduce = s.overlap_grad;
  in.overlap_param_gather = s.overlap_param;
  in.ddp_bucket_size = bucket_size;
  return in;
}

ir::Program build(const Small& s, int64_t bucket_size) {
  auto ls = make_scenario(s);
  ls.spec.mutable_parallel()->set_ddp_bucket_size(bucket_size);
  return compile(ls);
}

// DP collectives of a class by kind: count and bytes per chunk.
struct DpOps {
  std::map<ir::CollectiveKind, int> count;
  std::map<std::pair<ir::CollectiveKind, int>, int64_t> bytes;  // (kind, chunk)
};

DpOps dp_ops(const ir::RankClass& c) {
  DpOps out;
  const ir::Stream* dp = find_stream(c, "dp");
  if (dp == nullptr) return out;
  for (const auto& op : dp->ops())
    if (op.has_collective() && op.phase() == ir::DP_SYNC) {  // the buckets, not the loss
      out.count[op.collective().kind()]++;
      out.bytes[{op.collective().kind(), op.chunk()}] += op.collective().bytes();
    }
  return out;
}

TEST(DpBuckets, PartitionCoversEachStageOnceInReverseOrder) {
  for (int64_t v : {1, 2}) {
    Small s = eight_layers(v == 1 ? scenario::ONE_F_ONE_B : scenario::INTERLEAVED_1F1B);
    s.v = v;
    const StageInputs base = inputs(s, 0);
    const int64_t layer = model::layer_parameters(base.shape);
    for (int64_t size : {int64_t{1}, layer, layer + 1, 2 * layer + 1, 3 * layer, kHuge}) {
      StageInputs in = inputs(s, size);
      EXPECT_EQ(ddp_bucket_parameters(in), size);
      for (int32_t vs = 0; vs < s.pp * v; ++vs) {
        SCOPED_TRACE("v=" + std::to_string(v) + " size=" + std::to_string(size) + " stage=" + std::to_string(vs));
        const LayerRange& r = in.stages[static_cast<size_t>(vs)];
        const auto buckets = dp_buckets(in, vs);
        ASSERT_FALSE(buckets.empty());
        int64_t next = r.first + r.count;  // buckets run from the last layer down
        int64_t parameters = 0;
        for (size_t k = 0; k < buckets.size(); ++k) {
          EXPECT_EQ(buckets[k].first_layer + buckets[k].count, next);
          EXPECT_GE(buckets[k].count, 1);
          next = buckets[k].first_layer;
          parameters += buckets[k].parameters;
          if (k + 1 < buckets.size()) {
            EXPECT_GE(buckets[k].parameters, size);
            // Filled greedily: without its last-added (lowest, head-free)
            // layer the bucket would not have reached the size.
            if (buckets[k].count > 1) {
              EXPECT_LT(buckets[k].parameters - layer, size);
            }
          }
        }
        EXPECT_EQ(next, r.first);
        EXPECT_EQ(parameters, stage_parameters(in, vs));
        if (size == kHuge) {
          EXPECT_EQ(buckets.size(), 1u);
        }
        if (size == 1) {
          EXPECT_EQ(static_cast<int64_t>(buckets.size()), r.count);
        }
      }
    }
  }
}

TEST(DpBuckets, DefaultSizeAndNoBucketsWithoutOverlap) {
  Small s = eight_layers();
  s.dp = 2;
  EXPECT_EQ(ddp_bucket_parameters(inputs(s, 0)), 40'000'000);
  StageInputs big = inputs(s, 0);
  big.dp_cp = 64;
  EXPECT_EQ(ddp_bucket_parameters(big), 64'000'000);
  s.overlap_grad = false;
  s.overlap_param = false;
  const StageInputs in = inputs(s, 1);
  for (int32_t vs = 0; vs < s.pp; ++vs) EXPECT_EQ(dp_buckets(in, vs).size(), 1u);
}

TEST(DpBuckets, OneCollectivePerBucketWithTheChunksBytes) {
  for (bool distributed : {true, false}) {
    for (int64_t v : {1, 2}) {
      Small s = eight_layers(v == 1 ? scenario::ONE_F_ONE_B : scenario::INTERLEAVED_1F1B);
      s.v = v;
      s.distributed_optimizer = distributed;
      s.overlap_param = distributed;
      for (int64_t size : {int64_t{1}, int64_t{700'000}, kHuge}) {
        SCOPED_TRACE("distributed=" + std::to_string(distributed) + " v=" + std::to_string(v) +
                     " size=" + std::to_string(size));
        const ir::Program p = build(s, size);
        const StageInputs in = inputs(s, size);
        for (int32_t r = 0; r < s.pp; ++r) {
          const DpOps ops = dp_ops(p.classes(r));
          int buckets = 0;
          for (int32_t c = 0; c < v; ++c) {
            const int32_t vs = c * static_cast<int32_t>(s.pp) + r;
            buckets += static_cast<int>(dp_buckets(in, vs).size());
            const int64_t params = stage_parameters(in, vs);
            const auto grad = distributed ? ir::REDUCE_SCATTER : ir::ALL_REDUCE;
            EXPECT_EQ(ops.bytes.at({grad, c}), params * 4);
            if (distributed) {
              EXPECT_EQ(ops.bytes.at({ir::ALL_GATHER, c}), params * 2);
            }
          }
          EXPECT_EQ(ops.count.at(distributed ? ir::REDUCE_SCATTER : ir::ALL_REDUCE), buckets);
          EXPECT_EQ(ops.count.count(ir::ALL_GATHER) ? ops.count.at(ir::ALL_GATHER) : 0, distributed ? buckets : 0);
          if (size == 1) {
            EXPECT_EQ(buckets, static_cast<int>(s.layers / s.pp));
          }
        }
      }
    }
  }
}

// In the last backward pass (1F1B: B and W together; ZB-H1: the last W) each
// bucket but the last is handed to the DP stream right after its lowest
// layer's kernels, before the kernels of the layers below it.
TEST(DpBuckets, ReductionsIssuedDuringTheLastBackward) {
  for (auto kind : {scenario::ONE_F_ONE_B, scenario::ZB_H1}) {
    SCOPED_TRACE(scenario::ScheduleKind_Name(kind));
    const Small s = eight_layers(kind);
    const int32_t m = static_cast<int32_t>(s.global_batch / (s.micro_batch * s.dp));
    const ir::Program p = build(s, 1);  // one bucket per layer
    for (const auto& c : p.classes()) {
      const auto& ops = find_stream(c, "compute")->ops();
      int mid_pass = 0, last_layer = -1;
      for (int i = 0; i < ops.size(); ++i) {
        const auto& op = ops[i];
        if (op.has_compute() && op.phase() == ir::BACKWARD_WEIGHT && op.microbatch() == m - 1 && op.layer() >= 0)
          last_layer = op.layer();
        if (!(op.has_record() && op.phase() == ir::DP_SYNC)) continue;
        // A later weight-gradient kernel of the same pass, of a lower layer?
        for (int j = i + 1; j < ops.size(); ++j) {
          const auto& later = ops[j];
          if (later.has_compute() && later.phase() == ir::BACKWARD_WEIGHT && later.microbatch() == m - 1 &&
              later.layer() >= 0) {
            EXPECT_LT(later.layer(), last_layer);
            ++mid_pass;
            break;
          }
        }
      }
      EXPECT_EQ(mid_pass, s.layers / s.pp - 1) << c.name();
    }
  }
}

TEST(DpBuckets, BucketsHideGradientReduction) {
  const testing::TrivialCost cost;
  for (auto kind : {scenario::ONE_F_ONE_B, scenario::ZB_H1}) {
    SCOPED_TRACE(scenario::ScheduleKind_Name(kind));
    const Small s = eight_layers(kind);
    const auto one = engine::Simulator(build(s, kHuge), cost).run().end_time;
    const auto per_layer = engine::Simulator(build(s, 1), cost).run().end_time;
    EXPECT_LT(per_layer, one);
    // Without overlap the buckets change nothing.
    Small plain = s;
    plain.overlap_grad = false;
    plain.overlap_param = false;
    EXPECT_EQ(engine::Simulator(build(plain, 1), cost).run().end_time,
              engine::Simulator(build(plain, kHuge), cost).run().end_time);
  }
}

// GPT-3 175B, v = 12 one-layer chunks: every chunk is one bucket, so the
// program is the one-bucket-per-chunk program.
TEST(DpBuckets, OneLayerChunksUnchanged) {
  const Small s = testing::gpt3_3072();
  const ir::Program def = build(s, 0);
  const ir::Program one = build(s, kHuge);
  ASSERT_EQ(def.classes_size(), one.classes_size());
  for (int i = 0; i < def.classes_size(); ++i)
    EXPECT_EQ(def.classes(i).SerializeAsString(), one.classes(i).SerializeAsString()) << i;
}

}  // namespace
}  // namespace lacuna::compiler
