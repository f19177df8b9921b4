// The order of one stage's iteration and its forward / backward passes
// (stage_builder.h lists the other parts).
#include "sim/compiler/stage_builder.h"

#include <algorithm>
#include <numeric>

#include "sim/model/accounting.h"

namespace lacuna::compiler {

using schedule::Pass;

namespace {

// Whether the rank holds a stage where microbatches enter the pipeline
// (`first`) or leave it.
bool holds_pipeline_end(const StageInputs& in, bool first) {
  for (int32_t c = 0; c < in.pipeline.virtual_stages; ++c) {
    const int32_t vs = schedule::virtual_stage(in.pipeline, in.pp_rank, c);
    if (first ? !schedule::has_previous_stage(in.pipeline, vs) : !schedule::has_next_stage(in.pipeline, vs))
      return true;
  }
  return false;
}

}  // namespace

StageBuilder::StageBuilder(const StageInputs& in)
    : in_(in),
      e_(b_),
      e_pair_(b_),
      x_(in.execution),
      shape_(in.shape),
      chunks_(in.pipeline.virtual_stages),
      microbatches_(in.pipeline.microbatches),
      num_vs_(num_virtual_stages(in)),
      p2p_(in.pipeline.pp > 1),
      // Megatron-LM 2021–2022's scatter-gather (without SP): each TP rank sends
      // its 1/tp of the message, and the receiver all-gathers it over TP inside
      // the same p2p call (docs/compiler.md#pipeline-p2p).
      scatter_gather_(in.execution.pipeline_scatter_gather() && !in.shape.sequence_parallel && in.shape.tp > 1),
      dp_ops_(in.dp_cp > 1),
      // The ranks holding a first and a last stage (under the V layout
      // rank 0 holds both; under the bidirectional one ranks 0 and pp − 1).
      first_pp_(holds_pipeline_end(in, /*first=*/true)),
      last_pp_(holds_pipeline_end(in, /*first=*/false)),
      mirrored_(in.pipeline.layout == schedule::StageLayout::kBidirectional && in.pipeline.pp > 1),
      llm_(llm_module_work(in)) {
  modules_.push_back(&llm_);
  for (const ModuleWork& w : in.encoders) modules_.push_back(&w);
  segments_.resize(static_cast<size_t>(num_vs_));
  for (int32_t k = 0; k < num_vs_; ++k) segments_[k] = stage_segments(in, k);
  trained_by_module_.assign(modules_.size(), 0);
  trained_by_chunk_.assign(static_cast<size_t>(chunks_), 0);
  expert_by_chunk_.assign(static_cast<size_t>(chunks_), 0);
  for (int32_t c = 0; c < chunks_; ++c) {
    for (const Segment& seg : segments_[schedule::virtual_stage(in.pipeline, in.pp_rank, c)]) {
      const int64_t trained = segment_parameters(in, seg, true);
      parameters_ += segment_parameters(in, seg, false);
      expert_parameters_ += segment_expert_parameters(in, seg);
      trained_ += trained;
      trained_by_chunk_[static_cast<size_t>(c)] += trained;
      expert_by_chunk_[static_cast<size_t>(c)] += segment_expert_parameters(in, seg);
      trained_by_module_[static_cast<size_t>(seg.module)] += trained;
      if (seg.module == 0) {
        sp_norm_parameters_ +=
            seg.count * model::layer_sp_parameters(shape_) + (seg.post ? model::final_norm_parameters(shape_) : 0);
      }
    }
  }
  boundary_bytes_.assign(static_cast<size_t>(num_vs_), 0);
  boundary_module_.assign(static_cast<size_t>(num_vs_), 0);
  for (int32_t k = 0; k + 1 < num_vs_; ++k) {
    boundary_bytes_[k] = boundary_p2p_bytes(in, k);
    boundary_module_[k] = segments_[k].empty() ? 0 : segments_[k].back().module;
  }
  plan_amax_reductions();
  blocking_ = p2p_ && x_.pipeline_p2p() == scenario::P2P_BLOCKING;
  calls_after_.resize(in.actions.size() + 1);
  if (blocking_)
    for (schedule::P2pCall& call :
         in.p2p_calls ? std::vector<schedule::P2pCall>(*in.p2p_calls)
                      : schedule::blocking_p2p_calls(in.schedule_kind, in.pipeline, in.pp_rank, in.actions))
      calls_after_[static_cast<size_t>(call.after + 1)].push_back(std::move(call));

  first_forward_.assign(static_cast<size_t>(chunks_), -1);
  last_backward_.assign(static_cast<size_t>(chunks_), -1);
  for (int32_t i = 0; i < static_cast<int32_t>(in.actions.size()); ++i) {
    const auto& a = in.actions[i];
    if (a.pass == Pass::kForward && first_forward_[a.chunk] < 0) first_forward_[a.chunk] = i;
    if (a.pass == Pass::kBackward || a.pass == Pass::kBackwardWeight) last_backward_[a.chunk] = i;
  }
  // Gradient reductions go out in the order chunks finish their backward,
  // each from its last backward, and gathers in chunk order: the DP pass's
  // placement (schedule/lower_dp.h), unless a schedule file moves them.
  reduce_order_.resize(static_cast<size_t>(chunks_));
  std::iota(reduce_order_.begin(), reduce_order_.end(), 0);
  std::stable_sort(reduce_order_.begin(), reduce_order_.end(),
                   [&](int32_t x, int32_t y) { return last_backward_[x] < last_backward_[y]; });
  reduce_after_ = last_backward_;
  gather_order_.resize(static_cast<size_t>(chunks_));
  std::iota(gather_order_.begin(), gather_order_.end(), 0);
  gather_after_.assign(static_cast<size_t>(chunks_), -1);
  if (in.dp_points) {
    reduce_after_ = in.dp_points->reduce_after;
    reduce_order_ = in.dp_points->reduce_order;
    if (!in.dp_points->gather_order.empty()) gather_order_ = in.dp_points->gather_order;
    if (!in.dp_points->gather_after.empty()) gather_after_ = in.dp_points->gather_after;
  }

  // Gradients are reduced in fp32 (Megatron's main_grad buffer, 4 B/param)
  // unless the execution reduces them in the training precision (fp16's
  // default: 2 B/param); parameters gathered in bf16 (2 B/param).
  grad_bytes_ = x_.grad_reduce_in_fp32() ? model::kFp32 : model::kBf16;
  // DP buckets per chunk, gradient-ready order (bucket 0 holds the last layers).
  buckets_.resize(static_cast<size_t>(chunks_));
  for (int32_t c = 0; c < chunks_; ++c) {
    buckets_[c] = dp_buckets(in, schedule::virtual_stage(in.pipeline, in.pp_rank, c));
  }
}

StageProgram StageBuilder::build() {
  gather_parameters();
  zero_grad_buffers();
  emit_blocking_calls_after(-1);
  const auto& pairs = in_.overlapped_pairs;  // ascending
  for (int32_t i = 0; i < static_cast<int32_t>(in_.actions.size()); ++i) {
    // A pair leaves no blocking call between its passes (overlapped_pair
    // checks), so the calls after its backward are all there is to emit.
    if (std::binary_search(pairs.begin(), pairs.end(), i) && overlapped_pair(i)) {
      reduce_after_pass(i);
      gather_after_pass(i);
      ++i;
    } else {
      run_pass(i);
    }
    emit_blocking_calls_after(i);
    reduce_after_pass(i);
    gather_after_pass(i);
  }
  reduce_after_last_backward();
  mirror_reductions();
  finalize_and_step();

  StageProgram out;
  out.parameters = parameters_;
  out.expert_parameters = expert_parameters_;
  out.frozen_parameters = parameters_ - trained_;
  out.rank_class = b_.finish("pp" + std::to_string(in_.pp_rank));
  return out;
}

void StageBuilder::run_pass(int32_t i) {
  const schedule::Action& a = in_.actions[static_cast<size_t>(i)];
  (a.pass == Pass::kForward     ? forward(i, a)
   : a.pass == Pass::kRecompute ? recompute(a)
                                : backward(i, a))
      .finish();
}

bool StageBuilder::overlapped_pair(int32_t i) {
  const auto n = static_cast<int32_t>(in_.actions.size());
  if (i + 1 >= n || !calls_after_[static_cast<size_t>(i) + 1].empty()) return false;
  const schedule::Action& f = in_.actions[static_cast<size_t>(i)];
  const schedule::Action& b = in_.actions[static_cast<size_t>(i) + 1];
  if (f.pass != Pass::kForward || (b.pass != Pass::kBackward && b.pass != Pass::kBackwardInput)) return false;
  // ModuleStamp labels every op since a segment began; interleaved passes
  // would label each other's. Encoder stages run their pair in order.
  for (const schedule::Action* a : {&f, &b})
    for (const Segment& seg : segments_[schedule::virtual_stage(in_.pipeline, in_.pp_rank, a->chunk)])
      if (seg.module != 0) return false;
  PassEmission forward_pass = forward(i, f);
  PassEmission backward_pass = backward(i + 1, b);
  // The forward first (the authors' pair starts with its forward), then
  // turns at each collective; a pass that has ended leaves the other to run on.
  bool on_forward = true;
  while (!forward_pass.done() || !backward_pass.done()) {
    em_ = on_forward ? &e_ : &e_pair_;
    (on_forward ? forward_pass : backward_pass).step();  // a throw abandons the whole build
    if (!(on_forward ? backward_pass : forward_pass).done()) on_forward = !on_forward;
  }
  em_ = &e_;
  return true;
}

void StageBuilder::wait_gathers(int32_t chunk, int32_t segment, int64_t layer, const OpContext& ctx) {
  const auto& fwd_buckets = buckets_[static_cast<size_t>(chunk)];
  for (size_t k = 0; k + 1 < fwd_buckets.size(); ++k)
    if (fwd_buckets[k].segment == segment && fwd_buckets[k].first_layer == layer)
      b_.wait(StreamId::kCompute, EventId::kDpToCompute, gathered_[static_cast<size_t>(chunk)][k], ctx);
}

void StageBuilder::hand_off_at(int32_t chunk, int32_t segment, int64_t layer, size_t& reduced) {
  const auto& bwd_buckets = buckets_[static_cast<size_t>(chunk)];
  if (reduced + 1 < bwd_buckets.size() && bwd_buckets[reduced].segment == segment &&
      bwd_buckets[reduced].first_layer == layer) {
    hand_off({&bwd_buckets[reduced]}, chunk);
    ++reduced;
  }
}

PassEmission StageBuilder::forward(int32_t i, schedule::Action a) {
  const int32_t vs = schedule::virtual_stage(in_.pipeline, in_.pp_rank, a.chunk);
  const auto& segs = segments_[vs];
  const int32_t num_segs = static_cast<int32_t>(segs.size());
  const OpContext ctx{ir::FORWARD, a.microbatch, a.chunk, -1};
  // Overlapped: the chunk's first forward waits for each bucket's gather
  // right before the bucket's first layer (the first bucket: before the
  // pass), so only the very first bucket is exposed. Not overlapped: all
  // gathers before any compute.
  const bool gather_waits =
      dp_ops_ && in_.distributed_optimizer && in_.overlap_param_gather && i == first_forward_[a.chunk];
  const auto& fwd_buckets = buckets_[a.chunk];
  // With overlap get_batch runs first and the first module's forward
  // pre-hook then waits for the gather.
  broadcast_batch(ctx);
  if (gather_waits && !fwd_buckets.empty()) {
    ModuleStamp stamp(b_);
    b_.wait(StreamId::kCompute, EventId::kDpToCompute, gathered_[a.chunk][fwd_buckets.size() - 1], ctx);
    stamp.apply(fwd_buckets.back().module);
  }
  if (p2p_ && !blocking_ && schedule::has_previous_stage(in_.pipeline, vs)) {
    const Hop h = hop(vs, vs - 1, true);
    if (h.remote) receive_into_compute(h.recv_stream, h.received, h.peer_slot, 0, tag(0, vs, a.microbatch), vs - 1, ctx);
  }
  for (int32_t si = 0; si < num_segs; ++si) {
    const Segment& seg = segs[si];
    const ModuleWork& w = work(seg);
    ModuleStamp stamp(b_);
    Emitter::Emitted out;
    if (seg.count <= 0) {
      if (gather_waits) wait_gathers(a.chunk, si, seg.first, ctx);
      if (seg.pre)
        for (const model::Step& step : w.pre_forward)
          if (em().emit_step(step, Filter::kAll, ctx, out)) co_yield 0;
    }
    for (int64_t l = seg.first; l < seg.first + seg.count; ++l) {
      if (gather_waits) wait_gathers(a.chunk, si, l, ctx);
      if (l == seg.first && seg.pre)
        for (const model::Step& step : w.pre_forward)
          if (em().emit_step(step, Filter::kAll, ctx, out)) co_yield 0;
      const Bytes kept = activation_of(w, l, recomputes_layer(w, seg, l));
      OpContext layer_ctx = ctx;
      layer_ctx.layer = static_cast<int32_t>(l);
      Emitter::Emitted layer;
      for (const model::Step& step : layer_forward_of(w, l))
        if (em().emit_step(step, Filter::kAll, layer_ctx, layer)) co_yield 0;
      em().add_memory(layer.last, kept);
    }
    // FP8 delayed scaling: the LLM block's autocast exits after its layers.
    // Megatron's final norm is inside the block and lacuna's `post` starts
    // with it, so the reduction here comes one norm kernel early.
    if (seg.module == 0 && seg.count > 0) amax_reduction(i, true, ctx);
    if (seg.post) {
      Emitter::Emitted post;
      for (const model::Step& step : w.post_forward)
        if (em().emit_step(step, Filter::kAll, ctx, post)) co_yield 0;
      em().add_memory(post.last, w.post_activation_bytes);
    }
    // A segment's collectives complete inside it: the next module (or the
    // send) consumes its whole output.
    em().flush(ctx);
    if (seg.post && seg.module == 0) after_loss(ctx);
    stamp.apply(seg.module);
  }
  if (p2p_ && !blocking_ && schedule::has_next_stage(in_.pipeline, vs)) {
    const Hop h = hop(vs, vs + 1, true);
    if (h.remote) send_from_compute(h.send_stream, h.to_send, h.peer_slot, 0, tag(0, vs + 1, a.microbatch), vs, ctx);
  }
}

PassEmission StageBuilder::backward(int32_t i, schedule::Action a) {
  const int32_t vs = schedule::virtual_stage(in_.pipeline, in_.pp_rank, a.chunk);
  const auto& segs = segments_[vs];
  const int32_t num_segs = static_cast<int32_t>(segs.size());
  const OpContext ctx{a.pass == Pass::kBackwardWeight ? ir::BACKWARD_WEIGHT : ir::BACKWARD_INPUT, a.microbatch,
                      a.chunk, -1};
  const bool produces_grad = a.pass != Pass::kBackwardWeight;
  const bool finishes = a.pass != Pass::kBackwardInput;
  const Filter filter = a.pass == Pass::kBackward        ? Filter::kAll
                        : a.pass == Pass::kBackwardInput ? Filter::kInputOnly
                                                         : Filter::kWeightOnly;
  if (p2p_ && !blocking_ && produces_grad && schedule::has_next_stage(in_.pipeline, vs)) {
    const Hop h = hop(vs, vs + 1, false);
    if (h.remote) receive_into_compute(h.recv_stream, h.received, h.peer_slot, 1, tag(1, vs, a.microbatch), vs, ctx);
  }
  // The chunk's last weight-gradient pass hands each bucket but the last
  // to the DP stream as soon as its layers' kernels are out (Megatron's
  // overlap_grad_reduce); the last bucket goes after the pass, as below.
  const bool reduces =
      dp_ops_ && in_.overlap_grad_reduce && i == last_backward_[a.chunk] && reduce_after_[a.chunk] == i;
  const bool recomputed = recomputed_.count({a.chunk, a.microbatch}) > 0;
  const auto& bwd_buckets = buckets_[a.chunk];
  size_t reduced = 0;
  for (int32_t si = num_segs - 1; si >= 0; --si) {
    const Segment& seg = segs[si];
    const ModuleWork& w = work(seg);
    ModuleStamp stamp(b_);
    if (seg.post) {
      Emitter::Emitted out;
      for (const model::Step& step : w.post_backward)
        if (em().emit_step(step, filter, ctx, out)) co_yield 0;
      if (finishes) em().add_memory(out.last, -w.post_activation_bytes);
    }
    // A frozen module's layers and pre run no backward at all.
    if (seg.count <= 0) {
      Emitter::Emitted pre;
      if (seg.pre && !w.frozen)
        for (const model::Step& step : w.pre_backward)
          if (em().emit_step(step, filter, ctx, pre)) co_yield 0;
      if (reduces) hand_off_at(a.chunk, si, seg.first, reduced);
    }
    for (int64_t l = seg.first + seg.count - 1; l >= seg.first; --l) {
      if (!w.frozen) {
        const bool full = recomputes_layer(w, seg, l);
        OpContext layer_ctx = ctx;
        layer_ctx.layer = static_cast<int32_t>(l);
        Emitter::Emitted out;
        // After an R pass the layer's re-forward has run: its backward alone.
        const std::vector<model::Step>& steps = layer_backward_of(w, l, full);
        const bool ran = full && recomputed && seg.module == 0;
        const size_t from = ran ? recompute_prefix(steps) : 0;
        for (size_t k = from; k < steps.size(); ++k)
          if (em().emit_step(steps[k], filter, layer_ctx, out)) co_yield 0;
        if (full && !ran) em().add_memory(out.last_recompute, recompute_activation_of(w, l));
        const Bytes held = full ? Bytes(activation_of(w, l, true) + recompute_activation_of(w, l))
                                : activation_of(w, l, false);
        if (finishes) em().add_memory(out.last, -held);
        // FP8 delayed scaling: after the backward of the chunk's first FP8
        // module (layer `first`'s QKV), in the pass that runs its dgrad.
        if (seg.module == 0 && l == seg.first && produces_grad) amax_reduction(i, false, ctx);
        if (l == seg.first && seg.pre) {
          Emitter::Emitted pre;
          for (const model::Step& step : w.pre_backward)
            if (em().emit_step(step, filter, ctx, pre)) co_yield 0;
        }
      }
      if (reduces) hand_off_at(a.chunk, si, l, reduced);
    }
    em().flush(ctx);
    stamp.apply(seg.module);
  }
  if (p2p_ && !blocking_ && produces_grad && schedule::has_previous_stage(in_.pipeline, vs)) {
    const Hop h = hop(vs, vs - 1, false);
    if (h.remote)
      send_from_compute(h.send_stream, h.to_send, h.peer_slot, 1, tag(1, vs - 1, a.microbatch), vs - 1, ctx);
  }
  if (reduces && reduced < bwd_buckets.size()) {
    std::vector<const DpBucket*> rest;
    for (; reduced < bwd_buckets.size(); ++reduced) rest.push_back(&bwd_buckets[reduced]);
    hand_off(rest, a.chunk);
  }
}

PassEmission StageBuilder::recompute(schedule::Action a) {
  const int32_t vs = schedule::virtual_stage(in_.pipeline, in_.pp_rank, a.chunk);
  const OpContext ctx{ir::RECOMPUTE, a.microbatch, a.chunk, -1};
  // What the backward would re-run layer by layer, in forward order: each
  // layer's re-forward materialises what the layer keeps without recompute,
  // held until its backward frees it.
  for (const Segment& seg : segments_[vs]) {
    const ModuleWork& w = work(seg);
    // R is the LLM's action (a schedule file orders the LLM's passes only).
    if (seg.module != 0 || in_.recompute != scenario::RECOMPUTE_FULL) continue;
    ModuleStamp stamp(b_);
    for (int64_t l = seg.first; l < seg.first + seg.count; ++l) {
      if (!recomputes_layer(w, seg, l)) continue;
      OpContext layer_ctx = ctx;
      layer_ctx.layer = static_cast<int32_t>(l);
      const std::vector<model::Step>& steps = layer_backward_of(w, l, true);
      const size_t n = recompute_prefix(steps);
      Emitter::Emitted out;
      for (size_t k = 0; k < n; ++k)
        if (em().emit_step(steps[k], Filter::kAll, layer_ctx, out)) co_yield 0;
      em().add_memory(out.last_recompute, recompute_activation_of(w, l));
    }
    em().flush(ctx);
    stamp.apply(seg.module);
  }
  recomputed_.insert({a.chunk, a.microbatch});
}

}  // namespace lacuna::compiler
