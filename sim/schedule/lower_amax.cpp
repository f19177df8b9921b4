#include "sim/schedule/lower_amax.h"

#include <algorithm>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna::schedule {
namespace {

bool is_amax(const std::optional<ScheduleAction>& a) {
  return a && a->module.empty() && a->type == ActionType::kAmaxReduce;
}

// An LLM pass that reduces amaxes: a forward, a backward, an input gradient.
bool reduces_amax(const std::optional<ScheduleAction>& a) {
  return a && a->module.empty() &&
         (a->type == ActionType::kForward || a->type == ActionType::kBackward ||
          a->type == ActionType::kBackwardInput);
}

ScheduleAction amax_action(int32_t stage) { return llm_action(ActionType::kAmaxReduce, stage, -1); }

}  // namespace

bool has_amax_actions(const ActionSchedule& s) {
  for (const RankActions& r : s)
    if (std::any_of(r.begin(), r.end(), is_amax)) return true;
  return false;
}

ActionSchedule add_amax_actions(const ActionSchedule& s) {
  ActionSchedule out(s.size());
  for (size_t r = 0; r < s.size(); ++r) {
    RankActions in;
    for (const auto& a : s[r])
      if (!is_amax(a)) in.push_back(a);
    RankActions& o = out[r];
    std::vector<int32_t> pending;  // stages whose reduction is still to be written
    for (size_t k = 0; k < in.size(); ++k) {
      const auto& a = in[k];
      o.push_back(a);
      if (reduces_amax(a)) pending.push_back(a->stage);
      // Right after the pass (the reduction runs inside it, before its
      // output is sent), or after an overlapped pair's second pass.
      if (!a || !is_compute(a->type) || a->overlaps_next) continue;
      for (int32_t stage : pending) o.push_back(amax_action(stage));
      pending.clear();
    }
    for (int32_t stage : pending) o.push_back(amax_action(stage));
  }
  return out;
}

std::vector<bool> amax_passes_of(const ActionSchedule& s, int32_t rank, bool reduces, const std::string& file) {
  const RankActions& actions = s[static_cast<size_t>(rank)];
  std::vector<bool> out;
  const bool written = has_amax_actions(s);
  // Passes an AMAX may still claim, (index into out, stage): the latest
  // pass, or both of an overlapped pair.
  std::vector<std::pair<size_t, int32_t>> open;
  bool pair_open = false;
  for (size_t step = 0; step < actions.size(); ++step) {
    const auto& a = actions[step];
    if (a && a->module.empty() && is_compute(a->type)) {
      if (!pair_open) open.clear();
      pair_open = a->overlaps_next;
      if (!builder_pass(a)) continue;  // an "R&B" pair's recompute: part of its backward
      out.push_back(reduces && !written && reduces_amax(a));
      if (reduces_amax(a)) open.emplace_back(out.size() - 1, a->stage);
      continue;
    }
    if (!is_amax(a)) continue;
    if (!reduces)
      refuse_at(s, rank, step, file,
                fmt::format("{}: the scenario's FP8 recipe reduces no amax (only delayed scaling does, with FP8 "
                            "on)",
                            to_string(*a)),
                "drop the AMAX actions");
    const auto claimed = std::find_if(open.begin(), open.end(), [&](const std::pair<size_t, int32_t>& o) {
      return o.second == a->stage && !out[o.first];
    });
    if (claimed == open.end())
      refuse_at(s, rank, step, file,
                fmt::format("{} follows no forward, backward or input-gradient pass of stage {} that has no AMAX yet",
                            to_string(*a), a->stage),
                fmt::format("place it right after such a pass of stage {} (transfers may come between), or drop it",
                            a->stage));
    out[claimed->first] = true;
  }
  return out;
}

}  // namespace lacuna::schedule
