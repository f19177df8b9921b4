#include "sim/placement/optimus_emit.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "sim/compiler/rank_layout.h"
#include "sim/core/error.h"
#include "sim/cost/memory.h"
#include "sim/placement/class_edit.h"

namespace lacuna::placement::optimus {
namespace {

// p2p channels: the LLM uses 0 (activations) and 1 (gradients) between
// pipeline neighbours; encoder stages use 2 / 3 on the same pairs, boundary
// transfers 4 / 5 (the last LLM stage's pp_next is stage 0, so a boundary
// pair can coincide with an LLM pair).
constexpr int32_t kChannelEncoderForward = 2;
constexpr int32_t kChannelEncoderBackward = 3;
constexpr int32_t kChannelBoundaryForward = 4;
constexpr int32_t kChannelBoundaryBackward = 5;

// Order of insertions at one compute-stream position: the LLM's gradient
// record first (so the gradient leaves as soon as it exists), then encoder
// work, then the LLM's wait for vision embeddings (encoder work placed there
// ran in the bubble before it).
enum Priority : int32_t { kGradientRecord = 0, kEncoder = 1, kBoundaryWait = 2 };

struct Ins {
  int32_t position;
  int32_t priority;
  int32_t direction;  // encoder: 0 forward, 1 backward (−1: before both)
  int32_t x;
  int64_t seq;        // emission order
  ir::Op op;
};

// Slots added to the program.
struct Slots {
  int32_t enc_tp = -1, enc_dp = -1;
  int32_t dst_base = -1;  // enc_bnd_dst{k}: LLM stage-0 slice k (on encoder last-stage ranks)
  int32_t src_base = -1;  // enc_bnd_src{e}: pipeline e's last stage (on LLM stage-0 ranks)
};

ir::Op make_op(ir::Phase phase, int32_t microbatch) {
  ir::Op op;
  op.set_phase(phase);
  op.set_microbatch(microbatch);
  op.set_chunk(0);
  op.set_layer(-1);
  op.set_module(1);
  return op;
}

ir::Op record_op(ir::Phase phase, int32_t microbatch, int32_t event) {
  ir::Op op = make_op(phase, microbatch);
  op.mutable_record()->set_event(event);
  return op;
}

ir::Op wait_op(ir::Phase phase, int32_t microbatch, int32_t event, int64_t value) {
  ir::Op op = make_op(phase, microbatch);
  op.mutable_wait()->set_event(event);
  op.mutable_wait()->set_value(value);
  return op;
}

ir::Op send_op(ir::Phase phase, int32_t microbatch, int32_t slot, int64_t bytes, int32_t channel, int64_t tag) {
  ir::Op op = make_op(phase, microbatch);
  set_p2p(*op.mutable_send(), slot, bytes, channel, tag);
  return op;
}

ir::Op recv_op(ir::Phase phase, int32_t microbatch, int32_t slot, int64_t bytes, int32_t channel, int64_t tag) {
  ir::Op op = make_op(phase, microbatch);
  set_p2p(*op.mutable_recv(), slot, bytes, channel, tag);
  return op;
}

// One class being built (Emitter::build_class): LLM stage s's class for
// encoder slice c, and what the encoder's GPU there does.
struct ClassBuild {
  ClassBuild(const ir::RankClass& llm_class, int32_t stage, int32_t slice, const Geometry& geo, const Schedule& sched,
             const EncoderWork& work, const Slots& slots, int32_t slices, int32_t stages)
      : cls(llm_class),
        ed(cls),
        s(stage),
        c(slice),
        e(geo.pipeline(stage, slice * geo.tp_enc)),
        j(geo.encoder_stage(stage)),
        g(e * stages + j),
        gp(sched.gpus[static_cast<size_t>(g)]),
        sw(work.stages[static_cast<size_t>(j)]),
        dp_ops(slots.enc_dp >= 0 && sw.data_parallel()),
        gathers(dp_ops ? sw.gathers() : 0),
        buckets(dp_ops ? static_cast<int32_t>(sw.buckets.size()) : 0),
        handovers(work.overlap_grad_reduce ? buckets : (buckets > 0 ? 1 : 0)),
        last(j == stages - 1),
        recv_fwd(j > 0),
        send_fwd(j + 1 < stages),
        recv_bwd(j + 1 < stages && work.backward_p2p()),
        send_bwd(j > 0 && work.backward_p2p()) {
    cls.set_name(cls.name() + "_enc" + std::to_string(slice));
    // Reduction handovers of the GPU's last backward pass: after op k.
    if (dp_ops && work.overlap_grad_reduce)
      for (const DpBucket& bk : sw.buckets) handover_after.push_back(bk.backward_op);
    if (last)
      for (int32_t k = 0; k < slices; ++k) (geo.boundary_self(e, k) ? self_receivers : other_receivers)++;
  }

  void add(int32_t position, int32_t priority, int32_t direction, int32_t x, ir::Op op) {
    ins.push_back({position, priority, direction, x, seq++, std::move(op)});
  }
  // The stream `name` (made on first use), to append ops to directly.
  ir::Stream& stream(const std::string& name, ir::StreamKind kind) { return ed.stream_at(ed.stream(name, kind)); }

  ir::RankClass cls;
  ClassEditor ed;
  const int32_t s, c;  // LLM stage, encoder slice
  const int32_t e, j, g;  // encoder pipeline, its stage, the GPU (e · P + j)
  const GpuPlacement& gp;
  const StageWork& sw;
  const bool dp_ops;
  const int32_t gathers, buckets, handovers;
  std::vector<int32_t> handover_after;
  const bool last;
  int32_t self_receivers = 0, other_receivers = 0;  // boundary slices on this GPU's node or not
  const bool recv_fwd, send_fwd, recv_bwd, send_bwd;
  std::vector<Ins> ins;  // compute-stream insertions
  int64_t seq = 0;
};

class Emitter {
 public:
  Emitter(const ir::Program& llm, const LlmTimeline& tl, const EncoderWork& work, const Schedule& sched)
      : llm_(llm), tl_(tl), work_(work), sched_(sched), geo_(work.geo), R_(geo_.slices()), P_(geo_.pp_enc),
        N_(tl.microbatches) {}

  ir::Program run() {
    ir::Program out;
    *out.mutable_info() = llm_.info();
    *out.mutable_cluster() = llm_.cluster();
    *out.mutable_group_slots() = llm_.group_slots();
    *out.mutable_peer_slots() = llm_.peer_slots();
    *out.mutable_groups() = llm_.groups();
    *out.mutable_ranks() = llm_.ranks();
    add_slots(out);
    for (int32_t s = 0; s < geo_.pp_llm; ++s)
      for (int32_t c = 0; c < R_; ++c) *out.add_classes() = build_class(s, c);
    bind_ranks(out);
    return out;
  }

 private:
  bool any_data_parallel() const {
    for (const auto& st : work_.stages)
      if (st.data_parallel()) return true;
    return false;
  }

  void add_slots(ir::Program& out) {
    if (geo_.tp_enc > 1) slots_.enc_tp = add_group_slot(out, "enc_tp", ir::ENCODER_TP);
    if (any_data_parallel()) slots_.enc_dp = add_group_slot(out, "enc_dp", ir::ENCODER_DP);
    for (int32_t k = 0; k < R_; ++k) {
      const int32_t slot = add_peer_slot(out, "enc_bnd_dst" + std::to_string(k));
      if (k == 0) slots_.dst_base = slot;
    }
    for (int32_t e = 0; e < geo_.pipelines(); ++e) {
      const int32_t slot = add_peer_slot(out, "enc_bnd_src" + std::to_string(e));
      if (e == 0) slots_.src_base = slot;
    }
  }

  // ---------------------------------------------------------------- classes

  ir::RankClass build_class(int32_t s, int32_t c) {
    ClassBuild cb(llm_.classes(s), s, c, geo_, sched_, work_, slots_, R_, P_);
    add_encoder_dp(cb);
    add_encoder_passes(cb);
    add_pipeline_streams(cb);
    add_boundary_sender(cb);
    add_boundary_receiver(cb);
    splice_and_step(cb);
    add_encoder_state(cb);
    return std::move(cb.cls);
  }

  // Encoder data parallelism: per bucket, gathers (forward order) at
  // iteration start, reductions (gradient-ready order) as the last
  // backward completes each bucket (or all after it), one event each way;
  // the optimizer runs after the LLM's.
  void add_encoder_dp(ClassBuild& cb) {
    if (!cb.dp_ops) return;
    ir::Stream& dp = cb.stream("enc_dp", ir::DP_COMM);
    const int32_t from = cb.ed.event("enc_dp_to_compute"), to = cb.ed.event("compute_to_enc_dp");
    for (int32_t k = cb.buckets - 1; k >= 0 && cb.gathers > 0; --k) {
      ir::Op op = make_op(ir::DP_SYNC, 0);
      op.mutable_collective()->set_kind(ir::ALL_GATHER);
      op.mutable_collective()->set_group_slot(slots_.enc_dp);
      op.mutable_collective()->set_bytes(cb.sw.buckets[static_cast<size_t>(k)].gather_bytes);
      *dp.add_ops() = op;
      *dp.add_ops() = record_op(ir::DP_SYNC, 0, from);
    }
    for (int32_t k = 0; k < cb.buckets; ++k) {
      *dp.add_ops() = wait_op(ir::DP_SYNC, 0, to, work_.overlap_grad_reduce ? k + 1 : 1);
      ir::Op op = make_op(ir::DP_SYNC, 0);
      op.mutable_collective()->set_kind(work_.distributed_optimizer ? ir::REDUCE_SCATTER : ir::ALL_REDUCE);
      op.mutable_collective()->set_group_slot(slots_.enc_dp);
      op.mutable_collective()->set_bytes(cb.sw.buckets[static_cast<size_t>(k)].reduce_bytes);
      *dp.add_ops() = op;
    }
    *dp.add_ops() = record_op(ir::DP_SYNC, 0, from);
  }

  // The encoder passes where the scheduler put them, with their inputs
  // waited for before and their outputs recorded after, and the DP handovers.
  void add_encoder_passes(ClassBuild& cb) {
    int64_t tp_count[2] = {0, 0};
    for (int dir = 0; dir < 2; ++dir) {
      const bool backward = dir == 1;
      const auto& passes = backward ? cb.gp.backward : cb.gp.forward;
      const Pass& tmpl = backward ? cb.sw.backward : cb.sw.forward;
      const ir::Phase phase = backward ? ir::BACKWARD_INPUT : ir::FORWARD;
      const std::string tp_name = backward ? "enc_tp_bwd" : "enc_tp_fwd";
      for (size_t xi = 0; xi < passes.size(); ++xi) {
        const PlacedPass& pass = passes[xi];
        const int32_t x = static_cast<int32_t>(xi);
        const int32_t i = pass.llm_microbatch;
        if (pass.segments.empty()) continue;
        const int32_t first_pos = pass.segments.front().position, last_pos = pass.segments.back().position;
        // Before the pass: its inputs.
        if (!backward) {
          if (cb.recv_fwd) cb.add(first_pos, kEncoder, dir, x, wait_op(phase, i, cb.ed.event("enc_recv_fwd_to_compute"), x + 1));
        } else if (cb.last) {
          if (cb.other_receivers > 0)
            cb.add(first_pos, kEncoder, dir, x, wait_op(phase, i, cb.ed.event("bnd_recv_bwd_to_compute"), x + 1));
          if (cb.self_receivers > 0) cb.add(first_pos, kEncoder, dir, x, wait_op(phase, i, cb.ed.event("bnd_self_bwd"), x + 1));
        } else if (cb.recv_bwd) {
          cb.add(first_pos, kEncoder, dir, x, wait_op(phase, i, cb.ed.event("enc_recv_bwd_to_compute"), x + 1));
        }
        // The pass'cb.s ops where the scheduler put them.
        std::vector<int64_t> record_value(tmpl.ops.size(), 0);
        for (const Segment& seg : pass.segments) {
          for (int32_t k = seg.begin; k < seg.end; ++k) {
            const PassOp& po = tmpl.ops[static_cast<size_t>(k)];
            ir::Op op = po.op;
            op.set_microbatch(i);
            op.set_chunk(0);
            // The GPU'cb.s first forward waits for the parameter cb.gathers.
            if (!backward && x == 0 && cb.gathers > 0 && cb.sw.first_forward_gate_value[static_cast<size_t>(k)] > 0)
              cb.add(seg.position, kEncoder, dir, x,
                  wait_op(ir::DP_SYNC, i, cb.ed.event("enc_dp_to_compute"), cb.sw.first_forward_gate_value[static_cast<size_t>(k)]));
            if (po.kind == PassOp::kKernel) {
              cb.add(seg.position, kEncoder, dir, x, std::move(op));
            } else if (po.kind == PassOp::kCollective) {
              if (slots_.enc_tp < 0) throw Error("Optimus: encoder TP collective without an encoder TP group");
              ir::Stream& tp = cb.stream(tp_name, ir::ENCODER_COMM);
              const int32_t to = cb.ed.event("compute_to_" + tp_name), from = cb.ed.event(tp_name + "_to_compute");
              const int64_t n = ++tp_count[dir];
              cb.add(seg.position, kEncoder, dir, x, record_op(op.phase(), i, to));
              *tp.add_ops() = wait_op(op.phase(), i, to, n);
              op.mutable_collective()->set_group_slot(slots_.enc_tp);
              *tp.add_ops() = op;
              *tp.add_ops() = record_op(op.phase(), i, from);
              record_value[static_cast<size_t>(k)] = n;
            } else {
              const int64_t v = record_value[static_cast<size_t>(po.waits_for)];
              cb.add(seg.position, kEncoder, dir, x, wait_op(op.phase(), i, cb.ed.event(tp_name + "_to_compute"), v));
            }
            if (backward && x + 1 == static_cast<int32_t>(passes.size()) &&
                std::find(cb.handover_after.begin(), cb.handover_after.end(), k) != cb.handover_after.end())
              cb.add(seg.position, kEncoder, dir, x, record_op(ir::DP_SYNC, i, cb.ed.event("compute_to_enc_dp")));
          }
        }
        // After the pass: its outputs.
        if (!backward) {
          if (cb.send_fwd) cb.add(last_pos, kEncoder, dir, x, record_op(phase, i, cb.ed.event("compute_to_enc_send_fwd")));
          if (cb.last && cb.other_receivers > 0)
            cb.add(last_pos, kEncoder, dir, x, record_op(phase, i, cb.ed.event("compute_to_bnd_send_fwd")));
          if (cb.last && cb.self_receivers > 0) cb.add(last_pos, kEncoder, dir, x, record_op(phase, i, cb.ed.event("bnd_self_fwd")));
        } else {
          if (cb.send_bwd) cb.add(last_pos, kEncoder, dir, x, record_op(phase, i, cb.ed.event("compute_to_enc_send_bwd")));
          if (cb.dp_ops && !work_.overlap_grad_reduce && x + 1 == static_cast<int32_t>(passes.size()))
            cb.add(last_pos, kEncoder, dir, x, record_op(ir::DP_SYNC, i, cb.ed.event("compute_to_enc_dp")));
        }
      }
    }
    // Nothing to reduce from here (no microbatch): hand the zero gradients
    // to the reduction at once.
    if (cb.dp_ops && cb.gp.backward.empty())
      for (int32_t k = 0; k < cb.handovers; ++k)
        cb.add(tl_.stages[static_cast<size_t>(cb.s)].pre_position, kEncoder, -1, 0,
            record_op(ir::DP_SYNC, 0, cb.ed.event("compute_to_enc_dp")));
  }

  // The communication streams of the encoder pipeline, in microbatch order.
  void add_pipeline_streams(ClassBuild& cb) {
    const auto& fwd = cb.gp.forward;
    const auto& bwd = cb.gp.backward;
    const int64_t n_pp = static_cast<int64_t>(P_) * N_;
    if (cb.send_fwd && !fwd.empty()) {
      ir::Stream& st = cb.stream("enc_send_fwd", ir::ENCODER_COMM);
      const int32_t ev = cb.ed.event("compute_to_enc_send_fwd");
      for (size_t x = 0; x < fwd.size(); ++x) {
        const int32_t i = fwd[x].llm_microbatch;
        *st.add_ops() = wait_op(ir::FORWARD, i, ev, static_cast<int64_t>(x) + 1);
        *st.add_ops() = send_op(ir::FORWARD, i, compiler::kSlotPpNext, work_.p2p_forward_bytes, kChannelEncoderForward,
                                (cb.j + 1) * static_cast<int64_t>(N_) + i);
      }
    }
    if (cb.recv_fwd && !fwd.empty()) {
      ir::Stream& st = cb.stream("enc_recv_fwd", ir::ENCODER_COMM);
      const int32_t ev = cb.ed.event("enc_recv_fwd_to_compute");
      for (const PlacedPass& p : fwd) {
        *st.add_ops() = recv_op(ir::FORWARD, p.llm_microbatch, compiler::kSlotPpPrev, work_.p2p_forward_bytes,
                                kChannelEncoderForward, cb.j * static_cast<int64_t>(N_) + p.llm_microbatch);
        *st.add_ops() = record_op(ir::FORWARD, p.llm_microbatch, ev);
      }
    }
    if (cb.send_bwd && !bwd.empty()) {
      ir::Stream& st = cb.stream("enc_send_bwd", ir::ENCODER_COMM);
      const int32_t ev = cb.ed.event("compute_to_enc_send_bwd");
      for (size_t x = 0; x < bwd.size(); ++x) {
        const int32_t i = bwd[x].llm_microbatch;
        *st.add_ops() = wait_op(ir::BACKWARD_INPUT, i, ev, static_cast<int64_t>(x) + 1);
        *st.add_ops() = send_op(ir::BACKWARD_INPUT, i, compiler::kSlotPpPrev, work_.p2p_backward_bytes,
                                kChannelEncoderBackward, n_pp + (cb.j - 1) * static_cast<int64_t>(N_) + i);
      }
    }
    if (cb.recv_bwd && !bwd.empty()) {
      ir::Stream& st = cb.stream("enc_recv_bwd", ir::ENCODER_COMM);
      const int32_t ev = cb.ed.event("enc_recv_bwd_to_compute");
      for (const PlacedPass& p : bwd) {
        *st.add_ops() = recv_op(ir::BACKWARD_INPUT, p.llm_microbatch, compiler::kSlotPpNext, work_.p2p_backward_bytes,
                                kChannelEncoderBackward, n_pp + cb.j * static_cast<int64_t>(N_) + p.llm_microbatch);
        *st.add_ops() = record_op(ir::BACKWARD_INPUT, p.llm_microbatch, ev);
      }
    }
  }

  // The boundary, encoder side (the pipeline's last stage): embeddings out,
  // their gradients back in.
  void add_boundary_sender(ClassBuild& cb) {
    const auto& fwd = cb.gp.forward;
    const auto& bwd = cb.gp.backward;
    if (cb.last && cb.other_receivers > 0 && !fwd.empty()) {
      ir::Stream& send = cb.stream("bnd_send_fwd", ir::BOUNDARY);
      const int32_t ev = cb.ed.event("compute_to_bnd_send_fwd");
      for (size_t x = 0; x < fwd.size(); ++x) {
        const int32_t i = fwd[x].llm_microbatch;
        *send.add_ops() = wait_op(ir::FORWARD, i, ev, static_cast<int64_t>(x) + 1);
        for (int32_t k = 0; k < R_; ++k)
          if (!geo_.boundary_self(cb.e, k))
            *send.add_ops() =
                send_op(ir::FORWARD, i, slots_.dst_base + k, work_.boundary_bytes, kChannelBoundaryForward, i);
      }
      ir::Stream& recv = cb.stream("bnd_recv_bwd", ir::BOUNDARY);
      const int32_t rev = cb.ed.event("bnd_recv_bwd_to_compute");
      for (size_t x = 0; x < bwd.size(); ++x) {
        const int32_t i = bwd[x].llm_microbatch;
        for (int32_t k = 0; k < R_; ++k)
          if (!geo_.boundary_self(cb.e, k))
            *recv.add_ops() = recv_op(ir::BACKWARD_INPUT, i, slots_.dst_base + k, work_.boundary_bytes,
                                      kChannelBoundaryBackward, i);
        *recv.add_ops() = record_op(ir::BACKWARD_INPUT, i, rev);
      }
    }
  }

  // The boundary, LLM side (stage 0): wait for microbatch i's embeddings
  // before its forward on chunk 0, hand its gradient back after the last
  // input-gradient kernel.
  void add_boundary_receiver(ClassBuild& cb) {
    if (cb.s == 0) {
      int64_t other = 0, self = 0;
      std::vector<uint8_t> is_self(static_cast<size_t>(N_), 0);
      for (int32_t i = 0; i < N_; ++i) {
        const int32_t src = sched_.source_pipeline[static_cast<size_t>(i)];
        is_self[static_cast<size_t>(i)] = geo_.boundary_self(src, cb.c) ? 1 : 0;
        const int32_t pos = tl_.forward_position[static_cast<size_t>(i)];
        if (is_self[static_cast<size_t>(i)]) {
          cb.add(pos, kBoundaryWait, 0, i, wait_op(ir::FORWARD, i, cb.ed.event("bnd_self_fwd"), ++self));
        } else {
          ir::Stream& recv = cb.stream("bnd_recv_fwd", ir::BOUNDARY);
          const int32_t ev = cb.ed.event("bnd_recv_fwd_to_compute");
          *recv.add_ops() =
              recv_op(ir::FORWARD, i, slots_.src_base + src, work_.boundary_bytes, kChannelBoundaryForward, i);
          *recv.add_ops() = record_op(ir::FORWARD, i, ev);
          cb.add(pos, kBoundaryWait, 0, i, wait_op(ir::FORWARD, i, ev, ++other));
        }
      }
      std::vector<int32_t> order(static_cast<size_t>(N_));
      for (int32_t i = 0; i < N_; ++i) order[static_cast<size_t>(i)] = i;
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return tl_.backward_position[static_cast<size_t>(a)] < tl_.backward_position[static_cast<size_t>(b)];
      });
      int64_t sent = 0;
      for (int32_t i : order) {
        const int32_t pos = tl_.backward_position[static_cast<size_t>(i)];
        if (is_self[static_cast<size_t>(i)]) {
          cb.add(pos, kGradientRecord, 0, i, record_op(ir::BACKWARD_INPUT, i, cb.ed.event("bnd_self_bwd")));
          continue;
        }
        const int32_t ev = cb.ed.event("compute_to_bnd_send_bwd");
        cb.add(pos, kGradientRecord, 0, i, record_op(ir::BACKWARD_INPUT, i, ev));
        ir::Stream& send = cb.stream("bnd_send_bwd", ir::BOUNDARY);
        *send.add_ops() = wait_op(ir::BACKWARD_INPUT, i, ev, ++sent);
        *send.add_ops() = send_op(ir::BACKWARD_INPUT, i, slots_.src_base + sched_.source_pipeline[static_cast<size_t>(i)],
                                  work_.boundary_bytes, kChannelBoundaryBackward, i);
      }
    }
  }

  // Splices the insertions into the compute stream; the encoder optimizer
  // runs after the LLM's (its reduction ends after the last encoder
  // backward, normally after the LLM's own).
  void splice_and_step(ClassBuild& cb) {
    std::stable_sort(cb.ins.begin(), cb.ins.end(), [](const Ins& a, const Ins& b) {
      return std::tie(a.position, a.priority, a.direction, a.x, a.seq) <
             std::tie(b.position, b.priority, b.direction, b.x, b.seq);
    });
    std::vector<Insertion> splices;
    for (Ins& in : cb.ins) {
      if (splices.empty() || splices.back().before != in.position) splices.push_back({in.position, {}});
      splices.back().ops.push_back(std::move(in.op));
    }
    splice(cb.ed.stream_at(cb.ed.compute()), std::move(splices));
    // Encoder optimizer after the LLM'cb.s (its reduction ends after the cb.last
    // encoder backward, normally after the LLM'cb.s own).
    if (cb.sw.trains()) {
      ir::Stream& cs = cb.ed.stream_at(cb.ed.compute());
      if (cb.dp_ops) *cs.add_ops() = wait_op(ir::OPTIMIZER_STEP, 0, cb.ed.event("enc_dp_to_compute"), cb.gathers + 1);
      ir::Op op = make_op(ir::OPTIMIZER_STEP, 0);
      *op.mutable_compute() = cb.sw.optimizer;
      *cs.add_ops() = std::move(op);
    }
  }

  // Memory: the encoder model state on top of the LLM's.
  void add_encoder_state(ClassBuild& cb) {
    auto state = cost::model_state_bytes(cb.sw.trainable_parameters, geo_.dp_enc(), work_.distributed_optimizer);
    state.weights += cost::model_state_bytes(cb.sw.frozen_parameters, geo_.dp_enc(), work_.distributed_optimizer).weights;
    auto* mem = cb.cls.mutable_memory();
    mem->set_weights_bytes(mem->weights_bytes() + state.weights.count());
    mem->set_gradients_bytes(mem->gradients_bytes() + state.gradients.count());
    mem->set_optimizer_bytes(mem->optimizer_bytes() + state.optimizer.count());
  }


  // ---------------------------------------------------------------- ranks

  void bind_ranks(ir::Program& out) {
    const LlmRanks ranks(llm_);
    std::map<std::tuple<int32_t, int32_t, int32_t>, int32_t> tp_groups;  // (d, s, slice)
    std::map<std::pair<int32_t, int32_t>, int32_t> dp_groups;            // (j, u)
    for (int32_t r = 0; r < out.ranks_size(); ++r) {
      ir::RankBinding& bnd = *out.mutable_ranks(r);
      const int32_t t = bnd.coord().tp(), d = bnd.coord().dp(), s = bnd.coord().pp();
      const int32_t c = t / geo_.tp_enc, u = t % geo_.tp_enc, e = geo_.pipeline(s, t), j = geo_.encoder_stage(s);
      bnd.set_class_id(geo_.class_of(s, c));
      if (slots_.enc_tp >= 0) {
        auto [it, inserted] = tp_groups.try_emplace({d, s, c}, -1);
        if (inserted) {
          std::vector<int32_t> members;
          for (int32_t v = 0; v < geo_.tp_enc; ++v) members.push_back(ranks.rank(c * geo_.tp_enc + v, d, s));
          std::sort(members.begin(), members.end());
          it->second = intern_group(out, ir::ENCODER_TP, members);
        }
        bnd.set_group(slots_.enc_tp, it->second);
      }
      if (slots_.enc_dp >= 0) {
        auto [it, inserted] = dp_groups.try_emplace({j, u}, -1);
        if (inserted) {
          std::vector<int32_t> members;
          for (int32_t dd = 0; dd < geo_.dp_llm; ++dd)
            for (int32_t ss = j; ss < geo_.pp_llm; ss += P_)
              for (int32_t cc = 0; cc < R_; ++cc) members.push_back(ranks.rank(cc * geo_.tp_enc + u, dd, ss));
          std::sort(members.begin(), members.end());
          it->second = intern_group(out, ir::ENCODER_DP, members);
        }
        bnd.set_group(slots_.enc_dp, it->second);
      }
      if (s == geo_.last_llm_stage(e))
        for (int32_t k = 0; k < R_; ++k)
          if (!geo_.boundary_self(e, k)) bnd.set_peer(slots_.dst_base + k, ranks.rank(k * geo_.tp_enc + u, d, 0));
      if (s == 0)
        for (int32_t src = 0; src < geo_.pipelines(); ++src) {
          if (geo_.boundary_self(src, c)) continue;
          const int32_t peer = ranks.rank(geo_.slice_of_pipeline(src) * geo_.tp_enc + u, d, geo_.last_llm_stage(src));
          bnd.set_peer(slots_.src_base + src, peer);
        }
    }
  }

  const ir::Program& llm_;
  const LlmTimeline& tl_;
  const EncoderWork& work_;
  const Schedule& sched_;
  const Geometry geo_;
  const int32_t R_, P_, N_;
  Slots slots_;
};

}  // namespace

ir::Program emit_program(const ir::Program& llm, const LlmTimeline& timeline, const EncoderWork& work,
                         const Schedule& schedule) {
  return Emitter(llm, timeline, work, schedule).run();
}

}  // namespace lacuna::placement::optimus
