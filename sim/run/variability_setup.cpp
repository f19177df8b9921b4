#include "sim/run/variability_setup.h"

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/scenario/variability.h"

namespace lacuna::run {

std::unique_ptr<variability::VariabilityModel> make_perturbation(const ir::Program& program, bool fold) {
  const scenario::Variability& v = program.variability();
  // MoE routing imbalance is drawn through the same seam (per-op expert
  // loads keyed on the variability seed, docs/moe.md#load-imbalance), so it
  // needs the model even on an otherwise ideal cluster.
  const bool moe = variability::moe_imbalance_on(program);
  if (!scenario::any_variability(v) && !moe) return nullptr;
  if (fold && scenario::any_variability(v)) {
    const std::string why = variability::fold_refusal(v);
    if (!why.empty()) {
      throw Error(SourceLocation{"‹fold›", 0, 0, {}}, why,
                  "simulate every rank (without ‹fold›), or turn those sources off (‹ideal›, or ‹set›)");
    }
  }
  return std::make_unique<variability::VariabilityModel>(program, v);
}

std::optional<report::VariabilitySummary> variability_summary(const ir::Program& program,
                                                             const variability::VariabilityModel* model,
                                                             uint64_t link_flaps) {
  const scenario::Variability& v = program.variability();
  const bool moe = variability::moe_imbalance_on(program);
  if (!scenario::any_variability(v) && !moe) return std::nullopt;
  report::VariabilitySummary s;
  s.seed = v.seed();
  s.sources = variability::describe(v, model);
  if (moe) {
    // The routing draw is seeded like the other sources (docs/moe.md#load-imbalance).
    if (s.sources.empty()) s.sources.push_back(fmt::format("seed {}", v.seed()));
    const ir::MoeInfo& m = program.info().moe();
    s.sources.push_back(fmt::format("MoE routing: Dirichlet(α = {:g}) expert popularities, multinomial token counts "
                                    "per (layer, microbatch); {} experts over ep {}, top-{}",
                                    m.routing().dirichlet_alpha(), m.num_experts(), m.ep(), m.top_k()));
  }
  if (model != nullptr) {
    s.straggler_hosts = model->straggler_hosts();
    s.slowest_rank = model->slowest_rank();
    s.slowest_factor = model->slowest_factor();
  }
  s.link_flaps = link_flaps;
  return s;
}

}  // namespace lacuna::run
