// One stage's data-parallel work and synchronous collectives
// (stage_builder.h): parameter gathers and gradient reductions by bucket,
// the NaN checks, the gradient buffer's zeroing, the batch broadcast over TP
// and the loss reduction.
#include <algorithm>
#include <numeric>

#include "sim/compiler/stage_builder.h"
#include "sim/model/fp8.h"

namespace lacuna::compiler {

void StageBuilder::dp_collective(ir::CollectiveKind kind, int32_t slot, int32_t chunk, int64_t bytes,
                                 int32_t module, const OpContext& base_ctx) {
  OpContext ctx = base_ctx;
  ctx.chunk = chunk;
  ModuleStamp stamp(b_);
  auto* c = b_.add(StreamId::kDp, ctx)->mutable_collective();
  c->set_kind(kind);
  c->set_group_slot(slot);
  c->set_bytes(bytes);
  dp_records_ = b_.record(StreamId::kDp, EventId::kDpToCompute, ctx);
  stamp.apply(module);
}

// A collective that the compute stream hands off and then waits for at
// once: the small synchronous torch.distributed calls (the loss reported per
// microbatch, the tied embedding's gradients, the gradient norm and the step
// statistics) run on the sync stream, apart from the DP buckets.
void StageBuilder::sync_now(ir::CollectiveKind kind, int32_t slot, int64_t bytes, const OpContext& ctx) {
  const int64_t n = b_.record(StreamId::kCompute, EventId::kComputeToSync, ctx);
  b_.wait(StreamId::kSync, EventId::kComputeToSync, n, ctx);
  auto* c = b_.add(StreamId::kSync, ctx)->mutable_collective();
  c->set_kind(kind);
  c->set_group_slot(slot);
  c->set_bytes(bytes);
  b_.wait(StreamId::kCompute, EventId::kSyncToCompute, b_.record(StreamId::kSync, EventId::kSyncToCompute, ctx), ctx);
}

void StageBuilder::bucket_reduction(int32_t chunk, const DpBucket& bucket) {
  const ir::CollectiveKind kind = in_.distributed_optimizer ? ir::REDUCE_SCATTER : ir::ALL_REDUCE;
  if (bucket.expert_parameters <= 0) {
    dp_collective(kind, kSlotDpCp, chunk, bucket.parameters * grad_bytes_, bucket.module, dp_ctx_);
    return;
  }
  // MoE: the routed experts' gradients are reduced over the expert-DP group
  // (their replicas), the rest over dp × cp (Megatron's DDP: expert
  // parameters in buffers of their own, reduced over
  // expert_data_parallel_group; distributed_data_parallel.py).
  const int64_t dense = bucket.parameters - bucket.expert_parameters;
  if (dense > 0) dp_collective(kind, kSlotDpCp, chunk, dense * grad_bytes_, bucket.module, dp_ctx_);
  if (in_.expert_dp > 1)
    dp_collective(kind, kSlotExpertDp, chunk, bucket.expert_parameters * grad_bytes_, bucket.module, dp_ctx_);
}

// --check-for-nan-in-loss-and-grad: before a bucket's reduction the host
// reads its norm (isnan, isinf): a reduction kernel over the bucket, then
// the host waits for it.
void StageBuilder::bucket_nan_check(const DpBucket& bucket) {
  if (!x_.nan_check()) return;
  ModuleStamp stamp(b_);
  model::Kernel k = model::grad_norm(bucket.parameters);
  k.phase = ir::DP_SYNC;
  em().kernel(k, dp_ctx_);
  b_.host_sync_next();
  stamp.apply(bucket.module);
}

// Hands buckets to the DP stream after the compute stream's work so far.
void StageBuilder::hand_off(const std::vector<const DpBucket*>& group, int32_t chunk) {
  for (const DpBucket* bk : group) bucket_nan_check(*bk);
  const int64_t n = b_.record(StreamId::kCompute, EventId::kComputeToDp, dp_ctx_);
  b_.wait(StreamId::kDp, EventId::kComputeToDp, n, dp_ctx_);
  for (const DpBucket* bk : group) bucket_reduction(chunk, *bk);
}

// Parameter gathers go out at iteration start, chunk by chunk and bucket by
// bucket in forward order; gathered_[c][k] is the kDpToCompute value after
// bucket k's gather. Without overlap the gathers belong to the previous step
// (Megatron gathers synchronously inside optimizer.step(), before the next
// train_step zeroes the gradient buffer): compute waits for them before
// anything else.
void StageBuilder::gather_parameters() {
  gathered_.resize(static_cast<size_t>(chunks_));
  if (!dp_ops_ || !in_.distributed_optimizer) return;
  for (int32_t c : gather_order_)
    if (gather_after_[static_cast<size_t>(c)] < 0) gather_chunk(c);
  if (!in_.overlap_param_gather) {
    b_.wait(StreamId::kCompute, EventId::kDpToCompute, dp_records_, OpContext{ir::DP_SYNC, 0, 0, -1});
  }
}

// A schedule file's UNSHARD after pass i (a lookahead gather, with
// overlap_param_gather only: dp_points_of): the DP stream issues the chunk's
// gathers once the compute stream is through pass i. lacuna has no host
// clock on a communication stream, so "dispatched when the host reaches this
// point" becomes "when the GPU has finished the pass before it"; the
// chunk's first forward waits for each bucket as at iteration start.
void StageBuilder::gather_after_pass(int32_t i) {
  if (!dp_ops_ || !in_.distributed_optimizer) return;
  bool first = true;
  for (int32_t c : gather_order_) {
    if (gather_after_[static_cast<size_t>(c)] != i) continue;
    if (first) {
      const int64_t v = b_.record(StreamId::kCompute, EventId::kComputeToDp, dp_ctx_);
      b_.wait(StreamId::kDp, EventId::kComputeToDp, v, dp_ctx_);
      first = false;
    }
    gather_chunk(c);
  }
}

void StageBuilder::gather_chunk(int32_t c) {
  gathered_[c].resize(buckets_[c].size());
  for (size_t k = buckets_[c].size(); k-- > 0;) {
    // --fp8-param-gather: the FP8 GEMMs' weights travel as 1 byte (docs/fp8.md#weights).
    const DpBucket& bk = buckets_[c][k];
    const model::Fp8Weights fp8 = shape_.fp8.param_gather && bk.module == 0
                                      ? model::fp8_layers_weights(shape_, bk.first_layer, bk.count)
                                      : model::Fp8Weights{};
    // MoE: the routed experts' shards are gathered over expert DP.
    const int64_t dense = bk.parameters - bk.expert_parameters;
    if (bk.expert_parameters <= 0 || dense > 0)
      dp_collective(ir::ALL_GATHER, kSlotDpCp, c, dense * model::kBf16 - fp8.dense, bk.module, dp_ctx_);
    if (bk.expert_parameters > 0 && in_.expert_dp > 1)
      dp_collective(ir::ALL_GATHER, kSlotExpertDp, c, bk.expert_parameters * model::kBf16 - fp8.expert, bk.module,
                    dp_ctx_);
    gathered_[c][k] = dp_records_;
  }
}

// The fp32 gradient buffer is zeroed at the start of train_step
// (zero_grad_buffer), one memset per module's buffer: gradient-sync
// housekeeping (phase DP_SYNC), ahead of every pass.
void StageBuilder::zero_grad_buffers() {
  const OpContext zero_ctx{ir::DP_SYNC, 0, 0, -1};
  for (size_t mod = 0; mod < modules_.size(); ++mod) {
    if (trained_by_module_[mod] <= 0) continue;
    ModuleStamp stamp(b_);
    em().kernel(model::grad_zero(trained_by_module_[mod], grad_bytes_), zero_ctx);
    stamp.apply(static_cast<int32_t>(mod));
  }
}

// A schedule file's REDUCE_GRAD after a later pass than the chunk's last
// backward (with overlap_grad_reduce): every bucket of the chunk goes to the
// DP stream at once, after pass `i`.
void StageBuilder::reduce_after_pass(int32_t i) {
  if (!dp_ops_ || !in_.overlap_grad_reduce) return;
  for (int32_t c : reduce_order_) {
    if (reduce_after_[c] != i || last_backward_[c] == i) continue;
    std::vector<const DpBucket*> all;
    for (const DpBucket& bucket : buckets_[c]) all.push_back(&bucket);
    hand_off(all, c);
  }
}

// Without overlap_grad_reduce: finalize_model_grads reduces every chunk's
// buckets, synchronously, after the last backward.
void StageBuilder::reduce_after_last_backward() {
  if (!dp_ops_ || in_.overlap_grad_reduce) return;
  std::vector<const DpBucket*> all;
  std::vector<int32_t> chunk_of;
  for (int32_t c : reduce_order_)
    for (const DpBucket& bucket : buckets_[c]) {
      all.push_back(&bucket);
      chunk_of.push_back(c);
    }
  for (const DpBucket* bk : all) bucket_nan_check(*bk);
  const int64_t n = b_.record(StreamId::kCompute, EventId::kComputeToDp, dp_ctx_);
  b_.wait(StreamId::kDp, EventId::kComputeToDp, n, dp_ctx_);
  for (size_t k = 0; k < all.size(); ++k) bucket_reduction(chunk_of[k], *all[k]);
}

// DualPipe's bidirectional layout (docs/schedules.md#dualpipe): chunk 0 of
// pipeline rank r holds model stage r, and chunk 1 of its mirror pp − 1 − r
// holds the same layers, so every stage's gradient exists twice and the two
// are summed before the optimizer step. The authors' example sums them after
// the step with an all-gather over the pipeline group and a local add
// (examples/example_dualpipe.py, "Check grads"); lacuna sums them with an
// all-reduce between the pair, one per chunk, on the DP stream after the
// data-parallel reduction (so, with the distributed optimizer, over the
// rank's 1/(dp·cp) shard). Both ranks of a pair issue them in ascending
// model stage, so their collectives match.
void StageBuilder::mirror_reductions() {
  if (!mirrored_) return;
  const int64_t n = b_.record(StreamId::kCompute, EventId::kComputeToDp, dp_ctx_);
  b_.wait(StreamId::kDp, EventId::kComputeToDp, n, dp_ctx_);
  std::vector<int32_t> order(static_cast<size_t>(chunks_));
  std::iota(order.begin(), order.end(), 0);
  auto model_stage_of = [&](int32_t c) {
    return schedule::model_stage(in_.pipeline, schedule::virtual_stage(in_.pipeline, in_.pp_rank, c));
  };
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return model_stage_of(x) < model_stage_of(y); });
  for (int32_t c : order) {
    const int64_t params =
        updated_parameters(trained_by_chunk_[static_cast<size_t>(c)], expert_by_chunk_[static_cast<size_t>(c)]);
    if (params > 0) dp_collective(ir::ALL_REDUCE, kSlotPpMirror, c, params * grad_bytes_, 0, dp_ctx_);
  }
}

// Each microbatch's batch reaches the TP ranks (docs/compiler.md#data):
// Megatron-LM 2021–2022 broadcasts the int64 tokens on every stage after a
// size exchange the host reads; Megatron-core broadcasts the first and last
// stage's tensors, the data loader's [b, 1, s, s] attention mask among them.
void StageBuilder::broadcast_batch(const OpContext& ctx) {
  const int64_t tokens = shape_.micro_batch * shape_.seq_length;
  auto broadcast = [&](int64_t bytes) {
    if (shape_.tp <= 1 || bytes <= 0) return;
    model::CommPoint c;
    c.group = model::CommGroup::kTp;
    c.kind = ir::BROADCAST;
    c.bytes = bytes;
    c.phase = ctx.phase;
    em().collective_now(c, ctx);
  };
  if (x_.batch_broadcast() == scenario::BROADCAST_TOKENS) {
    broadcast(8 * 8);    // the key sizes (a few int64)
    b_.host_sync_next();  // read on the host (.cpu())
    broadcast((tokens + shape_.micro_batch) * 8);  // text: b × (s + 1) int64
    return;
  }
  if (x_.batch_broadcast() != scenario::BROADCAST_TENSORS_WITH_MASK || !(first_pp_ || last_pp_)) return;
  const int64_t mask = shape_.micro_batch * shape_.seq_length * shape_.seq_length;  // bool [b, 1, s, s]
  if (first_pp_) {
    broadcast(tokens * 8);  // tokens
    broadcast(mask);
    broadcast(tokens * 8);  // position ids
  }
  if (last_pp_) {
    broadcast(tokens * 8);  // labels
    broadcast(tokens * 4);  // loss mask (fp32)
    if (!first_pp_) broadcast(mask);
  }
}

// The last stage reduces each microbatch's loss over DP for reporting
// (Megatron's average_losses_across_data_parallel_group / reporting_loss:
// two fp32), and with NaN checks the host reads it twice.
void StageBuilder::after_loss(const OpContext& ctx) {
  if (dp_ops_) sync_now(ir::ALL_REDUCE, kSlotDpCp, 2 * model::kFp32, ctx);
  if (x_.nan_check()) b_.host_sync_next();
}

}  // namespace lacuna::compiler
