// FP8 delayed scaling's amax reductions in a stage's passes
// (docs/fp8.md#delayed-scaling-amax-reduction; model/fp8.h says what Megatron-Core
// and Transformer Engine run).
#include "sim/compiler/stage_builder.h"
#include "sim/model/fp8.h"

namespace lacuna::compiler {

// The FP8 GEMMs this rank holds, over all its chunks: Transformer Engine's
// global amax buffer registers every module once (per recipe and group), so
// each reduction carries the whole rank's amaxes, whichever chunk ran.
void StageBuilder::plan_amax_reductions() {
  const model::Fp8Plan& p = shape_.fp8;
  if (!model::fp8_delayed_amax_reduction(p)) return;
  model::LayerShape dense = shape_, moe = shape_;
  dense.moe_layer = false;
  moe.moe_layer = true;
  const int64_t dense_gemms = model::fp8_layer_gemms(dense);
  const int64_t moe_gemms = shape_.moe.enabled() ? model::fp8_layer_gemms(moe) : 0;
  for (int32_t c = 0; c < chunks_; ++c)
    for (const Segment& seg : segments_[schedule::virtual_stage(in_.pipeline, in_.pp_rank, c)])
      if (seg.module == 0)
        for (int64_t l = seg.first; l < seg.first + seg.count; ++l)
          amax_gemms_ += llm_.is_moe(l) ? moe_gemms : dense_gemms;
  // tp × cp × dp (in_.dp_cp is dp × cp), or tp × cp. A group of this rank
  // alone: TE skips the all-reduce (world size 1); the update still runs.
  amax_group_ = shape_.tp * (p.tp_only_amax_reduction ? shape_.cp : in_.dp_cp) > 1;
}

// The compute stream hands the concatenated amaxes to a MAX all-reduce over
// the amax group and waits for it (TE calls torch.distributed.all_reduce
// with async_op=False), then runs the fused history and scale update.
void StageBuilder::amax_reduction(int32_t i, bool forward, const OpContext& ctx) {
  if (amax_gemms_ <= 0) return;
  if (in_.amax_passes && !(*in_.amax_passes)[static_cast<size_t>(i)]) return;
  const int64_t values = model::fp8_delayed_amax_values(amax_gemms_, forward);
  em().flush(ctx);
  if (amax_group_) sync_now(ir::ALL_REDUCE, kSlotAmax, values * model::kFp32, ctx);
  em().kernel(model::fp8_amax_update(ctx.phase, values, shape_.fp8.amax_history_len), ctx);
}

}  // namespace lacuna::compiler
