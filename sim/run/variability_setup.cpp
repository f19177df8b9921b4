#include "sim/run/variability_setup.h"

#include "sim/core/error.h"
#include "sim/scenario/variability.h"

namespace lacuna::run {

std::unique_ptr<variability::VariabilityModel> make_perturbation(const ir::Program& program, bool fold) {
  const scenario::Variability& v = program.variability();
  if (!scenario::any_variability(v)) return nullptr;
  if (fold) {
    const std::string why = variability::fold_refusal(v);
    if (!why.empty()) {
      throw Error(SourceLocation{"--fold", 0, 0, {}}, why,
                  "simulate every rank (without --fold), or turn those sources off (--ideal, or --set)");
    }
  }
  return std::make_unique<variability::VariabilityModel>(program, v);
}

std::optional<report::VariabilitySummary> variability_summary(const ir::Program& program,
                                                             const variability::VariabilityModel* model,
                                                             uint64_t link_flaps) {
  const scenario::Variability& v = program.variability();
  if (!scenario::any_variability(v)) return std::nullopt;
  report::VariabilitySummary s;
  s.seed = v.seed();
  s.sources = variability::describe(v, model);
  if (model != nullptr) {
    s.straggler_hosts = model->straggler_hosts();
    s.slowest_rank = model->slowest_rank();
    s.slowest_factor = model->slowest_factor();
  }
  s.link_flaps = link_flaps;
  return s;
}

}  // namespace lacuna::run
