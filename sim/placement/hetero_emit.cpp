#include "sim/placement/hetero_emit.h"

#include <algorithm>

#include "sim/compiler/segment_inputs.h"
#include "sim/core/error.h"
#include "sim/cost/memory.h"
#include "sim/model/kernels.h"
#include "sim/placement/class_edit.h"

namespace lacuna::placement::hetero {

// ---------------------------------------------------------------- StepEmitter

StepEmitter::Emitted StepEmitter::emit(const std::vector<model::Step>& steps, const compiler::OpContext& ctx) {
  Emitted out;
  for (const model::Step& step : steps) {
    if (const auto* k = std::get_if<model::Kernel>(&step)) {
      kernel(*k, ctx);
      out.last = static_cast<int32_t>(ed_.compute_block()->size()) - 1;
      if (k->phase == ir::RECOMPUTE) out.last_recompute = out.last;
    } else {
      comm(std::get<model::CommPoint>(step), ctx);
    }
  }
  return out;
}

void StepEmitter::kernel(const model::Kernel& k, compiler::OpContext ctx) {
  ctx.phase = k.phase;
  // Pending collectives whose result this kernel consumes: the named role,
  // else the next kernel that is not a weight gradient (as the LLM's stage
  // program: a dgrad reduction overlaps the layer's wgrad GEMM).
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->consumer.matches(k)) {
      ed_.wait(ed_.compute(), it->event, it->value, ctx);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  *ed_.add(ed_.compute(), ctx)->mutable_compute() = model::to_compute(k);
}

void StepEmitter::flush(const compiler::OpContext& ctx) {
  for (const auto& p : pending_) ed_.wait(ed_.compute(), p.event, p.value, ctx);
  pending_.clear();
}

void StepEmitter::add_memory(int32_t index, Bytes delta) {
  if (index < 0 || delta == Bytes::zero()) return;
  auto* c = (*ed_.compute_block())[static_cast<size_t>(index)].mutable_compute();
  c->set_memory_delta_bytes(c->memory_delta_bytes() + delta.count());
}

void StepEmitter::comm(const model::CommPoint& c, compiler::OpContext ctx) {
  ctx.phase = c.phase;
  const bool tp = c.group == model::CommGroup::kTp;
  const int32_t slot = tp ? slots_.tp : slots_.cp;
  if (slot < 0) return;  // a group of one rank: nothing to communicate
  const std::string name = tp ? "enc_tp" : "enc_cp";
  const int32_t stream = ed_.stream(name, ir::ENCODER_COMM);
  ed_.handoff(ed_.compute(), stream, "compute>" + name, ctx);
  add_collective(ed_, stream, ctx, c.kind, slot, c.bytes);
  const int32_t back = ed_.event(name + ">compute");
  pending_.push_back({c.consumer, back, ed_.record(stream, back, ctx)});
}

// ---------------------------------------------------------------- stage work

StageWork stage_work(const scenario::Scenario& spec, const EncoderPlan& enc, int32_t stage, int64_t samples,
                     int64_t llm_hidden, bool keep_output) {
  StageWork w;
  const auto shard = enc.shard();
  w.shape = model::encoder_layer_shape(spec, enc.e, samples, shard);
  w.first_layer = stage * enc.layers_per_stage;
  w.num_layers = enc.layers_per_stage;
  w.first_stage = stage == 0;
  w.last_stage = stage == enc.dims.pp - 1;
  w.frozen = enc.frozen;
  // A frozen encoder runs forward without autograd: nothing kept, nothing
  // recomputed.
  w.recompute = enc.frozen ? scenario::RECOMPUTE_NONE : enc.recompute;
  w.layer_fwd = model::layer_forward(w.shape);
  if (!enc.frozen) {
    w.layer_bwd = model::layer_backward(w.shape, w.recompute);
    w.layer_activation_bytes = cost::layer_activation_bytes(compiler::activation_inputs(w.shape, w.recompute));
    if (w.recompute == scenario::RECOMPUTE_FULL)
      w.recompute_activation_bytes = cost::layer_activation_bytes(compiler::activation_inputs(w.shape, scenario::RECOMPUTE_NONE));
    if (w.recompute == scenario::RECOMPUTE_FULL && enc.recompute_num_layers > 0) {
      w.recompute_num_layers = enc.recompute_num_layers;
      w.layer_bwd_plain = model::layer_backward(w.shape, scenario::RECOMPUTE_NONE);
      w.layer_activation_bytes_plain = w.recompute_activation_bytes;
    }
  }
  if (w.first_stage) {
    w.patch_fwd = model::patch_embedding_forward(w.shape);
    if (!enc.frozen) w.patch_bwd = model::patch_embedding_backward(w.shape);
  }
  if (w.last_stage) {
    const auto proj = model::projector_shape(spec, enc.e, samples, shard);
    w.post_fwd = model::encoder_final_norm_forward(w.shape);
    for (auto& s : model::projector_forward(proj)) w.post_fwd.push_back(std::move(s));
    w.post_bwd = model::projector_backward(proj);
    w.post_activation_bytes = model::projector_activation_bytes(proj);
    if (!enc.frozen) {
      for (auto& s : model::encoder_final_norm_backward(w.shape)) w.post_bwd.push_back(std::move(s));
      // The final norm keeps its input (this rank's SP share of the tokens).
      w.post_activation_bytes += Bytes(w.shape.sp_tokens() * w.shape.hidden * model::kBf16);
    }
    if (keep_output) w.output_bytes = Bytes(enc.boundary_bytes(samples, llm_hidden));
  }
  // Between encoder stages: one hidden state, sequence-sharded over TP with SP.
  w.p2p_bytes = w.shape.hidden_bytes() / (w.shape.sequence_parallel ? w.shape.tp : 1);
  return w;
}

void emit_forward(StepEmitter& em, const StageWork& w, const compiler::OpContext& base) {
  compiler::OpContext ctx = base;
  ctx.phase = ir::FORWARD;
  ctx.layer = -1;
  if (w.first_stage) em.emit(w.patch_fwd, ctx);
  for (int64_t l = w.first_layer; l < w.first_layer + w.num_layers; ++l) {
    compiler::OpContext lc = ctx;
    lc.layer = static_cast<int32_t>(l);
    em.add_memory(em.emit(w.layer_fwd, lc).last,
                  w.recomputes(l) ? w.layer_activation_bytes : w.layer_activation_bytes_plain);
  }
  if (w.last_stage) em.add_memory(em.emit(w.post_fwd, ctx).last, w.post_activation_bytes + w.output_bytes);
  em.flush(ctx);
}

void emit_backward(StepEmitter& em, const StageWork& w, const compiler::OpContext& base) {
  compiler::OpContext ctx = base;
  ctx.phase = ir::BACKWARD_INPUT;
  ctx.layer = -1;
  if (w.last_stage) em.add_memory(em.emit(w.post_bwd, ctx).last, -(w.post_activation_bytes + w.output_bytes));
  if (!w.frozen) {
    for (int64_t l = w.first_layer + w.num_layers - 1; l >= w.first_layer; --l) {
      compiler::OpContext lc = ctx;
      lc.layer = static_cast<int32_t>(l);
      if (!w.recomputes(l)) {
        em.add_memory(em.emit(w.layer_bwd_plain, lc).last, -w.layer_activation_bytes_plain);
        continue;
      }
      const auto out = em.emit(w.layer_bwd, lc);
      em.add_memory(out.last_recompute, w.recompute_activation_bytes);
      em.add_memory(out.last, -(w.layer_activation_bytes + w.recompute_activation_bytes));
    }
    if (w.first_stage) em.emit(w.patch_bwd, ctx);
  }
  em.flush(ctx);
}

StageParameters stage_parameters(const scenario::Scenario& spec, const EncoderPlan& enc, int32_t stage) {
  const auto shard = enc.shard();
  int64_t encoder = enc.layers_per_stage * model::encoder_layer_parameters(spec, enc.e, shard);
  int64_t projector = 0;
  if (stage == 0) encoder += model::patch_embedding_parameters(spec, enc.e);
  if (stage == enc.dims.pp - 1) {
    encoder += model::encoder_final_norm_parameters(spec, enc.e);
    projector = model::projector_parameters(model::projector_shape(spec, enc.e, 1, shard));
  }
  StageParameters p;
  p.trained = projector + (enc.frozen ? 0 : encoder);
  p.frozen = enc.frozen ? encoder : 0;
  return p;
}

void add_model_state(ir::MemoryBaseline& mem, const StageParameters& p, int64_t dp_cp, bool distributed_optimizer) {
  const auto st = cost::model_state_bytes(p.trained, dp_cp, distributed_optimizer);
  mem.set_weights_bytes(mem.weights_bytes() + st.weights.count() + model::kBf16 * p.frozen);
  mem.set_gradients_bytes(mem.gradients_bytes() + st.gradients.count());
  mem.set_optimizer_bytes(mem.optimizer_bytes() + st.optimizer.count());
}

// ---------------------------------------------------------------- Groups

int32_t Groups::get(const std::string& key, ir::GroupKind kind, const std::vector<int32_t>& ranks) {
  if (ranks.size() <= 1) return -1;
  std::vector<int32_t> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  auto [it, fresh] = index_.try_emplace({key, sorted}, p_.groups_size());
  if (fresh) {
    auto* g = p_.add_groups();
    g->set_kind(kind);
    for (int32_t r : sorted) g->add_ranks(r);
  }
  return it->second;
}

}  // namespace lacuna::placement::hetero
