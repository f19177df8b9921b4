#include "sim/placement/optimus_memory.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "sim/cost/memory.h"
#include "sim/cost/memory_peak.h"
#include "sim/placement/recompute_ladder.h"

namespace lacuna::placement::optimus {

int32_t encoder_communicators(const ir::Program& llm, const EncoderWork& work) {
  bool trains = false;
  for (const StageWork& st : work.stages) trains |= st.trains();
  bool llm_p2p = false;
  for (const ir::RankBinding& b : llm.ranks())
    for (int32_t p : b.peer()) llm_p2p |= p >= 0;
  return (work.geo.tp_enc > 1 ? 1 : 0) + (work.geo.dp_enc() > 1 && trains ? 1 : 0) + (llm_p2p ? 0 : 1);
}

Bytes plan_peak_memory_bytes(const ir::Program& llm, const LlmTimeline& timeline, const EncoderWork& work,
                             const std::vector<int32_t>& split) {
  const Geometry& geo = work.geo;
  const auto& mo = llm.cluster().memory_overheads();
  const Bytes per_communicator(
      mo.has_nccl_communicator_mib() ? static_cast<int64_t>(std::llround(mo.nccl_communicator_mib() * 1048576.0)) : 0);
  const Bytes communicators = per_communicator * encoder_communicators(llm, work);
  const double fragmentation = cost::allocator_fragmentation(llm.cluster());
  Bytes peak;
  for (int32_t s = 0; s < geo.pp_llm; ++s) {
    const StageWork& sw = work.stages[static_cast<size_t>(geo.encoder_stage(s))];
    const auto enc = cost::model_state_bytes(sw.trainable_parameters, geo.dp_enc(), work.distributed_optimizer);
    const Bytes frozen =
        cost::model_state_bytes(sw.frozen_parameters, geo.dp_enc(), work.distributed_optimizer).weights;
    const Bytes baseline =
        cost::baseline_bytes(llm.classes(s).memory()) + enc.weights + enc.gradients + enc.optimizer + frozen + communicators;
    for (int32_t c = 0; c < geo.slices(); ++c) {
      const int32_t e = geo.pipeline(s, c * geo.tp_enc);
      const int64_t microbatches = e < static_cast<int32_t>(split.size()) ? split[static_cast<size_t>(e)] : 0;
      const Bytes activations = timeline.stages[static_cast<size_t>(s)].peak_activation +
                                Bytes(sw.activation * microbatches) +
                                (microbatches > 0 ? sw.recompute_transient : Bytes{});
      peak = std::max(peak, cost::memory_peak_bytes(baseline, activations, fragmentation));
    }
  }
  return peak;
}

std::vector<int32_t> even_split(int32_t n, int32_t m) {
  const int32_t each = std::max<int32_t>(1, m > 0 ? (n + m - 1) / m : 1);
  return std::vector<int32_t>(static_cast<size_t>(std::max(m, 0)), each);
}

namespace {

// Σ over encoder stages of one microbatch's RECOMPUTE kernel time.
int64_t recompute_ns(const EncoderWork& w) {
  int64_t t = 0;
  for (const StageWork& st : w.stages) t += st.recompute_ns;
  return t;
}

// The same for full recompute of the first `n` layers of each branch on each
// stage (0: all), read from `full`, whose every layer recomputes.
int64_t block_recompute_ns(const EncoderWork& full, int64_t n) {
  int64_t t = 0;
  for (const StageWork& st : full.stages) {
    std::map<int32_t, std::map<int32_t, int64_t>> by_module;  // module → layer → ns
    for (const PassOp& op : st.backward.ops)
      if (op.kind == PassOp::kKernel && op.op.phase() == ir::RECOMPUTE && op.op.layer() >= 0)
        by_module[op.op.module()][op.op.layer()] += op.duration_ns;
    for (const auto& [module, layers] : by_module) {
      int64_t taken = 0;
      for (const auto& [layer, ns] : layers) {
        if (n > 0 && taken++ >= n) break;
        t += ns;
      }
    }
  }
  return t;
}

// The most layers one encoder branch has on one stage.
int64_t max_stage_layers(const scenario::Scenario& spec, const Geometry& geo) {
  int64_t most = 0;
  for (const auto& e : spec.model().encoders())
    for (int32_t j = 0; j < geo.pp_enc; ++j)
      most = std::max(most, stage_layers(e.transformer().num_layers(), geo.pp_enc, j).count);
  return most;
}

}  // namespace

EncoderFit fit_encoder_recompute(const scenario::Scenario& spec, const Geometry& geo, bool sequence_parallel,
                                 const compiler::ModuleRecompute& asked, const ir::Program& llm,
                                 const LlmTimeline& timeline, const cost::CostModel& cost) {
  const Bytes capacity = cost::hbm_capacity_bytes(spec.cluster());
  const std::vector<int32_t> split = even_split(timeline.microbatches, geo.pipelines());
  auto work_at = [&](const compiler::ModuleRecompute& r) {
    return build_encoder_work(spec, geo, sequence_parallel, r.mode, llm, cost, r.num_layers);
  };
  auto fit_at = [&](const compiler::ModuleRecompute& r, EncoderWork w) {
    EncoderFit f;
    f.recompute = r;
    f.memory = plan_peak_memory_bytes(llm, timeline, w, split);
    f.fits = capacity <= Bytes::zero() || f.memory <= capacity;
    f.work = std::move(w);
    return f;
  };
  EncoderFit asked_fit = fit_at(asked, work_at(asked));
  bool trains = false;
  for (const auto& e : spec.model().encoders()) trains |= !e.frozen();
  if (asked_fit.fits || !trains) return asked_fit;

  // The ladder from the asked rung up, and each rung's cost.
  const int64_t layers = std::max<int64_t>(1, max_stage_layers(spec, geo));
  const auto full_ladder = recompute_ladder(layers);
  std::vector<compiler::ModuleRecompute> ladder{asked};
  for (size_t k = static_cast<size_t>(ladder_position(asked, layers)) + 1; k < full_ladder.size(); ++k)
    ladder.push_back(full_ladder[k]);
  if (ladder.size() == 1) return asked_fit;
  EncoderFit top = fit_at(ladder.back(), work_at(ladder.back()));
  if (!top.fits) return top;
  std::vector<int64_t> rung_cost;
  std::optional<EncoderWork> selective;
  for (const compiler::ModuleRecompute& r : ladder) {
    if (r.mode == scenario::RECOMPUTE_FULL) {
      rung_cost.push_back(block_recompute_ns(top.work, r.num_layers));
    } else if (r.mode == scenario::RECOMPUTE_SELECTIVE) {
      if (!selective) selective = r == asked ? asked_fit.work : work_at(r);
      rung_cost.push_back(recompute_ns(*selective));
    } else {
      rung_cost.push_back(0);
    }
  }
  std::vector<size_t> order(ladder.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rung_cost[a] < rung_cost[b]; });
  for (size_t k : order) {
    if (k == 0) continue;  // the asked rung does not fit
    if (k + 1 == ladder.size()) return top;
    EncoderFit f = fit_at(ladder[k], work_at(ladder[k]));
    if (f.fits) return f;
  }
  return top;  // unreachable: the top rung fits and is in the order
}

}  // namespace lacuna::placement::optimus
