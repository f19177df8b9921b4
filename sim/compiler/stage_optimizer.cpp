// finalize_model_grads and the optimizer step of one stage
// (stage_builder.h; docs/compiler.md#optimizer-step).
#include "sim/compiler/fp8_weights.h"
#include "sim/compiler/stage_builder.h"
#include "sim/model/fp8.h"

namespace lacuna::compiler {

int64_t StageBuilder::updated_parameters(int64_t trained, int64_t expert) const {
  auto shard = [&](int64_t p, int64_t n) { return in_.distributed_optimizer ? (p + n - 1) / n : p; };
  return shard(trained - expert, in_.dp_cp) + shard(expert, std::max<int64_t>(in_.expert_dp, 1));
}

void StageBuilder::finalize_and_step() {
  const OpContext opt_ctx{ir::OPTIMIZER_STEP, 0, 0, -1};
  if (dp_ops_ || mirrored_) b_.wait(StreamId::kCompute, EventId::kDpToCompute, dp_records_, opt_ctx);
  // finalize_model_grads after the DP reduction: with SP the norms'
  // gradients all-reduced over TP (each rank saw its sequence shard); with
  // tied embeddings and pp > 1 the word embedding's gradient all-reduced
  // between the first and last stage.
  if (shape_.sequence_parallel && shape_.tp > 1 && sp_norm_parameters_ > 0) {
    model::CommPoint c;
    c.group = model::CommGroup::kTp;
    c.kind = ir::ALL_REDUCE;
    c.bytes = sp_norm_parameters_ * grad_bytes_;
    c.phase = ir::OPTIMIZER_STEP;
    em().collective_now(c, opt_ctx);
  }
  // The embedding group is Megatron's: the first and the last pipeline rank
  // (rank_layout.h), whichever virtual stages hold the tables. A rank that
  // holds both the first and the last stage (the V layout's rank 0) holds
  // both tables: nothing to exchange.
  if (p2p_ && !shape_.untied_output && first_pp_ != last_pp_)
    sync_now(ir::ALL_REDUCE, kSlotEmbedding, shape_.vocab_per_rank() * shape_.hidden * grad_bytes_, opt_ctx);
  // With the distributed optimizer each rank updates its 1/(dp·cp) shard.
  // Per module (each a multi-tensor apply over its own parameters, so that
  // encoder work stays attributable; frozen weights are not updated), in
  // Megatron's order: fp16 gradients copied to fp32 main gradients; with a
  // loss scale (fp16) unscale and the found-inf all-reduce read on the host;
  // the gradient norm's local reduction, its all-reduce read on the host, the
  // clip; Adam; the fp32 → bf16 copy of the master weights.
  // MoE: routed-expert parameters are sharded over expert DP instead.
  auto updated = [&](int64_t p, size_t mod) { return updated_parameters(p, mod == 0 ? expert_parameters_ : 0); };
  auto per_module = [&](auto make) {
    for (size_t mod = 0; mod < modules_.size(); ++mod) {
      if (trained_by_module_[mod] <= 0 && !(mod == 0 && in_.encoders.empty())) continue;
      ModuleStamp stamp(b_);
      for (const model::Kernel& k : make(updated(trained_by_module_[mod], mod))) em().kernel(k, opt_ctx);
      stamp.apply(static_cast<int32_t>(mod));
    }
  };
  // The gradient statistics group (rank_layout.h, kSlotGradNorm): every rank
  // with the distributed optimizer, else the tp × pp model-parallel ranks.
  const int64_t world = shape_.tp * in_.dp_cp * in_.pipeline.pp;
  const bool stats_group = in_.distributed_optimizer ? world > 1 : shape_.tp * in_.pipeline.pp > 1;
  auto grad_stats_all_reduce = [&]() {
    if (stats_group) sync_now(ir::ALL_REDUCE, kSlotGradNorm, model::kFp32, opt_ctx);
    b_.host_sync_next();  // .item()
  };
  if (!x_.grad_reduce_in_fp32())
    per_module([](int64_t p) { return std::vector<model::Kernel>{model::grad_to_fp32(p)}; });
  if (in_.precision == scenario::FP16) {
    per_module([](int64_t p) { return std::vector<model::Kernel>{model::grad_unscale(p)}; });
    grad_stats_all_reduce();
  }
  if (x_.clip_grad() > 0) {
    per_module([](int64_t p) { return std::vector<model::Kernel>{model::grad_norm(p)}; });
    grad_stats_all_reduce();
    per_module([](int64_t p) { return std::vector<model::Kernel>{model::grad_clip(p)}; });
  }
  per_module([](int64_t p) { return std::vector<model::Kernel>{model::adam_step(p), model::param_copy(p)}; });
  // FP8 weights (docs/fp8.md#weights): the once-per-step casts of the FP8
  // GEMMs' weights this rank holds (LLM layers of every virtual stage).
  if (shape_.fp8.linear()) {
    const int64_t w = fp8_rank_weights(in_);
    const int64_t master_shard = in_.distributed_optimizer ? (w + in_.dp_cp - 1) / in_.dp_cp : w;
    for (const model::Kernel& k : model::fp8_weight_casts(shape_.fp8, w, master_shard)) em().kernel(k, opt_ctx);
  }
  // Megatron-core reduces two step statistics over the model-parallel ranks
  // and reads each on the host (training.py: update_successful, grad norm).
  if (x_.step_stats_sync()) {
    grad_stats_all_reduce();
    grad_stats_all_reduce();
  }
}

}  // namespace lacuna::compiler
