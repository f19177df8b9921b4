#include "sim/compiler/stage_program.h"

#include <algorithm>
#include <array>
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
    take_pending(ctx, [&](const Pending& p) { return p.consumer.matches(k); });
    *b_.add(StreamId::kCompute, ctx)->mutable_compute() = model::to_compute(k);
  }

  // Waits for every outstanding collective (end of a pass: what follows, a
  // send or the next pass, needs all of it).
  void flush(const OpContext& ctx) {
    take_pending(ctx, [](const Pending&) { return true; });
  }

  // A TP / CP collective the compute stream waits for at once (a synchronous
  // torch.distributed call on the compute path).
  void collective_now(const CommPoint& c, const OpContext& ctx) {
    comm(c, ctx);
    flush(ctx);
  }

  void add_memory(int32_t compute_index, int64_t delta) {
    if (compute_index < 0 || delta == 0) return;
    auto* c = b_.op(StreamId::kCompute, compute_index)->mutable_compute();
    c->set_memory_delta_bytes(c->memory_delta_bytes() + delta);
  }

 private:
  struct Pending {
    model::Consumer consumer;
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

// What a module holds per layer / pre / post on one rank.
struct ModuleParameters {
  int64_t layer = 0, pre = 0, post = 0, post_frozen = 0;
  bool frozen = false;
};

ModuleParameters module_parameters(const StageInputs& in, int32_t module) {
  if (module == 0)
    return {model::layer_parameters(in.shape), model::embedding_parameters(in.shape),
            model::head_parameters(in.shape), 0, false};
  const ModuleWork& w = in.encoders.at(static_cast<size_t>(module - 1));
  return {w.layer_parameters, w.pre_parameters, w.post_parameters, w.post_frozen_parameters, w.frozen};
}

int64_t segment_parameters(const StageInputs& in, const Segment& seg, bool trained_only) {
  const ModuleParameters p = module_parameters(in, seg.module);
  const bool skip_frozen = trained_only && p.frozen;
  int64_t n = skip_frozen ? 0 : seg.count * p.layer + (seg.pre ? p.pre : 0);
  if (seg.post) n += trained_only ? p.post - p.post_frozen : p.post;
  return n;
}

// Labels the ops appended to the class since construction with a module
// (Op.module): the builder knows nothing of modules, and every op of a
// segment, its TP / CP collectives and DP bucket hand-offs included, belongs
// to the segment's module.
class ModuleStamp {
 public:
  explicit ModuleStamp(ClassBuilder& b) : b_(b) {
    for (size_t i = 0; i < start_.size(); ++i) start_[i] = b.last_index(static_cast<StreamId>(i)) + 1;
  }
  void apply(int32_t module) {
    if (module == 0) return;  // the default: LLM programs stay as they were
    for (size_t i = 0; i < start_.size(); ++i) {
      const auto id = static_cast<StreamId>(i);
      for (int32_t j = start_[i]; j <= b_.last_index(id); ++j) b_.op(id, j)->set_module(module);
    }
  }

 private:
  ClassBuilder& b_;
  std::array<int32_t, static_cast<size_t>(StreamId::kCount)> start_{};
};

}  // namespace

ModuleWork llm_module_work(const StageInputs& in) {
  const auto& s = in.shape;
  ModuleWork w;
  w.shape = s;
  w.layer_forward = model::layer_forward(s);
  w.layer_backward = model::layer_backward(s, in.recompute);
  w.pre_forward = model::embedding_forward(s);
  w.pre_backward = model::embedding_backward(s);
  w.post_forward = model::head_forward(s);
  w.post_backward = model::head_backward(s);
  w.layer_activation_bytes = in.layer_activation_bytes;
  w.recompute_activation_bytes = in.recompute_activation_bytes;
  w.post_activation_bytes = model::head_activation_bytes(s);
  if (in.recompute == scenario::RECOMPUTE_FULL && in.recompute_num_layers > 0) {
    w.recompute_num_layers = in.recompute_num_layers;
    w.layer_backward_plain = model::layer_backward(s, scenario::RECOMPUTE_NONE);
    w.layer_activation_bytes_plain = in.recompute_activation_bytes;  // what a layer keeps without recompute
  }
  return w;
}

std::vector<Segment> stage_segments(const StageInputs& in, int32_t virtual_stage) {
  if (!in.segments.empty()) return in.segments.at(static_cast<size_t>(virtual_stage));
  const LayerRange& r = in.stages[static_cast<size_t>(virtual_stage)];
  return {Segment{0, r.first, r.count, virtual_stage == 0, virtual_stage == num_virtual_stages(in) - 1}};
}

int64_t boundary_p2p_bytes(const StageInputs& in, int32_t virtual_stage) {
  const auto& s = in.shape;
  // One LLM hidden state, sequence-sharded over TP with SP (Megatron's
  // scatter/gather optimisation).
  const int64_t llm = s.hidden_bytes() / (s.sequence_parallel ? s.tp : 1);
  if (in.segments.empty()) return llm;
  int64_t carried = 0;  // outputs of the encoders finished so far
  Segment last;
  for (int32_t k = 0; k <= virtual_stage; ++k)
    for (const Segment& seg : in.segments.at(static_cast<size_t>(k))) {
      if (seg.module != 0 && seg.post) carried += in.encoders.at(static_cast<size_t>(seg.module - 1)).output_p2p_bytes;
      last = seg;
    }
  if (last.module == 0) return llm;  // the LLM's sequence holds the vision embeddings by now
  if (last.post) return carried;
  return carried + in.encoders.at(static_cast<size_t>(last.module - 1)).layer_p2p_bytes;
}

int64_t stage_parameters(const StageInputs& in, int32_t virtual_stage) {
  int64_t p = 0;
  for (const Segment& seg : stage_segments(in, virtual_stage)) p += segment_parameters(in, seg, false);
  return p;
}

int64_t stage_trained_parameters(const StageInputs& in, int32_t virtual_stage) {
  int64_t p = 0;
  for (const Segment& seg : stage_segments(in, virtual_stage)) p += segment_parameters(in, seg, true);
  return p;
}

int64_t ddp_bucket_parameters(const StageInputs& in) {
  if (!in.overlap_grad_reduce) return std::numeric_limits<int64_t>::max();
  if (in.ddp_bucket_size > 0) return in.ddp_bucket_size;
  return std::max<int64_t>(40'000'000, 1'000'000 * in.dp_cp);
}

std::vector<DpBucket> dp_buckets(const StageInputs& in, int32_t virtual_stage) {
  const auto segments = stage_segments(in, virtual_stage);
  const int64_t size = ddp_bucket_parameters(in);
  std::vector<DpBucket> out;
  for (int32_t si = static_cast<int32_t>(segments.size()) - 1; si >= 0; --si) {
    const Segment& seg = segments[static_cast<size_t>(si)];
    const ModuleParameters mp = module_parameters(in, seg.module);
    // An LLM bucket is kept even when empty (a layer-less stage's embedding /
    // head bucket, as LLM-only programs always had); an encoder segment with
    // nothing trained (frozen layers) has none.
    auto push = [&](DpBucket b) {
      b.segment = si;
      b.module = seg.module;
      if (seg.module == 0 || b.parameters > 0) out.push_back(b);
    };
    if (seg.count <= 0) {
      push(DpBucket{seg.first, 0, segment_parameters(in, seg, true)});
      continue;
    }
    const int64_t per_layer = mp.frozen ? 0 : mp.layer;
    const int64_t last = seg.first + seg.count - 1;
    DpBucket cur;
    for (int64_t l = last; l >= seg.first; --l) {
      cur.parameters += per_layer;
      if (l == last && seg.post) cur.parameters += mp.post - mp.post_frozen;
      if (l == seg.first && seg.pre && !mp.frozen) cur.parameters += mp.pre;
      cur.first_layer = l;
      ++cur.count;
      if (cur.parameters >= size || l == seg.first) {
        push(cur);
        cur = DpBucket{};
      }
    }
  }
  return out;
}

int64_t estimate_ops(const StageInputs& in) {
  struct PerLayer {
    int64_t fwd = 0, bwd = 0, bwd_b = 0, bwd_w = 0;
  };
  auto per_layer = [](const std::vector<Step>& fwd_steps, const std::vector<Step>& bwd_steps, bool frozen) {
    PerLayer p;
    p.fwd = count_ops(fwd_steps, Filter::kAll);
    if (frozen) return p;
    p.bwd = count_ops(bwd_steps, Filter::kAll);
    p.bwd_b = count_ops(bwd_steps, Filter::kInputOnly);
    p.bwd_w = count_ops(bwd_steps, Filter::kWeightOnly);
    return p;
  };
  std::vector<PerLayer> modules;
  modules.push_back(per_layer(model::layer_forward(in.shape), model::layer_backward(in.shape, in.recompute), false));
  for (const ModuleWork& w : in.encoders) modules.push_back(per_layer(w.layer_forward, w.layer_backward, w.frozen));
  constexpr int64_t kPassOverhead = 16;  // p2p, head / embedding, DP waits
  int64_t n = 0;
  for (const auto& a : in.actions) {
    const int32_t vs = schedule::virtual_stage(in.pipeline, in.pp_rank, a.chunk);
    for (const Segment& seg : stage_segments(in, vs)) {
      const PerLayer& p = modules.at(static_cast<size_t>(seg.module));
      const int64_t ops = a.pass == Pass::kForward         ? p.fwd
                          : a.pass == Pass::kBackward      ? p.bwd
                          : a.pass == Pass::kBackwardInput ? p.bwd_b
                                                           : p.bwd_w;
      n += seg.count * ops;
    }
    n += kPassOverhead;
  }
  return n;
}

StageProgram build_stage_program(const StageInputs& in) {
  ClassBuilder b;
  Emitter e(b);
  const int32_t v = in.pipeline.virtual_stages, m = in.pipeline.microbatches;
  const int32_t num_vs = num_virtual_stages(in);
  const bool p2p = in.pipeline.pp > 1;
  const scenario::Execution& x = in.execution;
  const model::LayerShape& shape = in.shape;
  const ModuleWork llm = llm_module_work(in);
  std::vector<const ModuleWork*> modules{&llm};
  for (const ModuleWork& w : in.encoders) modules.push_back(&w);
  auto work = [&](const Segment& seg) -> const ModuleWork& { return *modules.at(static_cast<size_t>(seg.module)); };
  std::vector<std::vector<Segment>> segments(static_cast<size_t>(num_vs));
  for (int32_t k = 0; k < num_vs; ++k) segments[k] = stage_segments(in, k);
  // The message after virtual stage k and the module it belongs to (that of
  // the stage's last segment, whose output it is).
  std::vector<int64_t> boundary_bytes(static_cast<size_t>(num_vs), 0);
  std::vector<int32_t> boundary_module(static_cast<size_t>(num_vs), 0);
  for (int32_t k = 0; k + 1 < num_vs; ++k) {
    boundary_bytes[k] = boundary_p2p_bytes(in, k);
    boundary_module[k] = segments[k].empty() ? 0 : segments[k].back().module;
  }
  // Megatron-LM 2021–2022's scatter-gather (without SP): each TP rank sends
  // its 1/tp of the message, and the receiver all-gathers it over TP inside
  // the same p2p call (docs/compiler.md#pipeline-p2p).
  const bool scatter_gather = x.pipeline_scatter_gather() && !shape.sequence_parallel && shape.tp > 1;
  auto wire_bytes = [&](int32_t boundary) {
    const int64_t full = boundary_bytes[boundary];
    return scatter_gather && full % shape.tp == 0 ? full / shape.tp : full;
  };
  auto gather_received = [&](int32_t boundary, const OpContext& ctx) {
    if (!scatter_gather || boundary_bytes[boundary] % shape.tp != 0) return;
    ModuleStamp stamp(b);
    CommPoint c;
    c.group = model::CommGroup::kTp;
    c.kind = ir::ALL_GATHER;
    c.bytes = boundary_bytes[boundary];
    c.phase = ctx.phase;
    e.collective_now(c, ctx);
    stamp.apply(boundary_module[boundary]);
  };
  auto tag = [&](int64_t direction, int64_t receiver_stage, int64_t mb) {
    return (direction * num_vs + receiver_stage) * m + mb;
  };
  auto set_p2p = [&](auto* msg, int32_t peer_slot, int32_t boundary, int32_t channel, int64_t tag_value) {
    msg->set_peer_slot(peer_slot);
    msg->set_bytes(wire_bytes(boundary));
    msg->set_channel(channel);
    msg->set_tag(tag_value);
  };
  // Overlapped p2p: channel 0 carries activations to pp_next, channel 1
  // gradients to pp_prev; each direction has its own send and receive stream
  // (rendezvous sends block their stream). Receives are posted ahead, in the
  // order compute consumes them, and waited for right before the pass;
  // sends never block compute.
  auto receive_into_compute = [&](StreamId stream, EventId event, int32_t peer_slot, int32_t channel,
                                  int64_t tag_value, int32_t boundary, const OpContext& ctx) {
    ModuleStamp stamp(b);
    set_p2p(b.add(stream, ctx)->mutable_recv(), peer_slot, boundary, channel, tag_value);
    b.wait(StreamId::kCompute, event, b.record(stream, event, ctx), ctx);
    stamp.apply(boundary_module[boundary]);
    gather_received(boundary, ctx);
  };
  auto send_from_compute = [&](StreamId stream, EventId event, int32_t peer_slot, int32_t channel,
                               int64_t tag_value, int32_t boundary, const OpContext& ctx) {
    ModuleStamp stamp(b);
    b.wait(stream, event, b.record(StreamId::kCompute, event, ctx), ctx);
    set_p2p(b.add(stream, ctx)->mutable_send(), peer_slot, boundary, channel, tag_value);
    stamp.apply(boundary_module[boundary]);
  };

  // Blocking p2p (Megatron's batch_isend_irecv + wait + synchronize): at
  // each call of its schedule (sim/schedule/p2p_calls.h) the compute stream
  // records once, every send and receive of the call starts on its stream
  // after that record, compute waits for all of them, and the host waits for
  // the GPU before issuing anything else.
  const bool blocking = p2p && x.pipeline_p2p() == scenario::P2P_BLOCKING;
  std::vector<std::vector<schedule::P2pCall>> calls_after(in.actions.size() + 1);  // [after + 1]
  if (blocking)
    for (schedule::P2pCall& call : schedule::blocking_p2p_calls(in.schedule_kind, in.pipeline, in.pp_rank, in.actions))
      calls_after[static_cast<size_t>(call.after + 1)].push_back(std::move(call));
  auto emit_call = [&](const schedule::P2pCall& call) {
    const OpContext call_ctx{ir::FORWARD, 0, 0, -1};
    const int64_t go = b.record(StreamId::kCompute, EventId::kComputeToP2p, call_ctx);
    std::vector<std::pair<EventId, int64_t>> done;
    std::vector<std::pair<int32_t, OpContext>> received;  // boundary, context
    auto transfer = [&](int32_t action, bool send) {
      const schedule::Action& a = in.actions[static_cast<size_t>(action)];
      const int32_t vs = schedule::virtual_stage(in.pipeline, in.pp_rank, a.chunk);
      const bool forward = a.pass == Pass::kForward;
      OpContext ctx{forward ? ir::FORWARD : ir::BACKWARD_INPUT, a.microbatch, a.chunk, -1};
      // Forward: receive from pp_prev (boundary vs − 1), send to pp_next
      // (boundary vs); backward the reverse, on channel 1.
      const int32_t boundary = forward == send ? vs : vs - 1;
      const int32_t peer = forward == send ? kSlotPpNext : kSlotPpPrev;
      const int32_t channel = forward ? 0 : 1;
      const int64_t tag_value = forward ? tag(0, send ? vs + 1 : vs, a.microbatch) : tag(1, send ? vs - 1 : vs, a.microbatch);
      const StreamId stream = send ? (forward ? StreamId::kSendFwd : StreamId::kSendBwd)
                                   : (forward ? StreamId::kRecvFwd : StreamId::kRecvBwd);
      const EventId back = send ? (forward ? EventId::kSendFwdToCompute : EventId::kSendBwdToCompute)
                                : (forward ? EventId::kRecvFwdToCompute : EventId::kRecvBwdToCompute);
      ModuleStamp stamp(b);
      b.wait(stream, EventId::kComputeToP2p, go, ctx);
      if (send)
        set_p2p(b.add(stream, ctx)->mutable_send(), peer, boundary, channel, tag_value);
      else
        set_p2p(b.add(stream, ctx)->mutable_recv(), peer, boundary, channel, tag_value);
      done.emplace_back(back, b.record(stream, back, ctx));
      stamp.apply(boundary_module[boundary]);
      if (!send) received.emplace_back(boundary, ctx);
    };
    for (int32_t i : call.sends) transfer(i, true);
    for (int32_t i : call.recvs) transfer(i, false);
    for (const auto& [event, value] : done) b.wait(StreamId::kCompute, event, value, call_ctx);
    b.host_sync_next();
    for (const auto& [boundary, ctx] : received) gather_received(boundary, ctx);
  };
  const bool dp_ops = in.dp_cp > 1;
  const bool first_pp = in.pp_rank == 0, last_pp = in.pp_rank == in.pipeline.pp - 1;

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
                   [&](int32_t x_, int32_t y_) { return last_backward[x_] < last_backward[y_]; });

  int64_t dp_records = 0;
  const OpContext dp_ctx{ir::DP_SYNC, 0, 0, -1};
  auto dp_collective = [&](ir::CollectiveKind kind, int32_t slot, int32_t chunk, int64_t bytes, int32_t module,
                           const OpContext& base_ctx) {
    OpContext ctx = base_ctx;
    ctx.chunk = chunk;
    ModuleStamp stamp(b);
    auto* c = b.add(StreamId::kDp, ctx)->mutable_collective();
    c->set_kind(kind);
    c->set_group_slot(slot);
    c->set_bytes(bytes);
    dp_records = b.record(StreamId::kDp, EventId::kDpToCompute, ctx);
    stamp.apply(module);
  };
  // A collective that the compute stream hands off and then waits for at
  // once: the small synchronous torch.distributed calls (the loss reported per
  // microbatch, the tied embedding's gradients, the gradient norm and the step
  // statistics) run on the sync stream, apart from the DP buckets.
  auto sync_now = [&](ir::CollectiveKind kind, int32_t slot, int64_t bytes, const OpContext& ctx) {
    const int64_t n = b.record(StreamId::kCompute, EventId::kComputeToSync, ctx);
    b.wait(StreamId::kSync, EventId::kComputeToSync, n, ctx);
    auto* c = b.add(StreamId::kSync, ctx)->mutable_collective();
    c->set_kind(kind);
    c->set_group_slot(slot);
    c->set_bytes(bytes);
    b.wait(StreamId::kCompute, EventId::kSyncToCompute, b.record(StreamId::kSync, EventId::kSyncToCompute, ctx), ctx);
  };
  // Gradients are reduced in fp32 (Megatron's main_grad buffer, 4 B/param)
  // unless the execution reduces them in the training precision (fp16's
  // default: 2 B/param); parameters gathered in bf16 (2 B/param).
  const int64_t grad_bytes = x.grad_reduce_in_fp32() ? model::kFp32 : model::kBf16;
  // DP buckets per chunk, gradient-ready order (bucket 0 holds the last layers).
  std::vector<std::vector<DpBucket>> buckets(v);
  for (int32_t c = 0; c < v; ++c) buckets[c] = dp_buckets(in, schedule::virtual_stage(in.pipeline, in.pp_rank, c));
  auto bucket_reduction = [&](int32_t chunk, const DpBucket& bucket) {
    dp_collective(in.distributed_optimizer ? ir::REDUCE_SCATTER : ir::ALL_REDUCE, kSlotDpCp, chunk,
                  bucket.parameters * grad_bytes, bucket.module, dp_ctx);
  };
  // --check-for-nan-in-loss-and-grad: before a bucket's reduction the host
  // reads its norm (isnan, isinf): a reduction kernel over the bucket, then
  // the host waits for it.
  auto bucket_nan_check = [&](const DpBucket& bucket) {
    if (!x.nan_check()) return;
    ModuleStamp stamp(b);
    model::Kernel k = model::grad_norm(bucket.parameters);
    k.phase = ir::DP_SYNC;
    e.kernel(k, dp_ctx);
    b.host_sync_next();
    stamp.apply(bucket.module);
  };
  // Hands buckets to the DP stream after the compute stream's work so far.
  auto hand_off = [&](const std::vector<const DpBucket*>& group, int32_t chunk) {
    for (const DpBucket* bk : group) bucket_nan_check(*bk);
    const int64_t n = b.record(StreamId::kCompute, EventId::kComputeToDp, dp_ctx);
    b.wait(StreamId::kDp, EventId::kComputeToDp, n, dp_ctx);
    for (const DpBucket* bk : group) bucket_reduction(chunk, *bk);
  };
  // Parameter gathers go out at iteration start, chunk by chunk and bucket by
  // bucket in forward order; gathered[c][k] is the kDpToCompute value after
  // bucket k's gather.
  std::vector<std::vector<int64_t>> gathered(v);
  if (dp_ops && in.distributed_optimizer)
    for (int32_t c = 0; c < v; ++c) {
      gathered[c].resize(buckets[c].size());
      for (size_t k = buckets[c].size(); k-- > 0;) {
        dp_collective(ir::ALL_GATHER, kSlotDpCp, c, buckets[c][k].parameters * model::kBf16, buckets[c][k].module,
                      dp_ctx);
        gathered[c][k] = dp_records;
      }
    }
  // Without overlap the gathers belong to the previous step (Megatron gathers
  // synchronously inside optimizer.step(), before the next train_step zeroes
  // the gradient buffer): compute waits for them before anything else.
  const OpContext first_ctx{ir::DP_SYNC, 0, 0, -1};
  if (dp_ops && in.distributed_optimizer && !in.overlap_param_gather)
    b.wait(StreamId::kCompute, EventId::kDpToCompute, dp_records, first_ctx);
  // The fp32 gradient buffer is zeroed at the start of train_step
  // (zero_grad_buffer), one memset per module's buffer: gradient-sync
  // housekeeping (phase DP_SYNC), ahead of every pass.
  {
    std::vector<int64_t> trained_by_module(modules.size(), 0);
    for (int32_t c = 0; c < v; ++c)
      for (const Segment& seg : segments[schedule::virtual_stage(in.pipeline, in.pp_rank, c)])
        trained_by_module[static_cast<size_t>(seg.module)] += segment_parameters(in, seg, true);
    const OpContext zero_ctx{ir::DP_SYNC, 0, 0, -1};
    for (size_t mod = 0; mod < modules.size(); ++mod) {
      if (trained_by_module[mod] <= 0) continue;
      ModuleStamp stamp(b);
      e.kernel(model::grad_zero(trained_by_module[mod], grad_bytes), zero_ctx);
      stamp.apply(static_cast<int32_t>(mod));
    }
  }

  // Each microbatch's batch reaches the TP ranks (docs/compiler.md#data):
  // Megatron-LM 2021–2022 broadcasts the int64 tokens on every stage after a
  // size exchange the host reads; Megatron-core broadcasts the first and
  // last stage's tensors, the data loader's [b, 1, s, s] attention mask
  // among them.
  const int64_t tokens = shape.micro_batch * shape.seq_length;
  auto broadcast_batch = [&](const OpContext& ctx) {
    auto broadcast = [&](int64_t bytes) {
      if (shape.tp <= 1 || bytes <= 0) return;
      CommPoint c;
      c.group = model::CommGroup::kTp;
      c.kind = ir::BROADCAST;
      c.bytes = bytes;
      c.phase = ctx.phase;
      e.collective_now(c, ctx);
    };
    if (x.batch_broadcast() == scenario::BROADCAST_TOKENS) {
      broadcast(8 * 8);  // the key sizes (a few int64)
      b.host_sync_next();  // read on the host (.cpu())
      broadcast((tokens + shape.micro_batch) * 8);  // text: b × (s + 1) int64
      return;
    }
    if (x.batch_broadcast() != scenario::BROADCAST_TENSORS_WITH_MASK || !(first_pp || last_pp)) return;
    const int64_t mask = shape.micro_batch * shape.seq_length * shape.seq_length;  // bool [b, 1, s, s]
    if (first_pp) {
      broadcast(tokens * 8);  // tokens
      broadcast(mask);
      broadcast(tokens * 8);  // position ids
    }
    if (last_pp) {
      broadcast(tokens * 8);  // labels
      broadcast(tokens * 4);  // loss mask (fp32)
      if (!first_pp) broadcast(mask);
    }
  };
  // The last stage reduces each microbatch's loss over DP for reporting
  // (Megatron's average_losses_across_data_parallel_group / reporting_loss:
  // two fp32), and with NaN checks the host reads it twice.
  auto after_loss = [&](const OpContext& ctx) {
    if (dp_ops) sync_now(ir::ALL_REDUCE, kSlotDpCp, 2 * model::kFp32, ctx);
    if (x.nan_check()) b.host_sync_next();
  };

  if (blocking)
    for (const schedule::P2pCall& call : calls_after[0]) emit_call(call);
  for (int32_t i = 0; i < static_cast<int32_t>(in.actions.size()); ++i) {
    const auto& a = in.actions[i];
    const int32_t vs = schedule::virtual_stage(in.pipeline, in.pp_rank, a.chunk);
    const auto& segs = segments[vs];
    const int32_t num_segs = static_cast<int32_t>(segs.size());
    OpContext ctx{ir::FORWARD, a.microbatch, a.chunk, -1};
    auto layer_ctx = [&](int64_t layer) {
      OpContext c = ctx;
      c.layer = static_cast<int32_t>(layer);
      return c;
    };
    // Block recompute (recompute_num_layers): only the first N layers of a
    // module in this virtual stage recompute.
    auto recomputes = [&](const ModuleWork& w, const Segment& seg, int64_t l) {
      return w.recompute_num_layers <= 0 || l - seg.first < w.recompute_num_layers;
    };
    if (a.pass == Pass::kForward) {
      // Overlapped: the chunk's first forward waits for each bucket's gather
      // right before the bucket's first layer (the first bucket: before the
      // pass), so only the very first bucket is exposed. Not overlapped: all
      // gathers before any compute.
      const bool gather_waits =
          dp_ops && in.distributed_optimizer && in.overlap_param_gather && i == first_forward[a.chunk];
      const auto& fwd_buckets = buckets[a.chunk];
      // With overlap get_batch runs first and the first module's forward
      // pre-hook then waits for the gather.
      broadcast_batch(ctx);
      if (gather_waits && !fwd_buckets.empty()) {
        ModuleStamp stamp(b);
        b.wait(StreamId::kCompute, EventId::kDpToCompute, gathered[a.chunk][fwd_buckets.size() - 1], ctx);
        stamp.apply(fwd_buckets.back().module);
      }
      if (p2p && !blocking && vs > 0) {
        receive_into_compute(StreamId::kRecvFwd, EventId::kRecvFwdToCompute, kSlotPpPrev, 0,
                             tag(0, vs, a.microbatch), vs - 1, ctx);
      }
      for (int32_t si = 0; si < num_segs; ++si) {
        const Segment& seg = segs[si];
        const ModuleWork& w = work(seg);
        ModuleStamp stamp(b);
        auto wait_gathers = [&](int64_t l) {
          if (!gather_waits) return;
          for (size_t k = 0; k + 1 < fwd_buckets.size(); ++k)
            if (fwd_buckets[k].segment == si && fwd_buckets[k].first_layer == l)
              b.wait(StreamId::kCompute, EventId::kDpToCompute, gathered[a.chunk][k], ctx);
        };
        if (seg.count <= 0) {
          wait_gathers(seg.first);
          if (seg.pre) e.emit(w.pre_forward, Filter::kAll, ctx);
        }
        for (int64_t l = seg.first; l < seg.first + seg.count; ++l) {
          wait_gathers(l);
          if (l == seg.first && seg.pre) e.emit(w.pre_forward, Filter::kAll, ctx);
          const int64_t kept = recomputes(w, seg, l) ? w.layer_activation_bytes : w.layer_activation_bytes_plain;
          e.add_memory(e.emit(w.layer_forward, Filter::kAll, layer_ctx(l)).last, kept);
        }
        if (seg.post) e.add_memory(e.emit(w.post_forward, Filter::kAll, ctx).last, w.post_activation_bytes);
        // A segment's collectives complete inside it: the next module (or the
        // send) consumes its whole output.
        e.flush(ctx);
        if (seg.post && seg.module == 0) after_loss(ctx);
        stamp.apply(seg.module);
      }
      if (p2p && !blocking && vs < num_vs - 1) {
        send_from_compute(StreamId::kSendFwd, EventId::kComputeToSendFwd, kSlotPpNext, 0,
                          tag(0, vs + 1, a.microbatch), vs, ctx);
      }
    } else {
      ctx.phase = a.pass == Pass::kBackwardWeight ? ir::BACKWARD_WEIGHT : ir::BACKWARD_INPUT;
      const bool produces_grad = a.pass != Pass::kBackwardWeight;
      const bool finishes = a.pass != Pass::kBackwardInput;
      const Filter filter = a.pass == Pass::kBackward        ? Filter::kAll
                            : a.pass == Pass::kBackwardInput ? Filter::kInputOnly
                                                             : Filter::kWeightOnly;
      if (p2p && !blocking && produces_grad && vs < num_vs - 1) {
        receive_into_compute(StreamId::kRecvBwd, EventId::kRecvBwdToCompute, kSlotPpNext, 1,
                             tag(1, vs, a.microbatch), vs, ctx);
      }
      // The chunk's last weight-gradient pass hands each bucket but the last
      // to the DP stream as soon as its layers' kernels are out (Megatron's
      // overlap_grad_reduce); the last bucket goes after the pass, as below.
      const bool reduces = dp_ops && in.overlap_grad_reduce && i == last_backward[a.chunk];
      const auto& bwd_buckets = buckets[a.chunk];
      size_t reduced = 0;
      for (int32_t si = num_segs - 1; si >= 0; --si) {
        const Segment& seg = segs[si];
        const ModuleWork& w = work(seg);
        ModuleStamp stamp(b);
        auto hand_off_at = [&](int64_t l) {
          if (reduces && reduced + 1 < bwd_buckets.size() && bwd_buckets[reduced].segment == si &&
              bwd_buckets[reduced].first_layer == l) {
            hand_off({&bwd_buckets[reduced]}, a.chunk);
            ++reduced;
          }
        };
        if (seg.post) {
          const auto out = e.emit(w.post_backward, filter, ctx);
          if (finishes) e.add_memory(out.last, -w.post_activation_bytes);
        }
        // A frozen module's layers and pre run no backward at all.
        if (seg.count <= 0) {
          if (seg.pre && !w.frozen) e.emit(w.pre_backward, filter, ctx);
          hand_off_at(seg.first);
        }
        for (int64_t l = seg.first + seg.count - 1; l >= seg.first; --l) {
          if (!w.frozen) {
            const bool full = recomputes(w, seg, l);
            const auto out = e.emit(full ? w.layer_backward : w.layer_backward_plain, filter, layer_ctx(l));
            if (full) e.add_memory(out.last_recompute, w.recompute_activation_bytes);
            const int64_t held = full ? w.layer_activation_bytes + w.recompute_activation_bytes
                                      : w.layer_activation_bytes_plain;
            if (finishes) e.add_memory(out.last, -held);
            if (l == seg.first && seg.pre) e.emit(w.pre_backward, filter, ctx);
          }
          hand_off_at(l);
        }
        e.flush(ctx);
        stamp.apply(seg.module);
      }
      if (p2p && !blocking && produces_grad && vs > 0) {
        send_from_compute(StreamId::kSendBwd, EventId::kComputeToSendBwd, kSlotPpPrev, 1,
                          tag(1, vs - 1, a.microbatch), vs - 1, ctx);
      }
      if (reduces && reduced < bwd_buckets.size()) {
        std::vector<const DpBucket*> rest;
        for (; reduced < bwd_buckets.size(); ++reduced) rest.push_back(&bwd_buckets[reduced]);
        hand_off(rest, a.chunk);
      }
    }
    if (blocking)
      for (const schedule::P2pCall& call : calls_after[static_cast<size_t>(i + 1)]) emit_call(call);
  }
  if (dp_ops && !in.overlap_grad_reduce) {
    // finalize_model_grads: every chunk's buckets, synchronously, after the
    // last backward.
    std::vector<const DpBucket*> all;
    std::vector<int32_t> chunk_of;
    for (int32_t c : reduce_order)
      for (const DpBucket& bucket : buckets[c]) {
        all.push_back(&bucket);
        chunk_of.push_back(c);
      }
    for (const DpBucket* bk : all) bucket_nan_check(*bk);
    const int64_t n = b.record(StreamId::kCompute, EventId::kComputeToDp, dp_ctx);
    b.wait(StreamId::kDp, EventId::kComputeToDp, n, dp_ctx);
    for (size_t k = 0; k < all.size(); ++k) bucket_reduction(chunk_of[k], *all[k]);
  }
  // Parameters held and trained, per module (index = Op.module).
  int64_t parameters = 0, trained = 0;
  std::vector<int64_t> trained_by_module(modules.size(), 0);
  int64_t sp_norm_parameters = 0;  // SP: norm weights whose gradients are partial per TP rank
  for (int32_t c = 0; c < v; ++c) {
    const int32_t vs = schedule::virtual_stage(in.pipeline, in.pp_rank, c);
    for (const Segment& seg : segments[vs]) {
      parameters += segment_parameters(in, seg, false);
      const int64_t t = segment_parameters(in, seg, true);
      trained += t;
      trained_by_module[static_cast<size_t>(seg.module)] += t;
      if (seg.module == 0)
        sp_norm_parameters += seg.count * model::layer_sp_parameters(shape) +
                              (seg.post ? model::final_norm_parameters(shape) : 0);
    }
  }
  const OpContext opt_ctx{ir::OPTIMIZER_STEP, 0, 0, -1};
  if (dp_ops) b.wait(StreamId::kCompute, EventId::kDpToCompute, dp_records, opt_ctx);
  // finalize_model_grads after the DP reduction (docs/compiler.md#optimizer-step):
  // with SP the norms' gradients all-reduced over TP (each rank saw its
  // sequence shard); with tied embeddings and pp > 1 the word embedding's
  // gradient all-reduced between the first and last stage.
  if (shape.sequence_parallel && shape.tp > 1 && sp_norm_parameters > 0) {
    CommPoint c;
    c.group = model::CommGroup::kTp;
    c.kind = ir::ALL_REDUCE;
    c.bytes = sp_norm_parameters * grad_bytes;
    c.phase = ir::OPTIMIZER_STEP;
    e.collective_now(c, opt_ctx);
  }
  // The embedding group is Megatron's: the first and the last pipeline rank
  // (rank_layout.h), whichever virtual stages hold the tables.
  if (p2p && !shape.untied_output && (first_pp || last_pp))
    sync_now(ir::ALL_REDUCE, kSlotEmbedding, shape.vocab_per_rank() * shape.hidden * grad_bytes, opt_ctx);
  // With the distributed optimizer each rank updates its 1/(dp·cp) shard.
  // Per module (each a multi-tensor apply over its own parameters, so that
  // encoder work stays attributable; frozen weights are not updated), in
  // Megatron's order: fp16 gradients copied to fp32 main gradients; with a
  // loss scale (fp16) unscale and the found-inf all-reduce read on the host;
  // the gradient norm's local reduction, its all-reduce read on the host, the
  // clip; Adam; the fp32 → bf16 copy of the master weights.
  auto updated = [&](int64_t p) { return in.distributed_optimizer ? (p + in.dp_cp - 1) / in.dp_cp : p; };
  auto per_module = [&](auto make) {
    for (size_t mod = 0; mod < modules.size(); ++mod) {
      if (trained_by_module[mod] <= 0 && !(mod == 0 && in.encoders.empty())) continue;
      ModuleStamp stamp(b);
      for (const model::Kernel& k : make(updated(trained_by_module[mod]))) e.kernel(k, opt_ctx);
      stamp.apply(static_cast<int32_t>(mod));
    }
  };
  // The gradient statistics group (rank_layout.h, kSlotGradNorm): every rank
  // with the distributed optimizer, else the tp × pp model-parallel ranks.
  const int64_t world = shape.tp * in.dp_cp * in.pipeline.pp;
  const bool stats_group = in.distributed_optimizer ? world > 1 : shape.tp * in.pipeline.pp > 1;
  auto grad_stats_all_reduce = [&]() {
    if (stats_group) sync_now(ir::ALL_REDUCE, kSlotGradNorm, model::kFp32, opt_ctx);
    b.host_sync_next();  // .item()
  };
  if (!x.grad_reduce_in_fp32())
    per_module([](int64_t p) { return std::vector<model::Kernel>{model::grad_to_fp32(p)}; });
  if (in.precision == scenario::FP16) {
    per_module([](int64_t p) { return std::vector<model::Kernel>{model::grad_unscale(p)}; });
    grad_stats_all_reduce();
  }
  if (x.clip_grad() > 0) {
    per_module([](int64_t p) { return std::vector<model::Kernel>{model::grad_norm(p)}; });
    grad_stats_all_reduce();
    per_module([](int64_t p) { return std::vector<model::Kernel>{model::grad_clip(p)}; });
  }
  per_module([](int64_t p) { return std::vector<model::Kernel>{model::adam_step(p), model::param_copy(p)}; });
  // Megatron-core reduces two step statistics over the model-parallel ranks
  // and reads each on the host (training.py: update_successful, grad norm).
  if (x.step_stats_sync()) {
    grad_stats_all_reduce();
    grad_stats_all_reduce();
  }

  StageProgram out;
  out.parameters = parameters;
  out.frozen_parameters = parameters - trained;
  out.rank_class = b.finish("pp" + std::to_string(in.pp_rank));
  return out;
}

}  // namespace lacuna::compiler
