#include "sim/model/fp8.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "sim/model/model_internal.h"

namespace lacuna::model {
namespace {

using ir::Phase;

using internal::d;

bool forward(Phase p) { return p == ir::FORWARD || p == ir::RECOMPUTE; }

bool per_tensor(scenario::Fp8Recipe r) { return r == scenario::FP8_DELAYED || r == scenario::FP8_CURRENT; }

// Is `step` a TP all-gather of this phase (the SP gather in front of a
// column-parallel GEMM forward, or of a row-parallel GEMM's output gradient
// backward)?
bool tp_gather(const Step& step, Phase phase) {
  const auto* c = std::get_if<CommPoint>(&step);
  return c != nullptr && c->group == CommGroup::kTp && c->kind == ir::ALL_GATHER && c->phase == phase &&
         c->consumer.phase != ir::BACKWARD_WEIGHT;
}

// FP8 copies a cast writes: one per usage (rowwise for the GEMM that reads
// the tensor as its left operand, columnwise for the one that reads it
// transposed). Per-tensor scaling on a GPU with non-TN FP8 GEMMs serves both
// from one copy; Hopper needs the transpose (TE cast_transpose), blockwise
// and MXFP8 scale along each direction separately, so both copies are
// written on every GPU (TE tensor/float8_blockwise_tensor.py, mxfp8_tensor.py).
int copies(const Fp8Plan& p, bool rowwise, bool columnwise) {
  const int n = (rowwise ? 1 : 0) + (columnwise ? 1 : 0);
  if (n == 2 && per_tensor(p.recipe) && p.non_tn_gemm) return 1;
  return n;
}

// A GEMM's bytes with 1-byte A and B operands; C stays bf16 (TE writes
// the linear layer's output, dgrad and wgrad in the activation dtype).
void make_fp8(Kernel& k) {
  k.precision = scenario::FP8;
  if (k.shape.size() < 3) return;
  const double m = d(k.shape[0]), n = d(k.shape[1]), kk = d(k.shape[2]);
  const double batch = k.shape.size() > 3 ? d(k.shape[3]) : 1.0;
  k.bytes = batch * (m * kk + kk * n + static_cast<double>(kBf16) * m * n);
}

// The casts (and current scaling's amax passes and TP amax all-reduces) of
// one tensor of `elements` elements, appended to `out`. `sp_gather`: the
// tensor is a sequence shard all-gathered over TP before the GEMM (TE
// quantizes the shard and gathers FP8; with current scaling the shard's amax
// is all-reduced over TP first, linear.py set_quantizer_amax_reduction_group).
void cast_steps(std::vector<Step>& out, const Fp8Plan& p, Phase phase, int64_t elements, int n_copies,
                bool sp_gather) {
  if (n_copies == 0) return;
  if (p.recipe == scenario::FP8_CURRENT) {
    out.emplace_back(fp8_amax(phase, elements));
    if (sp_gather) {
      CommPoint c;
      c.group = CommGroup::kTp;
      c.kind = ir::ALL_REDUCE;
      c.bytes = kFp32;  // one fp32 amax
      c.phase = phase;
      c.consumer = Consumer{ir::ROLE_FP8_CAST, phase};
      out.emplace_back(c);
    }
  }
  out.emplace_back(fp8_cast(p.recipe, phase, elements, n_copies));
}

}  // namespace

scenario::Fp8 resolve_fp8(const scenario::Scenario& spec) {
  scenario::Fp8 f = spec.training().fp8();
  // Megatron-Core TransformerConfig.fp8_recipe defaults to "delayed"
  // (megatron/core/transformer/transformer_config.py L594); releases before
  // the option ran delayed scaling only.
  if (f.recipe() == scenario::FP8_RECIPE_UNSPECIFIED) f.set_recipe(scenario::FP8_DELAYED);
  // TE recipes run all three GEMMs in FP8 (override_linear_precision
  // (False, False, False); Megatron --fp8-wgrad defaults True).
  if (!f.has_fprop()) f.set_fprop(true);
  if (!f.has_dgrad()) f.set_dgrad(true);
  if (!f.has_wgrad()) f.set_wgrad(true);
  // --fp8-dot-product-attention and --fp8-param-gather default off.
  if (!f.has_attention()) f.set_attention(false);
  if (!f.has_param_gather()) f.set_param_gather(false);
  // TE saves the FP8 input it quantized for the weight gradient
  // (module/linear.py: saved_inputmat = the quantized inputmat, columnwise).
  if (!f.has_activation_storage()) f.set_activation_storage(f.wgrad());
  // Megatron's --fp8-amax-history-len default 1 (transformer_config.py L621);
  // the other recipes keep no history.
  if (!f.has_amax_history_len()) f.set_amax_history_len(f.recipe() == scenario::FP8_DELAYED ? 1 : 0);
  // TransformerConfig.tp_only_amax_red defaults False (transformer_config.py L646).
  if (!f.has_tp_only_amax_reduction()) f.set_tp_only_amax_reduction(false);
  return f;
}

Fp8Plan fp8_plan(const scenario::Scenario& spec) {
  Fp8Plan p;
  if (spec.training().precision() != scenario::FP8) return p;
  const scenario::Fp8 f = resolve_fp8(spec);
  p.recipe = f.recipe();
  p.fprop = f.fprop();
  p.dgrad = f.dgrad();
  p.wgrad = f.wgrad();
  p.attention = f.attention();
  p.param_gather = f.param_gather();
  p.activation_storage = f.activation_storage();
  // Blackwell tensor cores (the GPUs with OCP MX formats) take FP8 operands
  // in any layout (TE utils.py is_non_tn_fp8_gemm_supported: sm 10.x).
  p.non_tn_gemm = spec.cluster().gpu().mx_formats();
  p.amax_history_len = f.amax_history_len();
  p.tp_only_amax_reduction = f.tp_only_amax_reduction();
  return p;
}

bool fp8_linear_role(ir::KernelRole role) {
  switch (role) {
    case ir::ROLE_QKV:
    case ir::ROLE_ATTN_PROJ:
    case ir::ROLE_FC1:
    case ir::ROLE_FC2:
    case ir::ROLE_EXPERT_FC1:
    case ir::ROLE_EXPERT_FC2:
    case ir::ROLE_SHARED_EXPERT_FC1:
    case ir::ROLE_SHARED_EXPERT_FC2:
      return true;
    default:
      return false;
  }
}

double fp8_scale_bytes(scenario::Fp8Recipe recipe, int64_t elements) {
  switch (recipe) {
    case scenario::FP8_BLOCKWISE:
      return d((elements + 127) / 128) * kFp32;  // fp32 scale per 1×128 tile
    case scenario::FP8_MXFP8:
      return d((elements + 31) / 32);  // E8M0 scale per 32 elements
    default:
      return kFp32;  // one fp32 scale-inverse per tensor
  }
}

Kernel fp8_cast(scenario::Fp8Recipe recipe, Phase phase, int64_t elements, int copies) {
  Kernel k = memory_bound(ir::ELEMENTWISE, ir::ROLE_FP8_CAST, phase, {elements, kBf16 + copies}, d(elements),
                          kBf16 + copies, 1);
  k.bytes += copies * fp8_scale_bytes(recipe, elements);
  return k;
}

Kernel fp8_amax(Phase phase, int64_t elements) {
  return memory_bound(ir::ELEMENTWISE, ir::ROLE_FP8_AMAX, phase, {elements, kBf16}, d(elements), kBf16, 1);
}

bool fp8_delayed_amax_reduction(const Fp8Plan& p) { return p.recipe == scenario::FP8_DELAYED && p.linear(); }

namespace {

// Calls visit(kernel, batch) for each forward GEMM of `s`'s layer that runs
// FP8, as its BF16 kernel: one call per TE module (a GEMM split for TP
// overlap once, by its first piece), `batch` the local experts a grouped GEMM
// batches (1 otherwise). Nothing when no linear GEMM runs FP8.
template <class Visit>
void for_each_fp8_linear_gemm(const LayerShape& s, Visit visit) {
  if (!s.fp8.linear()) return;
  LayerShape bf16 = s;
  bf16.fp8 = Fp8Plan{};
  for (const Step& st : layer_forward(bf16, ir::FORWARD)) {
    const auto* k = std::get_if<Kernel>(&st);
    if (k == nullptr || k->op_class != ir::GEMM || !fp8_linear_role(k->role) || k->chunk > 0) continue;
    visit(*k, k->shape.size() > 3 ? k->shape[3] : int64_t{1});
  }
}

}  // namespace

int64_t fp8_layer_gemms(const LayerShape& s) {
  int64_t gemms = 0;
  for_each_fp8_linear_gemm(s, [&](const Kernel&, int64_t batch) { gemms += batch; });
  return gemms;
}

int64_t fp8_delayed_amax_values(int64_t gemms, bool forward) { return gemms * (forward ? 3 : 2); }

Kernel fp8_amax_update(Phase phase, int64_t values, int64_t history_len) {
  const int64_t accesses = 1 + 2 * std::max<int64_t>(history_len, 1) + 2;
  return memory_bound(ir::ELEMENTWISE, ir::ROLE_FP8_AMAX, phase, {values, accesses * kFp32}, d(values), d(accesses),
                      kFp32);
}

Fp8Weights fp8_layer_weights(const LayerShape& s) {
  Fp8Weights w;
  for_each_fp8_linear_gemm(s, [&](const Kernel& k, int64_t batch) {
    const int64_t weights = k.shape[1] * k.shape[2] * batch;  // Y[m, n] = X[m, k]·W[k, n]
    (k.role == ir::ROLE_EXPERT_FC1 || k.role == ir::ROLE_EXPERT_FC2 ? w.expert : w.dense) += weights;
  });
  return w;
}

Fp8Weights fp8_layers_weights(const LayerShape& s, int64_t first, int64_t count) {
  Fp8Weights sum;
  if (!s.fp8.linear()) return sum;
  // Two kinds of layer at most: compute each once.
  LayerShape kind = s;
  kind.moe_layer = false;
  const Fp8Weights dense = fp8_layer_weights(kind);
  std::optional<Fp8Weights> moe;
  for (int64_t l = first; l < first + count; ++l) {
    Fp8Weights w = dense;
    if (s.moe.is_moe_layer(l)) {
      kind.moe_layer = true;
      if (!moe) moe = fp8_layer_weights(kind);
      w = *moe;
    }
    sum.dense += w.dense;
    sum.expert += w.expert;
  }
  return sum;
}

std::vector<Kernel> fp8_weight_casts(const Fp8Plan& p, int64_t weights, int64_t shard) {
  std::vector<Kernel> out;
  if (!p.linear() || weights <= 0) return out;
  const int n = copies(p, p.fprop, p.dgrad);
  if (!p.param_gather) {
    if (n > 0) out.push_back(fp8_cast(p.recipe, ir::OPTIMIZER_STEP, weights, n));
    return out;
  }
  Kernel q = memory_bound(ir::ELEMENTWISE, ir::ROLE_FP8_CAST, ir::OPTIMIZER_STEP, {shard, kFp32 + 1}, d(shard),
                          kFp32 + 1, 1);
  q.bytes += fp8_scale_bytes(p.recipe, shard);
  out.push_back(q);
  if (n == 2) {
    Kernel t = memory_bound(ir::ELEMENTWISE, ir::ROLE_FP8_CAST, ir::OPTIMIZER_STEP, {weights, 2}, d(weights), 2, 1);
    t.bytes += fp8_scale_bytes(p.recipe, weights);
    out.push_back(t);
  }
  return out;
}

std::vector<Step> apply_fp8(const LayerShape& s, std::vector<Step> steps) {
  const Fp8Plan& p = s.fp8;
  if (!p.any()) return steps;
  std::vector<Step> out;
  out.reserve(steps.size() * 2);
  for (Step& step : steps) {
    auto* k = std::get_if<Kernel>(&step);
    if (k == nullptr) {
      // The SP re-gather of a column layer's input for its weight gradient
      // moves the FP8 copy saved in forward.
      auto* c = std::get_if<CommPoint>(&step);
      if (c->group == CommGroup::kTp && c->kind == ir::ALL_GATHER && c->consumer.phase == ir::BACKWARD_WEIGHT &&
          fp8_linear_role(c->consumer.role) && p.wgrad && p.activation_storage)
        c->bytes /= kBf16;
      out.emplace_back(std::move(step));
      continue;
    }
    if (k->op_class == ir::ATTENTION && p.attention) {
      k->precision = scenario::FP8;
      out.emplace_back(std::move(step));
      continue;
    }
    if (k->op_class != ir::GEMM || !fp8_linear_role(k->role) || k->precision != scenario::PRECISION_UNSPECIFIED ||
        !p.linear()) {
      out.emplace_back(std::move(step));
      continue;
    }
    const Phase phase = k->phase;
    // The tensor cast before this GEMM: forward the input X (rowwise for
    // fprop, columnwise for wgrad); input-gradient GEMM the output gradient
    // dY (rowwise for dgrad, columnwise for wgrad). The weight gradient
    // reads the two copies already made. A GEMM split for TP overlap casts
    // once, before its first piece.
    int n_copies = 0;
    bool gemm_fp8 = false;
    if (forward(phase)) {
      n_copies = copies(p, p.fprop, p.wgrad);
      gemm_fp8 = p.fprop;
    } else if (phase == ir::BACKWARD_INPUT) {
      n_copies = copies(p, p.dgrad, p.wgrad);
      gemm_fp8 = p.dgrad;
    } else {
      gemm_fp8 = p.wgrad;
    }
    if (n_copies > 0 && k->chunk <= 0 && phase != ir::BACKWARD_WEIGHT) {
      // Trailing SP all-gathers in front of this GEMM: cast the shard before
      // them and gather FP8 (1 byte per element).
      size_t first = out.size();
      while (first > 0 && tp_gather(out[first - 1], phase)) --first;
      const bool gathered = first < out.size();
      // Pieces of a split GEMM: one per gather in front (all-gather
      // overlap), else the reduce-scatter overlap's.
      int64_t pieces = 1;
      if (k->chunk == 0) pieces = gathered ? static_cast<int64_t>(out.size() - first) : s.tp_overlap_rs_chunks;
      const int64_t batch = k->shape.size() > 3 ? k->shape[3] : 1;
      const int64_t rows = k->shape[0] * pieces;
      const int64_t elements = (gathered ? rows / s.tp : rows) * k->shape[2] * batch;
      std::vector<Step> casts;
      cast_steps(casts, p, phase, elements, n_copies, gathered);
      if (gathered && gemm_fp8)
        for (size_t j = first; j < out.size(); ++j) std::get<CommPoint>(out[j]).bytes /= kBf16;
      out.insert(out.begin() + static_cast<std::ptrdiff_t>(first), casts.begin(), casts.end());
    }
    if (gemm_fp8) make_fp8(*k);
    out.emplace_back(std::move(step));
  }
  return out;
}

int64_t fp8_weight_memory_delta_bytes(const Fp8Plan& p, int64_t weights) {
  if (weights <= 0) return 0;
  const std::vector<Kernel> casts = fp8_weight_casts(p, 1, 1);
  if (casts.empty()) return 0;
  // One FP8 byte per copy the fprop / dgrad GEMMs read: with param_gather one
  // per cast kernel, replacing the 2-byte bf16 weight; without it, what the
  // cast of the bf16 weight writes (its bytes per element less the 2 read).
  if (p.param_gather) return weights * (static_cast<int64_t>(casts.size()) - kBf16);
  return weights * (casts.front().shape[1] - kBf16);
}

}  // namespace lacuna::model
