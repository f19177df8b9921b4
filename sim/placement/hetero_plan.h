// Heterogeneous placement, private: the validated plan every other part of
// compile_heterogeneous works from. Each module has its own layout and rank
// set (MegatronMIMO); this file decides and checks how the encoders' data-
// parallel shards map onto the LLM's replicas (docs/placements.md,
// "Heterogeneous").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/compiler/rank_layout.h"
#include "sim/model/mllm.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement::hetero {

// How the batch shards of an encoder (u) and the LLM (v) relate: equal DP
// pairs shards 1:1, fan-in concatenates several encoder shards into one LLM
// replica, fan-out splits one encoder shard over several replicas.
enum class DpRelation { kEqual, kFanIn, kFanOut };

struct LlmPlan {
  compiler::ParallelDims dims;
  std::string rank_order;
  int64_t global_batch = 0;
  int64_t micro_batch = 0;
  int32_t microbatches = 0;         // per pipeline: global_batch / (micro_batch · dp)
  int64_t samples_per_replica = 0;  // global_batch / dp
  int64_t hidden = 0;
  bool distributed_optimizer = false;
  int32_t gpus_per_node = 8;
};

struct EncoderPlan {
  int e = 0;           // index in model.encoders
  int32_t module = 0;  // Op.module = e + 1
  std::string name;
  scenario::ModuleLayout layout;  // as written (ModuleInfo)
  compiler::ParallelDims dims;    // 0 in the layout read as 1
  std::string rank_order;
  int32_t first_rank = 0;
  bool colocated = false;  // same ranks as the LLM (first_rank 0)
  bool frozen = false;
  bool sequence_parallel = false;  // only with tp > 1
  scenario::Recompute recompute = scenario::RECOMPUTE_NONE;
  int64_t recompute_num_layers = 0;  // full recompute: first N layers of each stage; 0 all
  DpRelation relation = DpRelation::kEqual;
  // dp_e / dp_llm for fan-in, dp_llm / dp_e for fan-out, 1 for equal.
  int32_t ratio = 1;
  int64_t samples_per_shard = 0;         // global_batch / dp_e
  int64_t vision_tokens_per_sample = 0;  // after the projector's merge
  int64_t layers = 0;                    // encoder transformer layers
  int64_t layers_per_stage = 0;          // layers / pp_e
  // Colocated: samples per encoder microbatch and microbatches per shard
  // (the shard's samples in microbatches of min(micro_batch, shard samples)).
  // Non-colocated: encoder microbatch i carries the samples of LLM
  // microbatch i of the replicas the shard serves.
  int64_t microbatch_samples = 0;
  int32_t microbatches = 0;

  int32_t world() const { return dims.world(); }
  int32_t last_rank_excl() const { return first_rank + world(); }
  model::ShardSpec shard() const { return {dims.tp, dims.cp, dims.pp, sequence_parallel}; }
  // The projector's output is split over this shard's ranks (sequence
  // parallelism over TP, or CP over the tokens): it must be gathered before
  // it is whole on one rank.
  bool sharded_output() const { return dims.cp > 1 || (sequence_parallel && dims.tp > 1); }
  // Bytes of this encoder's vision embeddings for `samples` samples at the
  // LLM's width, bf16 (model::boundary_bytes restricted to one encoder).
  int64_t boundary_bytes(int64_t samples, int64_t llm_hidden) const {
    return samples * vision_tokens_per_sample * llm_hidden * 2;
  }
};

struct Plan {
  LlmPlan llm;
  std::vector<EncoderPlan> encoders;
  bool colocated = false;   // every encoder colocated (else every encoder on an island)
  int32_t total_ranks = 0;  // LLM world + islands
};

// Validates the encoders' layouts against the LLM (lacuna::Error naming the
// scenario field for everything the compiler cannot build) and derives the
// plan. Every encoder has a layout (placement::compile_as checks that).
Plan make_plan(const scenario::LoadedScenario& scenario);

// Global ranks of one encoder shard (dp coordinate `shard`) at pipeline
// stage `stage`, ascending.
std::vector<int32_t> encoder_shard_ranks(const EncoderPlan& enc, int32_t shard, int32_t stage);
// Global ranks of one LLM data-parallel replica (every tp, cp, pp), ascending.
std::vector<int32_t> llm_replica_ranks(const LlmPlan& llm, int32_t replica);

// Colocated mapping: the LLM replica whose ranks hold encoder shard `shard`
// (fan-in, equal), or the encoder shard whose ranks hold replica `replica`
// (fan-out). make_plan has checked that containment holds.
int32_t colocated_replica_of_shard(const Plan& plan, const EncoderPlan& enc, int32_t shard);
int32_t colocated_shard_of_replica(const Plan& plan, const EncoderPlan& enc, int32_t replica);

}  // namespace lacuna::placement::hetero
