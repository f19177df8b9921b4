// Non-colocated encoders (MegatronMIMO's encoder islands). Each encoder runs
// on its own ranks after the LLM's, in its own layout; the module graph
// (encoder PP stages → LLM stage 0 → … → LLM last stage) runs graph-aware
// 1F1B: each encoder stage's warm-up follows its distance to the sink, and
// LLM stage 0 runs the forward of microbatch i only once every encoder's
// output for i has arrived (a join). Between the modules, one boundary
// leader per DP shard on each side (encoder last stage tp 0 cp 0, LLM stage
// 0 tp 0 cp 0) exchanges p2p messages — 1:1, many-to-one or one-to-many
// with the DP relation — and broadcasts to its TP / CP group; gradients
// return through the same leader pair (Megatron-LM's BridgeCommunicator).
#include <algorithm>

#include "sim/core/error.h"
#include "sim/model/kernels.h"
#include "sim/placement/class_edit.h"
#include "sim/placement/hetero_compile.h"
#include "sim/schedule/graph_aware.h"
#include "sim/schedule/schedule.h"

namespace lacuna::placement::hetero {
namespace {

using schedule::Pass;

// How many chunk-0 forwards LLM pipeline rank 0 runs before the pass that
// produces microbatch i's input gradient (the encoder's gradient), per i.
// 1F1B: pp + i; GPipe: all; interleaved: more, since the first chunk's
// backwards come after the other chunks' warm-up.
std::vector<int32_t> llm_forwards_before_gradient(const scenario::Scenario& spec, const Plan& plan) {
  const int32_t m = plan.llm.microbatches;
  const schedule::PipelineShape shape{
      plan.llm.dims.pp,
      spec.parallel().virtual_stages() > 0 ? static_cast<int32_t>(spec.parallel().virtual_stages()) : 1, m};
  const auto actions = schedule::build_schedule(spec.schedule().kind(), shape).front();
  std::vector<int32_t> need(static_cast<size_t>(m), m);
  int32_t forwards = 0;
  for (const auto& a : actions) {
    if (a.chunk != 0) continue;
    if (a.pass == Pass::kForward) ++forwards;
    if (a.pass == Pass::kBackward || a.pass == Pass::kBackwardInput) need[static_cast<size_t>(a.microbatch)] = forwards;
  }
  return need;
}

struct EncoderSlotsIsland {
  EncoderSlots kernel;
  int32_t dp_cp = -1;
  int32_t pp_next = -1, pp_prev = -1;
  int32_t enc_bcast = -1;        // encoder last stage tp × cp: gradient broadcast
  int32_t enc_gather = -1;       // the same ranks: gathering a split output
  int32_t llm_bcast = -1;        // LLM stage 0 tp × cp (activation broadcast)
  std::vector<int32_t> peers;    // bnd{e}_peer{q}
  int32_t llm_peers = 1;         // peers an LLM leader talks to (fan-in: ratio)
  int32_t enc_peers = 1;         // peers an encoder leader talks to (fan-out: ratio)
  int64_t slice_bytes = 0;       // one leader-to-leader message (one microbatch)
  int64_t microbatch_bytes = 0;  // one LLM replica's microbatch (what stage 0 broadcasts)
};

std::vector<int32_t> tpcp_ranks(const compiler::RankLayout& layout, int32_t first_rank, int32_t dp, int32_t pp) {
  std::vector<int32_t> out;
  for (int32_t cp = 0; cp < layout.dims().cp; ++cp)
    for (int32_t tp = 0; tp < layout.dims().tp; ++tp) {
      ir::Coordinates c;
      c.set_tp(tp);
      c.set_cp(cp);
      c.set_dp(dp);
      c.set_pp(pp);
      out.push_back(first_rank + layout.rank(c));
    }
  std::sort(out.begin(), out.end());
  return out;
}

int32_t leader_rank(const compiler::RankLayout& layout, int32_t first_rank, int32_t dp, int32_t pp) {
  ir::Coordinates c;
  c.set_dp(dp);
  c.set_pp(pp);
  return first_rank + layout.rank(c);
}

// Where each microbatch's passes sit in LLM stage 0's compute stream.
struct StageZeroPositions {
  std::vector<int32_t> forward_at;      // first op of the chunk-0 forward of microbatch i
  std::vector<int32_t> gradient_after;  // after the last op of its input-gradient pass
};

StageZeroPositions locate_passes(const ir::Stream& compute, int32_t m) {
  StageZeroPositions out{std::vector<int32_t>(static_cast<size_t>(m), -1),
                         std::vector<int32_t>(static_cast<size_t>(m), -1)};
  for (int32_t i = 0; i < compute.ops_size(); ++i) {
    const ir::Op& op = compute.ops(i);
    if (op.module() != 0 || op.chunk() != 0 || op.microbatch() < 0 || op.microbatch() >= m) continue;
    const auto mb = static_cast<size_t>(op.microbatch());
    if (op.phase() == ir::FORWARD && out.forward_at[mb] < 0) out.forward_at[mb] = i;
    // Input-gradient ops (B, or the B half of a combined backward; a
    // separate W pass has none): the embeddings' gradient exists after the
    // last of them, including the wait for the first layer's dgrad reduction.
    if (op.phase() == ir::BACKWARD_INPUT) out.gradient_after[mb] = i + 1;
  }
  for (int32_t i = 0; i < m; ++i)
    if (out.forward_at[static_cast<size_t>(i)] < 0 || out.gradient_after[static_cast<size_t>(i)] < 0)
      throw Error(
          "heterogeneous placement: internal error, LLM stage 0 has no chunk-0 forward / backward of "
          "microbatch " +
          std::to_string(i));
  return out;
}

// Island ranks after the LLM's: bindings with every existing slot unbound.
void add_island_ranks(const Plan& plan, ir::Program& p) {
  const int64_t gpn = plan.llm.gpus_per_node;
  for (const EncoderPlan& enc : plan.encoders) {
    const compiler::RankLayout el(enc.dims, enc.rank_order);
    for (int32_t l = 0; l < enc.world(); ++l) {
      const int32_t r = enc.first_rank + l;
      if (r != p.ranks_size())
        throw InternalError("heterogeneous placement: internal error, island ranks out of order at rank " + std::to_string(r));
      ir::RankBinding* b = p.add_ranks();
      b->set_class_id(0);  // set below
      for (int32_t s = 0; s < p.group_slots_size(); ++s) b->add_group(-1);
      for (int32_t s = 0; s < p.peer_slots_size(); ++s) b->add_peer(-1);
      b->set_node(static_cast<int32_t>(r / gpn));
      b->set_local_gpu(static_cast<int32_t>(r % gpn));
      *b->mutable_coord() = el.coordinates(l);
    }
  }
}

// One encoder's slots and groups: its own TP / CP / DP / PP, the bridge's
// broadcast groups on both sides, and the leader pairs.
EncoderSlotsIsland bind_island_slots(const EncoderPlan& enc, const LlmPlan& llm, Groups& groups, ir::Program& p) {
  const compiler::RankLayout llm_layout(llm.dims, llm.rank_order);
  const int32_t llm_tpcp = llm.dims.tp * llm.dims.cp;
  EncoderSlotsIsland s;
  const std::string pre = "enc" + std::to_string(enc.e);
  const std::string bnd = "bnd" + std::to_string(enc.e);
  const compiler::RankLayout el(enc.dims, enc.rank_order);
  const int32_t last = enc.dims.pp - 1;
  if (enc.dims.tp > 1) {
    s.kernel.tp = add_group_slot(p, pre + "_tp", ir::ENCODER_TP);
    bind_axis_groups(p, groups, pre + "_tp", ir::ENCODER_TP, s.kernel.tp, el, enc.first_rank,
                     {true, false, false, false});
  }
  if (enc.dims.cp > 1) {
    s.kernel.cp = add_group_slot(p, pre + "_cp", ir::ENCODER_CP);
    bind_axis_groups(p, groups, pre + "_cp", ir::ENCODER_CP, s.kernel.cp, el, enc.first_rank,
                     {false, true, false, false});
  }
  if (enc.dims.dp * enc.dims.cp > 1) {
    s.dp_cp = add_group_slot(p, pre + "_dp_cp", ir::ENCODER_DP);
    bind_axis_groups(p, groups, pre + "_dp_cp", ir::ENCODER_DP, s.dp_cp, el, enc.first_rank,
                     {false, true, true, false});
  }
  if (enc.dims.pp > 1) {
    s.pp_next = add_peer_slot(p, pre + "_pp_next");
    s.pp_prev = add_peer_slot(p, pre + "_pp_prev");
    bind_stage_peers(p, el, enc.first_rank, s.pp_next, s.pp_prev);
  }
  // The bridge's broadcast groups: the boundary stage's tp × cp ranks of
  // each DP shard, on both sides. The encoder side has two communicators:
  // the forward gather and the gradient broadcast run on different streams
  // (and its members post them at different times), so one shared group
  // would interleave them.
  auto bind_enc_side = [&](const std::string& name) {
    const int32_t slot = add_group_slot(p, name, ir::BOUNDARY_GROUP);
    for (int32_t k = 0; k < enc.dims.dp; ++k) {
      const auto ranks = tpcp_ranks(el, enc.first_rank, k, last);
      const int32_t g = groups.get(name, ir::BOUNDARY_GROUP, ranks);
      for (int32_t r : ranks) p.mutable_ranks(r)->set_group(slot, g);
    }
    return slot;
  };
  if (enc.dims.tp * enc.dims.cp > 1) s.enc_bcast = bind_enc_side(bnd + "_enc_bwd");
  if (enc.sharded_output()) s.enc_gather = bind_enc_side(bnd + "_enc_fwd");
  if (llm_tpcp > 1) {
    s.llm_bcast = add_group_slot(p, bnd + "_llm", ir::BOUNDARY_GROUP);
    for (int32_t d = 0; d < llm.dims.dp; ++d) {
      const auto ranks = tpcp_ranks(llm_layout, 0, d, 0);
      const int32_t g = groups.get(bnd + "_llm", ir::BOUNDARY_GROUP, ranks);
      for (int32_t r : ranks) p.mutable_ranks(r)->set_group(s.llm_bcast, g);
    }
  }
  // Leader pairs. Fan-in: LLM replica d ← shards d·f … d·f + f − 1;
  // fan-out: shard k → replicas k·r … k·r + r − 1 (the bridge's order).
  s.llm_peers = enc.relation == DpRelation::kFanIn ? enc.ratio : 1;
  s.enc_peers = enc.relation == DpRelation::kFanOut ? enc.ratio : 1;
  for (int32_t q = 0; q < std::max(s.llm_peers, s.enc_peers); ++q)
    s.peers.push_back(add_peer_slot(p, bnd + "_peer" + std::to_string(q)));
  for (int32_t d = 0; d < llm.dims.dp; ++d) {
    const int32_t llm_leader = leader_rank(llm_layout, 0, d, 0);
    for (int32_t q = 0; q < s.llm_peers; ++q) {
      const int32_t shard = enc.relation == DpRelation::kFanIn    ? d * enc.ratio + q
                            : enc.relation == DpRelation::kFanOut ? d / enc.ratio
                                                                  : d;
      p.mutable_ranks(llm_leader)
          ->set_peer(s.peers[static_cast<size_t>(q)], leader_rank(el, enc.first_rank, shard, last));
    }
  }
  for (int32_t k = 0; k < enc.dims.dp; ++k) {
    const int32_t enc_leader = leader_rank(el, enc.first_rank, k, last);
    for (int32_t q = 0; q < s.enc_peers; ++q) {
      const int32_t replica = enc.relation == DpRelation::kFanOut  ? k * enc.ratio + q
                              : enc.relation == DpRelation::kFanIn ? k / enc.ratio
                                                                   : k;
      p.mutable_ranks(enc_leader)->set_peer(s.peers[static_cast<size_t>(q)], leader_rank(llm_layout, 0, replica, 0));
    }
  }
  // One message carries one LLM replica's microbatch (fan-out: a slice of
  // the shard's), or one shard's share of it (fan-in).
  s.slice_bytes = enc.boundary_bytes(std::min(enc.microbatch_samples, llm.micro_batch), llm.hidden);
  s.microbatch_bytes = enc.boundary_bytes(llm.micro_batch, llm.hidden);
  return s;
}

// LLM stage 0: the boundary leaders (tp 0, cp 0 of every replica) get a
// class of their own when stage 0 has other ranks (they alone exchange p2p).
// Returns the leaders' class.
int32_t split_llm_stage0_leaders(const LlmPlan& llm, ir::Program& p) {
  const compiler::RankLayout llm_layout(llm.dims, llm.rank_order);
  if (p.classes_size() == 0) throw InternalError("heterogeneous placement: internal error, the LLM program has no classes");
  int32_t leader_class = 0;
  if (llm.dims.tp * llm.dims.cp > 1) {
    leader_class = p.classes_size();
    ir::RankClass copy = p.classes(0);
    copy.set_name(p.classes(0).name() + "_boundary_leader");
    *p.add_classes() = std::move(copy);
    for (int32_t d = 0; d < llm.dims.dp; ++d)
      p.mutable_ranks(leader_rank(llm_layout, 0, d, 0))->set_class_id(leader_class);
  }
  return leader_class;
}

// LLM stage 0's class (`leader`: the boundary leaders'): each forward of
// microbatch i waits for every encoder's input for i (the join); leaders
// receive it from their peers and broadcast it to their TP / CP group, and
// send the embeddings' gradient back after each backward.
void edit_llm_stage0(ir::RankClass& cls, bool leader, const Plan& plan, const std::vector<EncoderSlotsIsland>& slots,
                     const StageZeroPositions& positions) {
  const int32_t m = plan.llm.microbatches;
  const int32_t num_enc = static_cast<int32_t>(plan.encoders.size());
  ClassEditor ed(cls);
  const int32_t compute = ed.compute();
  // Insertion points, in stream order; at one position the gradient
  // handoff (end of a backward) precedes the wait (start of a forward).
  struct Point {
    int32_t at;
    int32_t order;  // 0: gradient handoff, 1: forward wait
    int32_t mb;
  };
  std::vector<Point> points;
  for (int32_t i = 0; i < m; ++i) {
    points.push_back({positions.forward_at[static_cast<size_t>(i)], 1, i});
    if (leader) points.push_back({positions.gradient_after[static_cast<size_t>(i)], 0, i});
  }
  std::stable_sort(points.begin(), points.end(),
                   [](const Point& a, const Point& b) { return a.at != b.at ? a.at < b.at : a.order < b.order; });
  // Activation receipt: per encoder and microbatch, the value of the event
  // the compute stream waits for (per peer without a broadcast).
  std::vector<std::vector<std::vector<std::pair<int32_t, int64_t>>>> ready(
      static_cast<size_t>(num_enc), std::vector<std::vector<std::pair<int32_t, int64_t>>>(static_cast<size_t>(m)));
  for (int32_t ei = 0; ei < num_enc; ++ei) {
    const EncoderSlotsIsland& s = slots[static_cast<size_t>(ei)];
    const std::string bnd = "bnd" + std::to_string(plan.encoders[static_cast<size_t>(ei)].e);
    const int32_t module = plan.encoders[static_cast<size_t>(ei)].module;
    const int32_t bcast = s.llm_bcast >= 0 ? ed.stream(bnd + "_bcast_fwd", ir::BOUNDARY) : -1;
    for (int32_t i = 0; i < m; ++i) {
      const compiler::OpContext ctx{ir::FORWARD, i, 0, -1, module};
      const int64_t tag = boundary_tag(0, num_enc, ei, m, i);
      std::vector<std::pair<int32_t, int64_t>> received;
      if (leader)
        for (int32_t q = 0; q < s.llm_peers; ++q) {
          const std::string name = bnd + "_recv_fwd" + std::to_string(q);
          const int32_t st = ed.stream(name, ir::BOUNDARY);
          add_recv(ed, st, ctx, s.peers[static_cast<size_t>(q)], s.slice_bytes, kBoundaryFwdChannel, tag);
          const int32_t ev = ed.event(name + ">");
          received.push_back({ev, ed.record(st, ev, ctx)});
        }
      if (bcast >= 0) {
        // The leader has the replica's microbatch whole once every shard's
        // message is in; it broadcasts to its TP / CP group.
        for (const auto& [ev, v] : received) ed.wait(bcast, ev, v, ctx);
        add_collective(ed, bcast, ctx, ir::BROADCAST, s.llm_bcast, s.microbatch_bytes);
        const int32_t ev = ed.event(bnd + "_bcast_fwd>compute");
        ready[static_cast<size_t>(ei)][static_cast<size_t>(i)] = {{ev, ed.record(bcast, ev, ctx)}};
      } else {
        ready[static_cast<size_t>(ei)][static_cast<size_t>(i)] = received;
      }
    }
  }
  std::vector<Insertion> insertions;
  for (const Point& pt : points) {
    std::vector<ir::Op> block;
    ed.set_compute_block(&block);
    if (pt.order == 1) {
      // Join: microbatch i runs only after every encoder's input arrived.
      for (int32_t ei = 0; ei < num_enc; ++ei)
        for (const auto& [ev, v] : ready[static_cast<size_t>(ei)][static_cast<size_t>(pt.mb)])
          ed.wait(compute, ev, v, compiler::OpContext{ir::FORWARD, pt.mb, 0, -1, plan.encoders[static_cast<size_t>(ei)].module});
    } else {
      // The embeddings' gradient goes back through the edges that
      // delivered the activations.
      const compiler::OpContext ctx{ir::BACKWARD_INPUT, pt.mb, 0, -1, plan.encoders.front().module};
      const int32_t ev = ed.event("compute>bnd_send_bwd");
      const int64_t v = ed.record(compute, ev, ctx);
      for (int32_t ei = 0; ei < num_enc; ++ei) {
        const EncoderSlotsIsland& s = slots[static_cast<size_t>(ei)];
        const std::string bnd = "bnd" + std::to_string(plan.encoders[static_cast<size_t>(ei)].e);
        const compiler::OpContext ectx{ir::BACKWARD_INPUT, pt.mb, 0, -1, plan.encoders[static_cast<size_t>(ei)].module};
        for (int32_t q = 0; q < s.llm_peers; ++q) {
          const int32_t st = ed.stream(bnd + "_send_bwd" + std::to_string(q), ir::BOUNDARY);
          ed.wait(st, ev, v, ectx);
          add_send(ed, st, ectx, s.peers[static_cast<size_t>(q)], s.slice_bytes, kBoundaryBwdChannel,
                   boundary_tag(1, num_enc, ei, m, pt.mb));
        }
      }
    }
    ed.set_compute_block(nullptr);
    insertions.push_back({pt.at, std::move(block)});
  }
  splice(*cls.mutable_streams(compute), std::move(insertions));
  drop_empty_streams(cls);
}

// One encoder's island schedule (schedule::graph_aware_1f1b): the last stage
// answers to the LLM (LLM stage 0's forwards before each gradient), stage j
// to stage j + 1; a frozen encoder's stages before the last (the projector)
// run forwards only. One action list per encoder stage.
schedule::ActionSchedule island_schedules(const EncoderPlan& enc, const LlmPlan& llm,
                                          const std::vector<int32_t>& llm_need) {
  schedule::GraphAwareInput in;
  in.stages = enc.dims.pp;
  in.sink_distance = llm.dims.pp;
  in.downstream_need = llm_need;
  for (int32_t j = 0; j < enc.dims.pp; ++j) in.trains.push_back(!enc.frozen || j == enc.dims.pp - 1);
  in.module = enc.name;
  return schedule::graph_aware_1f1b(in);
}

// The class of encoder `ei`'s stage j (`leader`: its last stage's boundary
// leaders, or the stage's only class): the model state, the parameter
// gather, the schedule's passes with their PP and boundary transfers, the
// gradient reduction and the optimizer.
ir::RankClass build_island_class(const scenario::Scenario& spec, const Plan& plan, int32_t ei,
                                 const EncoderSlotsIsland& s, int32_t j, bool leader,
                                 const schedule::RankActions& stage_actions) {
  const LlmPlan& llm = plan.llm;
  const EncoderPlan& enc = plan.encoders[static_cast<size_t>(ei)];
  const int32_t m = llm.microbatches;
  const int32_t num_enc = static_cast<int32_t>(plan.encoders.size());
  const bool dist_opt = llm.distributed_optimizer;
  const int32_t pp = enc.dims.pp, last = pp - 1;
  const int64_t dp_cp = int64_t{enc.dims.dp} * enc.dims.cp;
  const std::string bnd = "bnd" + std::to_string(enc.e);
  const bool leader_split = enc.dims.tp * enc.dims.cp > 1;
  ir::RankClass cls;
  cls.set_name("enc" + std::to_string(enc.e) + "_pp" + std::to_string(j) + (leader ? "_boundary_leader" : ""));
  ClassEditor ed(cls);
  const int32_t compute = ed.compute();
  std::vector<ir::Op> ops;
  ed.set_compute_block(&ops);
  StepEmitter em(ed, s.kernel);
  const StageWork work = stage_work(spec, enc, j, enc.microbatch_samples, llm.hidden, false);
  const StageParameters params = stage_parameters(spec, enc, j);
  add_model_state(*cls.mutable_memory(), params, dp_cp, dist_opt);
  const int32_t enc_dp = ed.stream("enc_dp", ir::DP_COMM);
  int64_t gathered = 0;
  if (dist_opt && s.dp_cp >= 0 && params.trained > 0) {
    const compiler::OpContext ctx{ir::DP_SYNC, 0, 0, -1, enc.module};
    add_collective(ed, enc_dp, ctx, ir::ALL_GATHER, s.dp_cp, params.trained * model::kBf16);
    gathered = ed.record(enc_dp, ed.event("enc_dp>compute"), ctx);
  }
  const int64_t num_vs = pp;
  auto pp_tag = [&](int64_t dir, int64_t receiver, int64_t mb) { return (dir * num_vs + receiver) * m + mb; };
  bool first_forward = true;
  for (const auto& a : stage_actions) {
    const int32_t i = a->microbatch;
    if (a->type == schedule::ActionType::kForward) {
      const compiler::OpContext ctx{ir::FORWARD, i, 0, -1, enc.module};
      if (first_forward && gathered > 0) ed.wait(compute, ed.event("enc_dp>compute"), gathered, ctx);
      first_forward = false;
      if (j > 0) {
        const int32_t st = ed.stream("enc_pp_recv_fwd", ir::ENCODER_COMM);
        add_recv(ed, st, ctx, s.pp_prev, work.p2p_bytes, 0, pp_tag(0, j, i));
        ed.handoff(st, compute, "enc_pp_recv_fwd>compute", ctx);
      }
      emit_forward(em, work, ctx);
      if (j < last) {
        const int32_t st = ed.stream("enc_pp_send_fwd", ir::ENCODER_COMM);
        ed.handoff(compute, st, "compute>enc_pp_send_fwd", ctx);
        add_send(ed, st, ctx, s.pp_next, work.p2p_bytes, 0, pp_tag(0, j + 1, i));
      } else {
        // The projector's output, whole on the leader: gathered over
        // the shard's tp × cp ranks when SP / CP split it.
        int32_t from = compute;
        std::string from_key = "compute>bnd_send_fwd";
        if (enc.sharded_output()) {
          const int32_t g = ed.stream(bnd + "_gather", ir::BOUNDARY);
          ed.handoff(compute, g, "compute>" + bnd + "_gather", ctx);
          add_collective(ed, g, ctx, ir::ALL_GATHER, s.enc_gather,
                         enc.boundary_bytes(enc.microbatch_samples, llm.hidden));
          from = g;
          from_key = bnd + "_gather>bnd_send_fwd";
        }
        if (leader) {
          const int32_t ev = ed.event(from_key);
          const int64_t v = ed.record(from, ev, ctx);
          for (int32_t q = 0; q < s.enc_peers; ++q) {
            const int32_t st = ed.stream(bnd + "_send_fwd" + std::to_string(q), ir::BOUNDARY);
            ed.wait(st, ev, v, ctx);
            add_send(ed, st, ctx, s.peers[static_cast<size_t>(q)], s.slice_bytes, kBoundaryFwdChannel,
                     boundary_tag(0, num_enc, ei, m, i));
          }
        }
      }
    } else {
      const compiler::OpContext ctx{ir::BACKWARD_INPUT, i, 0, -1, enc.module};
      if (j == last) {
        std::vector<std::pair<int32_t, int64_t>> received;
        if (leader)
          for (int32_t q = 0; q < s.enc_peers; ++q) {
            const std::string name = bnd + "_recv_bwd" + std::to_string(q);
            const int32_t st = ed.stream(name, ir::BOUNDARY);
            add_recv(ed, st, ctx, s.peers[static_cast<size_t>(q)], s.slice_bytes, kBoundaryBwdChannel,
                     boundary_tag(1, num_enc, ei, m, i));
            const int32_t ev = ed.event(name + ">");
            received.push_back({ev, ed.record(st, ev, ctx)});
          }
        if (leader_split) {
          // Mirror of the forward: the leader broadcasts the gradient
          // of the shard's microbatch to its TP / CP group.
          const int32_t st = ed.stream(bnd + "_bcast_bwd", ir::BOUNDARY);
          for (const auto& [ev, v] : received) ed.wait(st, ev, v, ctx);
          add_collective(ed, st, ctx, ir::BROADCAST, s.enc_bcast,
                         enc.boundary_bytes(enc.microbatch_samples, llm.hidden));
          ed.handoff(st, compute, bnd + "_bcast_bwd>compute", ctx);
        } else {
          for (const auto& [ev, v] : received) ed.wait(compute, ev, v, ctx);
        }
      } else {
        const int32_t st = ed.stream("enc_pp_recv_bwd", ir::ENCODER_COMM);
        add_recv(ed, st, ctx, s.pp_next, work.p2p_bytes, 1, pp_tag(1, j, i));
        ed.handoff(st, compute, "enc_pp_recv_bwd>compute", ctx);
      }
      emit_backward(em, work, ctx);
      if (j > 0 && !enc.frozen) {
        const int32_t st = ed.stream("enc_pp_send_bwd", ir::ENCODER_COMM);
        ed.handoff(compute, st, "compute>enc_pp_send_bwd", ctx);
        add_send(ed, st, ctx, s.pp_prev, work.p2p_bytes, 1, pp_tag(1, j - 1, i));
      }
    }
  }
  // Gradient reduction over the encoder's dp × cp, then its optimizer.
  const compiler::OpContext dctx{ir::DP_SYNC, 0, 0, -1, enc.module};
  const compiler::OpContext octx{ir::OPTIMIZER_STEP, 0, 0, -1, enc.module};
  if (s.dp_cp >= 0 && params.trained > 0) {
    ed.handoff(compute, enc_dp, "compute>enc_dp", dctx);
    add_collective(ed, enc_dp, dctx, dist_opt ? ir::REDUCE_SCATTER : ir::ALL_REDUCE, s.dp_cp,
                   params.trained * model::kFp32);
    ed.handoff(enc_dp, compute, "enc_dp>compute", octx);
  }
  if (params.trained > 0) {
    const int64_t updated = dist_opt ? (params.trained + dp_cp - 1) / dp_cp : params.trained;
    for (const model::Kernel& k : model::optimizer_update(updated)) em.kernel(k, octx);
  }
  ed.set_compute_block(nullptr);
  splice(*cls.mutable_streams(compute), {{0, std::move(ops)}});
  drop_empty_streams(cls);
  return cls;
}

// Binds a class of encoder stage j to its ranks: every tp × cp rank of each
// DP shard, or (last stage, split) the leaders (role 0) or the others.
void bind_island_class(const EncoderPlan& enc, int32_t j, int32_t role, int32_t class_id, ir::Program& p) {
  const compiler::RankLayout el(enc.dims, enc.rank_order);
  const int32_t last = enc.dims.pp - 1;
  const bool leader_split = enc.dims.tp * enc.dims.cp > 1;
  for (int32_t k = 0; k < enc.dims.dp; ++k)
    for (int32_t r : tpcp_ranks(el, enc.first_rank, k, j)) {
      const bool is_leader = r == leader_rank(el, enc.first_rank, k, j);
      const bool mine = j != last || !leader_split || (role == 0) == is_leader;
      if (mine) p.mutable_ranks(r)->set_class_id(class_id);
    }
}

// Every island class: per encoder and stage, one class (two on the last
// stage when its tp × cp ranks split into leaders and the rest).
void add_island_classes(const scenario::Scenario& spec, const Plan& plan, const std::vector<EncoderSlotsIsland>& slots,
                        ir::Program& p) {
  const auto llm_need = llm_forwards_before_gradient(spec, plan);
  for (int32_t ei = 0; ei < static_cast<int32_t>(plan.encoders.size()); ++ei) {
    const EncoderPlan& enc = plan.encoders[static_cast<size_t>(ei)];
    const auto actions = island_schedules(enc, plan.llm, llm_need);
    const int32_t last = enc.dims.pp - 1;
    const bool leader_split = enc.dims.tp * enc.dims.cp > 1;
    for (int32_t j = 0; j < enc.dims.pp; ++j) {
      for (int32_t role = 0; role < (j == last && leader_split ? 2 : 1); ++role) {
        // role 0: the only class of the stage, or (last stage, split) the
        // leaders; role 1: the last stage's other tp / cp ranks.
        const bool leader = j == last && role == 0;
        const int32_t class_id = p.classes_size();
        *p.add_classes() = build_island_class(spec, plan, ei, slots[static_cast<size_t>(ei)], j, leader,
                                              actions[static_cast<size_t>(j)]);
        bind_island_class(enc, j, role, class_id, p);
      }
    }
  }
}
}  // namespace

void add_encoder_islands(const scenario::LoadedScenario& scenario, const Plan& plan, ir::Program& p) {
  add_island_ranks(plan, p);
  Groups groups(p);
  std::vector<EncoderSlotsIsland> slots;
  for (const EncoderPlan& enc : plan.encoders) slots.push_back(bind_island_slots(enc, plan.llm, groups, p));
  const int32_t leader_class = split_llm_stage0_leaders(plan.llm, p);
  const auto positions = locate_passes(p.classes(0).streams(compute_stream(p.classes(0))), plan.llm.microbatches);
  edit_llm_stage0(*p.mutable_classes(leader_class), true, plan, slots, positions);
  if (plan.llm.dims.tp * plan.llm.dims.cp > 1) edit_llm_stage0(*p.mutable_classes(0), false, plan, slots, positions);
  add_island_classes(scenario.spec, plan, slots, p);
}

}  // namespace lacuna::placement::hetero
