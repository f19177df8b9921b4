#include "sim/scenario/checks.h"
#include "sim/scenario/execution.h"

namespace lacuna::scenario {

// Sections first, each on its own (every field present and in range), then the
// rules that tie sections together; the first problem found is reported, so the
// order is fixed.
void validate_scenario(const Scenario& spec, const SourceMap& locations) {
  const Checker c(locations);
  validate_model(spec, c);
  validate_training(spec, c);
  validate_cluster(spec, c);
  validate_parallel(spec, c);
  validate_multimodal(spec, c);
  validate_consistency(spec, c);
  // The switches as the compiler will see them: the software preset's
  // defaults under the scenario's own (a scenario built in code may not have
  // been resolved yet).
  Scenario resolved = spec;
  *resolved.mutable_execution() = resolve_execution(spec, locations);
  validate_execution(resolved, c);
  validate_variability(spec, c);
}

}  // namespace lacuna::scenario
