// The backward passes of the bubble scheduler (optimus_scheduler_impl.h):
// which LLM microbatch each encoder gradient belongs to, packing the
// backward passes, and when the gradients' reduction can start.
#include "sim/placement/optimus_scheduler_impl.h"

namespace lacuna::placement::optimus {

void BubbleScheduler::Impl::assign_and_gradients() {
  for (int32_t i = 0; i < N; ++i) {
    const Entry& en = entries[static_cast<size_t>(i)];
    llm_mb[static_cast<size_t>(en.e)][static_cast<size_t>(en.x)] = i;
  }
  sender_free.assign(static_cast<size_t>(R), kNever);
  receiver_free.assign(static_cast<size_t>(M), kNever);
  grad_arrival.assign(static_cast<size_t>(N), 0);
  for (int32_t i : backward_order) {
    const Entry& en = entries[static_cast<size_t>(i)];
    const int64_t ready = llm.backward_end_ns[static_cast<size_t>(i)];
    int64_t arr = ready;
    for (int32_t k = 0; k < R; ++k) {
      if (self(en.e, k)) continue;
      const int64_t start =
          std::max({ready, sender_free[static_cast<size_t>(k)], receiver_free[static_cast<size_t>(en.e)]});
      const int64_t end = start + in.boundary_ns[static_cast<size_t>(en.e) * R + k];
      sender_free[static_cast<size_t>(k)] = end;
      receiver_free[static_cast<size_t>(en.e)] = end;
      arr = std::max(arr, end);
    }
    eb_ready[static_cast<size_t>(en.e)][static_cast<size_t>(en.x)] = arr;
    grad_arrival[static_cast<size_t>(i)] = arr;
  }
}

void BubbleScheduler::Impl::note_reduce_ready(int32_t g, int64_t end) {
  const StageWork& sw = work_of(g);
  auto& ready = reduce_ready[static_cast<size_t>(g)];
  ready.resize(sw.buckets.size());
  for (size_t k = 0; k < sw.buckets.size(); ++k)
    ready[k] = work.overlap_grad_reduce ? op_end_scratch[static_cast<size_t>(sw.buckets[k].backward_op)] : end;
}

bool BubbleScheduler::Impl::pack_backward(int32_t e, int32_t x) {
  int64_t arrive = eb_ready[static_cast<size_t>(e)][static_cast<size_t>(x)];
  for (int32_t j = P - 1; j >= 0; --j) {
    if (!has_backward[static_cast<size_t>(j)]) continue;
    const int32_t g = e * P + j;
    PackResult res;
    PlacedPass* r = recorded(g, true, x);
    const StageWork& sw = work.stages[static_cast<size_t>(j)];
    const bool last_pass = x + 1 == n[static_cast<size_t>(e)];
    if (last_pass) op_end_scratch.assign(sw.backward.ops.size(), 0);
    if (!pack(g, sw.backward, arrive, bwd_front[static_cast<size_t>(g)], std::numeric_limits<int32_t>::max(), res,
              r ? &r->segments : nullptr, nullptr, last_pass ? op_end_scratch.data() : nullptr))
      return false;
    if (last_pass) note_reduce_ready(g, res.end);
    if (r) {
      r->in_bubbles = true;
      r->start_ns = res.start;
      r->end_ns = res.end;
    }
    bwd_moved_end[static_cast<size_t>(g)] = res.end;
    if (j > 0 && has_backward[static_cast<size_t>(j - 1)]) {
      auto& link = bwd_link[static_cast<size_t>(e)][static_cast<size_t>(j - 1)];
      arrive = std::max(res.end, link) + in.pp_backward_ns[static_cast<size_t>(e * P + j - 1)];
      link = arrive;
    }
  }
  return true;
}

bool BubbleScheduler::Impl::pack_backward_head(int32_t e) {
  const int32_t x = b[static_cast<size_t>(e)], at = bcut[static_cast<size_t>(e)];
  const int32_t g = e * P + P - 1;
  const Pass& head = bwd_prefix(at);
  auto& op_end = bcut_op_end[static_cast<size_t>(e)];
  op_end.assign(head.ops.size(), 0);
  PackResult res;
  PlacedPass* r = rec != nullptr ? &rec->gpus[static_cast<size_t>(g)].backward[static_cast<size_t>(x)] : nullptr;
  if (r) r->segments.clear();
  if (!pack(g, head, eb_ready[static_cast<size_t>(e)][static_cast<size_t>(x)], bwd_front[static_cast<size_t>(g)],
            std::numeric_limits<int32_t>::max(), res, r ? &r->segments : nullptr, nullptr, op_end.data()))
    return false;
  if (r) {
    r->x = x;
    r->cut_op = at;
  }
  bcut_end[static_cast<size_t>(e)] = res.end;
  return true;
}

int64_t BubbleScheduler::Impl::backward_eval(int32_t& critical) {
  post_end.assign(static_cast<size_t>(G), kNever);
  bwd_done.assign(static_cast<size_t>(G), kNever);
  for (int32_t e = 0; e < M; ++e) {
    link_scratch = bwd_link[static_cast<size_t>(e)];
    cursor_scratch.assign(static_cast<size_t>(P), 0);
    for (int32_t j = 0; j < P; ++j)
      cursor_scratch[static_cast<size_t>(j)] = llm.stages[static_cast<size_t>(geo.llm_stage(e, j))].post_start_ns;
    const int32_t nn = n[static_cast<size_t>(e)];
    for (int32_t x = b[static_cast<size_t>(e)]; x < nn; ++x) {
      int64_t arrive = eb_ready[static_cast<size_t>(e)][static_cast<size_t>(x)];
      for (int32_t j = P - 1; j >= 0; --j) {
        if (!has_backward[static_cast<size_t>(j)]) continue;
        const int32_t g = e * P + j;
        const StageWork& sw = work.stages[static_cast<size_t>(j)];
        // A cut pass runs only its tail here, after its head in the bubbles.
        const int32_t at = j + 1 == P && x == b[static_cast<size_t>(e)] ? bcut[static_cast<size_t>(e)] : 0;
        const Pass& pass = at > 0 ? bwd_suffix(at) : sw.backward;
        int64_t start = std::max(cursor_scratch[static_cast<size_t>(j)], arrive);
        if (at > 0) start = std::max(start, bcut_end[static_cast<size_t>(e)]);
        int64_t end = start + pass.contiguous_ns;
        if (x + 1 == nn && sw.data_parallel()) {
          op_end_scratch.assign(sw.backward.ops.size(), 0);
          const auto& head = bcut_op_end[static_cast<size_t>(e)];
          if (at > 0) std::copy(head.begin(), head.end(), op_end_scratch.begin());
          end = run_pass(pass, start, nullptr, op_end_scratch.data() + at);
          note_reduce_ready(g, end);
        }
        cursor_scratch[static_cast<size_t>(j)] = end;
        PlacedPass* r = at > 0 ? (rec != nullptr ? &rec->gpus[static_cast<size_t>(g)].backward[static_cast<size_t>(x)]
                                                 : nullptr)
                               : recorded(g, true, x);
        if (r) {
          r->in_bubbles = false;
          r->start_ns = start;
          r->end_ns = end;
          r->segments.push_back(
              {stage_of(g).post_position, at, static_cast<int32_t>(sw.backward.ops.size())});
        }
        if (j > 0 && has_backward[static_cast<size_t>(j - 1)]) {
          auto& link = link_scratch[static_cast<size_t>(j - 1)];
          arrive = std::max(end, link) + in.pp_backward_ns[static_cast<size_t>(e * P + j - 1)];
          link = arrive;
        }
      }
    }
    for (int32_t j = 0; j < P; ++j) {
      const int32_t g = e * P + j;
      if (!has_backward[static_cast<size_t>(j)]) continue;
      if (b[static_cast<size_t>(e)] < nn) post_end[static_cast<size_t>(g)] = cursor_scratch[static_cast<size_t>(j)];
      bwd_done[static_cast<size_t>(g)] =
          post_end[static_cast<size_t>(g)] != kNever ? post_end[static_cast<size_t>(g)] : bwd_moved_end[static_cast<size_t>(g)];
    }
  }
  // Encoder DP reductions of stage j, bucket by bucket on one stream: each
  // starts when every member (all pipelines' GPUs of the stage) handed it
  // over (a GPU without microbatches does at iteration start);
  // `reduce_gate` is the GPU that handed over the last bucket last.
  reduce_end.assign(static_cast<size_t>(P), 0);
  reduce_gate.assign(static_cast<size_t>(P), -1);
  for (int32_t j = 0; j < P; ++j) {
    const StageWork& sw = work.stages[static_cast<size_t>(j)];
    // The stream first runs the parameter gathers.
    int64_t t = 0, last_ready = kNever;
    for (const DpBucket& bk : sw.buckets) t += bk.gather_ns;
    for (size_t k = 0; k < sw.buckets.size(); ++k) {
      int64_t start = t;
      for (int32_t e = 0; e < M; ++e) {
        const int32_t g = e * P + j;
        if (n[static_cast<size_t>(e)] == 0) continue;
        const int64_t ready = reduce_ready[static_cast<size_t>(g)][k] + delta;
        start = std::max(start, ready);
        if (k + 1 == sw.buckets.size() && ready > last_ready) {
          last_ready = ready;
          reduce_gate[static_cast<size_t>(j)] = g;
        }
      }
      t = start + sw.buckets[k].reduce_ns;
    }
    reduce_end[static_cast<size_t>(j)] = t;
  }
  // Per GPU: the LLM optimizer after POST (later when the encoder's POST
  // passes overrun it), then the encoder optimizer after its reduction.
  // The optimizer step reduces the gradient norm over the gradient-
  // statistics group (every rank with the distributed optimizer) and the
  // host waits for it: no GPU's step finishes before the last GPU has
  // started its own, so every step starts at the latest start.
  // When the step waits for a collective across stages (StageTimeline::
  // step_sync: the gradient norm's or the tied embedding's all-reduce, read
  // on the host), no GPU's step ends before every GPU has started its own:
  // every step then starts at the latest start, and what the LLM runs
  // between its last pass and its first optimizer kernel (the norms' and
  // the embedding's all-reduces) follows encoder POST work that overran it.
  bool step_sync = false;
  for (int32_t g = 0; g < G; ++g) step_sync |= stage_of(g).step_sync;
  int64_t step_start = kNever;
  if (step_sync)
    for (int32_t g = 0; g < G; ++g) {
      const StageTimeline& st = stage_of(g);
      const int64_t post = post_end[static_cast<size_t>(g)];
      step_start = std::max(step_start, std::max(st.post_end_ns, post == kNever ? kNever
                                                                                : post + (st.post_end_ns - st.post_start_ns)));
    }
  int64_t worst_end = kNever;
  int32_t worst_g = -1;
  bool worst_by_reduce = false;
  for (int32_t g = 0; g < G; ++g) {
    const StageTimeline& st = stage_of(g);
    const StageWork& sw = work_of(g);
    const int64_t post = post_end[static_cast<size_t>(g)];
    const int64_t llm_end = (step_sync ? step_start : std::max(st.post_end_ns, post)) + delta + st.optimizer_ns;
    int64_t end = std::max(llm_end, st.end_ns + delta);
    bool by_reduce = false;
    if (sw.trains()) {
      const int64_t reduced = reduce_end[static_cast<size_t>(g % P)];
      by_reduce = reduced > llm_end;
      end = std::max(end, std::max(llm_end, reduced) + sw.optimizer_ns);
    }
    if (end > worst_end) {
      worst_end = end;
      worst_g = g;
      worst_by_reduce = by_reduce;
    }
  }
  const int64_t estimate = std::max(llm.iteration_ns + delta, worst_end);
  critical = -1;
  if (worst_g >= 0) {
    const StageTimeline& st = stage_of(worst_g);
    if (worst_by_reduce && reduce_gate[static_cast<size_t>(worst_g % P)] >= 0)
      critical = reduce_gate[static_cast<size_t>(worst_g % P)] / P;
    else if (post_end[static_cast<size_t>(worst_g)] > st.post_end_ns)
      critical = worst_g / P;
  }
  return estimate;
}

}  // namespace lacuna::placement::optimus
