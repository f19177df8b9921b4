#include "sim/compiler/class_builder.h"

namespace lacuna::compiler {
namespace {

struct StreamSpec {
  const char* name;
  ir::StreamKind kind;
};

// Indexed by StreamId. Separate p2p streams per direction: a rendezvous send
// blocks its stream until the receiver posts, so one stream for both
// directions would couple forward and backward traffic and can deadlock.
constexpr std::array<StreamSpec, static_cast<size_t>(StreamId::kCount)> kStreams = {{
    {"compute", ir::COMPUTE},
    {"tp", ir::TP_COMM},
    {"cp", ir::CP_COMM},
    {"pp_recv_fwd", ir::PP_RECV},
    {"pp_send_fwd", ir::PP_SEND},
    {"pp_recv_bwd", ir::PP_RECV},
    {"pp_send_bwd", ir::PP_SEND},
    {"dp", ir::DP_COMM},
    {"sync", ir::DP_COMM},
    {"ep", ir::EP_COMM},
    {"pp_recv_fwd_next", ir::PP_RECV},
    {"pp_send_fwd_prev", ir::PP_SEND},
    {"pp_recv_bwd_prev", ir::PP_RECV},
    {"pp_send_bwd_next", ir::PP_SEND},
}};

size_t idx(StreamId s) { return static_cast<size_t>(s); }
size_t idx(EventId e) { return static_cast<size_t>(e); }

}  // namespace

ClassBuilder::ClassBuilder() {
  for (size_t i = 0; i < streams_.size(); ++i) {
    streams_[i].set_name(kStreams[i].name);
    streams_[i].set_kind(kStreams[i].kind);
  }
}

ir::Op* ClassBuilder::add(StreamId stream, const OpContext& ctx) {
  ir::Op* op = streams_[idx(stream)].add_ops();
  op->set_phase(ctx.phase);
  op->set_microbatch(ctx.microbatch);
  op->set_chunk(ctx.chunk);
  op->set_layer(ctx.layer);
  op->set_module(ctx.module);
  if (stream == StreamId::kCompute && sync_next_) {
    op->set_host_sync(true);
    sync_next_ = false;
  }
  return op;
}

int64_t ClassBuilder::record(StreamId stream, EventId event, const OpContext& ctx) {
  add(stream, ctx)->mutable_record()->set_event(static_cast<int32_t>(event));
  return ++counters_[idx(event)];
}

void ClassBuilder::wait(StreamId stream, EventId event, int64_t value, const OpContext& ctx) {
  auto* w = add(stream, ctx)->mutable_wait();
  w->set_event(static_cast<int32_t>(event));
  w->set_value(value);
}

int32_t ClassBuilder::last_index(StreamId stream) const { return streams_[idx(stream)].ops_size() - 1; }

ir::Op* ClassBuilder::op(StreamId stream, int32_t index) { return streams_[idx(stream)].mutable_ops(index); }

ir::RankClass ClassBuilder::finish(const std::string& name) {
  ir::RankClass c;
  c.set_name(name);
  // Classes without EP traffic or the V layout's streams declare the events
  // of dense programs only.
  bool extended = streams_[idx(StreamId::kEp)].ops_size() > 0;
  for (size_t i = idx(StreamId::kRecvFwdFromNext); i < streams_.size(); ++i) extended |= streams_[i].ops_size() > 0;
  c.set_num_events(static_cast<int32_t>(extended ? EventId::kCount : EventId::kComputeToEp));
  for (auto& s : streams_)
    if (s.ops_size() > 0) *c.add_streams() = std::move(s);
  return c;
}

}  // namespace lacuna::compiler
