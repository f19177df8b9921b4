#include "sim/compiler/stage_plan.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"

namespace lacuna::compiler {

std::vector<LayerRange> plan_stages(const scenario::LoadedScenario& scenario) {
  const auto& spec = scenario.spec;
  const int64_t layers = spec.model().llm().num_layers();
  const int64_t pp = std::max<int64_t>(1, spec.parallel().pp());
  const int64_t v = std::max<int64_t>(1, spec.parallel().virtual_stages());
  const int64_t stages = pp * v;
  std::vector<LayerRange> ranges(static_cast<size_t>(stages));
  const auto& given = spec.parallel().layers_per_stage();
  if (!given.empty()) {
    if (given.size() != stages)
      throw Error(scenario.locations.locate("parallel.layers_per_stage"),
                  "layers_per_stage has " + std::to_string(given.size()) + " entries, the pipeline has " +
                      std::to_string(stages) + " virtual stages",
                  "give one entry per virtual stage (pp × virtual_stages)");
    int64_t first = 0;
    for (int64_t k = 0; k < stages; ++k) {
      if (given[static_cast<int>(k)] < 0)
        throw Error(scenario.locations.locate("parallel.layers_per_stage[" + std::to_string(k) + "]"),
                    "negative layer count", "use 0 or more layers");
      ranges[k] = {first, given[static_cast<int>(k)]};
      first += given[static_cast<int>(k)];
    }
    if (first != layers)
      throw Error(scenario.locations.locate("parallel.layers_per_stage"),
                  "layers_per_stage adds up to " + std::to_string(first) + " layers, the model has " +
                      std::to_string(layers),
                  "make the entries sum to model.llm.num_layers");
    return ranges;
  }
  const bool uneven = spec.parallel().has_first_stage_layers() || spec.parallel().has_last_stage_layers();
  if (!uneven && layers % stages != 0)
    throw Error(scenario.locations.locate("model.llm.num_layers"),
                std::to_string(layers) + " layers do not split evenly over " + std::to_string(stages) +
                    " virtual stages (pp × virtual_stages)",
                "set parallel.layers_per_stage, or choose pp and virtual_stages dividing the layer count");
  // Even, or Megatron's uneven first / last stage (validated).
  const std::vector<int64_t> counts = scenario::layers_per_virtual_stage(spec);
  int64_t first = 0;
  for (int64_t k = 0; k < stages; ++k) {
    ranges[k] = {first, counts[static_cast<size_t>(k)]};
    first += counts[static_cast<size_t>(k)];
  }
  return ranges;
}

std::vector<LayerRange> plan_mirrored_stages(const scenario::LoadedScenario& scenario) {
  const auto& spec = scenario.spec;
  const auto& par = spec.parallel();
  const int64_t layers = spec.model().llm().num_layers();
  const int64_t pp = std::max<int64_t>(1, par.pp());
  const char* field = !par.layers_per_stage().empty() ? "parallel.layers_per_stage"
                      : par.has_first_stage_layers()  ? "parallel.first_stage_layers"
                      : par.has_last_stage_layers()   ? "parallel.last_stage_layers"
                                                      : nullptr;
  if (field)
    throw Error(scenario.locations.locate(field),
                std::string(field) + " splits the layers over pp × virtual_stages stages, but the actions file's "
                "bidirectional layout runs DualPipe's two pipelines, each the whole model in pp stages "
                "(docs/schedules.md#dualpipe)",
                "drop the field: the layers are split evenly over pp");
  // Scenario validation has checked that pp × virtual_stages divides the
  // layers, so pp does.
  const int64_t per_stage = layers / pp;
  std::vector<LayerRange> ranges(static_cast<size_t>(2 * pp));
  for (int64_t k = 0; k < 2 * pp; ++k) ranges[static_cast<size_t>(k)] = {(k % pp) * per_stage, per_stage};
  return ranges;
}

}  // namespace lacuna::compiler
