// Pipeline p2p of one stage (stage_builder.h): overlapped, with a send and a
// receive stream per direction, or blocking, in Megatron's batched calls.
#include "sim/compiler/stage_builder.h"

namespace lacuna::compiler {

using schedule::Pass;

int64_t StageBuilder::wire_bytes(int32_t boundary) const {
  const int64_t full = boundary_bytes_[boundary];
  return scatter_gather_ && full % shape_.tp == 0 ? full / shape_.tp : full;
}

void StageBuilder::gather_received(int32_t boundary, const OpContext& ctx) {
  if (!scatter_gather_ || boundary_bytes_[boundary] % shape_.tp != 0) return;
  ModuleStamp stamp(b_);
  model::CommPoint c;
  c.group = model::CommGroup::kTp;
  c.kind = ir::ALL_GATHER;
  c.bytes = boundary_bytes_[boundary];
  c.phase = ctx.phase;
  em().collective_now(c, ctx);
  stamp.apply(boundary_module_[boundary]);
}

int64_t StageBuilder::tag(int64_t direction, int64_t receiver_stage, int64_t microbatch) const {
  return (direction * num_vs_ + receiver_stage) * microbatches_ + microbatch;
}

template <class Message>
void StageBuilder::set_p2p(Message* msg, int32_t peer_slot, int32_t boundary, int32_t channel,
                           int64_t tag_value) const {
  msg->set_peer_slot(peer_slot);
  msg->set_bytes(wire_bytes(boundary));
  msg->set_channel(channel);
  msg->set_tag(tag_value);
}

// Overlapped p2p: channel 0 carries activations to pp_next, channel 1
// gradients to pp_prev; each direction has its own send and receive stream
// (rendezvous sends block their stream). Receives are posted ahead, in the
// order compute consumes them, and waited for right before the pass;
// sends never block compute.
void StageBuilder::receive_into_compute(StreamId stream, EventId event, int32_t peer_slot, int32_t channel,
                                        int64_t tag_value, int32_t boundary, const OpContext& ctx) {
  ModuleStamp stamp(b_);
  set_p2p(b_.add(stream, ctx)->mutable_recv(), peer_slot, boundary, channel, tag_value);
  b_.wait(StreamId::kCompute, event, b_.record(stream, event, ctx), ctx);
  stamp.apply(boundary_module_[boundary]);
  gather_received(boundary, ctx);
}

void StageBuilder::send_from_compute(StreamId stream, EventId event, int32_t peer_slot, int32_t channel,
                                     int64_t tag_value, int32_t boundary, const OpContext& ctx) {
  ModuleStamp stamp(b_);
  b_.wait(stream, event, b_.record(StreamId::kCompute, event, ctx), ctx);
  set_p2p(b_.add(stream, ctx)->mutable_send(), peer_slot, boundary, channel, tag_value);
  stamp.apply(boundary_module_[boundary]);
}

StageBuilder::Hop StageBuilder::hop(int32_t vs, int32_t other, bool activation) const {
  Hop h;
  h.remote = schedule::rank_of_stage(in_.pipeline, other) != in_.pp_rank;
  // Looped layout: the next stage is always on pp_next. V layout: the second
  // chunk runs back towards rank 0, so its next stage is on pp_prev.
  const bool returning = schedule::v_shaped(in_.pipeline) && vs >= in_.pipeline.pp;
  const bool toward_next = (other > vs) != returning;
  h.peer_slot = toward_next ? kSlotPpNext : kSlotPpPrev;
  // The looped layout's four streams (activations to pp_next, gradients to
  // pp_prev, and their receives), unchanged; the V layout's reverse
  // directions on streams of their own.
  if (activation) {
    if (toward_next) {
      h.send_stream = StreamId::kSendFwd, h.to_send = EventId::kComputeToSendFwd, h.sent = EventId::kSendFwdToCompute;
      h.recv_stream = StreamId::kRecvFwdFromNext, h.received = EventId::kRecvFwdFromNextToCompute;
    } else {
      h.send_stream = StreamId::kSendFwdToPrev, h.to_send = EventId::kComputeToSendFwdToPrev,
      h.sent = EventId::kSendFwdToPrevToCompute;
      h.recv_stream = StreamId::kRecvFwd, h.received = EventId::kRecvFwdToCompute;
    }
  } else {
    if (toward_next) {
      h.send_stream = StreamId::kSendBwdToNext, h.to_send = EventId::kComputeToSendBwdToNext,
      h.sent = EventId::kSendBwdToNextToCompute;
      h.recv_stream = StreamId::kRecvBwd, h.received = EventId::kRecvBwdToCompute;
    } else {
      h.send_stream = StreamId::kSendBwd, h.to_send = EventId::kComputeToSendBwd, h.sent = EventId::kSendBwdToCompute;
      h.recv_stream = StreamId::kRecvBwdFromPrev, h.received = EventId::kRecvBwdFromPrevToCompute;
    }
  }
  return h;
}

void StageBuilder::emit_blocking_calls_after(int32_t action_index) {
  if (!blocking_) return;
  for (const schedule::P2pCall& call : calls_after_[static_cast<size_t>(action_index + 1)]) emit_call(call);
}

// Blocking p2p (Megatron's batch_isend_irecv + wait + synchronize): at each
// call of its schedule (sim/schedule/p2p_calls.h) the compute stream records
// once, every send and receive of the call starts on its stream after that
// record, compute waits for all of them, and the host waits for the GPU
// before issuing anything else.
void StageBuilder::emit_call(const schedule::P2pCall& call) {
  const OpContext call_ctx{ir::FORWARD, 0, 0, -1};
  const int64_t go = b_.record(StreamId::kCompute, EventId::kComputeToP2p, call_ctx);
  std::vector<std::pair<EventId, int64_t>> done;
  std::vector<std::pair<int32_t, OpContext>> received;  // boundary, context
  auto transfer = [&](int32_t action, bool send) {
    const schedule::Action& a = in_.actions[static_cast<size_t>(action)];
    const int32_t vs = schedule::virtual_stage(in_.pipeline, in_.pp_rank, a.chunk);
    const bool forward = a.pass == Pass::kForward;
    OpContext ctx{forward ? ir::FORWARD : ir::BACKWARD_INPUT, a.microbatch, a.chunk, -1};
    // Forward: receive from stage vs − 1 (boundary vs − 1), send to vs + 1
    // (boundary vs); backward the reverse, on channel 1.
    const int32_t boundary = forward == send ? vs : vs - 1;
    const Hop h = hop(vs, forward == send ? vs + 1 : vs - 1, forward);
    const int32_t peer = h.peer_slot;
    const int32_t channel = forward ? 0 : 1;
    const int64_t tag_value =
        forward ? tag(0, send ? vs + 1 : vs, a.microbatch) : tag(1, send ? vs - 1 : vs, a.microbatch);
    const StreamId stream = send ? h.send_stream : h.recv_stream;
    const EventId back = send ? h.sent : h.received;
    ModuleStamp stamp(b_);
    b_.wait(stream, EventId::kComputeToP2p, go, ctx);
    if (send)
      set_p2p(b_.add(stream, ctx)->mutable_send(), peer, boundary, channel, tag_value);
    else
      set_p2p(b_.add(stream, ctx)->mutable_recv(), peer, boundary, channel, tag_value);
    done.emplace_back(back, b_.record(stream, back, ctx));
    stamp.apply(boundary_module_[boundary]);
    if (!send) received.emplace_back(boundary, ctx);
  };
  for (int32_t i : call.sends) transfer(i, true);
  for (int32_t i : call.recvs) transfer(i, false);
  for (const auto& [event, value] : done) b_.wait(StreamId::kCompute, event, value, call_ctx);
  b_.host_sync_next();
  for (const auto& [boundary, ctx] : received) gather_received(boundary, ctx);
}

}  // namespace lacuna::compiler
