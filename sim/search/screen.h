// The screen of `lacuna search` (docs/search.md#the-screen): a closed-form
// estimate of a plan's iteration time and memory, fast enough to rank
// millions of plans, so that only the best K are compiled and simulated.
//
// Kernel and collective times come from the same analytic cost model the
// simulator uses (roofline kernels, NCCL ring/tree collectives over the node
// hierarchy), applied to the same per-layer kernel lists (sim/model/layer.h);
// what the screen leaves out is the schedule's interplay: it uses the
// textbook pipeline formulas instead of running the schedule, and a fixed
// rule for what overlap hides. How well it ranks is measured on every search
// (the rank correlation against the simulation, docs/search.md).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "sim/core/units.h"
#include "sim/cost/cost_model.h"
#include "sim/model/layer_shape.h"
#include "sim/scenario/scenario.h"
#include "sim/search/plan.h"

namespace lacuna::search {

struct ScreenEstimate {
  double iteration_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  int64_t gpus = 0;            // the plan's GPUs (with an encoder island: estimated)
  Bytes memory;                // the worst pipeline stage's peak, estimated
  Bytes memory_lower_bound;    // never above the compiled program's peak (plan_memory_test.cpp)
  double bubble_s = 0;         // pipeline fill and drain
  double exposed_comm_s = 0;   // TP, CP, PP and DP communication the plan leaves exposed
};

// One per thread: it caches per-layer figures by shape.
class Screen {
 public:
  explicit Screen(const scenario::Scenario& base);
  ScreenEstimate estimate(const Plan& plan);

 private:
  struct LayerFigures {
    double forward_s = 0, backward_s = 0, weight_grad_s = 0;  // compute, one layer, one microbatch
    double attention_s = 0;                                    // of which the attention kernels
    double tp_comm_s = 0;                                      // TP collectives, forward + backward
    double cp_comm_s = 0;
    double ep_comm_s = 0;  // MoE layer: dispatch and combine (EP, expert TP), forward + backward
    int64_t expert_params = 0;  // MoE layer: the local routed experts' (reduced over expert DP)
    double embedding_s = 0, head_s = 0;                        // forward + backward
    double p2p_bytes = 0;
    int64_t layer_params = 0, embedding_params = 0, head_params = 0;
    Bytes layer_activation, head_activation;
    int64_t fp8_weight_delta = 0;  // FP8 weight copies the layer adds (model::fp8_weight_memory_delta_bytes)
    int64_t fp8_gemms = 0;         // FP8 GEMMs whose amaxes delayed scaling reduces (model::fp8_layer_gemms)
    bool grad_fp32 = true;
  };
  // tp cp sp mb recompute tp-overlap pp>1 ep expert_tp moe-layer
  using ShapeKey = std::tuple<int32_t, int32_t, bool, int32_t, int, bool, bool, int32_t, int32_t, bool>;
  // One layer's figures; `moe_layer`: an MoE layer of an MoE model.
  const LayerFigures& layer(const Plan& plan, bool moe_layer = false);
  // MoE layers among [first, first + n) of the LLM.
  int64_t moe_layers(int64_t first, int64_t n) const;
  // NCCL communicators the expert groups add (in the estimate, not the bound).
  int64_t moe_communicators(const Plan& plan) const;
  double optimizer_s(int64_t parameters);
  // FP8 delayed scaling's amax group size (1: no reduction) and the time of
  // its reductions for one microbatch on a rank holding `gemms` FP8 GEMMs.
  int64_t amax_group_size(const Plan& plan) const;
  double amax_s(const Plan& plan, int64_t gemms) const;

  scenario::Scenario base_;
  std::unique_ptr<cost::CostModel> cost_;
  std::map<ShapeKey, LayerFigures> layers_;
  std::map<int64_t, double> optimizer_;
  double peak_flops_ = 0;
  double model_flops_ = 0;     // LLM, per iteration
  double encoder_flops_ = 0;   // all encoders, per iteration
  double encoder_trained_params_ = 0, encoder_frozen_params_ = 0;
  double gemm_efficiency_ = 1;
  model::MoeShape moe_;  // the model's MoE settings (num_experts 0: dense)
  model::Fp8Plan fp8_;   // the scenario's FP8 plan (recipe unspecified: not FP8)
  bool grad_reduce_fp32_ = false;
  double cuda_context_bytes_ = 0, nccl_communicator_bytes_ = 0, fragmentation_ = 0;
};

}  // namespace lacuna::search
