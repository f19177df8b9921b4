#include "sim/schedule/colocated.h"

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::schedule {

RankActions colocated_three_phase(const std::vector<ColocatedEncoder>& encoders, const RankActions& llm) {
  RankActions forwards, backwards;
  for (const ColocatedEncoder& e : encoders) {
    if (e.module.empty() || e.stages < 1 || e.stage < 0 || e.stage >= e.stages || e.microbatches < 1)
      throw Error(SourceLocation{},
                  fmt::format("colocated schedule: encoder '{}' at stage {} of {} with {} microbatches", e.module,
                              e.stage, e.stages, e.microbatches),
                  "name the encoder and give it a stage of its pipeline and at least one microbatch");
    // GPipe over the encoder's own stages (schedule.h), this rank's line:
    // every forward, then every backward.
    const PipelineShape shape{e.stages, 1, e.microbatches};
    const RankActions line = to_actions(build_schedule(scenario::GPIPE, shape), shape)[static_cast<size_t>(e.stage)];
    for (std::optional<ScheduleAction> a : line) {
      a->module = e.module;
      if (a->type == ActionType::kForward) forwards.push_back(std::move(a));
      else if (e.trains) backwards.push_back(std::move(a));
    }
  }
  RankActions out = std::move(forwards);
  out.insert(out.end(), llm.begin(), llm.end());
  out.insert(out.end(), backwards.begin(), backwards.end());
  return out;
}

}  // namespace lacuna::schedule
