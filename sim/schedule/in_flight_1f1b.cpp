#include "sim/schedule/in_flight_1f1b.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/core/error.h"

namespace lacuna::schedule {

std::vector<int32_t> megatron_1f1b_in_flight(int32_t pp, int32_t microbatches) {
  std::vector<int32_t> k(static_cast<size_t>(std::max(pp, 0)));
  for (int32_t r = 0; r < pp; ++r) k[static_cast<size_t>(r)] = std::min(pp - r, microbatches);
  return k;
}

ActionSchedule in_flight_1f1b_schedule(int32_t pp, int32_t microbatches, const std::vector<int32_t>& in_flight) {
  if (pp < 1 || microbatches < 1)
    throw Error(SourceLocation{},
                fmt::format("1F1B needs at least one rank and one microbatch (pp {}, microbatches {})", pp,
                            microbatches),
                "");
  if (in_flight.size() != static_cast<size_t>(pp))
    throw Error(SourceLocation{},
                fmt::format("{} in-flight counts given for {} pipeline ranks", in_flight.size(), pp),
                fmt::format("give one count per rank, or one count for every rank"));
  for (int32_t r = 0; r < pp; ++r) {
    const int32_t k = in_flight[static_cast<size_t>(r)];
    if (k < 1 || k > microbatches)
      throw Error(SourceLocation{},
                  fmt::format("rank {} would hold {} microbatches in flight, outside [1, {}] (the iteration's "
                              "microbatches)",
                              r, k, microbatches),
                  fmt::format("give rank {} a count from 1 to {}", r, microbatches));
    if (r > 0 && k > in_flight[static_cast<size_t>(r - 1)])
      throw Error(SourceLocation{},
                  fmt::format("rank {} would hold {} microbatches in flight but rank {} upstream only {}: rank {} "
                              "sends {} forward{} before it waits for its first backward, and rank {} needs {} before "
                              "it sends that backward, so the pipeline would deadlock",
                              r, k, r - 1, in_flight[static_cast<size_t>(r - 1)], r - 1,
                              in_flight[static_cast<size_t>(r - 1)], in_flight[static_cast<size_t>(r - 1)] == 1 ? "" : "s",
                              r, k),
                  "give counts that do not grow downstream (rank 0 the most)");
  }
  ActionSchedule out(static_cast<size_t>(pp));
  for (int32_t r = 0; r < pp; ++r) {
    // Warm-up: k − 1 forwards; steady: a forward, then the oldest backward;
    // cool-down: the backwards left.
    const int32_t warmup = in_flight[static_cast<size_t>(r)] - 1;
    RankActions& rank = out[static_cast<size_t>(r)];
    rank.reserve(2 * static_cast<size_t>(microbatches));
    for (int32_t mb = 0; mb < warmup; ++mb) rank.push_back(llm_action(ActionType::kForward, r, mb));
    for (int32_t i = 0; i < microbatches - warmup; ++i) {
      rank.push_back(llm_action(ActionType::kForward, r, warmup + i));
      rank.push_back(llm_action(ActionType::kBackward, r, i));
    }
    for (int32_t mb = microbatches - warmup; mb < microbatches; ++mb) rank.push_back(llm_action(ActionType::kBackward, r, mb));
  }
  return out;
}

}  // namespace lacuna::schedule
