#include "sim/schedule/looped_bfs.h"

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna::schedule {

ActionSchedule looped_bfs_schedule(int32_t pp, int32_t virtual_stages, int32_t microbatches) {
  if (pp < 1 || virtual_stages < 1 || microbatches < 1)
    throw Error(SourceLocation{},
                fmt::format("Looped BFS needs at least one rank, chunk and microbatch (pp {}, virtual stages {}, "
                            "microbatches {})",
                            pp, virtual_stages, microbatches),
                "");
  ActionSchedule out(static_cast<size_t>(pp));
  for (int32_t r = 0; r < pp; ++r) {
    RankActions& rank = out[static_cast<size_t>(r)];
    rank.reserve(2 * static_cast<size_t>(virtual_stages) * static_cast<size_t>(microbatches));
    for (int32_t c = 0; c < virtual_stages; ++c)
      for (int32_t mb = 0; mb < microbatches; ++mb) rank.push_back(llm_action(ActionType::kForward, c * pp + r, mb));
    for (int32_t c = virtual_stages - 1; c >= 0; --c)
      for (int32_t mb = microbatches - 1; mb >= 0; --mb) rank.push_back(llm_action(ActionType::kBackward, c * pp + r, mb));
  }
  return out;
}

}  // namespace lacuna::schedule
