// Communication is overlapped with compute, as in Megatron-LM's and the Zero
// Bubble runtime's batched isend/irecv: each direction has its own send and
// receive stream, receives are posted in consumption order as early as the
// previous one completes, and a send starts as soon as its pass ends. A
// transfer therefore adds its duration as latency between the producing and
// the consuming pass and never occupies the compute stream — the model of
// the Zero Bubble paper's simulator (T_comm between dependent passes).
#include "sim/schedule/synthetic.h"

#include <string>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna::schedule {
namespace {

// Stream indices of every rank class: activations travel to the next rank and
// gradients to the previous one; the V layout's second chunk adds the
// opposite directions (the last four, only in its classes).
enum StreamIndex : int {
  kCompute = 0, kSendFwd, kRecvFwd, kSendBwd, kRecvBwd, kLoopedStreams,
  kSendFwdToPrev = kLoopedStreams, kRecvFwdFromNext, kSendBwdToNext, kRecvBwdFromPrev, kVStreams
};
// Event indices: inputs arrived (recorded by the receive streams) and outputs
// ready (recorded by the compute stream); likewise the V layout's last four.
enum EventIndex : int32_t {
  kFwdInArrived = 0, kBwdInArrived, kFwdOutReady, kBwdOutReady, kLoopedEvents,
  kFwdInFromNext = kLoopedEvents, kBwdInFromPrev, kFwdOutToPrev, kBwdOutToNext, kVEvents
};
enum PeerSlot : int32_t { kNext = 0, kPrev = 1 };
enum Channel : int32_t { kActivations = 0, kGradients = 1 };

const StageTimes& times_of(const SyntheticPipeline& p, int32_t rank) {
  return p.per_stage.size() == 1 ? p.per_stage[0] : p.per_stage[static_cast<size_t>(rank)];
}

void validate_synthetic(const SyntheticPipeline& p) {
  const auto n = p.per_stage.size();
  if (n != 1 && n != static_cast<size_t>(p.shape.pp)) {
    throw Error(SourceLocation{}, "per_stage has " + std::to_string(n) + " entries for pp = " + std::to_string(p.shape.pp),
                "give one entry per pipeline rank, or one for all");
  }
  for (size_t i = 0; i < n; ++i) {
    const StageTimes& t = p.per_stage[i];
    // Zero would make the engine ask the cost model, which synthetic programs never do.
    if (t.forward <= TimeNs::zero() || t.backward_input <= TimeNs::zero() || t.backward_weight <= TimeNs::zero()) {
      throw Error(SourceLocation{}, "per_stage[" + std::to_string(i) + "]: pass times must be positive",
                  "give forward, backward_input and backward_weight > 0 ns");
    }
  }
  if (p.p2p < TimeNs::zero()) throw Error(SourceLocation{}, "p2p time must not be negative", "");
  if (!p.order.empty() && p.order.size() != static_cast<size_t>(p.shape.pp))
    throw Error(SourceLocation{}, fmt::format("the order lists {} ranks for pp = {}", p.order.size(), p.shape.pp),
                "give one list per pipeline rank");
  if (v_shaped(p.shape) && p.shape.virtual_stages != 2)
    throw Error(SourceLocation{}, fmt::format("the V and bidirectional layouts hold two stages per rank, not {}",
                                             p.shape.virtual_stages),
                "set virtual_stages to 2");
}

// Identical on both sides of a transfer: direction, microbatch and the
// receiving virtual stage.
int64_t tag_of(const PipelineShape& s, int32_t channel, int32_t microbatch, int32_t receiver_stage) {
  const int64_t stages = static_cast<int64_t>(s.pp) * s.virtual_stages;
  return (channel * stages + receiver_stage) * s.microbatches + microbatch;
}

class RankBuilder {
 public:
  RankBuilder(const SyntheticPipeline& p, int32_t rank, ir::RankClass* cls)
      : p_(p), s_(p.shape), rank_(rank), times_(times_of(p, rank)), cls_(cls) {
    static constexpr struct { const char* name; ir::StreamKind kind; } kStreams[kVStreams] = {
        {"compute", ir::COMPUTE},        {"pp_send_fwd", ir::PP_SEND},          {"pp_recv_fwd", ir::PP_RECV},
        {"pp_send_bwd", ir::PP_SEND},    {"pp_recv_bwd", ir::PP_RECV},          {"pp_send_fwd_prev", ir::PP_SEND},
        {"pp_recv_fwd_next", ir::PP_RECV}, {"pp_send_bwd_next", ir::PP_SEND}, {"pp_recv_bwd_prev", ir::PP_RECV}};
    const bool v = v_shaped(s_);
    for (int i = 0; i < (v ? kVStreams : kLoopedStreams); ++i) {
      ir::Stream* stream = cls_->add_streams();
      stream->set_name(kStreams[i].name);
      stream->set_kind(kStreams[i].kind);
    }
    cls_->set_name("stage" + std::to_string(rank));
    cls_->set_num_events(v ? kVEvents : kLoopedEvents);
    cls_->mutable_memory();  // all zeros: synthetic stages hold no state
  }

  void add(const Action& a) {
    const int32_t stage = virtual_stage(s_, rank_, a.chunk);
    // Where a neighbouring stage lives: this rank (the V layout's turn: no
    // transfer, the compute stream's order carries the dependency), the next
    // rank or the previous one. Looped layouts always look "next" forward
    // and "previous" backward (the bindings wrap around).
    enum class Where { kHere, kNext, kPrev };
    auto where = [&](int32_t other) {
      if (!v_shaped(s_)) return other > stage ? Where::kNext : Where::kPrev;
      const int32_t r = rank_of_stage(s_, other);
      return r == rank_ ? Where::kHere : r > rank_ ? Where::kNext : Where::kPrev;
    };
    switch (a.pass) {
      case Pass::kForward:
        if (has_previous_stage(s_, stage)) {
          const Where from = where(stage - 1);
          if (from == Where::kPrev) receive(kRecvFwd, kFwdInArrived, kPrev, kActivations, a, stage);
          if (from == Where::kNext) receive(kRecvFwdFromNext, kFwdInFromNext, kNext, kActivations, a, stage);
        }
        compute(ir::FORWARD, times_.forward, a);
        if (has_next_stage(s_, stage)) {
          const Where to = where(stage + 1);
          if (to == Where::kNext) send(kSendFwd, kFwdOutReady, kNext, kActivations, a, stage + 1);
          if (to == Where::kPrev) send(kSendFwdToPrev, kFwdOutToPrev, kPrev, kActivations, a, stage + 1);
        }
        break;
      case Pass::kBackward:
      case Pass::kBackwardInput:
        if (has_next_stage(s_, stage)) {
          const Where from = where(stage + 1);
          if (from == Where::kNext) receive(kRecvBwd, kBwdInArrived, kNext, kGradients, a, stage);
          if (from == Where::kPrev) receive(kRecvBwdFromPrev, kBwdInFromPrev, kPrev, kGradients, a, stage);
        }
        compute(ir::BACKWARD_INPUT, times_.backward_input, a);
        // Unsplit backward: W runs right after B and the gradient leaves when
        // both are done (Megatron sends after backward_step returns).
        if (a.pass == Pass::kBackward) compute(ir::BACKWARD_WEIGHT, times_.backward_weight, a);
        if (has_previous_stage(s_, stage)) {
          const Where to = where(stage - 1);
          if (to == Where::kPrev) send(kSendBwd, kBwdOutReady, kPrev, kGradients, a, stage - 1);
          if (to == Where::kNext) send(kSendBwdToNext, kBwdOutToNext, kNext, kGradients, a, stage - 1);
        }
        break;
      case Pass::kBackwardWeight:
        compute(ir::BACKWARD_WEIGHT, times_.backward_weight, a);
        break;
      case Pass::kRecompute:
        // Full recompute re-runs the stage's forward; it moves no tensor.
        compute(ir::RECOMPUTE, times_.forward, a);
        break;
    }
  }

 private:
  ir::Op* op(int stream, const Action& a, ir::Phase phase) {
    ir::Op* o = cls_->mutable_streams(stream)->add_ops();
    o->set_phase(phase);
    o->set_microbatch(a.microbatch);
    o->set_chunk(a.chunk);
    o->set_layer(-1);
    return o;
  }

  void compute(ir::Phase phase, TimeNs duration, const Action& a) {
    ir::Compute* c = op(kCompute, a, phase)->mutable_compute();
    c->set_op_class(ir::ELEMENTWISE);
    c->set_role(ir::ROLE_STAGE);
    c->set_fixed_duration_ns(duration.count());
  }

  // Recv on its stream, then an event the compute stream waits on before the pass.
  void receive(int stream, int32_t event, int32_t peer, int32_t channel, const Action& a, int32_t stage) {
    const ir::Phase phase = channel == kActivations ? ir::FORWARD : ir::BACKWARD_INPUT;
    ir::Recv* r = op(stream, a, phase)->mutable_recv();
    r->set_peer_slot(peer);
    r->set_bytes(0);
    r->set_channel(channel);
    r->set_tag(tag_of(s_, channel, a.microbatch, stage));
    op(stream, a, phase)->mutable_record()->set_event(event);
    ir::EventWait* w = op(kCompute, a, phase)->mutable_wait();
    w->set_event(event);
    w->set_value(++count_[event]);
  }

  // Compute records an event after the pass; the send stream waits on it.
  void send(int stream, int32_t event, int32_t peer, int32_t channel, const Action& a, int32_t receiver_stage) {
    const ir::Phase phase = channel == kActivations ? ir::FORWARD : ir::BACKWARD_INPUT;
    op(kCompute, a, phase)->mutable_record()->set_event(event);
    ir::EventWait* w = op(stream, a, phase)->mutable_wait();
    w->set_event(event);
    w->set_value(++count_[event]);
    ir::Send* snd = op(stream, a, phase)->mutable_send();
    snd->set_peer_slot(peer);
    snd->set_bytes(0);
    snd->set_channel(channel);
    snd->set_tag(tag_of(s_, channel, a.microbatch, receiver_stage));
    snd->set_fixed_duration_ns(p_.p2p.count());
  }

  const SyntheticPipeline& p_;
  const PipelineShape& s_;
  int32_t rank_;
  const StageTimes& times_;
  ir::RankClass* cls_;
  int64_t count_[kVEvents] = {};
};

}  // namespace

ir::Program build_synthetic_program(const SyntheticPipeline& pipeline) {
  const auto schedule =
      pipeline.order.empty() ? build_schedule(pipeline.kind, pipeline.shape) : pipeline.order;
  validate_synthetic(pipeline);
  const PipelineShape& s = pipeline.shape;

  ir::Program program;
  ir::ProgramInfo* info = program.mutable_info();
  info->set_scenario_name("synthetic");
  info->set_num_ranks(s.pp);
  info->set_tp(1);
  info->set_cp(1);
  info->set_pp(s.pp);
  info->set_dp(1);
  info->set_virtual_stages(s.virtual_stages);
  info->set_num_microbatches(s.microbatches);
  info->set_schedule(pipeline.order.empty() ? pipeline.kind : lacuna::scenario::CUSTOM);
  program.mutable_cluster()->set_num_nodes(s.pp);
  program.mutable_cluster()->set_gpus_per_node(1);

  ir::Slot* next = program.add_peer_slots();
  next->set_name("pp_next");
  next->set_kind(ir::PP);
  ir::Slot* prev = program.add_peer_slots();
  prev->set_name("pp_prev");
  prev->set_kind(ir::PP);

  for (int32_t r = 0; r < s.pp; ++r) {
    RankBuilder builder(pipeline, r, program.add_classes());
    for (const Action& a : schedule[static_cast<size_t>(r)]) builder.add(a);

    ir::RankBinding* b = program.add_ranks();
    b->set_class_id(r);
    // Cyclic so that the last rank's chunk c feeds rank 0's chunk c + 1; a
    // single stage has no neighbour.
    b->add_peer(s.pp > 1 ? (r + 1) % s.pp : -1);
    b->add_peer(s.pp > 1 ? (r + s.pp - 1) % s.pp : -1);
    b->set_node(r);
    b->set_local_gpu(0);
    b->mutable_coord()->set_pp(r);
  }
  return program;
}

}  // namespace lacuna::schedule
