// The forward passes of the bubble scheduler (optimus_scheduler_impl.h): the
// split into pipelines, PRE, repacking a pipeline's passes into the
// bubbles, and the evaluation against LLM stage 0's forwards.
#include "sim/placement/optimus_scheduler_impl.h"

namespace lacuna::placement::optimus {

void BubbleScheduler::Impl::reset_split(const std::vector<int32_t>& split) {
  if (static_cast<int32_t>(split.size()) != M)
    throw Error("Optimus scheduler: split has " + std::to_string(split.size()) + " parts for " + std::to_string(M) +
                " encoder pipelines");
  if (std::accumulate(split.begin(), split.end(), 0) != N)
    throw Error("Optimus scheduler: split does not sum to the " + std::to_string(N) + " microbatches");
  for (int32_t g = 0; g < G; ++g) clear_gpu(g);
  undo.clear();
  logging = false;
  n = split;
  f.assign(static_cast<size_t>(M), 0);
  b.assign(static_cast<size_t>(M), 0);
  out_ready.resize(static_cast<size_t>(M));
  llm_mb.resize(static_cast<size_t>(M));
  eb_ready.resize(static_cast<size_t>(M));
  bwd_link.assign(static_cast<size_t>(M), std::vector<int64_t>(static_cast<size_t>(P), kNever));
  for (int32_t e = 0; e < M; ++e) {
    out_ready[static_cast<size_t>(e)].assign(static_cast<size_t>(n[static_cast<size_t>(e)]), 0);
    llm_mb[static_cast<size_t>(e)].assign(static_cast<size_t>(n[static_cast<size_t>(e)]), 0);
    eb_ready[static_cast<size_t>(e)].assign(static_cast<size_t>(n[static_cast<size_t>(e)]), 0);
  }
  pre_end.assign(static_cast<size_t>(G), kNever);
  reduce_ready.resize(static_cast<size_t>(G));
  fwd_front.assign(static_cast<size_t>(G), Frontier{});
  bwd_front.assign(static_cast<size_t>(G), Frontier{});
  bwd_moved_end.assign(static_cast<size_t>(G), kNever);
  forward_moves = backward_moves = 0;
  cut.assign(static_cast<size_t>(M), last_forward_ops());
  forward_cuts = 0;
  bcut.assign(static_cast<size_t>(M), 0);
  bcut_end.assign(static_cast<size_t>(M), kNever);
  bcut_op_end.assign(static_cast<size_t>(M), {});
  backward_cuts = 0;
}

PlacedPass* BubbleScheduler::Impl::recorded(int32_t g, bool backward, int32_t x) {
  if (rec == nullptr) return nullptr;
  auto& gp = rec->gpus[static_cast<size_t>(g)];
  auto& v = backward ? gp.backward : gp.forward;
  PlacedPass& p = v[static_cast<size_t>(x)];
  p.x = x;
  p.segments.clear();
  return &p;
}

void BubbleScheduler::Impl::compute_pre(int32_t e) {
  const int32_t p = n[static_cast<size_t>(e)] - f[static_cast<size_t>(e)];
  // From the end of the iteration's housekeeping (the gradient memset).
  cursor_scratch.assign(static_cast<size_t>(P), 0);
  for (int32_t j = 0; j < P; ++j) cursor_scratch[static_cast<size_t>(j)] = stage_of(e * P + j).pre_start_ns;
  link_scratch.assign(static_cast<size_t>(P), kNever);
  for (int32_t x = 0; x < p; ++x) {
    int64_t arrive = kNever;
    for (int32_t j = 0; j < P; ++j) {
      const int32_t g = e * P + j;
      const StageWork& sw = work.stages[static_cast<size_t>(j)];
      const Pass& pass = sw.forward;
      const int64_t start = std::max(cursor_scratch[static_cast<size_t>(j)], arrive);
      // The last PRE microbatch of a cut pipeline runs only its prefix here.
      const bool prefix = j + 1 == P && x + 1 == p && is_cut(e);
      const size_t ops = prefix ? static_cast<size_t>(cut[static_cast<size_t>(e)]) : pass.ops.size();
      // The first microbatch waits for the encoder's parameter gathers.
      const bool gated = x == 0 && !sw.first_forward_gate_ns.empty();
      const int64_t end = gated || prefix ? run_pass(pass, start, gated ? sw.first_forward_gate_ns.data() : nullptr,
                                                     nullptr, ops)
                                          : start + pass.contiguous_ns;
      cursor_scratch[static_cast<size_t>(j)] = end;
      if (PlacedPass* r = recorded(g, false, x)) {
        r->in_bubbles = false;
        r->cut_op = prefix ? static_cast<int32_t>(ops) : -1;
        r->start_ns = start;
        r->end_ns = end;
        r->segments.push_back({stage_of(g).pre_position, 0, static_cast<int32_t>(ops)});
      }
      if (prefix) continue;  // its output comes from the suffix (repack_forward)
      if (j + 1 < P) {
        arrive = std::max(end, link_scratch[static_cast<size_t>(j)]) + in.pp_forward_ns[static_cast<size_t>(g)];
        link_scratch[static_cast<size_t>(j)] = arrive;
      } else {
        out_ready[static_cast<size_t>(e)][static_cast<size_t>(x)] = end;
      }
    }
  }
  for (int32_t j = 0; j < P; ++j) pre_end[static_cast<size_t>(e * P + j)] = p > 0 ? cursor_scratch[static_cast<size_t>(j)] : kNever;
}

bool BubbleScheduler::Impl::repack_forward(int32_t e) {
  for (int32_t j = 0; j < P; ++j) {
    clear_gpu(e * P + j);
    fwd_front[static_cast<size_t>(e * P + j)] = Frontier{};
  }
  const int32_t nn = n[static_cast<size_t>(e)], p = nn - f[static_cast<size_t>(e)];
  link_scratch.assign(static_cast<size_t>(P), kNever);
  if (p > 0)
    for (int32_t j = 0; j + 1 < P; ++j)
      link_scratch[static_cast<size_t>(j)] = llm.stages[static_cast<size_t>(geo.llm_stage(e, j + 1))].pre_end_ns;
  if (p > 0 && is_cut(e)) {
    // The cut pass's suffix, first in the last stage's program order. Its
    // PRE prefix ends at absolute A; δ ≥ this GPU's PRE overflow
    // A − pre_end, so A − δ ≤ pre_end: any bubble (all start after the
    // LLM's first kernel, at or after pre_end) begins after the prefix.
    const int32_t at = cut[static_cast<size_t>(e)];
    const int32_t g = e * P + P - 1;
    const StageWork& sw = work.stages[static_cast<size_t>(P - 1)];
    const Pass& rest = suffix(at);
    PackResult res;
    PlacedPass* r = rec != nullptr ? &rec->gpus[static_cast<size_t>(g)].forward[static_cast<size_t>(p - 1)] : nullptr;
    std::vector<Segment> segs;
    const int64_t* gates =
        p - 1 == 0 && !sw.first_forward_gate_ns.empty() ? sw.first_forward_gate_ns.data() + at : nullptr;
    const int32_t limit = bubbles[static_cast<size_t>(gpu_llm_stage[static_cast<size_t>(g)])].forward_limit;
    if (!pack(g, rest, stage_of(g).pre_end_ns, fwd_front[static_cast<size_t>(g)], limit, res,
              r ? &segs : nullptr, gates))
      return false;
    if (r) {
      for (Segment sg : segs) r->segments.push_back({sg.position, sg.begin + at, sg.end + at});
      r->end_ns = res.end;  // relative until δ is known
    }
    out_ready[static_cast<size_t>(e)][static_cast<size_t>(p - 1)] = res.end;
  }
  for (int32_t x = p; x < nn; ++x) {
    int64_t arrive = kNever;
    for (int32_t j = 0; j < P; ++j) {
      const int32_t g = e * P + j;
      const StageWork& sw = work.stages[static_cast<size_t>(j)];
      PackResult res;
      PlacedPass* r = recorded(g, false, x);
      const int32_t limit = bubbles[static_cast<size_t>(gpu_llm_stage[static_cast<size_t>(g)])].forward_limit;
      const int64_t* gates = x == 0 && !sw.first_forward_gate_ns.empty() ? sw.first_forward_gate_ns.data() : nullptr;
      if (!pack(g, sw.forward, arrive, fwd_front[static_cast<size_t>(g)], limit, res, r ? &r->segments : nullptr,
                gates))
        return false;
      if (r) {
        r->in_bubbles = true;
        r->start_ns = res.start;  // relative until δ is known
        r->end_ns = res.end;
      }
      if (j + 1 < P) {
        arrive = std::max(res.end, link_scratch[static_cast<size_t>(j)]) + in.pp_forward_ns[static_cast<size_t>(g)];
        link_scratch[static_cast<size_t>(j)] = arrive;
      } else {
        out_ready[static_cast<size_t>(e)][static_cast<size_t>(x)] = res.end;
      }
    }
  }
  return true;
}

bool BubbleScheduler::Impl::forward_eval(int32_t& critical) {
  int64_t overflow = 0;
  int32_t overflow_g = -1;
  for (int32_t g = 0; g < G; ++g) {
    if (pre_end[static_cast<size_t>(g)] == kNever) continue;
    const int64_t ov = pre_end[static_cast<size_t>(g)] - stage_of(g).pre_end_ns;
    if (ov > overflow) {
      overflow = ov;
      overflow_g = g;
    }
  }
  delta = overflow;
  int32_t worst = -1;
  int64_t need = 0;
  bool converged = false;
  for (int round = 0; round < kMaxDeltaRounds && !converged; ++round) {
    entries.clear();
    for (int32_t e = 0; e < M; ++e) {
      const int32_t p = n[static_cast<size_t>(e)] - f[static_cast<size_t>(e)];
      for (int32_t x = 0; x < n[static_cast<size_t>(e)]; ++x) {
        const bool moved = x >= p || (x + 1 == p && is_cut(e));  // in the LLM's frame
        const int64_t ready = out_ready[static_cast<size_t>(e)][static_cast<size_t>(x)] + (moved ? delta : 0);
        entries.push_back({ready, ready + send_chain[static_cast<size_t>(e)], -geo.last_llm_stage(e), e, x});
      }
    }
    // The i-th output to reach LLM stage 0 feeds LLM microbatch i. Among
    // equal arrivals the pipeline ending on the later LLM stage takes the
    // earlier microbatch: its gradient returns first, and later stages
    // reach their POST bubble first (1F1B-like schedules drain from the
    // last stage).
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& c) {
      return std::tie(a.projected, a.tie, a.e, a.x) < std::tie(c.projected, c.tie, c.e, c.x);
    });
    serialize_forward();
    need = kNever;
    worst = -1;
    for (int32_t i = 0; i < N; ++i) {
      const int64_t late = arrival[static_cast<size_t>(i)] - llm.forward_start_ns[static_cast<size_t>(i)];
      if (late > need) {
        need = late;
        worst = i;
      }
    }
    if (need <= delta) {
      converged = true;
    } else {
      delta = need;
    }
  }
  if (!converged) return false;
  if (delta == 0)
    critical = -1;
  else if (overflow_g >= 0 && overflow >= need)
    critical = overflow_g / P;
  else
    critical = entries[static_cast<size_t>(worst)].e;
  return true;
}

void BubbleScheduler::Impl::serialize_forward() {
  sender_free.assign(static_cast<size_t>(M), kNever);
  receiver_free.assign(static_cast<size_t>(R), kNever);
  arrival.assign(static_cast<size_t>(N), 0);
  for (int32_t i = 0; i < N; ++i) {
    const Entry& en = entries[static_cast<size_t>(i)];
    int64_t t = std::max(en.ready, sender_free[static_cast<size_t>(en.e)]);
    int64_t arr = en.ready;
    for (int32_t k = 0; k < R; ++k) {
      if (self(en.e, k)) continue;
      const int64_t start = std::max(t, receiver_free[static_cast<size_t>(k)]);
      const int64_t end = start + in.boundary_ns[static_cast<size_t>(en.e) * R + k];
      t = end;
      receiver_free[static_cast<size_t>(k)] = end;
      arr = std::max(arr, end);
    }
    sender_free[static_cast<size_t>(en.e)] = t;
    arrival[static_cast<size_t>(i)] = arr;
  }
}

}  // namespace lacuna::placement::optimus
