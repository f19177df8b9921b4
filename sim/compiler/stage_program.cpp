#include "sim/compiler/stage_program.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "sim/compiler/class_builder.h"
#include "sim/compiler/rank_layout.h"
#include "sim/model/accounting.h"
#include "sim/model/kernels.h"
#include "sim/model/layer.h"

namespace lacuna::compiler {
namespace {

using model::CommPoint;
using model::Kernel;
using model::Step;
using schedule::Pass;

enum class Filter { kAll, kInputOnly, kWeightOnly };

bool keep(const Step& step, Filter f) {
  if (f == Filter::kAll) return true;
  const Kernel* k = std::get_if<Kernel>(&step);
  const bool weight = k != nullptr && k->phase == ir::BACKWARD_WEIGHT;
  return f == Filter::kWeightOnly ? weight : !weight;
}

// Turns model steps into stream ops. A CommPoint becomes
//   compute: record → comm stream: wait, collective, record
// and a pending wait that the compute stream takes right before the kernel
// consuming the result (CommPoint::consumer), or at the end of the pass.
class Emitter {
 public:
  explicit Emitter(ClassBuilder& b) : b_(b) {}

  struct Emitted {
    int32_t last = -1;            // last compute op emitted (index in the compute stream)
    int32_t last_recompute = -1;  // last RECOMPUTE-phase kernel
  };

  Emitted emit(const std::vector<Step>& steps, Filter filter, const OpContext& ctx) {
    Emitted out;
    for (const Step& step : steps) {
      if (!keep(step, filter)) continue;
      if (const auto* k = std::get_if<Kernel>(&step)) {
        kernel(*k, ctx);
        out.last = b_.last_index(StreamId::kCompute);
        if (k->phase == ir::RECOMPUTE) out.last_recompute = out.last;
      } else {
        comm(std::get<CommPoint>(step), ctx);
      }
    }
    return out;
  }

  void kernel(const Kernel& k, OpContext ctx) {
    ctx.phase = k.phase;
    take_pending(ctx, [&](const Pending& p) {
      return p.consumer == ir::ROLE_UNSPECIFIED ? k.phase != ir::BACKWARD_WEIGHT : p.consumer == k.role;
    });
    auto* c = b_.add(StreamId::kCompute, ctx)->mutable_compute();
    c->set_op_class(k.op_class);
    c->set_role(k.role);
    for (int64_t d : k.shape) c->add_shape(d);
    c->set_flops(k.flops);
    c->set_bytes(k.bytes);
  }

  // Waits for every outstanding collective (end of a pass: what follows, a
  // send or the next pass, needs all of it).
  void flush(const OpContext& ctx) {
    take_pending(ctx, [](const Pending&) { return true; });
  }

  void add_memory(int32_t compute_index, int64_t delta) {
    if (compute_index < 0 || delta == 0) return;
    auto* c = b_.op(StreamId::kCompute, compute_index)->mutable_compute();
    c->set_memory_delta_bytes(c->memory_delta_bytes() + delta);
  }

 private:
  struct Pending {
    ir::KernelRole consumer;
    EventId event;
    int64_t value;
  };

  void comm(const CommPoint& c, OpContext ctx) {
    ctx.phase = c.phase;
    const bool tp = c.group == model::CommGroup::kTp;
    const StreamId stream = tp ? StreamId::kTp : StreamId::kCp;
    const EventId to = tp ? EventId::kComputeToTp : EventId::kComputeToCp;
    const EventId from = tp ? EventId::kTpToCompute : EventId::kCpToCompute;
    const int64_t ready = b_.record(StreamId::kCompute, to, ctx);
    b_.wait(stream, to, ready, ctx);
    auto* coll = b_.add(stream, ctx)->mutable_collective();
    coll->set_kind(c.kind);
    coll->set_group_slot(tp ? kSlotTp : kSlotCp);
    coll->set_bytes(c.bytes);
    pending_.push_back({c.consumer, from, b_.record(stream, from, ctx)});
  }

  template <class Pred>
  void take_pending(const OpContext& ctx, Pred pred) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (pred(*it)) {
        b_.wait(StreamId::kCompute, it->event, it->value, ctx);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }

  ClassBuilder& b_;
  std::vector<Pending> pending_;
};

int32_t num_virtual_stages(const StageInputs& in) { return in.pipeline.pp * in.pipeline.virtual_stages; }

// Ops one step list turns into: a kernel is one op, a collective five
// (record, wait, collective, record, wait).
int64_t count_ops(const std::vector<Step>& steps, Filter filter) {
  int64_t n = 0;
  for (const Step& s : steps)
    if (keep(s, filter)) n += std::holds_alternative<Kernel>(s) ? 1 : 5;
  return n;
}

}  // namespace

int64_t stage_parameters(const StageInputs& in, int32_t virtual_stage) {
  const LayerRange& r = in.stages[static_cast<size_t>(virtual_stage)];
  int64_t p = r.count * model::layer_parameters(in.shape);
  if (virtual_stage == 0) p += model::embedding_parameters(in.shape);
  if (virtual_stage == num_virtual_stages(in) - 1) p += model::head_parameters(in.shape);
  return p;
}

int64_t ddp_bucket_parameters(const StageInputs& in) {
  if (!in.overlap_grad_reduce) return std::numeric_limits<int64_t>::max();
  if (in.ddp_bucket_size > 0) return in.ddp_bucket_size;
  return std::max<int64_t>(40'000'000, 1'000'000 * in.dp_cp);
}

std::vector<DpBucket> dp_buckets(const StageInputs& in, int32_t virtual_stage) {
  const LayerRange& r = in.stages[static_cast<size_t>(virtual_stage)];
  if (r.count <= 0) return {DpBucket{r.first, 0, stage_parameters(in, virtual_stage)}};
  const int64_t size = ddp_bucket_parameters(in);
  const int64_t per_layer = model::layer_parameters(in.shape);
  const int64_t last = r.first + r.count - 1;
  std::vector<DpBucket> out;
  DpBucket cur;
  for (int64_t l = last; l >= r.first; --l) {
    cur.parameters += per_layer;
    if (l == last && virtual_stage == num_virtual_stages(in) - 1) cur.parameters += model::head_parameters(in.shape);
    if (l == r.first && virtual_stage == 0) cur.parameters += model::embedding_parameters(in.shape);
    cur.first_layer = l;
    ++cur.count;
    if (cur.parameters >= size || l == r.first) {
      out.push_back(cur);
      cur = DpBucket{};
    }
  }
  return out;
}

int64_t estimate_ops(const StageInputs& in) {
  const auto& s = in.shape;
  const int64_t fwd = count_ops(model::layer_forward(s), Filter::kAll);
  const auto bwd_steps = model::layer_backward(s, in.recompute);
  const int64_t bwd = count_ops(bwd_steps, Filter::kAll);
  const int64_t bwd_b = count_ops(bwd_steps, Filter::kInputOnly);
  const int64_t bwd_w = count_ops(bwd_steps, Filter::kWeightOnly);
  constexpr int64_t kPassOverhead = 16;  // p2p, head / embedding, DP waits
  int64_t n = 0;
  for (const auto& a : in.actions) {
    const int64_t layers =
        in.stages[static_cast<size_t>(schedule::virtual_stage(in.pipeline, in.pp_rank, a.chunk))].count;
    const int64_t per_layer = a.pass == Pass::kForward          ? fwd
                              : a.pass == Pass::kBackward       ? bwd
                              : a.pass == Pass::kBackwardInput  ? bwd_b
                                                                : bwd_w;
    n += layers * per_layer + kPassOverhead;
  }
  return n;
}

StageProgram build_stage_program(const StageInputs& in) {
  ClassBuilder b;
  Emitter e(b);
  const auto& s = in.shape;
  const int32_t pp = in.pipeline.pp, v = in.pipeline.virtual_stages, m = in.pipeline.microbatches;
  const int32_t num_vs = num_virtual_stages(in);
  const bool p2p = pp > 1;
  // Activations / gradients between stages: one hidden state, sequence-sharded
  // over TP with SP (Megatron's scatter/gather optimisation).
  const int64_t p2p_bytes = s.hidden_bytes() / (s.sequence_parallel ? s.tp : 1);
  auto tag = [&](int64_t direction, int64_t receiver_stage, int64_t mb) {
    return (direction * num_vs + receiver_stage) * m + mb;
  };
  // Channel 0 carries activations to pp_next, channel 1 gradients to pp_prev;
  // each direction has its own send and receive stream (rendezvous sends block
  // their stream) and the compute stream waits on the receive's record.
  auto receive_into_compute = [&](StreamId stream, EventId event, int32_t peer_slot, int32_t channel,
                                  int64_t tag_value, const OpContext& ctx) {
    auto* r = b.add(stream, ctx)->mutable_recv();
    r->set_peer_slot(peer_slot);
    r->set_bytes(p2p_bytes);
    r->set_channel(channel);
    r->set_tag(tag_value);
    b.wait(StreamId::kCompute, event, b.record(stream, event, ctx), ctx);
  };
  auto send_from_compute = [&](StreamId stream, EventId event, int32_t peer_slot, int32_t channel,
                               int64_t tag_value, const OpContext& ctx) {
    b.wait(stream, event, b.record(StreamId::kCompute, event, ctx), ctx);
    auto* snd = b.add(stream, ctx)->mutable_send();
    snd->set_peer_slot(peer_slot);
    snd->set_bytes(p2p_bytes);
    snd->set_channel(channel);
    snd->set_tag(tag_value);
  };
  const bool dp_ops = in.dp_cp > 1;
  const int64_t head_bytes = model::head_activation_bytes(s);
  const auto layer_fwd = model::layer_forward(s);
  const auto layer_bwd = model::layer_backward(s, in.recompute);
  const auto head_fwd = model::head_forward(s);
  const auto head_bwd = model::head_backward(s);
  const auto emb_fwd = model::embedding_forward(s);
  const auto emb_bwd = model::embedding_backward(s);

  std::vector<int32_t> first_forward(v, -1), last_backward(v, -1);
  for (int32_t i = 0; i < static_cast<int32_t>(in.actions.size()); ++i) {
    const auto& a = in.actions[i];
    if (a.pass == Pass::kForward && first_forward[a.chunk] < 0) first_forward[a.chunk] = i;
    if (a.pass == Pass::kBackward || a.pass == Pass::kBackwardWeight) last_backward[a.chunk] = i;
  }
  // Gradient reductions go out in the order chunks finish their backward.
  std::vector<int32_t> reduce_order(v);
  std::iota(reduce_order.begin(), reduce_order.end(), 0);
  std::stable_sort(reduce_order.begin(), reduce_order.end(),
                   [&](int32_t x, int32_t y) { return last_backward[x] < last_backward[y]; });

  int64_t dp_records = 0;
  const OpContext dp_ctx{ir::DP_SYNC, 0, 0, -1};
  auto dp_collective = [&](ir::CollectiveKind kind, int32_t chunk, int64_t bytes) {
    OpContext ctx = dp_ctx;
    ctx.chunk = chunk;
    auto* c = b.add(StreamId::kDp, ctx)->mutable_collective();
    c->set_kind(kind);
    c->set_group_slot(kSlotDpCp);
    c->set_bytes(bytes);
    dp_records = b.record(StreamId::kDp, EventId::kDpToCompute, ctx);
  };
  auto chunk_parameters = [&](int32_t chunk) {
    return stage_parameters(in, schedule::virtual_stage(in.pipeline, in.pp_rank, chunk));
  };
  // Gradients are reduced in fp32 (Megatron's main_grad buffer, 4 B/param);
  // parameters gathered in bf16 (2 B/param).
  // DP buckets per chunk, gradient-ready order (bucket 0 holds the last layers).
  std::vector<std::vector<DpBucket>> buckets(v);
  for (int32_t c = 0; c < v; ++c) buckets[c] = dp_buckets(in, schedule::virtual_stage(in.pipeline, in.pp_rank, c));
  auto bucket_reduction = [&](int32_t chunk, const DpBucket& bucket) {
    dp_collective(in.distributed_optimizer ? ir::REDUCE_SCATTER : ir::ALL_REDUCE, chunk,
                  bucket.parameters * model::kFp32);
  };
  // Parameter gathers go out at iteration start, chunk by chunk and bucket by
  // bucket in forward order; gathered[c][k] is the kDpToCompute value after
  // bucket k's gather.
  std::vector<std::vector<int64_t>> gathered(v);
  if (dp_ops && in.distributed_optimizer)
    for (int32_t c = 0; c < v; ++c) {
      gathered[c].resize(buckets[c].size());
      for (size_t k = buckets[c].size(); k-- > 0;) {
        dp_collective(ir::ALL_GATHER, c, buckets[c][k].parameters * model::kBf16);
        gathered[c][k] = dp_records;
      }
    }

  for (int32_t i = 0; i < static_cast<int32_t>(in.actions.size()); ++i) {
    const auto& a = in.actions[i];
    const int32_t vs = schedule::virtual_stage(in.pipeline, in.pp_rank, a.chunk);
    const LayerRange& range = in.stages[static_cast<size_t>(vs)];
    OpContext ctx{ir::FORWARD, a.microbatch, a.chunk, -1};
    auto layer_ctx = [&](int64_t layer) {
      OpContext c = ctx;
      c.layer = static_cast<int32_t>(layer);
      return c;
    };
    if (a.pass == Pass::kForward) {
      // Overlapped: the chunk's first forward waits for each bucket's gather
      // right before the bucket's first layer (the first bucket: before the
      // pass), so only the very first bucket is exposed. Not overlapped: all
      // gathers before any compute.
      const bool gather_waits =
          dp_ops && in.distributed_optimizer && in.overlap_param_gather && i == first_forward[a.chunk];
      const auto& fwd_buckets = buckets[a.chunk];
      if (gather_waits)
        b.wait(StreamId::kCompute, EventId::kDpToCompute, gathered[a.chunk][fwd_buckets.size() - 1], ctx);
      if (dp_ops && in.distributed_optimizer && !in.overlap_param_gather && i == 0)
        b.wait(StreamId::kCompute, EventId::kDpToCompute, dp_records, ctx);
      if (p2p && vs > 0) {
        receive_into_compute(StreamId::kRecvFwd, EventId::kRecvFwdToCompute, kSlotPpPrev, 0,
                             tag(0, vs, a.microbatch), ctx);
      }
      if (vs == 0) e.emit(emb_fwd, Filter::kAll, ctx);
      for (int64_t l = range.first; l < range.first + range.count; ++l) {
        if (gather_waits)
          for (size_t k = 0; k + 1 < fwd_buckets.size(); ++k)
            if (fwd_buckets[k].first_layer == l) b.wait(StreamId::kCompute, EventId::kDpToCompute, gathered[a.chunk][k], ctx);
        e.add_memory(e.emit(layer_fwd, Filter::kAll, layer_ctx(l)).last, in.layer_activation_bytes);
      }
      if (vs == num_vs - 1) e.add_memory(e.emit(head_fwd, Filter::kAll, ctx).last, head_bytes);
      e.flush(ctx);
      if (p2p && vs < num_vs - 1) {
        send_from_compute(StreamId::kSendFwd, EventId::kComputeToSendFwd, kSlotPpNext, 0,
                          tag(0, vs + 1, a.microbatch), ctx);
      }
    } else {
      ctx.phase = a.pass == Pass::kBackwardWeight ? ir::BACKWARD_WEIGHT : ir::BACKWARD_INPUT;
      const bool produces_grad = a.pass != Pass::kBackwardWeight;
      const bool finishes = a.pass != Pass::kBackwardInput;
      const Filter filter = a.pass == Pass::kBackward        ? Filter::kAll
                            : a.pass == Pass::kBackwardInput ? Filter::kInputOnly
                                                             : Filter::kWeightOnly;
      if (p2p && produces_grad && vs < num_vs - 1) {
        receive_into_compute(StreamId::kRecvBwd, EventId::kRecvBwdToCompute, kSlotPpNext, 1,
                             tag(1, vs, a.microbatch), ctx);
      }
      if (vs == num_vs - 1) {
        const auto out = e.emit(head_bwd, filter, ctx);
        if (finishes) e.add_memory(out.last, -head_bytes);
      }
      // The chunk's last weight-gradient pass hands each bucket but the last
      // to the DP stream as soon as its layers' kernels are out (Megatron's
      // overlap_grad_reduce); the last bucket goes after the pass, as below.
      const bool reduces = dp_ops && in.overlap_grad_reduce && i == last_backward[a.chunk];
      const auto& bwd_buckets = buckets[a.chunk];
      size_t reduced = 0;
      for (int64_t l = range.first + range.count - 1; l >= range.first; --l) {
        const auto out = e.emit(layer_bwd, filter, layer_ctx(l));
        e.add_memory(out.last_recompute, in.recompute_activation_bytes);
        if (finishes) e.add_memory(out.last, -(in.layer_activation_bytes + in.recompute_activation_bytes));
        if (reduces && reduced + 1 < bwd_buckets.size() && bwd_buckets[reduced].first_layer == l) {
          const int64_t n = b.record(StreamId::kCompute, EventId::kComputeToDp, dp_ctx);
          b.wait(StreamId::kDp, EventId::kComputeToDp, n, dp_ctx);
          bucket_reduction(a.chunk, bwd_buckets[reduced++]);
        }
      }
      if (vs == 0) e.emit(emb_bwd, filter, ctx);
      e.flush(ctx);
      if (p2p && produces_grad && vs > 0) {
        send_from_compute(StreamId::kSendBwd, EventId::kComputeToSendBwd, kSlotPpPrev, 1,
                          tag(1, vs - 1, a.microbatch), ctx);
      }
      if (reduces) {
        const int64_t n = b.record(StreamId::kCompute, EventId::kComputeToDp, dp_ctx);
        b.wait(StreamId::kDp, EventId::kComputeToDp, n, dp_ctx);
        for (; reduced < bwd_buckets.size(); ++reduced) bucket_reduction(a.chunk, bwd_buckets[reduced]);
      }
    }
  }
  if (dp_ops && !in.overlap_grad_reduce) {
    const int64_t n = b.record(StreamId::kCompute, EventId::kComputeToDp, dp_ctx);
    b.wait(StreamId::kDp, EventId::kComputeToDp, n, dp_ctx);
    for (int32_t c : reduce_order)
      for (const DpBucket& bucket : buckets[c]) bucket_reduction(c, bucket);
  }
  int64_t parameters = 0;
  for (int32_t c = 0; c < v; ++c) parameters += chunk_parameters(c);
  const OpContext opt_ctx{ir::OPTIMIZER_STEP, 0, 0, -1};
  if (dp_ops) b.wait(StreamId::kCompute, EventId::kDpToCompute, dp_records, opt_ctx);
  // With the distributed optimizer each rank updates its 1/(dp·cp) shard.
  const int64_t updated = in.distributed_optimizer ? (parameters + in.dp_cp - 1) / in.dp_cp : parameters;
  e.kernel(model::adam_step(updated), opt_ctx);

  StageProgram out;
  out.parameters = parameters;
  out.rank_class = b.finish("pp" + std::to_string(in.pp_rank));
  return out;
}

}  // namespace lacuna::compiler
