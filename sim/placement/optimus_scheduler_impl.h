// Internal to the Optimus planner: the bubble scheduler's state
// (BubbleScheduler::Impl, docs/placements.md#optimus), one responsibility per
// file:
//   optimus_scheduler.cpp           the scheduler's input, its bubbles and the
//                                   packing of passes into them
//   optimus_scheduler_forward.cpp   the forward passes: split, PRE, repacking,
//                                   evaluation against LLM stage 0
//   optimus_scheduler_backward.cpp  the backward passes and the gradients'
//                                   reduction
//   optimus_scheduler_driver.cpp    cutting passes at op boundaries, the δ
//                                   fixed point and the schedule it returns
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>
#include <vector>

#include "sim/core/error.h"
#include "sim/placement/optimus_scheduler.h"

namespace lacuna::placement::optimus {

// "No constraint" for times that may be maxed with others and shifted by δ
// without overflowing.
inline constexpr int64_t kNever = std::numeric_limits<int64_t>::min() / 4;
// The δ fixed point converges in two rounds without fine moves; moved
// outputs shift with δ, so a violated moved output never converges: give up
// after this many rounds.
inline constexpr int kMaxDeltaRounds = 16;

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
  static std::vector<int32_t> cut_points_of(const Pass& pass);

  const StageTimeline& stage_of(int32_t g) const { return llm.stages[static_cast<size_t>(gpu_llm_stage[static_cast<size_t>(g)])]; }
  const StageWork& work_of(int32_t g) const { return work.stages[static_cast<size_t>(g % P)]; }
  bool self(int32_t e, int32_t k) const { return geo.boundary_self(e, k); }

  void set_used(int32_t g, int32_t bub, int64_t value);

  void clear_gpu(int32_t g);

  // Runs `pass` back to back from `start`; the compute stream waits until
  // gates[k] (when given) before op k; op_end[k] (when given) receives the
  // time the stream is past op k.
  int64_t run_pass(const Pass& pass, int64_t start, const int64_t* gates, int64_t* op_end, size_t ops = std::numeric_limits<size_t>::max());

  int32_t last_forward_ops() const;
  bool is_cut(int32_t e) const { return cut[static_cast<size_t>(e)] < last_forward_ops(); }

  // The last stage's forward from op `at` on, as a pass of its own (cached
  // per cut point: the search tries each many times).
  const Pass& bwd_prefix(int32_t at);
  const Pass& bwd_suffix(int32_t at);

  const Pass& suffix(int32_t at);

  // Packs `pass` into GPU g's bubbles, from `ready` (relative) on and after
  // `front` (program order within one direction), using bubbles up to
  // `limit`. Whole ops only: a kernel goes where it ends before the bubble
  // does, a wait where its collective has ended by then, a collective's
  // record where the compute stream is (its time then is its issue time).
  // `gates` and `op_end` as for run_pass (gates in absolute time, which is
  // never earlier than relative: a conservative bound).
  bool pack(int32_t g, const Pass& pass, int64_t ready, Frontier& front, int32_t limit, PackResult& res, std::vector<Segment>* segments, const int64_t* gates = nullptr, int64_t* op_end = nullptr);

  // ---------------------------------------------------------------- forward

  void reset_split(const std::vector<int32_t>& split);

  PlacedPass* recorded(int32_t g, bool backward, int32_t x);

  // PRE: pipeline e's first n − f microbatches, back to back from iteration
  // start (after the encoder's parameter gather), before any LLM compute.
  void compute_pre(int32_t e);

  // Pipeline e's last f microbatches in the steady-phase bubbles, from
  // scratch. Bounds that depend on δ are taken at δ = 0 (later than the truth,
  // so the estimate stays an upper bound): the encoder's parameter gathers
  // end at their absolute times, and a link still busy with PRE transfers is
  // free by the receiving stage's PRE end.
  bool repack_forward(int32_t e);

  // δ, the assignment of encoder outputs to LLM microbatches and EF_i; false
  // when no δ satisfies EF_i ≤ F_i + δ (a moved output arrives too late).
  // `critical`: the encoder pipeline that sets δ (−1 when δ = 0).
  bool forward_eval(int32_t& critical);

  // Boundary transfers in LLM-microbatch order: each output goes from its
  // pipeline's last stage to the R LLM stage-0 TP slices one after another
  // (one send stream), each receiver taking them in microbatch order (one
  // receive stream).
  void serialize_forward();

  // ---------------------------------------------------------------- backward

  // The LLM microbatch of every encoder output, and when its gradient is back
  // at the pipeline's last stage (relative): LLM stage-0 slice k sends its
  // gradients in record order, the last stage receives them in order.
  void assign_and_gradients();

  // When GPU g's last backward pass (whose op end times are in
  // op_end_scratch, ending at `end`) hands each DP bucket to the reduction:
  // after the bucket's last op with overlap_grad_reduce, else all after the
  // pass.
  void note_reduce_ready(int32_t g, int64_t end);

  // Pipeline e's microbatch x backward in the bubbles, last encoder stage
  // first (its gradient comes from the LLM), each upstream stage after the
  // gradient from the next one arrived.
  bool pack_backward(int32_t e, int32_t x);

  // The head (ops before bcut[e]) of pipeline e's first POST backward on
  // its last encoder stage, in the bubbles after the moved passes, from the
  // gradient's arrival on.
  bool pack_backward_head(int32_t e);

  // POST passes, encoder data-parallel reduction and optimizer; the
  // estimated iteration. `critical`: the pipeline whose encoder backward
  // ends last, when encoder work (not the LLM) sets the end; else −1.
  int64_t backward_eval(int32_t& critical);

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
  void cut_forward(int32_t critical);

  // Kernel-level backward moves, after the whole-microbatch ones: while
  // encoder work sets the iteration's end, the critical pipeline's first
  // POST backward is cut on its last encoder stage at the op that gives the
  // smallest estimate; the head runs in the LLM's bubbles (kernel by kernel,
  // after the moved passes, from the gradient's arrival), the tail in POST.
  // Kept only if the estimate shrinks, each pipeline cut at most once; the
  // same stride search as cut_forward.
  void cut_backward(int32_t& critical, int64_t& estimate);

  int64_t run(const std::vector<int32_t>& split, bool coarse_only);

  Schedule schedule(const std::vector<int32_t>& split, bool coarse_only);
};

}  // namespace lacuna::placement::optimus
