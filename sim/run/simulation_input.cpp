#include "sim/run/simulation_input.h"

#include "sim/calibration/coverage.h"
#include "sim/placement/compile.h"
#include "sim/run/lazy_cost_model.h"
#include "sim/run/program_input.h"

namespace lacuna::run {

std::unique_ptr<cost::CostModel> make_cost_model(const CalibrationChoice& option, const scenario::Cluster& cluster,
                                                 scenario::Precision precision, const std::string& scenario) {
  auto lazy = std::make_unique<LazyAnalyticCostModel>(cluster, precision);
  if (!option.enabled()) return lazy;
  auto model = calibration::make_calibrated_cost_model(option.profile, cluster, std::move(lazy),
                                                       option.allow_device_mismatch, scenario);
  calibration::check_precision(model->profile(), option.profile, precision, option.allow_device_mismatch);
  return model;
}

SimulationInput load_simulation_input(const std::string& input, const CalibrationChoice& option,
                                      int64_t scale_down, const scenario::ScenarioEdits& edits) {
  SimulationInput in;
  if (!option.enabled() || is_program_file(input)) {
    in.program = load_program_input(input, nullptr, scale_down, edits);
    in.cost = make_cost_model(option, in.program.cluster(), in.program.info().precision(),
                              in.program.info().scenario_file());
    return in;
  }
  // The profile is checked before compiling, and planning uses it too.
  const scenario::LoadedScenario loaded = scenario::load_scenario(input, scale_down, edits);
  in.cost = make_cost_model(option, loaded.spec.cluster(), loaded.spec.training().precision(), input);
  in.program = placement::compile(loaded, *in.cost);
  attach_variability(in.program, loaded);
  return in;
}

report::CalibrationCoverage coverage_section(const calibration::CalibratedCostModel& model,
                                             const ir::Program& program) {
  const calibration::Coverage cov = calibration::kernel_coverage(program, model.kernels());
  const auto row = [](const calibration::CoverageRow& r, std::string name) {
    report::CalibrationCoverage::Row out;
    out.op_class = std::move(name);
    for (size_t k = 0; k < out.shares.size(); ++k) out.shares[k] = {r.by_kind[k].kernels, r.by_kind[k].time_ns};
    return out;
  };
  report::CalibrationCoverage section;
  section.profile = model.profile_path();
  section.device = model.profile().device().name();
  section.total = row(cov.total, "");
  for (const auto& [op_class, r] : cov.by_class) section.classes.push_back(row(r, ir::OpClass_Name(op_class)));
  return section;
}

}  // namespace lacuna::run
