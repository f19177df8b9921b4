#include "sim/placement/optimus_scheduler.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "sim/core/error.h"

namespace lacuna::placement::optimus {
namespace {

// "No constraint" for times that may be maxed with others and shifted by δ
// without overflowing.
constexpr int64_t kNever = std::numeric_limits<int64_t>::min() / 4;
// The δ fixed point converges in two rounds without fine moves; moved
// outputs shift with δ, so a violated moved output never converges: give up
// after this many rounds.
constexpr int kMaxDeltaRounds = 16;

}  // namespace

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

struct BubbleScheduler::Impl {
  struct Frontier {
    int32_t bubble = 0;
    int64_t time = kNever;
  };
  struct StageBubbles {
    std::vector<int64_t> start, end;
    std::vector<int32_t> position;
    int32_t forward_limit = -1;  // last bubble a forward pass may use
    int64_t longest = 0;
  };
  struct Undo {
    int32_t g, b;
    int64_t old;
  };
  struct PackResult {
    int64_t start = 0, end = 0;
  };
  struct Entry {  // one encoder output on its way to LLM stage 0
    int64_t ready;
    int64_t projected;  // ready + the sender's boundary transfers, without contention
    int32_t tie;        // −(LLM stage of the pipeline's last stage)
    int32_t e, x;
  };

  const SchedulerInput in;
  const LlmTimeline& llm;
  const EncoderWork& work;
  const Geometry geo;
  const int32_t P, R, M, G, N;
  bool kernel_cuts = false;            // schedule(): kernel-level forward and backward moves too
  std::vector<StageBubbles> bubbles;   // per LLM stage
  std::vector<int32_t> gpu_llm_stage;  // per g
  std::vector<uint8_t> has_backward;   // per encoder stage
  std::vector<int32_t> backward_order;  // LLM microbatches by gradient record position
  std::vector<int64_t> send_chain;      // per pipeline: its boundary sends back to back

  // Bubble occupancy per GPU: time up to which encoder work fills it.
  std::vector<std::vector<int64_t>> used;
  std::vector<std::vector<int32_t>> touched;
  std::vector<std::vector<uint8_t>> is_touched;
  std::vector<Undo> undo;
  bool logging = false;

  // State of one split.
  std::vector<int32_t> n, f, b;                 // per pipeline: microbatches, forward moved, backward moved
  std::vector<std::vector<int64_t>> out_ready;  // per pipeline, per x: abs (PRE) or rel (moved)
  std::vector<int64_t> pre_end;                 // per g: end of its PRE passes (abs), kNever if none
  std::vector<Frontier> fwd_front, bwd_front;   // per g
  std::vector<std::vector<int64_t>> bwd_link;   // per pipeline, per link j (j+1 → j): free from (rel)
  std::vector<int64_t> bwd_moved_end;           // per g: end of its last moved backward pass (rel)
  int64_t delta = 0;
  std::vector<Entry> entries;
  std::vector<int64_t> arrival;                 // EF_i (abs)
  std::vector<std::vector<int32_t>> llm_mb;     // per pipeline, per x: the LLM microbatch it feeds
  std::vector<std::vector<int64_t>> eb_ready;   // per pipeline, per x: gradient arrived (rel)
  std::vector<int64_t> grad_arrival;            // per LLM microbatch (rel)
  std::vector<int64_t> coll_end;                // scratch per pass op
  std::vector<int64_t> sender_free, receiver_free;
  std::vector<int64_t> post_end, bwd_done;      // per g (rel), kNever if none
  std::vector<int64_t> cursor_scratch, link_scratch;
  std::vector<int64_t> reduce_end;
  std::vector<int32_t> reduce_gate;
  std::vector<std::vector<int64_t>> reduce_ready;  // per g, per bucket: handed to the DP stream (relative)
  std::vector<int64_t> op_end_scratch;
  int32_t forward_moves = 0, backward_moves = 0;
  // Kernel-level forward cuts (docs/placements.md, "Kernel-level cuts"):
  // per pipeline, the op at which the last encoder stage's pass of the last
  // PRE microbatch is cut; its ops from there on run in the steady-phase
  // bubbles. The pass's op count means uncut.
  std::vector<int32_t> cut;
  std::vector<int32_t> cut_points;    // op indices where no collective is pending, ascending
  std::map<int32_t, Pass> suffixes;   // by cut point
  int32_t forward_cuts = 0;
  // Kernel-level backward cuts (docs/placements.md, "Kernel-level cuts"):
  // per pipeline, the op at which the last encoder stage's backward of its
  // first POST microbatch is cut; ops before it run in the LLM's bubbles
  // (after the moved passes), the rest in POST. 0 means uncut.
  std::vector<int32_t> bcut;
  std::vector<int32_t> bwd_cut_points;  // as cut_points, of the last stage's backward
  std::map<int32_t, Pass> bwd_prefixes, bwd_suffixes;
  std::vector<int64_t> bcut_end;                // per pipeline: the head's end (relative)
  std::vector<std::vector<int64_t>> bcut_op_end;  // per pipeline: the head's op ends (relative)
  int32_t backward_cuts = 0;

  Schedule* rec = nullptr;  // filled when recording

  explicit Impl(const SchedulerInput& input)
      : in(input),
        llm(*input.llm),
        work(*input.work),
        geo(input.work->geo),
        P(geo.pp_enc),
        R(geo.slices()),
        M(geo.pipelines()),
        G(geo.gpus()),
        N(input.llm->microbatches) {
    if (static_cast<int32_t>(llm.stages.size()) != geo.pp_llm)
      throw Error("Optimus scheduler: timeline has " + std::to_string(llm.stages.size()) + " stages, plan " +
                  std::to_string(geo.pp_llm));
    const int64_t last_forward = *std::max_element(llm.forward_start_ns.begin(), llm.forward_start_ns.end());
    for (const StageTimeline& st : llm.stages) {
      StageBubbles sb;
      for (const Bubble& bub : st.bubbles) {
        sb.start.push_back(bub.start_ns);
        sb.end.push_back(bub.end_ns);
        sb.position.push_back(bub.position);
        sb.longest = std::max(sb.longest, bub.length());
        // An encoder output made after the LLM's last forward on stage 0
        // began can feed no microbatch.
        if (bub.start_ns < last_forward) sb.forward_limit = static_cast<int32_t>(sb.start.size()) - 1;
      }
      bubbles.push_back(std::move(sb));
    }
    for (int32_t g = 0; g < G; ++g) gpu_llm_stage.push_back(geo.llm_stage(g / P, g % P));
    for (int32_t j = 0; j < P; ++j) has_backward.push_back(work.stages[static_cast<size_t>(j)].backward.empty() ? 0 : 1);
    send_chain.assign(static_cast<size_t>(M), 0);
    for (int32_t e = 0; e < M; ++e)
      for (int32_t k = 0; k < R; ++k) send_chain[static_cast<size_t>(e)] += in.boundary_ns[static_cast<size_t>(e) * R + k];
    backward_order.resize(static_cast<size_t>(N));
    std::iota(backward_order.begin(), backward_order.end(), 0);
    std::stable_sort(backward_order.begin(), backward_order.end(), [&](int32_t a, int32_t c) {
      return llm.backward_position[static_cast<size_t>(a)] < llm.backward_position[static_cast<size_t>(c)];
    });
    cut_points = cut_points_of(work.stages[static_cast<size_t>(P - 1)].forward);
    if (has_backward[static_cast<size_t>(P - 1)])
      bwd_cut_points = cut_points_of(work.stages[static_cast<size_t>(P - 1)].backward);
    used.resize(static_cast<size_t>(G));
    touched.resize(static_cast<size_t>(G));
    is_touched.resize(static_cast<size_t>(G));
    for (int32_t g = 0; g < G; ++g) {
      const auto& sb = bubbles[static_cast<size_t>(gpu_llm_stage[static_cast<size_t>(g)])];
      used[static_cast<size_t>(g)] = sb.start;
      is_touched[static_cast<size_t>(g)].assign(sb.start.size(), 0);
    }
  }

  // Where a pass may be cut: between two ops with no TP collective issued
  // and not yet waited for (so both parts hold whole record → wait pairs).
  static std::vector<int32_t> cut_points_of(const Pass& pass) {
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

  const StageTimeline& stage_of(int32_t g) const { return llm.stages[static_cast<size_t>(gpu_llm_stage[static_cast<size_t>(g)])]; }
  const StageWork& work_of(int32_t g) const { return work.stages[static_cast<size_t>(g % P)]; }
  bool self(int32_t e, int32_t k) const { return geo.boundary_self(e, k); }

  void set_used(int32_t g, int32_t bub, int64_t value) {
    auto& u = used[static_cast<size_t>(g)][static_cast<size_t>(bub)];
    if (logging) undo.push_back({g, bub, u});
    u = value;
    auto& flag = is_touched[static_cast<size_t>(g)][static_cast<size_t>(bub)];
    if (!flag) {
      flag = 1;
      touched[static_cast<size_t>(g)].push_back(bub);
    }
  }

  void clear_gpu(int32_t g) {
    const auto& sb = bubbles[static_cast<size_t>(gpu_llm_stage[static_cast<size_t>(g)])];
    for (int32_t bub : touched[static_cast<size_t>(g)]) {
      used[static_cast<size_t>(g)][static_cast<size_t>(bub)] = sb.start[static_cast<size_t>(bub)];
      is_touched[static_cast<size_t>(g)][static_cast<size_t>(bub)] = 0;
    }
    touched[static_cast<size_t>(g)].clear();
  }

  // Runs `pass` back to back from `start`; the compute stream waits until
  // gates[k] (when given) before op k; op_end[k] (when given) receives the
  // time the stream is past op k.
  int64_t run_pass(const Pass& pass, int64_t start, const int64_t* gates, int64_t* op_end,
                   size_t ops = std::numeric_limits<size_t>::max()) {
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

  int32_t last_forward_ops() const {
    return static_cast<int32_t>(work.stages[static_cast<size_t>(P - 1)].forward.ops.size());
  }
  bool is_cut(int32_t e) const { return cut[static_cast<size_t>(e)] < last_forward_ops(); }

  // The last stage's forward from op `at` on, as a pass of its own (cached
  // per cut point: the search tries each many times).
  const Pass& bwd_prefix(int32_t at) {
    auto it = bwd_prefixes.find(at);
    if (it == bwd_prefixes.end())
      it = bwd_prefixes.emplace(at, work.stages[static_cast<size_t>(P - 1)].backward.prefix(at)).first;
    return it->second;
  }
  const Pass& bwd_suffix(int32_t at) {
    auto it = bwd_suffixes.find(at);
    if (it == bwd_suffixes.end())
      it = bwd_suffixes.emplace(at, work.stages[static_cast<size_t>(P - 1)].backward.suffix(at)).first;
    return it->second;
  }

  const Pass& suffix(int32_t at) {
    auto it = suffixes.find(at);
    if (it == suffixes.end())
      it = suffixes.emplace(at, work.stages[static_cast<size_t>(P - 1)].forward.suffix(at)).first;
    return it->second;
  }

  // Packs `pass` into GPU g's bubbles, from `ready` (relative) on and after
  // `front` (program order within one direction), using bubbles up to
  // `limit`. Whole ops only: a kernel goes where it ends before the bubble
  // does, a wait where its collective has ended by then, a collective's
  // record where the compute stream is (its time then is its issue time).
  // `gates` and `op_end` as for run_pass (gates in absolute time, which is
  // never earlier than relative: a conservative bound).
  bool pack(int32_t g, const Pass& pass, int64_t ready, Frontier& front, int32_t limit, PackResult& res,
            std::vector<Segment>* segments, const int64_t* gates = nullptr, int64_t* op_end = nullptr) {
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

  // ---------------------------------------------------------------- forward

  void reset_split(const std::vector<int32_t>& split) {
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

  PlacedPass* recorded(int32_t g, bool backward, int32_t x) {
    if (rec == nullptr) return nullptr;
    auto& gp = rec->gpus[static_cast<size_t>(g)];
    auto& v = backward ? gp.backward : gp.forward;
    PlacedPass& p = v[static_cast<size_t>(x)];
    p.x = x;
    p.segments.clear();
    return &p;
  }

  // PRE: pipeline e's first n − f microbatches, back to back from iteration
  // start (after the encoder's parameter gather), before any LLM compute.
  void compute_pre(int32_t e) {
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

  // Pipeline e's last f microbatches in the steady-phase bubbles, from
  // scratch. Bounds that depend on δ are taken at δ = 0 (later than the truth,
  // so the estimate stays an upper bound): the encoder's parameter gathers
  // end at their absolute times, and a link still busy with PRE transfers is
  // free by the receiving stage's PRE end.
  bool repack_forward(int32_t e) {
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

  // δ, the assignment of encoder outputs to LLM microbatches and EF_i; false
  // when no δ satisfies EF_i ≤ F_i + δ (a moved output arrives too late).
  // `critical`: the encoder pipeline that sets δ (−1 when δ = 0).
  bool forward_eval(int32_t& critical) {
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

  // Boundary transfers in LLM-microbatch order: each output goes from its
  // pipeline's last stage to the R LLM stage-0 TP slices one after another
  // (one send stream), each receiver taking them in microbatch order (one
  // receive stream).
  void serialize_forward() {
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

  // ---------------------------------------------------------------- backward

  // The LLM microbatch of every encoder output, and when its gradient is back
  // at the pipeline's last stage (relative): LLM stage-0 slice k sends its
  // gradients in record order, the last stage receives them in order.
  void assign_and_gradients() {
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

  // When GPU g's last backward pass (whose op end times are in
  // op_end_scratch, ending at `end`) hands each DP bucket to the reduction:
  // after the bucket's last op with overlap_grad_reduce, else all after the
  // pass.
  void note_reduce_ready(int32_t g, int64_t end) {
    const StageWork& sw = work_of(g);
    auto& ready = reduce_ready[static_cast<size_t>(g)];
    ready.resize(sw.buckets.size());
    for (size_t k = 0; k < sw.buckets.size(); ++k)
      ready[k] = work.overlap_grad_reduce ? op_end_scratch[static_cast<size_t>(sw.buckets[k].backward_op)] : end;
  }

  // Pipeline e's microbatch x backward in the bubbles, last encoder stage
  // first (its gradient comes from the LLM), each upstream stage after the
  // gradient from the next one arrived.
  bool pack_backward(int32_t e, int32_t x) {
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

  // The head (ops before bcut[e]) of pipeline e's first POST backward on
  // its last encoder stage, in the bubbles after the moved passes, from the
  // gradient's arrival on.
  bool pack_backward_head(int32_t e) {
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

  // POST passes, encoder data-parallel reduction and optimizer; the
  // estimated iteration. `critical`: the pipeline whose encoder backward
  // ends last, when encoder work (not the LLM) sets the end; else −1.
  int64_t backward_eval(int32_t& critical) {
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

  // ---------------------------------------------------------------- driver

  // Tries `points` on a stride of at most 64 evaluations, then every point
  // around the best; `attempt(at)` updates `best_cut` when `at` is better.
  template <class Attempt>
  static void search_cut_points(const std::vector<int32_t>& points, const int32_t& best_cut, Attempt&& attempt) {
    const auto count = static_cast<int32_t>(points.size());
    const int32_t stride = std::max(1, count / 64);
    int32_t best_index = -1;
    for (int32_t i = 0; i < count; i += stride) {
      const int32_t had = best_cut;
      attempt(points[static_cast<size_t>(i)]);
      if (best_cut != had) best_index = i;
    }
    if (best_index >= 0 && stride > 1)
      for (int32_t i = std::max(0, best_index - stride + 1); i < std::min(count, best_index + stride); ++i)
        if (i != best_index) attempt(points[static_cast<size_t>(i)]);
  }

  // Kernel-level forward moves, after the whole-microbatch ones: while δ > 0,
  // the critical pipeline's last PRE microbatch is cut at the op that gives
  // the smallest δ (the tail of its last encoder stage's pass runs in the
  // steady-phase bubbles, kernel by kernel); kept only if δ shrinks, each
  // pipeline cut at most once. Cut points are tried on a stride of at most 64
  // evaluations, then every point around the best.
  void cut_forward(int32_t critical) {
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

  // Kernel-level backward moves, after the whole-microbatch ones: while
  // encoder work sets the iteration's end, the critical pipeline's first
  // POST backward is cut on its last encoder stage at the op that gives the
  // smallest estimate; the head runs in the LLM's bubbles (kernel by kernel,
  // after the moved passes, from the gradient's arrival), the tail in POST.
  // Kept only if the estimate shrinks, each pipeline cut at most once; the
  // same stride search as cut_forward.
  void cut_backward(int32_t& critical, int64_t& estimate) {
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

  int64_t run(const std::vector<int32_t>& split, bool coarse_only) {
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

  Schedule schedule(const std::vector<int32_t>& split, bool coarse_only) {
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
};

BubbleScheduler::BubbleScheduler(const SchedulerInput& in) : impl_(std::make_unique<Impl>(in)) {}
BubbleScheduler::~BubbleScheduler() = default;

int64_t BubbleScheduler::evaluate(const std::vector<int32_t>& split, bool coarse_only) {
  return impl_->run(split, coarse_only);
}

Schedule BubbleScheduler::schedule(const std::vector<int32_t>& split, bool coarse_only) {
  return impl_->schedule(split, coarse_only);
}

}  // namespace lacuna::placement::optimus
