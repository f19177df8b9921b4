// The bubble scheduler's input, its bubbles and the packing of passes into
// them (optimus_scheduler_impl.h lists the other parts).
#include "sim/placement/optimus_scheduler.h"

#include "sim/placement/optimus_scheduler_impl.h"

namespace lacuna::placement::optimus {

SchedulerInput make_scheduler_input(const LlmTimeline& llm, const EncoderWork& work, const ir::Program& llm_program,
                                    const cost::CostModel& cost) {
  SchedulerInput in;
  in.llm = &llm;
  in.work = &work;
  const Geometry& geo = work.geo;
  const LlmRanks ranks(llm_program);
  const int32_t P = geo.pp_enc, R = geo.slices(), m = geo.pipelines();
  in.pp_forward_ns.assign(static_cast<size_t>(geo.gpus()), 0);
  in.pp_backward_ns.assign(static_cast<size_t>(geo.gpus()), 0);
  in.boundary_ns.assign(static_cast<size_t>(m) * R, 0);
  // Representatives: LLM pipeline 0, encoder TP rank 0 (every other member
  // of a GPU class sits alike on the nodes).
  for (int32_t e = 0; e < m; ++e) {
    const int32_t t = geo.slice_of_pipeline(e) * geo.tp_enc;
    for (int32_t j = 0; j + 1 < P; ++j) {
      const int32_t a = ranks.rank(t, 0, geo.llm_stage(e, j)), b = ranks.rank(t, 0, geo.llm_stage(e, j + 1));
      const bool same = ranks.node(a) == ranks.node(b);
      const size_t g = static_cast<size_t>(e) * P + j;
      in.pp_forward_ns[g] = cost.p2p(work.p2p_forward_bytes, same).count();
      if (work.backward_p2p()) in.pp_backward_ns[g] = cost.p2p(work.p2p_backward_bytes, same).count();
    }
    const int32_t sender = ranks.rank(t, 0, geo.last_llm_stage(e));
    for (int32_t k = 0; k < R; ++k) {
      if (geo.boundary_self(e, k)) continue;
      const int32_t receiver = ranks.rank(k * geo.tp_enc, 0, 0);
      in.boundary_ns[static_cast<size_t>(e) * R + k] =
          cost.p2p(work.boundary_bytes, ranks.node(sender) == ranks.node(receiver)).count();
    }
  }
  return in;
}

std::vector<int32_t> BubbleScheduler::Impl::cut_points_of(const Pass& pass) {
  const int32_t K = static_cast<int32_t>(pass.ops.size());
  std::vector<int32_t> pending_until(static_cast<size_t>(K), -1);
  for (int32_t k = 0; k < K; ++k)
    if (pass.ops[static_cast<size_t>(k)].kind == PassOp::kWait)
      pending_until[static_cast<size_t>(pass.ops[static_cast<size_t>(k)].waits_for)] = k;
  std::vector<int32_t> out;
  int32_t open_until = -1;
  for (int32_t k = 1; k < K; ++k) {
    open_until = std::max(open_until, pending_until[static_cast<size_t>(k - 1)]);
    if (open_until < k) out.push_back(k);
  }
  return out;
}

void BubbleScheduler::Impl::set_used(int32_t g, int32_t bub, int64_t value) {
  auto& u = used[static_cast<size_t>(g)][static_cast<size_t>(bub)];
  if (logging) undo.push_back({g, bub, u});
  u = value;
  auto& flag = is_touched[static_cast<size_t>(g)][static_cast<size_t>(bub)];
  if (!flag) {
    flag = 1;
    touched[static_cast<size_t>(g)].push_back(bub);
  }
}

void BubbleScheduler::Impl::clear_gpu(int32_t g) {
  const auto& sb = bubbles[static_cast<size_t>(gpu_llm_stage[static_cast<size_t>(g)])];
  for (int32_t bub : touched[static_cast<size_t>(g)]) {
    used[static_cast<size_t>(g)][static_cast<size_t>(bub)] = sb.start[static_cast<size_t>(bub)];
    is_touched[static_cast<size_t>(g)][static_cast<size_t>(bub)] = 0;
  }
  touched[static_cast<size_t>(g)].clear();
}

int64_t BubbleScheduler::Impl::run_pass(const Pass& pass, int64_t start, const int64_t* gates, int64_t* op_end, size_t ops) {
  coll_end.assign(pass.ops.size(), 0);
  int64_t cursor = start, stream_free = kNever;
  for (size_t k = 0; k < pass.ops.size() && k < ops; ++k) {
    const PassOp& op = pass.ops[k];
    if (gates != nullptr) cursor = std::max(cursor, gates[k]);
    if (op.kind == PassOp::kKernel) {
      cursor += op.duration_ns;
    } else if (op.kind == PassOp::kCollective) {
      stream_free = std::max(stream_free, cursor) + op.duration_ns;
      coll_end[k] = stream_free;
    } else {
      cursor = std::max(cursor, coll_end[static_cast<size_t>(op.waits_for)]);
    }
    if (op_end != nullptr) op_end[k] = cursor;
  }
  return cursor;
}

int32_t BubbleScheduler::Impl::last_forward_ops() const {
  return static_cast<int32_t>(work.stages[static_cast<size_t>(P - 1)].forward.ops.size());
}

const Pass& BubbleScheduler::Impl::bwd_prefix(int32_t at) {
  auto it = bwd_prefixes.find(at);
  if (it == bwd_prefixes.end())
    it = bwd_prefixes.emplace(at, work.stages[static_cast<size_t>(P - 1)].backward.prefix(at)).first;
  return it->second;
}

const Pass& BubbleScheduler::Impl::bwd_suffix(int32_t at) {
  auto it = bwd_suffixes.find(at);
  if (it == bwd_suffixes.end())
    it = bwd_suffixes.emplace(at, work.stages[static_cast<size_t>(P - 1)].backward.suffix(at)).first;
  return it->second;
}

const Pass& BubbleScheduler::Impl::suffix(int32_t at) {
  auto it = suffixes.find(at);
  if (it == suffixes.end())
    it = suffixes.emplace(at, work.stages[static_cast<size_t>(P - 1)].forward.suffix(at)).first;
  return it->second;
}

bool BubbleScheduler::Impl::pack(int32_t g, const Pass& pass, int64_t ready, Frontier& front, int32_t limit, PackResult& res, std::vector<Segment>* segments, const int64_t* gates, int64_t* op_end) {
  const StageBubbles& sb = bubbles[static_cast<size_t>(gpu_llm_stage[static_cast<size_t>(g)])];
  const int32_t nb = static_cast<int32_t>(sb.start.size());
  limit = std::min(limit, nb - 1);
  if (pass.ops.empty()) {
    res.start = res.end = std::max(ready, front.time);
    return true;
  }
  if (pass.max_kernel_ns > sb.longest || front.bubble > limit) return false;
  const int64_t t0 = std::max(ready, front.time);
  int32_t bub = static_cast<int32_t>(
      std::upper_bound(sb.end.begin() + front.bubble, sb.end.begin() + nb, t0) - sb.end.begin());
  if (bub > limit) return false;
  auto& u = used[static_cast<size_t>(g)];
  int64_t cursor = std::max({sb.start[static_cast<size_t>(bub)], u[static_cast<size_t>(bub)], t0});
  bool placed_here = false;
  auto advance = [&]() {
    if (placed_here) set_used(g, bub, cursor);
    placed_here = false;
    if (++bub > limit) return false;
    cursor = std::max({sb.start[static_cast<size_t>(bub)], u[static_cast<size_t>(bub)], t0});
    return true;
  };
  coll_end.assign(pass.ops.size(), 0);
  int64_t stream_free = kNever;
  for (size_t k = 0; k < pass.ops.size(); ++k) {
    const PassOp& op = pass.ops[k];
    const int64_t gate = gates != nullptr ? gates[k] : kNever;
    switch (op.kind) {
      case PassOp::kKernel:
        while (std::max(cursor, gate) + op.duration_ns > sb.end[static_cast<size_t>(bub)])
          if (!advance()) return false;
        if (k == 0) res.start = cursor;
        cursor = std::max(cursor, gate) + op.duration_ns;
        break;
      case PassOp::kCollective:
        while (std::max(cursor, gate) > sb.end[static_cast<size_t>(bub)])
          if (!advance()) return false;
        if (k == 0) res.start = cursor;
        cursor = std::max(cursor, gate);
        stream_free = std::max(stream_free, cursor) + op.duration_ns;
        coll_end[k] = stream_free;
        break;
      case PassOp::kWait: {
        const int64_t done = std::max(coll_end[static_cast<size_t>(op.waits_for)], gate);
        while (std::max(cursor, done) > sb.end[static_cast<size_t>(bub)])
          if (!advance()) return false;
        if (k == 0) res.start = cursor;
        cursor = std::max(cursor, done);
        break;
      }
    }
    if (op_end != nullptr) op_end[k] = cursor;
    placed_here = true;
    if (segments != nullptr) {
      const int32_t pos = sb.position[static_cast<size_t>(bub)];
      if (!segments->empty() && segments->back().position == pos && segments->back().end == static_cast<int32_t>(k))
        ++segments->back().end;
      else
        segments->push_back({pos, static_cast<int32_t>(k), static_cast<int32_t>(k) + 1});
    }
  }
  set_used(g, bub, cursor);
  front = {bub, cursor};
  res.end = cursor;
  return true;
}

BubbleScheduler::BubbleScheduler(const SchedulerInput& in) : impl_(std::make_unique<Impl>(in)) {}
BubbleScheduler::~BubbleScheduler() = default;

int64_t BubbleScheduler::evaluate(const std::vector<int32_t>& split, bool coarse_only) {
  return impl_->run(split, coarse_only);
}

Schedule BubbleScheduler::schedule(const std::vector<int32_t>& split, bool coarse_only) {
  return impl_->schedule(split, coarse_only);
}

}  // namespace lacuna::placement::optimus
