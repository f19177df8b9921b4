// The input and cost model of one run (sim/run/): the program (a scenario
// compiled here, or a .pb) and the model that plans and times it, calibrated
// (`--calibration PROFILE`: kernel times measured by `lacuna calibrate`) or
// the lazily built analytic model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sim/calibration/calibrated_cost_model.h"
#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"
#include "sim/report/analyses/summary.h"
#include "sim/scenario/edits.h"
#include "sim/scenario/scenario.h"

namespace lacuna::run {

struct CalibrationChoice {
  std::string profile;  // empty: analytic kernels
  bool allow_device_mismatch = false;
  bool enabled() const { return !profile.empty(); }
};

// The cost model for a cluster: the calibrated model over the lazy analytic
// one (which times communication the profile has no fit for) when a profile
// was given, else the lazy analytic model alone. The profile is read and
// validated, and the device checked, here (before any compilation or run).
// `scenario`: the scenario file simulated, for the hint when the profile
// lacks a kernel class.
std::unique_ptr<cost::CostModel> make_cost_model(const CalibrationChoice& option, const scenario::Cluster& cluster,
                                                 scenario::Precision precision, const std::string& scenario = {});

// What `lacuna simulate INPUT` runs: the program and the model that compiled
// (planned) it and will time it. A .pb program was planned when it was
// compiled; the calibration then applies to the simulation only.
struct SimulationInput {
  ir::Program program;
  std::unique_ptr<cost::CostModel> cost;
  // `cost` as the calibrated model; null without --calibration.
  const calibration::CalibratedCostModel* calibrated() const {
    return dynamic_cast<const calibration::CalibratedCostModel*>(cost.get());
  }
};
// `scale_down`: --scale-down N, as in load_program_input (a .pb input with
// N > 1 is an error).
// `edits`: the what-if flags (sim/scenario/edits.h).
SimulationInput load_simulation_input(const std::string& input, const CalibrationChoice& option,
                                      int64_t scale_down = 1, const scenario::ScenarioEdits& edits = {});

// The coverage section of the summary: how the program's kernels were found
// in the profile. Throws the kernel table's error for a class the profile
// lacks, so calling it before the run fails before any output is written.
report::CalibrationCoverage coverage_section(const calibration::CalibratedCostModel& model,
                                             const ir::Program& program);

}  // namespace lacuna::run
