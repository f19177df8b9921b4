// Colocated encoders (MegatronMIMO's three-phase schedule). Every rank holds
// both modules; encoder collectives need all members of a group at once,
// while 1F1B staggers the LLM's ranks, so the encoder runs as whole phases
// around the LLM's own program:
//   (1) encoder parameter all-gather, encoder forward of every microbatch of
//       this rank's shard, the colocated forward transform (boundary);
//   (2) the LLM's compiled program, unchanged (its DP all-gather runs on its
//       own stream and overlaps phase 1);
//   (3) after the LLM's last forward / backward kernel: backward transform,
//       encoder backward of every microbatch, encoder gradient reduction;
//       both modules' reductions finish before either optimizer steps.
// An encoder with pp > 1 (docs/placements.md#colocated-encoder-pipeline)
// runs phases 1 and 3 as a GPipe pipeline over its own stages on the same
// GPUs (all forwards, then all backwards); its output and gradient cross
// between its last stage and the LLM's first stage through one collective
// among exactly those ranks of the nested replica / shard.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "sim/core/error.h"
#include "sim/cost/memory.h"
#include "sim/model/kernels.h"
#include "sim/placement/class_edit.h"
#include "sim/placement/hetero_compile.h"
#include "sim/schedule/colocated.h"

namespace lacuna::placement::hetero {
namespace {

// Which ranks a boundary collective spans.
enum class Over {
  kShard,    // the encoder shard's tp × cp ranks (of its last stage)
  kReplica,  // the LLM replica's ranks (all its tp, cp and pp)
  kBridge,   // encoder pp > 1: the LLM's first-stage ranks and the encoder's
             // last-stage ranks of one nested replica / shard (bridge_members)
};

// What one encoder's boundary transform is on a colocated rank.
struct Transform {
  ir::CollectiveKind kind = ir::COLLECTIVE_UNSPECIFIED;  // unspecified: no traffic
  int64_t bytes = 0;
  Over over = Over::kShard;
};

// The bytes one bridge carries: the replica's embeddings (fan-in, equal), or
// the shard's, which its replicas slice (fan-out).
int64_t bridge_bytes(const Plan& plan, const EncoderPlan& enc) {
  return enc.relation == DpRelation::kFanOut ? enc.boundary_bytes(enc.samples_per_shard, plan.llm.hidden)
                                             : enc.boundary_bytes(plan.llm.samples_per_replica, plan.llm.hidden);
}

// Forward: equal DP is a local reinterpretation; fan-in gathers the shards
// that form one LLM replica's batch among that replica's ranks; fan-out is a
// local slice. A shard whose output is split over its ranks (SP or CP) first
// needs it whole, an all-gather among the shard's ranks (fan-in's replica
// gather covers it).
//
// Encoder pp > 1: the output is on the encoder's last stage, which in
// general holds other GPUs than the LLM's first stage. A split output is
// first gathered among the last stage's tp × cp ranks (`pre`); then one
// broadcast over the bridge (those ranks and the LLM's first-stage ranks of
// the replica / shard) delivers it. NCCL has no many-to-many primitive;
// for fan-in the shards' parts travel the same chain, so the bytes are the
// replica's either way.
Transform forward_transform(const Plan& plan, const EncoderPlan& enc) {
  Transform t;
  if (enc.dims.pp > 1) return {ir::BROADCAST, bridge_bytes(plan, enc), Over::kBridge};
  switch (enc.relation) {
    case DpRelation::kFanIn:
      t = {ir::ALL_GATHER, enc.boundary_bytes(plan.llm.samples_per_replica, plan.llm.hidden), Over::kReplica};
      break;
    case DpRelation::kEqual:
    case DpRelation::kFanOut:
      if (enc.sharded_output())
        t = {ir::ALL_GATHER, enc.boundary_bytes(enc.samples_per_shard, plan.llm.hidden), Over::kShard};
      break;
  }
  return t;
}

Transform forward_pre_gather(const Plan& plan, const EncoderPlan& enc) {
  if (enc.dims.pp == 1 || !enc.sharded_output()) return {};
  return {ir::ALL_GATHER, enc.boundary_bytes(enc.samples_per_shard, plan.llm.hidden), Over::kShard};
}

// Backward: the LLM produces the embeddings' gradient on its first pipeline
// stage (whole on each of its tp·cp ranks: Megatron all-gathers the SP-sharded
// embedding gradient). Fan-in / equal: with pp > 1 the replica's other
// stages hold encoder shards too, so stage 0 broadcasts the replica's
// gradient within the replica; with pp = 1 every shard takes its slice
// locally. Fan-out: the shard's replicas each hold their part: an all-gather
// among the shard's ranks. Encoder pp > 1: the mirror of the forward, one
// broadcast over the bridge to the encoder's last stage.
Transform backward_transform(const Plan& plan, const EncoderPlan& enc) {
  Transform t;
  if (enc.dims.pp > 1) return {ir::BROADCAST, bridge_bytes(plan, enc), Over::kBridge};
  if (enc.relation == DpRelation::kFanOut) {
    t = {ir::ALL_GATHER, enc.boundary_bytes(enc.samples_per_shard, plan.llm.hidden), Over::kShard};
  } else if (plan.llm.dims.pp > 1) {
    t = {ir::BROADCAST, enc.boundary_bytes(plan.llm.samples_per_replica, plan.llm.hidden), Over::kReplica};
  }
  return t;
}

// The bridges of an encoder with pp > 1, as sorted global rank sets: per LLM
// replica (fan-in, equal) its first-stage ranks and the last-stage ranks of
// the shards feeding it; per encoder shard (fan-out) its last-stage ranks
// and the first-stage ranks of the replicas it feeds.
std::vector<std::vector<int32_t>> bridge_members(const Plan& plan, const EncoderPlan& enc) {
  const compiler::RankLayout llm(plan.llm.dims, plan.llm.rank_order);
  const int32_t last = enc.dims.pp - 1;
  auto llm_first_stage = [&](int32_t d) {
    std::vector<int32_t> out;
    for (int32_t r : llm_replica_ranks(plan.llm, d))
      if (llm.coordinates(r).pp() == 0) out.push_back(r);
    return out;
  };
  std::vector<std::vector<int32_t>> out;
  if (enc.relation == DpRelation::kFanOut) {
    out.resize(static_cast<size_t>(enc.dims.dp));
    for (int32_t k = 0; k < enc.dims.dp; ++k) out[static_cast<size_t>(k)] = encoder_shard_ranks(enc, k, last);
    for (int32_t d = 0; d < plan.llm.dims.dp; ++d) {
      auto& m = out[static_cast<size_t>(colocated_shard_of_replica(plan, enc, d))];
      for (int32_t r : llm_first_stage(d)) m.push_back(r);
    }
  } else {
    out.resize(static_cast<size_t>(plan.llm.dims.dp));
    for (int32_t d = 0; d < plan.llm.dims.dp; ++d) out[static_cast<size_t>(d)] = llm_first_stage(d);
    for (int32_t k = 0; k < enc.dims.dp; ++k) {
      auto& m = out[static_cast<size_t>(colocated_replica_of_shard(plan, enc, k))];
      for (int32_t r : encoder_shard_ranks(enc, k, last)) m.push_back(r);
    }
  }
  for (auto& m : out) {
    std::sort(m.begin(), m.end());
    m.erase(std::unique(m.begin(), m.end()), m.end());
  }
  return out;
}

// What a class's ranks hold once every class has one role.
struct ClassRole {
  std::vector<int32_t> enc_stage;  // per encoder: the pipeline stage (0 with pp 1)
  std::vector<bool> in_bridge;     // per encoder with pp > 1: a member of a bridge of ≥ 2 ranks
  bool llm_first_stage = false;
};

// An encoder with pp > 1 runs different stages on ranks of one LLM class,
// and only some of them join its bridge: the classes are split by (LLM
// class, LLM first stage or not, encoder stages), numbered in order of their
// first rank. Without such an encoder the classes stay as compiled.
// `bridge_slot`: per encoder, its bridge's group slot (-1: none).
std::vector<ClassRole> split_classes(const Plan& plan, const std::vector<int32_t>& bridge_slot, ir::Program& p) {
  std::vector<compiler::RankLayout> layouts;
  bool staged = false;
  for (const EncoderPlan& enc : plan.encoders) {
    layouts.emplace_back(enc.dims, enc.rank_order);
    staged = staged || enc.dims.pp > 1;
  }
  const auto role_of = [&](const ir::RankBinding& b, int32_t r) {
    ClassRole role;
    role.llm_first_stage = b.coord().pp() == 0;
    for (size_t i = 0; i < layouts.size(); ++i) {
      role.enc_stage.push_back(layouts[i].coordinates(r).pp());
      role.in_bridge.push_back(bridge_slot[i] >= 0 && b.group(bridge_slot[i]) >= 0);
    }
    return role;
  };
  std::vector<ClassRole> roles(static_cast<size_t>(p.classes_size()));
  if (!staged) {
    std::vector<bool> seen(roles.size(), false);
    for (int32_t r = 0; r < p.ranks_size(); ++r) {
      const int32_t c = p.ranks(r).class_id();
      if (seen[static_cast<size_t>(c)]) continue;
      seen[static_cast<size_t>(c)] = true;
      roles[static_cast<size_t>(c)] = role_of(p.ranks(r), r);
    }
    return roles;
  }
  std::map<std::tuple<int32_t, bool, std::vector<int32_t>, std::vector<bool>>, int32_t> index;
  std::vector<ir::RankClass> classes;
  roles.clear();
  for (int32_t r = 0; r < p.ranks_size(); ++r) {
    ir::RankBinding& b = *p.mutable_ranks(r);
    ClassRole role = role_of(b, r);
    const auto key = std::make_tuple(b.class_id(), role.llm_first_stage, role.enc_stage, role.in_bridge);
    auto [it, fresh] = index.try_emplace(key, static_cast<int32_t>(classes.size()));
    if (fresh) {
      ir::RankClass cls = p.classes(b.class_id());
      std::string name = cls.name();
      for (size_t i = 0; i < plan.encoders.size(); ++i)
        if (plan.encoders[i].dims.pp > 1)
          name += "_enc" + std::to_string(plan.encoders[i].e) + "_pp" + std::to_string(role.enc_stage[i]) +
                  (role.in_bridge[i] ? "_bridge" : "");
      // Unique even when one compiled class spanned the LLM's first stage
      // and others.
      if (std::any_of(classes.begin(), classes.end(), [&](const ir::RankClass& c) { return c.name() == name; }))
        name += "_" + std::to_string(classes.size());
      cls.set_name(name);
      classes.push_back(std::move(cls));
      roles.push_back(std::move(role));
    }
    b.set_class_id(it->second);
  }
  p.clear_classes();
  for (auto& cls : classes) *p.add_classes() = std::move(cls);
  return roles;
}

struct EncoderSlotSet {
  EncoderSlots kernel;
  int32_t dp_cp = -1;  // gradient reduction / parameter gather
  int32_t fwd = -1;    // boundary transform groups
  int32_t bwd = -1;
  int32_t pre = -1;    // pp > 1: the last stage's gather of a split output
  int32_t pp_next = -1, pp_prev = -1;  // pp > 1: the neighbouring stages
  Transform fwd_transform, bwd_transform, pre_transform;
};

int32_t first_index(const ir::Stream& s, ir::Phase phase) {
  for (int32_t i = 0; i < s.ops_size(); ++i)
    if (s.ops(i).module() == 0 && s.ops(i).phase() == phase) return i;
  return -1;
}

int32_t last_index(const ir::Stream& s, ir::Phase phase) {
  for (int32_t i = s.ops_size() - 1; i >= 0; --i)
    if (s.ops(i).module() == 0 && s.ops(i).phase() == phase) return i;
  return -1;
}

ir::Op copy_op(const compiler::OpContext& ctx, int64_t bytes, int64_t duration_ns, int64_t memory_delta) {
  ir::Op op;
  op.set_phase(ctx.phase);
  op.set_microbatch(ctx.microbatch);
  op.set_chunk(ctx.chunk);
  op.set_layer(ctx.layer);
  op.set_module(ctx.module);
  auto* c = op.mutable_compute();
  c->set_op_class(ir::ELEMENTWISE);
  c->add_shape(bytes);
  c->set_bytes(static_cast<double>(bytes));
  c->set_fixed_duration_ns(duration_ns);
  c->set_memory_delta_bytes(memory_delta);
  return op;
}

}  // namespace

void add_colocated_encoders(const scenario::LoadedScenario& scenario, const Plan& plan, ir::Program& p) {
  const auto& spec = scenario.spec;
  const compiler::RankLayout llm_layout(plan.llm.dims, plan.llm.rank_order);
  const bool dist_opt = plan.llm.distributed_optimizer;
  const auto& het = spec.placement().heterogeneous();
  if (het.host_link_gb_per_s() < 0)
    throw Error(scenario.locations.locate("placement.heterogeneous.host_link_gb_per_s"),
                "host_link_gb_per_s = " + std::to_string(het.host_link_gb_per_s()) + " is negative",
                "set the host link bandwidth per GPU and direction (0: PCIe Gen5 x16, 64 GB/s)");
  const bool offload = het.offload_encoder();
  // Unset: PCIe Gen5 x16's nominal 64 GB/s per direction (the field's default).
  const double host_gb_per_s = het.host_link_gb_per_s() > 0 ? het.host_link_gb_per_s() : 64.0;

  Groups groups(p);
  std::vector<EncoderSlotSet> slots(plan.encoders.size());
  for (size_t i = 0; i < plan.encoders.size(); ++i) {
    const EncoderPlan& enc = plan.encoders[i];
    EncoderSlotSet& s = slots[i];
    const std::string pre = "enc" + std::to_string(enc.e);
    const compiler::RankLayout el(enc.dims, enc.rank_order);
    if (enc.dims.tp > 1) {
      s.kernel.tp = add_group_slot(p, pre + "_tp", ir::ENCODER_TP);
      bind_axis_groups(p, groups, pre + "_tp", ir::ENCODER_TP, s.kernel.tp, el, 0, {true, false, false, false});
    }
    if (enc.dims.cp > 1) {
      s.kernel.cp = add_group_slot(p, pre + "_cp", ir::ENCODER_CP);
      bind_axis_groups(p, groups, pre + "_cp", ir::ENCODER_CP, s.kernel.cp, el, 0, {false, true, false, false});
    }
    // Gradients reduce over dp × cp (CP ranks replicate the weights too).
    if (enc.dims.dp * enc.dims.cp > 1) {
      s.dp_cp = add_group_slot(p, pre + "_dp_cp", ir::ENCODER_DP);
      bind_axis_groups(p, groups, pre + "_dp_cp", ir::ENCODER_DP, s.dp_cp, el, 0, {false, true, true, false});
    }
    s.fwd_transform = forward_transform(plan, enc);
    s.bwd_transform = backward_transform(plan, enc);
    s.pre_transform = forward_pre_gather(plan, enc);
    const int32_t last = enc.dims.pp - 1;
    // Boundary groups: the LLM replica's ranks (all its tp, cp and pp), the
    // encoder shard's ranks (all its tp and cp; of its last stage), or the
    // bridge between the encoder's last stage and the LLM's first.
    auto bind_boundary = [&](const Transform& t, const std::string& name) {
      if (t.kind == ir::COLLECTIVE_UNSPECIFIED) return -1;
      const int32_t slot = add_group_slot(p, name, ir::BOUNDARY_GROUP);
      auto bind = [&](const std::vector<int32_t>& ranks) {
        if (ranks.size() < 2) return;
        const int32_t g = groups.get(name, ir::BOUNDARY_GROUP, ranks);
        for (int32_t r : ranks) p.mutable_ranks(r)->set_group(slot, g);
      };
      switch (t.over) {
        case Over::kReplica:
          bind_axis_groups(p, groups, name, ir::BOUNDARY_GROUP, slot, llm_layout, 0, {true, true, false, true});
          break;
        case Over::kShard:
          if (last == 0)
            bind_axis_groups(p, groups, name, ir::BOUNDARY_GROUP, slot, el, 0, {true, true, false, false});
          else
            for (int32_t k = 0; k < enc.dims.dp; ++k) bind(encoder_shard_ranks(enc, k, last));
          break;
        case Over::kBridge:
          for (const auto& ranks : bridge_members(plan, enc)) bind(ranks);
          break;
      }
      return slot;
    };
    const std::string bnd = "bnd" + std::to_string(enc.e);
    s.fwd = bind_boundary(s.fwd_transform, bnd + "_fwd");
    s.bwd = bind_boundary(s.bwd_transform, bnd + "_bwd");
    s.pre = bind_boundary(s.pre_transform, bnd + "_gather");
    if (s.fwd < 0) s.fwd_transform = {};
    if (s.bwd < 0) s.bwd_transform = {};
    if (s.pre < 0) s.pre_transform = {};
    if (enc.dims.pp > 1) {
      s.pp_next = add_peer_slot(p, pre + "_pp_next");
      s.pp_prev = add_peer_slot(p, pre + "_pp_prev");
      bind_stage_peers(p, el, 0, s.pp_next, s.pp_prev);
    }
  }
  std::vector<int32_t> bridge_slot;
  for (const EncoderSlotSet& s : slots) bridge_slot.push_back(s.fwd_transform.over == Over::kBridge ? s.fwd : -1);
  const std::vector<ClassRole> roles = split_classes(plan, bridge_slot, p);

  for (int32_t k = 0; k < p.classes_size(); ++k) {
    ir::RankClass& cls = *p.mutable_classes(k);
    ClassEditor ed(cls);
    const int32_t compute = ed.compute();
    const ir::Stream& llm_compute = cls.streams(compute);
    const int32_t n = llm_compute.ops_size();
    // Phase 3 goes right before the LLM's optimizer step (its wait for the
    // DP reduction, then the Adam kernel): after its last forward / backward
    // kernel and after it handed its last gradients to the DP stream, so the
    // LLM's reduction overlaps the encoder's backward.
    int32_t phase3_at = first_index(llm_compute, ir::OPTIMIZER_STEP);
    if (phase3_at < 0) phase3_at = n;
    const int32_t last_forward = last_index(llm_compute, ir::FORWARD);
    const int32_t prefetch_at = std::min(last_forward + 1, phase3_at);

    std::vector<ir::Op> phase1, prefetch, phase3, tail;
    const int32_t enc_dp = ed.stream("enc_dp", ir::DP_COMM);
    const int32_t boundary = ed.stream("boundary", ir::BOUNDARY);
    const int32_t offload_stream = offload ? ed.stream("enc_offload", ir::ENCODER_COMM) : -1;

    struct PerEncoder {
      StageWork work;
      StageParameters params;
      int64_t gathered = 0;  // enc_dp>compute value after the parameter gather (0: none)
      int64_t offload_bytes = 0;
    };
    const ClassRole& role = roles[static_cast<size_t>(k)];
    std::vector<PerEncoder> per;
    for (size_t i = 0; i < plan.encoders.size(); ++i) {
      const EncoderPlan& enc = plan.encoders[i];
      const int32_t stage = role.enc_stage[i];
      PerEncoder pe{stage_work(spec, enc, stage, enc.microbatch_samples, plan.llm.hidden, true),
                    stage_parameters(spec, enc, stage), 0, 0};
      const auto st = cost::model_state_bytes(pe.params.trained, int64_t{enc.dims.dp} * enc.dims.cp, dist_opt);
      pe.offload_bytes = (st.weights + st.optimizer).count() + model::kBf16 * pe.params.frozen;
      add_model_state(*cls.mutable_memory(), pe.params, int64_t{enc.dims.dp} * enc.dims.cp, dist_opt);
      per.push_back(std::move(pe));
    }

    // ---- phase 1
    ed.set_compute_block(&phase1);
    // Distributed optimizer: the encoder's bf16 parameters are gathered at
    // iteration start (after the previous step), as the LLM's are.
    for (size_t i = 0; i < plan.encoders.size(); ++i) {
      const EncoderPlan& enc = plan.encoders[i];
      const compiler::OpContext ctx{ir::DP_SYNC, 0, 0, -1, enc.module};
      if (dist_opt && slots[i].dp_cp >= 0 && per[i].params.trained > 0) {
        add_collective(ed, enc_dp, ctx, ir::ALL_GATHER, slots[i].dp_cp, per[i].params.trained * model::kBf16);
        per[i].gathered = ed.record(enc_dp, ed.event("enc_dp>compute"), ctx);
      }
    }
    // Each encoder's passes on this rank, from the three-phase schedule
    // (schedule::colocated_three_phase): its forwards in phase 1, its
    // backwards in phase 3.
    std::vector<schedule::RankActions> passes;
    for (size_t i = 0; i < plan.encoders.size(); ++i) {
      const EncoderPlan& enc = plan.encoders[i];
      const int32_t stage = role.enc_stage[i];
      passes.push_back(schedule::colocated_three_phase(
          {{enc.name, enc.dims.pp, stage, enc.microbatches, !enc.frozen || stage == enc.dims.pp - 1}}, {}));
    }
    std::vector<std::pair<int32_t, int64_t>> transform_waits;
    for (size_t i = 0; i < plan.encoders.size(); ++i) {
      const EncoderPlan& enc = plan.encoders[i];
      StepEmitter em(ed, slots[i].kernel);
      const compiler::OpContext ctx{ir::FORWARD, 0, 0, -1, enc.module};
      if (per[i].gathered > 0) ed.wait(compute, ed.event("enc_dp>compute"), per[i].gathered, ctx);
      const int32_t stage = role.enc_stage[i], last = enc.dims.pp - 1;
      const std::string pp = "enc" + std::to_string(enc.e) + "_pp";
      for (const auto& a : passes[i]) {
        if (a->type != schedule::ActionType::kForward) continue;
        const int32_t mb = a->microbatch;
        compiler::OpContext mctx = ctx;
        mctx.microbatch = mb;
        if (stage > 0) {
          const int32_t st = ed.stream(pp + "_recv_fwd", ir::ENCODER_COMM);
          add_recv(ed, st, mctx, slots[i].pp_prev, per[i].work.p2p_bytes, encoder_pp_channel(static_cast<int32_t>(i), true), mb);
          ed.handoff(st, compute, pp + "_recv_fwd>compute", mctx);
        }
        emit_forward(em, per[i].work, mctx);
        if (stage < last) {
          const int32_t st = ed.stream(pp + "_send_fwd", ir::ENCODER_COMM);
          ed.handoff(compute, st, "compute>" + pp + "_send_fwd", mctx);
          add_send(ed, st, mctx, slots[i].pp_next, per[i].work.p2p_bytes, encoder_pp_channel(static_cast<int32_t>(i), true), mb);
        }
      }
      if (last > 0) {
        // Encoder pipeline: the last stage gathers a split output, then the
        // bridge carries it to the LLM's first stage, which alone waits.
        const Transform& g = slots[i].pre_transform;
        if (stage == last && g.kind != ir::COLLECTIVE_UNSPECIFIED) {
          ed.handoff(compute, boundary, "compute>boundary", ctx);
          add_collective(ed, boundary, ctx, g.kind, slots[i].pre, g.bytes);
        }
        const Transform& t = slots[i].fwd_transform;
        if (role.in_bridge[i]) {
          if (stage != last || g.kind == ir::COLLECTIVE_UNSPECIFIED) ed.handoff(compute, boundary, "compute>boundary", ctx);
          add_collective(ed, boundary, ctx, t.kind, slots[i].fwd, t.bytes);
          if (role.llm_first_stage) {
            const int32_t ev = ed.event("boundary>compute");
            transform_waits.push_back({ev, ed.record(boundary, ev, ctx)});
          }
        }
      } else if (const Transform& t = slots[i].fwd_transform; t.kind != ir::COLLECTIVE_UNSPECIFIED) {
        ed.handoff(compute, boundary, "compute>boundary", ctx);
        add_collective(ed, boundary, ctx, t.kind, slots[i].fwd, t.bytes);
        const int32_t ev = ed.event("boundary>compute");
        transform_waits.push_back({ev, ed.record(boundary, ev, ctx)});
      }
      if (offload) {
        // Weights and optimizer state leave for host memory once the
        // forward no longer needs them; the LLM phase runs without them.
        ed.handoff(compute, offload_stream, "compute>offload", ctx);
        *ed.add(offload_stream, ctx) = copy_op(
            ctx, per[i].offload_bytes, host_copy_ns(per[i].offload_bytes, host_gb_per_s), -per[i].offload_bytes);
      }
    }
    // The LLM's first stage consumes the packed boundary tensor: every
    // transform has landed before phase 2 (they overlap later encoders'
    // forward).
    for (const auto& [ev, v] : transform_waits)
      ed.wait(compute, ev, v, compiler::OpContext{ir::FORWARD, 0, 0, -1, plan.encoders.back().module});

    // ---- prefetch: the encoder state comes back during the LLM's cool-down
    // (after its last forward on this rank), ready for phase 3.
    ed.set_compute_block(&prefetch);
    std::vector<int64_t> restored(plan.encoders.size(), 0);
    if (offload) {
      const compiler::OpContext ctx{ir::BACKWARD_INPUT, 0, 0, -1, plan.encoders.front().module};
      ed.handoff(compute, offload_stream, "compute>offload", ctx);
      for (size_t i = 0; i < plan.encoders.size(); ++i) {
        const compiler::OpContext ectx{ir::BACKWARD_INPUT, 0, 0, -1, plan.encoders[i].module};
        *ed.add(offload_stream, ectx) = copy_op(
            ectx, per[i].offload_bytes, host_copy_ns(per[i].offload_bytes, host_gb_per_s), per[i].offload_bytes);
        restored[i] = ed.record(offload_stream, ed.event("offload>compute"), ectx);
      }
    }

    // ---- phase 3
    ed.set_compute_block(&phase3);
    int64_t reduced = 0;
    for (size_t i = 0; i < plan.encoders.size(); ++i) {
      const EncoderPlan& enc = plan.encoders[i];
      StepEmitter em(ed, slots[i].kernel);
      const compiler::OpContext ctx{ir::BACKWARD_INPUT, 0, 0, -1, enc.module};
      if (restored[i] > 0) ed.wait(compute, ed.event("offload>compute"), restored[i], ctx);
      const int32_t stage = role.enc_stage[i], last = enc.dims.pp - 1;
      const Transform& t = slots[i].bwd_transform;
      if (last > 0) {
        // The bridge brings the gradient to the encoder's last stage; the
        // LLM's first-stage ranks only send it.
        if (role.in_bridge[i]) {
          ed.handoff(compute, boundary, "compute>boundary", ctx);
          add_collective(ed, boundary, ctx, t.kind, slots[i].bwd, t.bytes);
          if (stage == last) ed.handoff(boundary, compute, "boundary>compute", ctx);
        }
      } else if (t.kind != ir::COLLECTIVE_UNSPECIFIED) {
        ed.handoff(compute, boundary, "compute>boundary", ctx);
        add_collective(ed, boundary, ctx, t.kind, slots[i].bwd, t.bytes);
        ed.handoff(boundary, compute, "boundary>compute", ctx);
      }
      // A frozen encoder trains its projector alone (on the last stage): the
      // earlier stages run no backward (the schedule has none for them).
      const std::string pp = "enc" + std::to_string(enc.e) + "_pp";
      for (const auto& a : passes[i]) {
        if (a->type != schedule::ActionType::kBackward) continue;
        const int32_t mb = a->microbatch;
        compiler::OpContext mctx = ctx;
        mctx.microbatch = mb;
        if (stage < last) {
          const int32_t st = ed.stream(pp + "_recv_bwd", ir::ENCODER_COMM);
          add_recv(ed, st, mctx, slots[i].pp_next, per[i].work.p2p_bytes, encoder_pp_channel(static_cast<int32_t>(i), false), mb);
          ed.handoff(st, compute, pp + "_recv_bwd>compute", mctx);
        }
        emit_backward(em, per[i].work, mctx);
        if (stage > 0 && !enc.frozen) {
          const int32_t st = ed.stream(pp + "_send_bwd", ir::ENCODER_COMM);
          ed.handoff(compute, st, "compute>" + pp + "_send_bwd", mctx);
          add_send(ed, st, mctx, slots[i].pp_prev, per[i].work.p2p_bytes, encoder_pp_channel(static_cast<int32_t>(i), false), mb);
        }
      }
      if (slots[i].dp_cp >= 0 && per[i].params.trained > 0) {
        const compiler::OpContext dctx{ir::DP_SYNC, 0, 0, -1, enc.module};
        ed.handoff(compute, enc_dp, "compute>enc_dp", dctx);
        add_collective(ed, enc_dp, dctx, dist_opt ? ir::REDUCE_SCATTER : ir::ALL_REDUCE, slots[i].dp_cp,
                       per[i].params.trained * model::kFp32);
        reduced = ed.record(enc_dp, ed.event("enc_dp>compute"), dctx);
      }
    }
    // One final gradient reduction for both modules: the encoder's has
    // finished before the LLM's optimizer wait that follows.
    if (reduced > 0)
      ed.wait(compute, ed.event("enc_dp>compute"), reduced,
              compiler::OpContext{ir::OPTIMIZER_STEP, 0, 0, -1, plan.encoders.back().module});

    // ---- the encoders' optimizer steps, after the LLM's
    ed.set_compute_block(&tail);
    for (size_t i = 0; i < plan.encoders.size(); ++i) {
      const EncoderPlan& enc = plan.encoders[i];
      const int64_t trained = per[i].params.trained;
      if (trained == 0) continue;
      const int64_t dp_cp = int64_t{enc.dims.dp} * enc.dims.cp;
      const int64_t updated = dist_opt ? (trained + dp_cp - 1) / dp_cp : trained;
      StepEmitter em(ed, slots[i].kernel);
      for (const model::Kernel& k : model::optimizer_update(updated)) em.kernel(k, compiler::OpContext{ir::OPTIMIZER_STEP, 0, 0, -1, enc.module});
    }
    ed.set_compute_block(nullptr);

    splice(*cls.mutable_streams(compute), {{0, std::move(phase1)},
                                           {prefetch_at, std::move(prefetch)},
                                           {phase3_at, std::move(phase3)},
                                           {n, std::move(tail)}});
    drop_empty_streams(cls);
  }
}

}  // namespace lacuna::placement::hetero
