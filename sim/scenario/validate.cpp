#include <vector>

#include "sim/scenario/checks.h"
#include "sim/scenario/execution.h"
#include "sim/scenario/moe.h"

namespace lacuna::scenario {

// Every problem of the file at once (Error::all_of, in file order). The
// four section passes read only their own section and each reports all its
// independent problems (checks.h, Problems); a check never runs on a value an
// earlier check rejected (no division by a tp <= 0 already reported). The
// rules that tie sections together run once every section is valid, in the
// fixed order below, and stop at their first problem.
void validate_scenario(const Scenario& spec, const SourceMap& locations) {
  const Checker c(locations);
  Problems problems;
  const auto pass = [&problems](const auto& run) { return problems.check(run); };
  if (!pass([&] { validate_text(spec, c); })) problems.throw_if_any();
  const bool model = pass([&] { validate_model(spec, c); });
  const bool training = pass([&] { validate_training(spec, c); });
  const bool cluster = pass([&] { validate_cluster(spec, c); });
  const bool parallel = pass([&] { validate_parallel(spec, c); });
  if (model && training && cluster && parallel) {
    pass([&] {
      validate_multimodal(spec, c);
      validate_consistency(spec, c);
      validate_moe(spec, c);  // docs/moe.md
      // The switches as the compiler will see them: the software preset's
      // defaults under the scenario's own (a scenario built in code may not have
      // been resolved yet).
      Scenario resolved = spec;
      *resolved.mutable_execution() = resolve_execution(spec, locations);
      validate_execution(resolved, c);
    });
  }
  // The variability section reads the cluster only (node and link indices).
  if (cluster) pass([&] { validate_variability(spec, c); });
  pass([&] { validate_reliability(spec, c); });
  problems.throw_if_any();
}

}  // namespace lacuna::scenario
