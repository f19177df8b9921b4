#include "sim/schedule/lower_recompute.h"

#include <set>
#include <tuple>

#include <fmt/format.h>

namespace lacuna::schedule {
namespace {

bool is_llm_recompute(const std::optional<ScheduleAction>& a) {
  return a && a->module.empty() && a->type == ActionType::kRecompute;
}

bool is_llm_input_backward(const std::optional<ScheduleAction>& a) {
  return a && a->module.empty() && (a->type == ActionType::kBackward || a->type == ActionType::kBackwardInput);
}

}  // namespace

bool has_recompute_actions(const ActionSchedule& s) {
  for (const RankActions& r : s)
    for (const auto& a : r)
      if (is_llm_recompute(a)) return true;
  return false;
}

ActionSchedule add_recompute_actions(const ActionSchedule& s) {
  ActionSchedule out(s.size());
  for (size_t r = 0; r < s.size(); ++r) {
    std::set<std::pair<int32_t, int32_t>> recomputed;  // (stage, microbatch)
    for (const auto& a : s[r])
      if (is_llm_recompute(a)) recomputed.insert({a->stage, a->microbatch});
    RankActions& o = out[r];
    for (size_t k = 0; k < s[r].size(); ++k) {
      const auto& a = s[r][k];
      const bool closes_pair = k > 0 && s[r][k - 1] && s[r][k - 1]->overlaps_next;
      if (is_llm_input_backward(a) && !closes_pair && !recomputed.count({a->stage, a->microbatch})) {
        ScheduleAction rc;
        rc.type = ActionType::kRecompute;
        rc.stage = a->stage;
        rc.microbatch = a->microbatch;
        rc.overlaps_next = true;
        o.push_back(std::move(rc));
      }
      o.push_back(a);
    }
  }
  return out;
}

void check_recompute_actions(const ActionSchedule& s, const std::string& recompute, const std::string& file) {
  if (recompute == "RECOMPUTE_FULL") return;
  for (size_t r = 0; r < s.size(); ++r)
    for (size_t step = 0; step < s[r].size(); ++step)
      if (is_llm_recompute(s[r][step]))
        refuse_at(s, static_cast<int32_t>(r), step, file,
                  fmt::format("{} recomputes whole layers, but the scenario's parallel.recompute is {}{}",
                              to_string(*s[r][step]), recompute,
                              recompute == "RECOMPUTE_SELECTIVE"
                                  ? " (the attention core, recomputed inside each backward)"
                                  : " (nothing is recomputed)"),
                  "set parallel.recompute: RECOMPUTE_FULL, or drop the R actions");
}

}  // namespace lacuna::schedule
