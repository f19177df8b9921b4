#include "sim/placement/optimus_work.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <variant>

#include "sim/compiler/segment_inputs.h"
#include "sim/core/error.h"
#include "sim/cost/group_shape.h"
#include "sim/model/kernels.h"
#include "sim/model/mllm.h"

namespace lacuna::placement::optimus {
namespace {

// Turns model steps into a pass, with the compiler's rule for where the
// compute stream waits for a collective (compiler/stage_program.cpp,
// Emitter): before the next kernel with the CommPoint's consumer role, or
// the next kernel that is not a weight gradient; whatever is pending at the
// end of the pass is waited for there.
class PassBuilder {
 public:
  PassBuilder(const cost::CostModel& cost, const cost::GroupShape& tp_group) : cost_(cost), tp_group_(tp_group) {}

  struct Appended {
    int32_t last_kernel = -1;
    int32_t last_recompute = -1;
  };

  Appended append(const std::vector<model::Step>& steps, int32_t module, int64_t layer) {
    Appended out;
    for (const model::Step& step : steps) {
      if (const auto* k = std::get_if<model::Kernel>(&step)) {
        take_pending([&](const Pending& p) { return p.consumer.matches(*k); });
        PassOp op;
        op.kind = PassOp::kKernel;
        op.op.set_phase(k->phase);
        op.op.set_layer(static_cast<int32_t>(layer));
        op.op.set_module(module);
        *op.op.mutable_compute() = model::to_compute(*k);
        op.duration_ns = cost_.compute(op.op.compute()).count();
        pass_.ops.push_back(std::move(op));
        out.last_kernel = static_cast<int32_t>(pass_.ops.size()) - 1;
        if (k->phase == ir::RECOMPUTE) out.last_recompute = out.last_kernel;
      } else {
        const auto& cp = std::get<model::CommPoint>(step);
        // CP_enc = 1: only TP communication exists.
        if (cp.group != model::CommGroup::kTp) throw Error("Optimus: encoder CP communication with cp = 1");
        PassOp op;
        op.kind = PassOp::kCollective;
        op.op.set_phase(cp.phase);
        op.op.set_layer(static_cast<int32_t>(layer));
        op.op.set_module(module);
        auto* c = op.op.mutable_collective();
        c->set_kind(cp.kind);
        c->set_bytes(cp.bytes);
        op.duration_ns = cost_.collective(cp.kind, cp.bytes, tp_group_).count();
        pass_.ops.push_back(std::move(op));
        pending_.push_back({cp.consumer, static_cast<int32_t>(pass_.ops.size()) - 1, module});
      }
    }
    return out;
  }

  void add_memory(int32_t index, Bytes delta) {
    if (index < 0 || delta == Bytes::zero()) return;
    auto* c = pass_.ops[static_cast<size_t>(index)].op.mutable_compute();
    c->set_memory_delta_bytes(c->memory_delta_bytes() + delta.count());
  }

  int32_t size() const { return static_cast<int32_t>(pass_.ops.size()); }

  Pass finish() {
    take_pending([](const Pending&) { return true; });
    pass_.recompute_totals();
    return std::move(pass_);
  }

 private:
  struct Pending {
    model::Consumer consumer;
    int32_t collective;
    int32_t module;
  };

  template <class Pred>
  void take_pending(Pred pred) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (pred(*it)) {
        PassOp op;
        op.kind = PassOp::kWait;
        op.waits_for = it->collective;
        op.op.set_module(it->module);
        op.op.set_phase(pass_.ops[static_cast<size_t>(it->collective)].op.phase());
        op.op.set_layer(-1);
        pass_.ops.push_back(std::move(op));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }

  const cost::CostModel& cost_;
  cost::GroupShape tp_group_;
  Pass pass_;
  std::vector<Pending> pending_;
};

// Block recompute: the first recompute_num_layers layers of the module on
// this stage recompute (Megatron's first N of each chunk), the others keep
// their activations.
bool recomputes(const compiler::ModuleWork& m, const StageLayers& range, int64_t layer) {
  return m.recompute_num_layers <= 0 || layer - range.first < m.recompute_num_layers;
}

}  // namespace

int32_t StageWork::gathers() const {
  int32_t n = 0;
  for (const DpBucket& b : buckets) n += b.gather_bytes > 0 ? 1 : 0;
  return n;
}

void Pass::recompute_totals() {
  // Back-to-back timing: the collectives run in issue order on their own
  // stream; the compute stream blocks only at the waits.
  compute_ns = max_kernel_ns = 0;
  collectives = 0;
  int64_t cursor = 0, stream_free = 0;
  std::vector<int64_t> end(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    const PassOp& op = ops[i];
    switch (op.kind) {
      case PassOp::kKernel:
        cursor += op.duration_ns;
        compute_ns += op.duration_ns;
        max_kernel_ns = std::max(max_kernel_ns, op.duration_ns);
        break;
      case PassOp::kCollective:
        stream_free = std::max(stream_free, cursor) + op.duration_ns;
        end[i] = stream_free;
        ++collectives;
        break;
      case PassOp::kWait:
        cursor = std::max(cursor, end[static_cast<size_t>(op.waits_for)]);
        break;
    }
  }
  contiguous_ns = cursor;
}

Pass Pass::suffix(int32_t at) const {
  Pass out;
  out.ops.assign(ops.begin() + at, ops.end());
  for (PassOp& op : out.ops)
    if (op.kind == PassOp::kWait) op.waits_for -= at;
  out.recompute_totals();
  return out;
}

Pass Pass::prefix(int32_t at) const {
  Pass out;
  out.ops.assign(ops.begin(), ops.begin() + at);
  out.recompute_totals();
  return out;
}

int64_t Pass::compute_within(int64_t start, int64_t window_begin, int64_t window_end, int32_t count) const {
  int64_t cursor = start, stream_free = start, inside = 0;
  std::vector<int64_t> end(ops.size(), 0);
  const size_t n = count < 0 ? ops.size() : std::min(ops.size(), static_cast<size_t>(count));
  for (size_t i = 0; i < n; ++i) {
    const PassOp& op = ops[i];
    if (op.kind == PassOp::kKernel) {
      const int64_t b = std::max(cursor, window_begin), e = std::min(cursor + op.duration_ns, window_end);
      if (e > b) inside += e - b;
      cursor += op.duration_ns;
    } else if (op.kind == PassOp::kCollective) {
      stream_free = std::max(stream_free, cursor) + op.duration_ns;
      end[i] = stream_free;
    } else {
      cursor = std::max(cursor, end[static_cast<size_t>(op.waits_for)]);
    }
  }
  return inside;
}

LlmRanks::LlmRanks(const ir::Program& llm) : program_(llm) {
  tp_ = std::max(1, llm.info().tp());
  dp_ = std::max(1, llm.info().dp());
  pp_ = std::max(1, llm.info().pp());
  rank_.assign(static_cast<size_t>(tp_) * dp_ * pp_, -1);
  for (int32_t r = 0; r < llm.ranks_size(); ++r) {
    const auto& c = llm.ranks(r).coord();
    if (c.cp() != 0) continue;
    rank_[(static_cast<size_t>(c.pp()) * dp_ + c.dp()) * tp_ + c.tp()] = r;
  }
}

int32_t LlmRanks::rank(int32_t tp, int32_t dp, int32_t pp) const {
  return rank_[(static_cast<size_t>(pp) * dp_ + dp) * tp_ + tp];
}


std::string plan_problem(const scenario::Scenario& spec, const Geometry& geo, bool sequence_parallel) {
  const int64_t tp = geo.tp_enc;
  const int64_t mb = spec.training().micro_batch();
  auto s = [](int64_t v) { return std::to_string(v); };
  if (spec.model().llm().hidden_size() % tp != 0)
    return "the projector's LLM width " + s(spec.model().llm().hidden_size()) + " is not divisible by encoder tp " +
           s(tp);
  for (int e = 0; e < spec.model().encoders_size(); ++e) {
    const auto& t = spec.model().encoders(e).transformer();
    const std::string name = "encoder " + s(e);
    const int64_t kv = t.num_kv_heads() > 0 ? t.num_kv_heads() : t.num_attention_heads();
    if (t.num_attention_heads() % tp != 0) return name + "'s " + s(t.num_attention_heads()) + " heads are not divisible by tp " + s(tp);
    if (kv >= tp && kv % tp != 0) return name + "'s " + s(kv) + " kv heads are not divisible by tp " + s(tp);
    if (t.ffn_hidden_size() % tp != 0) return name + "'s FFN width " + s(t.ffn_hidden_size()) + " is not divisible by tp " + s(tp);
    if (sequence_parallel && tp > 1) {
      const int64_t tokens = mb * model::images_per_sample(spec, e) * model::encoder_tokens_per_image(spec, e);
      const int64_t vision = mb * model::vision_tokens_per_sample(spec, e);
      if (tokens % tp != 0 || vision % tp != 0)
        return name + "'s " + s(tokens) + " tokens / " + s(vision) + " projector outputs per microbatch do not split "
               "over tp " + s(tp) + " under sequence parallelism";
    }
  }
  return {};
}

EncoderWork build_encoder_work(const scenario::Scenario& spec, const Geometry& geo, bool sequence_parallel,
                               scenario::Recompute recompute, const ir::Program& llm, const cost::CostModel& cost,
                               int64_t recompute_num_layers) {
  EncoderWork w;
  w.geo = geo;
  w.micro_batch = spec.training().micro_batch();
  w.microbatches = llm.info().num_microbatches();
  w.sequence_parallel = sequence_parallel && geo.tp_enc > 1;
  w.recompute = recompute;
  w.recompute_num_layers = recompute == scenario::RECOMPUTE_FULL ? recompute_num_layers : 0;
  w.distributed_optimizer = llm.info().distributed_optimizer();
  const int32_t pp = geo.pp_enc;

  // Group shapes of the first GPU class (all classes are alike: the TP group
  // inside a TP slice of one LLM stage, the DP group across every pipeline).
  const LlmRanks ranks(llm);
  std::vector<int32_t> tp_ranks, dp_ranks;
  for (int32_t u = 0; u < geo.tp_enc; ++u) tp_ranks.push_back(ranks.rank(u, 0, 0));
  for (int32_t d = 0; d < geo.dp_llm; ++d)
    for (int32_t s = 0; s < geo.pp_llm; s += geo.pp_enc)
      for (int32_t c = 0; c < geo.slices(); ++c) dp_ranks.push_back(ranks.rank(c * geo.tp_enc, d, s));
  std::sort(dp_ranks.begin(), dp_ranks.end());
  w.tp_group = cost::shape_of_ranks(llm, tp_ranks);
  w.dp_group = cost::shape_of_ranks(llm, dp_ranks);

  const model::ShardSpec shard{geo.tp_enc, 1, geo.pp_enc, w.sequence_parallel};
  const int32_t n_enc = spec.model().encoders_size();
  std::vector<compiler::ModuleWork> branches;
  for (int32_t b = 0; b < n_enc; ++b) {
    branches.push_back(compiler::encoder_work(spec, b, w.micro_batch, shard, recompute, w.recompute_num_layers));
    if (!branches.back().frozen) w.any_trainable_encoder = true;
    w.p2p_forward_bytes += branches.back().layer_p2p_bytes;
    if (!branches.back().frozen) w.p2p_backward_bytes += branches.back().layer_p2p_bytes;
  }
  const int64_t llm_tp = std::max(1, llm.info().tp());
  w.boundary_bytes = model::boundary_bytes(spec, w.micro_batch) / (llm.info().sequence_parallel() ? llm_tp : 1);

  w.stages.resize(static_cast<size_t>(pp));
  // Megatron-LM DDP bucket size (docs/compiler.md): ddp_bucket_size, else
  // max(40M, 1M × dp); one bucket per stage without overlap_grad_reduce.
  const auto& par = spec.parallel();
  w.overlap_param_gather = par.overlap_param_gather() && w.distributed_optimizer;
  w.overlap_grad_reduce = par.overlap_grad_reduce();
  const int32_t dp = geo.dp_enc();
  const int64_t bucket_size = !w.overlap_grad_reduce       ? std::numeric_limits<int64_t>::max()
                              : par.ddp_bucket_size() > 0 ? par.ddp_bucket_size()
                                                          : std::max<int64_t>(40'000'000, 1'000'000LL * dp);

  for (int32_t j = 0; j < pp; ++j) {
    StageWork& st = w.stages[static_cast<size_t>(j)];
    const bool first = j == 0, last = j == pp - 1;
    PassBuilder fwd(cost, w.tp_group), bwd(cost, w.tp_group);
    // Units of trained parameters: a branch's patch embedding, each layer,
    // its final norm + projector; where their forward starts and their
    // backward ends.
    struct Unit {
      int64_t parameters = 0;
      int32_t forward_op = 0, backward_op = -1;
    };
    std::map<std::tuple<int32_t, int32_t, int64_t>, Unit> units;  // (branch, 0 pre / 1 layer / 2 post, layer)
    for (int32_t b = 0; b < n_enc; ++b) {
      const auto& m = branches[static_cast<size_t>(b)];
      const int32_t module = b + 1;
      const StageLayers range = stage_layers(m.num_layers, pp, j);
      if (first) {
        units[{b, 0, 0}] = {m.frozen ? 0 : m.pre_parameters, fwd.size(), -1};
        fwd.append(m.pre_forward, module, -1);
      }
      for (int64_t l = range.first; l < range.first + range.count; ++l) {
        units[{b, 1, l}] = {m.frozen ? 0 : m.layer_parameters, fwd.size(), -1};
        fwd.add_memory(fwd.append(m.layer_forward, module, l).last_kernel,
                       recomputes(m, range, l) ? m.layer_activation_bytes : m.layer_activation_bytes_plain);
      }
      if (last) {
        units[{b, 2, 0}] = {m.post_parameters - m.post_frozen_parameters, fwd.size(), -1};
        fwd.add_memory(fwd.append(m.post_forward, module, -1).last_kernel, m.post_activation_bytes);
      }
      // Parameters on this GPU.
      const int64_t layer_params = range.count * m.layer_parameters + (first ? m.pre_parameters : 0);
      (m.frozen ? st.frozen_parameters : st.trainable_parameters) += layer_params;
      if (last) {
        st.trainable_parameters += m.post_parameters - m.post_frozen_parameters;
        st.frozen_parameters += m.post_frozen_parameters;
      }
    }
    // Backward: branches in reverse, each in autograd order (projector, layers
    // from the last, patch embedding's weight gradient).
    for (int32_t b = n_enc - 1; b >= 0; --b) {
      const auto& m = branches[static_cast<size_t>(b)];
      const int32_t module = b + 1;
      const StageLayers range = stage_layers(m.num_layers, pp, j);
      if (last) {
        const auto out = bwd.append(m.post_backward, module, -1);
        bwd.add_memory(out.last_kernel, -m.post_activation_bytes);
        units[{b, 2, 0}].backward_op = out.last_kernel;
      }
      if (m.frozen) continue;
      for (int64_t l = range.first + range.count - 1; l >= range.first; --l) {
        if (!recomputes(m, range, l)) {
          const auto out = bwd.append(m.layer_backward_plain, module, l);
          bwd.add_memory(out.last_kernel, -m.layer_activation_bytes_plain);
          units[{b, 1, l}].backward_op = out.last_kernel;
          continue;
        }
        const auto out = bwd.append(m.layer_backward, module, l);
        bwd.add_memory(out.last_recompute, m.recompute_activation_bytes);
        bwd.add_memory(out.last_kernel, -(m.layer_activation_bytes + m.recompute_activation_bytes));
        st.recompute_transient = std::max(st.recompute_transient, m.recompute_activation_bytes);
        units[{b, 1, l}].backward_op = out.last_kernel;
      }
      if (first) units[{b, 0, 0}].backward_op = bwd.append(m.pre_backward, module, -1).last_kernel;
    }
    st.forward = fwd.finish();
    st.backward = bwd.finish();
    for (const PassOp& op : st.forward.ops)
      if (op.kind == PassOp::kKernel) st.activation += Bytes(op.op.compute().memory_delta_bytes());
    for (const PassOp& op : st.backward.ops)
      if (op.kind == PassOp::kKernel && op.op.phase() == ir::RECOMPUTE) st.recompute_ns += op.duration_ns;
    if (!st.trains()) continue;

    if (dp > 1) {
      // Buckets in gradient-ready order (backward op order).
      std::vector<Unit> ready;
      for (const auto& [key, u] : units)
        if (u.parameters > 0 && u.backward_op >= 0) ready.push_back(u);
      std::sort(ready.begin(), ready.end(), [](const Unit& a, const Unit& b) { return a.backward_op < b.backward_op; });
      DpBucket cur;
      cur.forward_op = std::numeric_limits<int32_t>::max();
      for (size_t u = 0; u < ready.size(); ++u) {
        cur.parameters += ready[u].parameters;
        cur.forward_op = std::min(cur.forward_op, ready[u].forward_op);
        cur.backward_op = ready[u].backward_op;
        if (cur.parameters >= bucket_size || u + 1 == ready.size()) {
          st.buckets.push_back(cur);
          cur = DpBucket{};
          cur.forward_op = std::numeric_limits<int32_t>::max();
        }
      }
      for (DpBucket& bk : st.buckets) {
        if (w.distributed_optimizer) {
          bk.gather_bytes = bk.parameters * model::kBf16;
          bk.gather_ns = cost.collective(ir::ALL_GATHER, bk.gather_bytes, w.dp_group).count();
        }
        bk.reduce_bytes = bk.parameters * model::kFp32;
        bk.reduce_ns =
            cost.collective(w.distributed_optimizer ? ir::REDUCE_SCATTER : ir::ALL_REDUCE, bk.reduce_bytes, w.dp_group)
                .count();
      }
      // Gathers go out in forward order (the reverse), back to back on the
      // encoder's DP stream; the first forward waits for each.
      st.first_forward_gate_ns.assign(st.forward.ops.size(), 0);
      st.first_forward_gate_value.assign(st.forward.ops.size(), 0);
      if (w.distributed_optimizer && !st.forward.ops.empty()) {
        int64_t t = 0;
        int32_t value = 0;
        for (size_t k = st.buckets.size(); k-- > 0;) {
          t += st.buckets[k].gather_ns;
          ++value;
          const size_t op = w.overlap_param_gather ? static_cast<size_t>(st.buckets[k].forward_op) : 0;
          st.first_forward_gate_ns[op] = std::max(st.first_forward_gate_ns[op], t);
          st.first_forward_gate_value[op] = std::max(st.first_forward_gate_value[op], value);
        }
      }
    }
    const int64_t updated = w.distributed_optimizer ? (st.trainable_parameters + dp - 1) / dp : st.trainable_parameters;
    // Optimus keeps one optimizer op per encoder stage: Adam with the fp32 →
    // bf16 copy's bytes folded in (the LLM runs them as separate kernels).
    model::Kernel k = model::adam_step(updated);
    k.bytes += model::param_copy(updated).bytes;
    st.optimizer = model::to_compute(k);
    st.optimizer_ns = cost.compute(st.optimizer).count();
  }
  return w;
}

}  // namespace lacuna::placement::optimus
