// The variability of a scenario as an engine::Perturbation
// (docs/variability.md): per-GPU speed and straggler hosts fixed per rank,
// kernel noise per op class, host pauses before forward kernels, collective
// launch skew. Every value is drawn from the counter RNG (sim/core/
// counter_rng.h) keyed on (seed, rank, stream, op or pass, iteration,
// purpose), so an answer never depends on when it is asked.
//
// Links (slow and flapping) are the flow-level network's business
// (sim/network/link_variation.h); this class leaves them alone.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/core/distributions.h"
#include "sim/engine/perturbation.h"
#include "sim/proto/program.pb.h"
#include "sim/variability/moe_load.h"

namespace lacuna::variability {

class VariabilityModel : public engine::Perturbation {
 public:
  // `variability` resolved (presets applied) and validated; `program` must
  // outlive the model (its classes are read for the host-pause ops).
  VariabilityModel(const ir::Program& program, const scenario::Variability& variability);

  double rank_compute_factor(int32_t rank) const override { return rank_factor_[static_cast<size_t>(rank)]; }
  uint8_t perturbs(const ir::Op& op, ir::StreamKind stream_kind) const override;
  double compute_factor(const engine::OpRef& op) const override;
  double compute_factor_folded(const engine::OpRef& op, const std::vector<int32_t>& members) const override;
  engine::HostDelay host_delay(const engine::OpRef& op) const override;

  // What was drawn, for reports.
  int32_t straggler_hosts() const { return straggler_hosts_; }
  // The largest per-rank factor and its rank.
  double slowest_factor() const;
  int32_t slowest_rank() const;
  // Does rank `rank` pause in `iteration`?
  bool pauses(int32_t rank, uint32_t iteration) const;
  // MoE load imbalance (docs/moe.md#load-imbalance): null for dense programs
  // and balanced routing. A rank's EP index: its position in its EP group's
  // ascending rank list (-1: none).
  const MoeLoad* moe_load() const { return moe_ && moe_->varies() ? moe_.get() : nullptr; }
  int32_t ep_index(int32_t rank) const;

 private:
  struct Noise {
    bool on = false;
    LogNormalMean1 lognormal{0.0};
    double tail_probability = 0;
    double tail_alpha = 0;
    double tail_max = 1;
  };
  // Forward compute ops on compute streams of one class, in stream order:
  // where a host pause may fall.
  struct PauseSlot {
    int32_t stream = 0;
    int32_t op = 0;
  };

  const Noise& noise_of(const ir::Op& op) const;

  const ir::Program& program_;
  uint64_t seed_ = 0;
  std::vector<double> rank_factor_;
  int32_t straggler_hosts_ = 0;
  std::array<Noise, 13> noise_{};  // by ir::OpClass
  bool per_pass_ = true;
  bool any_noise_ = false;
  int64_t pause_interval_ = 0;  // 0: no pauses
  int64_t pause_ns_ = 0;
  bool pause_synchronized_ = false;
  std::vector<std::vector<PauseSlot>> pause_slots_;  // by class
  double skew_mean_ns_ = 0;
  std::unique_ptr<MoeLoad> moe_;
  std::vector<int32_t> ep_index_;  // by global rank
};

// Whether a program's MoE routing makes expert loads differ between EP ranks
// (then the engine needs a perturbation even when variability is off).
bool moe_imbalance_on(const ir::Program& program);

// Is this op one of the routed experts' kernels, whose time scales with the
// tokens its rank's experts received?
bool is_routed_expert_kernel(const ir::Op& op);

// Why a folded run cannot represent this variability (empty: it can). Fold
// handles per-rank speed and stragglers (a class at its slowest member's
// pace, docs/variability.md#fold); per-op sources and links need every rank.
std::string fold_refusal(const scenario::Variability& variability);

// One line per source that is on, for the terminal summary, e.g.
// "GPU speed: log-normal CV 0.5 % per GPU (slowest rank 1234 at ×1.0172)".
std::vector<std::string> describe(const scenario::Variability& variability, const VariabilityModel* model);

}  // namespace lacuna::variability
