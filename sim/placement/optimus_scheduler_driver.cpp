// The bubble scheduler's driver (optimus_scheduler_impl.h): cutting passes
// at op boundaries, the δ fixed point, and the schedule it returns.
#include "sim/placement/optimus_scheduler_impl.h"

namespace lacuna::placement::optimus {

void BubbleScheduler::Impl::cut_forward(int32_t critical) {
  if (cut_points.empty()) return;
  std::vector<uint8_t> tried(static_cast<size_t>(M), 0);
  while (critical >= 0 && delta > 0 && !tried[static_cast<size_t>(critical)]) {
    const int32_t e = critical;
    tried[static_cast<size_t>(e)] = 1;
    if (n[static_cast<size_t>(e)] - f[static_cast<size_t>(e)] <= 0) break;
    const int64_t before = delta;
    int64_t best_delta = before;
    int32_t best_cut = -1;
    auto attempt = [&](int32_t at) {
      cut[static_cast<size_t>(e)] = at;
      compute_pre(e);
      int32_t next = -1;
      if (repack_forward(e) && forward_eval(next) && delta < best_delta) {
        best_delta = delta;
        best_cut = at;
      }
    };
    search_cut_points(cut_points, best_cut, attempt);
    cut[static_cast<size_t>(e)] = best_cut >= 0 ? best_cut : last_forward_ops();
    compute_pre(e);
    int32_t next = -1;
    if (!repack_forward(e) || !forward_eval(next))
      throw InternalError("Optimus scheduler: cannot restore the kernel-level forward placement");
    if (best_cut < 0) break;
    ++forward_cuts;
    critical = next;
  }
}

void BubbleScheduler::Impl::cut_backward(int32_t& critical, int64_t& estimate) {
  if (bwd_cut_points.empty()) return;
  std::vector<uint8_t> tried(static_cast<size_t>(M), 0);
  while (critical >= 0 && !tried[static_cast<size_t>(critical)]) {
    const int32_t e = critical;
    tried[static_cast<size_t>(e)] = 1;
    if (b[static_cast<size_t>(e)] >= n[static_cast<size_t>(e)]) break;
    const int32_t g = e * P + P - 1;
    int64_t best = estimate;
    int32_t best_cut = 0;
    auto attempt = [&](int32_t at) {
      const Frontier saved = bwd_front[static_cast<size_t>(g)];
      logging = true;
      bcut[static_cast<size_t>(e)] = at;
      int32_t next = -1;
      if (pack_backward_head(e)) {
        const int64_t est = backward_eval(next);
        if (est < best) {
          best = est;
          best_cut = at;
        }
      }
      while (!undo.empty()) {
        const Undo u = undo.back();
        undo.pop_back();
        used[static_cast<size_t>(u.g)][static_cast<size_t>(u.b)] = u.old;
      }
      logging = false;
      bwd_front[static_cast<size_t>(g)] = saved;
      bcut[static_cast<size_t>(e)] = 0;
    };
    search_cut_points(bwd_cut_points, best_cut, attempt);
    bcut[static_cast<size_t>(e)] = best_cut;
    if (best_cut > 0 && !pack_backward_head(e))
      throw InternalError("Optimus scheduler: cannot restore the kernel-level backward placement");
    estimate = backward_eval(critical);
    if (best_cut == 0) break;
    ++backward_cuts;
  }
}

int64_t BubbleScheduler::Impl::run(const std::vector<int32_t>& split, bool coarse_only) {
  reset_split(split);
  for (int32_t e = 0; e < M; ++e) compute_pre(e);
  int32_t critical = -1;
  if (!forward_eval(critical))
    throw Error("Optimus scheduler: no LLM shift satisfies the forward dependencies of the coarse schedule");
  if (!coarse_only) {
    while (critical >= 0 && f[static_cast<size_t>(critical)] < n[static_cast<size_t>(critical)]) {
      const int32_t e = critical;
      const int64_t old_delta = delta;
      ++f[static_cast<size_t>(e)];
      compute_pre(e);
      int32_t next = -1;
      const bool ok = repack_forward(e) && forward_eval(next) && delta <= old_delta;
      if (!ok) {
        --f[static_cast<size_t>(e)];
        compute_pre(e);
        if (!repack_forward(e) || !forward_eval(critical))
          throw InternalError("Optimus scheduler: cannot restore the previous forward placement");
        break;
      }
      ++forward_moves;
      critical = next;
    }
    if (kernel_cuts) cut_forward(critical);
  }
  assign_and_gradients();
  int64_t estimate = backward_eval(critical);
  if (!coarse_only) {
    std::vector<Frontier> saved_front(static_cast<size_t>(P));
    std::vector<int64_t> saved_end(static_cast<size_t>(P));
    while (critical >= 0 && b[static_cast<size_t>(critical)] < n[static_cast<size_t>(critical)]) {
      const int32_t e = critical;
      const size_t mark = undo.size();
      logging = true;
      for (int32_t j = 0; j < P; ++j) {
        saved_front[static_cast<size_t>(j)] = bwd_front[static_cast<size_t>(e * P + j)];
        saved_end[static_cast<size_t>(j)] = bwd_moved_end[static_cast<size_t>(e * P + j)];
      }
      const std::vector<int64_t> saved_link = bwd_link[static_cast<size_t>(e)];
      bool ok = pack_backward(e, b[static_cast<size_t>(e)]);
      int32_t next = -1;
      int64_t next_estimate = estimate;
      if (ok) {
        ++b[static_cast<size_t>(e)];
        next_estimate = backward_eval(next);
        ok = next_estimate <= estimate;
        if (!ok) --b[static_cast<size_t>(e)];
      }
      if (!ok) {
        while (undo.size() > mark) {
          const Undo u = undo.back();
          undo.pop_back();
          used[static_cast<size_t>(u.g)][static_cast<size_t>(u.b)] = u.old;
        }
        for (int32_t j = 0; j < P; ++j) {
          bwd_front[static_cast<size_t>(e * P + j)] = saved_front[static_cast<size_t>(j)];
          bwd_moved_end[static_cast<size_t>(e * P + j)] = saved_end[static_cast<size_t>(j)];
        }
        bwd_link[static_cast<size_t>(e)] = saved_link;
        logging = false;
        estimate = backward_eval(critical);
        break;
      }
      logging = false;
      undo.clear();
      ++backward_moves;
      estimate = next_estimate;
      critical = next;
    }
    if (kernel_cuts) cut_backward(critical, estimate);
  }
  return estimate;
}

Schedule BubbleScheduler::Impl::schedule(const std::vector<int32_t>& split, bool coarse_only) {
  kernel_cuts = !coarse_only;
  const int64_t estimate = run(split, coarse_only);
  kernel_cuts = false;
  const std::vector<int32_t> moved_f = f, moved_b = b, cuts = cut, bcuts = bcut;
  const int32_t fm = forward_moves, bm = backward_moves, fc = forward_cuts, bc = backward_cuts;
  Schedule out;
  out.split = split;
  out.coarse_only = coarse_only;
  out.gpus.resize(static_cast<size_t>(G));
  for (int32_t g = 0; g < G; ++g) {
    GpuPlacement& gp = out.gpus[static_cast<size_t>(g)];
    gp.pipeline = g / P;
    gp.stage = g % P;
    gp.llm_stage = gpu_llm_stage[static_cast<size_t>(g)];
    gp.slice = geo.slice_of_pipeline(g / P);
    gp.forward.resize(static_cast<size_t>(split[static_cast<size_t>(g / P)]));
    if (has_backward[static_cast<size_t>(g % P)]) gp.backward.resize(gp.forward.size());
  }
  // Replay the final state with recording (pipelines use disjoint GPUs, so
  // each pipeline's placement depends on its own moves only).
  rec = &out;
  reset_split(split);
  f = moved_f;
  cut = cuts;
  for (int32_t e = 0; e < M; ++e) {
    compute_pre(e);
    if (!repack_forward(e)) throw InternalError("Optimus scheduler: replay of the forward placement failed");
  }
  int32_t critical = -1;
  if (!forward_eval(critical)) throw InternalError("Optimus scheduler: replay of the forward dependencies failed");
  assign_and_gradients();
  for (int32_t e = 0; e < M; ++e)
    for (int32_t x = 0; x < moved_b[static_cast<size_t>(e)]; ++x)
      if (!pack_backward(e, x)) throw InternalError("Optimus scheduler: replay of the backward placement failed");
  b = moved_b;
  bcut = bcuts;
  for (int32_t e = 0; e < M; ++e)
    if (bcut[static_cast<size_t>(e)] > 0 && !pack_backward_head(e))
      throw InternalError("Optimus scheduler: replay of the kernel-level backward placement failed");
  const int64_t replayed = backward_eval(critical);
  rec = nullptr;
  if (replayed != estimate) throw InternalError("Optimus scheduler: replay estimate differs from the search's");

  out.delta_ns = delta;
  out.estimate_ns = estimate;
  out.forward_moves = fm;
  out.backward_moves = bm;
  out.forward_cuts = fc;
  out.backward_cuts = bc;
  out.source_pipeline.resize(static_cast<size_t>(N));
  out.source_x.resize(static_cast<size_t>(N));
  out.forward_arrival_ns = arrival;
  out.gradient_arrival_ns.resize(static_cast<size_t>(N));
  for (int32_t i = 0; i < N; ++i) {
    out.source_pipeline[static_cast<size_t>(i)] = entries[static_cast<size_t>(i)].e;
    out.source_x[static_cast<size_t>(i)] = entries[static_cast<size_t>(i)].x;
    out.gradient_arrival_ns[static_cast<size_t>(i)] = grad_arrival[static_cast<size_t>(i)] + delta;
  }
  double efficiency = 1;
  for (int32_t g = 0; g < G; ++g) {
    GpuPlacement& gp = out.gpus[static_cast<size_t>(g)];
    const StageTimeline& st = stage_of(g);
    const StageWork& sw = work_of(g);
    const int32_t e = g / P;
    for (size_t x = 0; x < gp.forward.size(); ++x) {
      PlacedPass& pass = gp.forward[x];
      pass.llm_microbatch = llm_mb[static_cast<size_t>(e)][x];
      gp.compute_ns += sw.forward.compute_ns;
      if (pass.in_bubbles) {
        gp.inside_ns += sw.forward.compute_ns;
        pass.start_ns += delta;
        pass.end_ns += delta;
      } else if (pass.cut_op >= 0) {
        // The PRE prefix where it overlaps the PRE bubble, the suffix in bubbles.
        gp.inside_ns += sw.forward.compute_within(pass.start_ns, 0, st.pre_end_ns, pass.cut_op);
        const Pass& rest = suffix(pass.cut_op);
        gp.inside_ns += rest.compute_ns;
        pass.end_ns += delta;
      } else {
        gp.inside_ns += sw.forward.compute_within(pass.start_ns, 0, st.pre_end_ns);
      }
    }
    for (size_t x = 0; x < gp.backward.size(); ++x) {
      PlacedPass& pass = gp.backward[x];
      pass.llm_microbatch = llm_mb[static_cast<size_t>(e)][x];
      gp.compute_ns += sw.backward.compute_ns;
      if (pass.in_bubbles) {
        gp.inside_ns += sw.backward.compute_ns;
      } else if (pass.cut_op >= 0) {
        // The head in the bubbles, the tail where it overlaps POST.
        gp.inside_ns += bwd_prefix(pass.cut_op).compute_ns +
                        bwd_suffix(pass.cut_op).compute_within(pass.start_ns, st.post_start_ns, st.post_end_ns);
      } else {
        gp.inside_ns += sw.backward.compute_within(pass.start_ns, st.post_start_ns, st.post_end_ns);
      }
      pass.start_ns += delta;
      pass.end_ns += delta;
    }
    if (gp.compute_ns > 0)
      efficiency = std::min(efficiency, static_cast<double>(gp.inside_ns) / static_cast<double>(gp.compute_ns));
  }
  out.efficiency = efficiency;
  return out;
}

}  // namespace lacuna::placement::optimus
