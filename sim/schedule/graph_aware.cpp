#include "sim/schedule/graph_aware.h"

#include <algorithm>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna::schedule {

ActionSchedule graph_aware_1f1b(const GraphAwareInput& in) {
  const auto m = static_cast<int32_t>(in.downstream_need.size());
  if (in.stages < 1 || in.sink_distance < 0 || in.trains.size() != static_cast<size_t>(in.stages))
    throw Error(SourceLocation{}, fmt::format("graph-aware 1F1B: {} stages, distance {}, {} training flags",
                                              in.stages, in.sink_distance, in.trains.size()),
                "give one training flag per stage");
  ActionSchedule out(static_cast<size_t>(in.stages));
  auto action = [&](ActionType type, int32_t stage, int32_t microbatch) {
    ScheduleAction a;
    a.type = type;
    a.stage = stage;
    a.microbatch = microbatch;
    a.module = in.module;
    return a;
  };
  // From the sink upstream: each stage answers to the one after it.
  std::vector<int32_t> need = in.downstream_need;
  for (int32_t j = in.stages - 1; j >= 0; --j) {
    RankActions& rank = out[static_cast<size_t>(j)];
    std::vector<int32_t> before(static_cast<size_t>(m), m);
    if (!in.trains[static_cast<size_t>(j)]) {
      for (int32_t i = 0; i < m; ++i) rank.push_back(action(ActionType::kForward, j, i));
    } else {
      const int32_t warmup = std::min((in.stages - 1 - j) + in.sink_distance, m);
      int32_t f = 0;
      for (int32_t i = 0; i < m; ++i) {
        const int32_t until = std::min(m, std::max(warmup + i + 1, need[static_cast<size_t>(i)]));
        for (; f < until; ++f) rank.push_back(action(ActionType::kForward, j, f));
        before[static_cast<size_t>(i)] = f;
        rank.push_back(action(ActionType::kBackward, j, i));
      }
    }
    need = std::move(before);
  }
  return out;
}

}  // namespace lacuna::schedule
