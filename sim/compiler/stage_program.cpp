#include "sim/compiler/stage_program.h"

#include <algorithm>
#include <limits>

#include "sim/compiler/stage_builder.h"
#include "sim/compiler/stage_emitter.h"
#include "sim/model/accounting.h"
#include "sim/model/kernels.h"
#include "sim/model/layer.h"
#include "sim/model/moe.h"

namespace lacuna::compiler {
namespace {

using model::CommPoint;
using model::Kernel;
using model::Step;
using schedule::Pass;


// Ops one step list turns into: a kernel is one op, a collective five
// (record, wait, collective, record, wait).
int64_t count_ops(const std::vector<Step>& steps, Filter filter) {
  int64_t n = 0;
  for (const Step& s : steps)
    if (keep(s, filter)) n += std::holds_alternative<Kernel>(s) ? 1 : 5;
  return n;
}

// What a module holds per layer / pre / post on one rank.
struct ModuleParameters {
  int64_t layer = 0, pre = 0, post = 0, post_frozen = 0;
  bool frozen = false;
};

ModuleParameters module_parameters(const StageInputs& in, int32_t module) {
  if (module == 0)
    return {model::layer_parameters(in.shape), model::embedding_parameters(in.shape),
            model::head_parameters(in.shape), 0, false};
  const ModuleWork& w = in.encoders.at(static_cast<size_t>(module - 1));
  return {w.layer_parameters, w.pre_parameters, w.post_parameters, w.post_frozen_parameters, w.frozen};
}

// LLM layer l on one rank: a MoE layer swaps the dense MLP for the MoE one.
int64_t llm_layer_parameters(const StageInputs& in, int64_t l) {
  const int64_t dense = model::layer_parameters(in.shape);
  if (!in.shape.moe.is_moe_layer(l)) return dense;
  return dense - model::dense_mlp_parameters(in.shape) + model::moe_mlp_parameters(in.shape);
}

int64_t llm_expert_parameters(const StageInputs& in, int64_t l) {
  return in.shape.moe.is_moe_layer(l) ? model::moe_routed_expert_parameters(in.shape) : 0;
}

// Parameters of layers [first, first + count) of a module on one rank.
int64_t layers_parameters(const StageInputs& in, int32_t module, int64_t first, int64_t count, int64_t per_layer) {
  if (module != 0 || !in.shape.moe.enabled()) return count * per_layer;
  int64_t n = 0;
  for (int64_t l = first; l < first + count; ++l) n += llm_layer_parameters(in, l);
  return n;
}

}  // namespace

int64_t segment_expert_parameters(const StageInputs& in, const Segment& seg) {
  if (seg.module != 0) return 0;
  int64_t n = 0;
  for (int64_t l = seg.first; l < seg.first + seg.count; ++l) n += llm_expert_parameters(in, l);
  return n;
}

int64_t segment_parameters(const StageInputs& in, const Segment& seg, bool trained_only) {
  const ModuleParameters p = module_parameters(in, seg.module);
  const bool skip_frozen = trained_only && p.frozen;
  int64_t n = skip_frozen ? 0 : layers_parameters(in, seg.module, seg.first, seg.count, p.layer) + (seg.pre ? p.pre : 0);
  if (seg.post) n += trained_only ? p.post - p.post_frozen : p.post;
  return n;
}

ModuleWork llm_module_work(const StageInputs& in) {
  const auto& s = in.shape;
  ModuleWork w;
  w.shape = s;
  w.layer_forward = model::layer_forward(s);
  w.layer_backward = model::layer_backward(s, in.recompute);
  w.pre_forward = model::embedding_forward(s);
  w.pre_backward = model::embedding_backward(s);
  w.post_forward = model::head_forward(s);
  w.post_backward = model::head_backward(s);
  w.layer_activation_bytes = in.layer_activation_bytes;
  w.recompute_activation_bytes = in.recompute_activation_bytes;
  w.post_activation_bytes = model::head_activation_bytes(s);
  w.layer_parameters = model::layer_parameters(s);
  if (s.moe.enabled()) {
    // The MoE layers: the same layer with the MoE MLP, its activations the
    // dense ones with the MLP's share swapped (full recompute keeps the layer
    // input only, as for a dense layer).
    model::LayerShape m = s;
    m.moe_layer = true;
    w.moe_layer_forward = model::layer_forward(m);
    w.moe_layer_backward = model::layer_backward(m, in.recompute);
    const Bytes swap(model::moe_mlp_activation_bytes(m) - model::dense_mlp_activation_bytes(s));
    auto moe_bytes = [&](Bytes dense, scenario::Recompute mode) {
      return mode == scenario::RECOMPUTE_FULL ? dense : Bytes(dense + swap);
    };
    w.moe_layer_activation_bytes = moe_bytes(in.layer_activation_bytes, in.recompute);
    if (in.recompute == scenario::RECOMPUTE_FULL)
      w.moe_recompute_activation_bytes = moe_bytes(in.recompute_activation_bytes, scenario::RECOMPUTE_NONE);
    if (in.recompute == scenario::RECOMPUTE_FULL && in.recompute_num_layers > 0) {
      w.moe_layer_backward_plain = model::layer_backward(m, scenario::RECOMPUTE_NONE);
      w.moe_layer_activation_bytes_plain = w.moe_recompute_activation_bytes;
    }
    w.moe_layer_parameters = w.layer_parameters - model::dense_mlp_parameters(s) + model::moe_mlp_parameters(m);
    w.moe_expert_parameters = model::moe_routed_expert_parameters(m);
  }
  if (in.recompute == scenario::RECOMPUTE_FULL && in.recompute_num_layers > 0) {
    w.recompute_num_layers = in.recompute_num_layers;
    w.layer_backward_plain = model::layer_backward(s, scenario::RECOMPUTE_NONE);
    w.layer_activation_bytes_plain = in.recompute_activation_bytes;  // what a layer keeps without recompute
  }
  return w;
}

std::vector<Segment> stage_segments(const StageInputs& in, int32_t virtual_stage) {
  if (!in.segments.empty()) return in.segments.at(static_cast<size_t>(virtual_stage));
  const LayerRange& r = in.stages[static_cast<size_t>(virtual_stage)];
  // The embedding where a microbatch enters, the head where it leaves (the
  // bidirectional layout's two pipelines each have both).
  return {Segment{0, r.first, r.count, !schedule::has_previous_stage(in.pipeline, virtual_stage),
                  !schedule::has_next_stage(in.pipeline, virtual_stage)}};
}

int64_t boundary_p2p_bytes(const StageInputs& in, int32_t virtual_stage) {
  const auto& s = in.shape;
  // One LLM hidden state, sequence-sharded over TP with SP (Megatron's
  // scatter/gather optimisation).
  const int64_t llm = s.hidden_bytes() / (s.sequence_parallel ? s.tp : 1);
  if (in.segments.empty()) return llm;
  int64_t carried = 0;  // outputs of the encoders finished so far
  Segment last;
  for (int32_t k = 0; k <= virtual_stage; ++k)
    for (const Segment& seg : in.segments.at(static_cast<size_t>(k))) {
      if (seg.module != 0 && seg.post) carried += in.encoders.at(static_cast<size_t>(seg.module - 1)).output_p2p_bytes;
      last = seg;
    }
  if (last.module == 0) return llm;  // the LLM's sequence holds the vision embeddings by now
  if (last.post) return carried;
  return carried + in.encoders.at(static_cast<size_t>(last.module - 1)).layer_p2p_bytes;
}

int64_t stage_parameters(const StageInputs& in, int32_t virtual_stage) {
  int64_t p = 0;
  for (const Segment& seg : stage_segments(in, virtual_stage)) p += segment_parameters(in, seg, false);
  return p;
}

int64_t stage_trained_parameters(const StageInputs& in, int32_t virtual_stage) {
  int64_t p = 0;
  for (const Segment& seg : stage_segments(in, virtual_stage)) p += segment_parameters(in, seg, true);
  return p;
}

int64_t ddp_bucket_parameters(const StageInputs& in) {
  if (!in.overlap_grad_reduce) return std::numeric_limits<int64_t>::max();
  if (in.ddp_bucket_size > 0) return in.ddp_bucket_size;
  return std::max<int64_t>(40'000'000, 1'000'000 * in.dp_cp);
}

std::vector<DpBucket> dp_buckets(const StageInputs& in, int32_t virtual_stage) {
  const auto segments = stage_segments(in, virtual_stage);
  const int64_t size = ddp_bucket_parameters(in);
  std::vector<DpBucket> out;
  for (int32_t si = static_cast<int32_t>(segments.size()) - 1; si >= 0; --si) {
    const Segment& seg = segments[static_cast<size_t>(si)];
    const ModuleParameters mp = module_parameters(in, seg.module);
    // An LLM bucket is kept even when empty (a layer-less stage's embedding /
    // head bucket, as LLM-only programs always had); an encoder segment with
    // nothing trained (frozen layers) has none.
    auto push = [&](DpBucket b) {
      b.segment = si;
      b.module = seg.module;
      if (seg.module == 0 || b.parameters > 0) out.push_back(b);
    };
    if (seg.count <= 0) {
      push(DpBucket{seg.first, 0, segment_parameters(in, seg, true)});
      continue;
    }
    const int64_t last = seg.first + seg.count - 1;
    DpBucket cur;
    for (int64_t l = last; l >= seg.first; --l) {
      const int64_t per_layer = mp.frozen ? 0 : seg.module == 0 ? llm_layer_parameters(in, l) : mp.layer;
      cur.parameters += per_layer;
      if (seg.module == 0) cur.expert_parameters += llm_expert_parameters(in, l);
      if (l == last && seg.post) cur.parameters += mp.post - mp.post_frozen;
      if (l == seg.first && seg.pre && !mp.frozen) cur.parameters += mp.pre;
      cur.first_layer = l;
      ++cur.count;
      if (cur.parameters >= size || l == seg.first) {
        push(cur);
        cur = DpBucket{};
      }
    }
  }
  return out;
}

int64_t estimate_ops(const StageInputs& in) {
  struct PerLayer {
    int64_t fwd = 0, bwd = 0, bwd_b = 0, bwd_w = 0;
  };
  auto per_layer = [](const std::vector<Step>& fwd_steps, const std::vector<Step>& bwd_steps, bool frozen) {
    PerLayer p;
    p.fwd = count_ops(fwd_steps, Filter::kAll);
    if (frozen) return p;
    p.bwd = count_ops(bwd_steps, Filter::kAll);
    p.bwd_b = count_ops(bwd_steps, Filter::kInputOnly);
    p.bwd_w = count_ops(bwd_steps, Filter::kWeightOnly);
    return p;
  };
  std::vector<PerLayer> modules;
  modules.push_back(per_layer(model::layer_forward(in.shape), model::layer_backward(in.shape, in.recompute), false));
  PerLayer moe;  // the LLM's MoE layers
  if (in.shape.moe.enabled()) {
    model::LayerShape m = in.shape;
    m.moe_layer = true;
    moe = per_layer(model::layer_forward(m), model::layer_backward(m, in.recompute), false);
  }
  for (const ModuleWork& w : in.encoders) modules.push_back(per_layer(w.layer_forward, w.layer_backward, w.frozen));
  constexpr int64_t kPassOverhead = 16;  // p2p, head / embedding, DP waits
  int64_t n = 0;
  for (const auto& a : in.actions) {
    const int32_t vs = schedule::virtual_stage(in.pipeline, in.pp_rank, a.chunk);
    for (const Segment& seg : stage_segments(in, vs)) {
      const PerLayer& p = modules.at(static_cast<size_t>(seg.module));
      // R re-runs the forward (an estimate: the re-forward's op count).
      const bool forward = a.pass == Pass::kForward || a.pass == Pass::kRecompute;
      const int64_t ops = forward                          ? p.fwd
                          : a.pass == Pass::kBackward      ? p.bwd
                          : a.pass == Pass::kBackwardInput ? p.bwd_b
                                                           : p.bwd_w;
      if (seg.module == 0 && in.shape.moe.enabled()) {
        const int64_t moe_ops = forward                          ? moe.fwd
                                : a.pass == Pass::kBackward      ? moe.bwd
                                : a.pass == Pass::kBackwardInput ? moe.bwd_b
                                                                 : moe.bwd_w;
        for (int64_t l = seg.first; l < seg.first + seg.count; ++l) n += in.shape.moe.is_moe_layer(l) ? moe_ops : ops;
        continue;
      }
      n += seg.count * ops;
    }
    n += kPassOverhead;
  }
  return n;
}

StageProgram build_stage_program(const StageInputs& in) { return StageBuilder(in).build(); }

}  // namespace lacuna::compiler
