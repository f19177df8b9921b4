#include "sim/schedule/lower_dp.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna::schedule {
namespace {

bool is_dp_action(const std::optional<ScheduleAction>& a) {
  return a && a->module.empty() &&
         (a->type == ActionType::kUnshard || a->type == ActionType::kReshard || a->type == ActionType::kReduceGrad);
}

// Per chunk, the index (among the rank's LLM passes) of its last B or W: the
// pass that completes its gradients; -1 for a chunk without one.
std::vector<int32_t> last_gradient_pass(const RankActions& actions, const PipelineShape& shape, int32_t* passes) {
  std::vector<int32_t> last(static_cast<size_t>(shape.virtual_stages), -1);
  int32_t p = -1;
  for (const auto& a : actions) {
    if (!builder_pass(a)) continue;
    ++p;
    const Pass pass = *pass_of(a->type);
    const int32_t c = chunk_of_stage(shape, a->stage);
    if ((pass == Pass::kBackward || pass == Pass::kBackwardWeight) && c >= 0 && c < shape.virtual_stages)
      last[static_cast<size_t>(c)] = p;
  }
  if (passes != nullptr) *passes = p + 1;
  return last;
}

ScheduleAction dp_action(ActionType type, int32_t stage) {
  ScheduleAction a;
  a.type = type;
  a.stage = stage;
  a.microbatch = -1;
  return a;
}

}  // namespace

bool has_dp_actions(const ActionSchedule& s) {
  for (const RankActions& r : s)
    for (const auto& a : r)
      if (is_dp_action(a)) return true;
  return false;
}

ActionSchedule add_dp_actions(const ActionSchedule& s, const PipelineShape& shape, const DpSettings& settings) {
  ActionSchedule out(s.size());
  for (size_t r = 0; r < s.size(); ++r) {
    const int32_t rank = static_cast<int32_t>(r);
    RankActions in;
    for (const auto& a : s[r])
      if (!is_dp_action(a)) in.push_back(a);
    if (!settings.reduce) {
      out[r] = std::move(in);
      continue;
    }
    const std::vector<int32_t> last = last_gradient_pass(in, shape, nullptr);
    RankActions& o = out[r];
    if (settings.unshard)
      for (int32_t c = 0; c < shape.virtual_stages; ++c)
        o.push_back(dp_action(ActionType::kUnshard, virtual_stage(shape, rank, c)));
    int32_t p = -1, pending = -1;
    for (size_t k = 0; k < in.size(); ++k) {
      o.push_back(in[k]);
      if (builder_pass(in[k])) pending = ++p;
      // After the pass and the transfers that follow it.
      const bool transfer_next = k + 1 < in.size() && in[k + 1] && is_transfer(in[k + 1]->type);
      if (pending < 0 || transfer_next) continue;
      if (settings.overlap_reduce)
        for (int32_t c = 0; c < shape.virtual_stages; ++c)
          if (last[static_cast<size_t>(c)] == pending)
            o.push_back(dp_action(ActionType::kReduceGrad, virtual_stage(shape, rank, c)));
      pending = -1;
    }
    if (!settings.overlap_reduce) {
      std::vector<int32_t> order(static_cast<size_t>(shape.virtual_stages));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t x, int32_t y) { return last[static_cast<size_t>(x)] < last[static_cast<size_t>(y)]; });
      for (int32_t c : order) o.push_back(dp_action(ActionType::kReduceGrad, virtual_stage(shape, rank, c)));
    }
  }
  return out;
}

DpPoints dp_points_of(const ActionSchedule& s, int32_t rank, const PipelineShape& shape, const DpSettings& settings,
                      const std::string& file) {
  const RankActions& actions = s[static_cast<size_t>(rank)];
  auto refuse = [&](size_t step, const std::string& what, const std::string& fix) {
    refuse_at(s, rank, step, file, what, fix);
  };
  int32_t passes = 0;
  const std::vector<int32_t> last = last_gradient_pass(actions, shape, &passes);
  const size_t chunks = static_cast<size_t>(shape.virtual_stages);
  DpPoints out;
  out.reduce_after.assign(chunks, -1);
  std::vector<size_t> reduce_step(chunks, 0), gather_step(chunks, 0);
  std::vector<bool> gathered(chunks, false);
  std::vector<size_t> pass_step;  // step of each pass
  // Per chunk, the index of its first forward (past the last pass if none).
  std::vector<int32_t> first_forward(chunks, INT32_MAX);
  for (size_t step = 0; step < actions.size(); ++step)
    if (builder_pass(actions[step])) {
      const auto& a = actions[step];
      const int32_t c = chunk_of_stage(shape, a->stage);
      if (a->type == ActionType::kForward && c >= 0 && static_cast<size_t>(c) < chunks &&
          first_forward[static_cast<size_t>(c)] == INT32_MAX)
        first_forward[static_cast<size_t>(c)] = static_cast<int32_t>(pass_step.size());
      pass_step.push_back(step);
    }
  if (settings.unshard) out.gather_after.assign(chunks, -1);
  int32_t after = -1;
  for (size_t step = 0; step < actions.size(); ++step) {
    const auto& a = actions[step];
    if (builder_pass(a)) {
      ++after;
      continue;
    }
    if (!is_dp_action(a)) continue;
    if (a->type == ActionType::kReshard)
      refuse(step, fmt::format("{}: Megatron-LM's distributed optimizer keeps the gathered parameters for the "
                               "whole iteration",
                               to_string(*a)),
             "drop the RESHARD actions");
    if (a->stage < 0 || a->stage >= shape.pp * shape.virtual_stages || rank_of_stage(shape, a->stage) != rank)
      refuse(step, fmt::format("{} names stage {}, which this rank does not hold ({})", to_string(*a), a->stage,
                               layout_rule(shape)),
             "move the action to its stage's rank");
    const size_t c = static_cast<size_t>(chunk_of_stage(shape, a->stage));
    if (a->type == ActionType::kUnshard) {
      if (!settings.unshard)
        refuse(step, fmt::format("{} gathers sharded parameters, but the scenario does not shard them (no "
                                 "distributed optimizer, or dp × cp = 1)",
                                 to_string(*a)),
               "drop the UNSHARD actions, or set parallel.distributed_optimizer: true with dp × cp > 1");
      if (after >= 0 && !settings.overlap_gather)
        refuse(step, fmt::format("{} comes after the rank's first pass (step {}): without "
                                 "parallel.overlap_param_gather Megatron-LM gathers every parameter synchronously "
                                 "before the first forward",
                                 to_string(*a), pass_step.front()),
               "move the UNSHARD actions before the rank's first pass, or set parallel.overlap_param_gather: true");
      if (after >= first_forward[c])
        refuse(step, fmt::format("{} comes after the stage's first forward ({} at step {}), which needs the gathered "
                                 "parameters",
                                 to_string(*a), to_string(*actions[pass_step[static_cast<size_t>(first_forward[c])]]),
                                 pass_step[static_cast<size_t>(first_forward[c])]),
               "move it before that forward");
      if (gathered[c]) refuse(step, fmt::format("{} is listed twice (first at step {})", to_string(*a), gather_step[c]),
                              "gather each stage once");
      gathered[c] = true;
      gather_step[c] = step;
      out.gather_order.push_back(static_cast<int32_t>(c));
      out.gather_after[c] = after;
      continue;
    }
    // REDUCE_GRAD.
    if (!settings.reduce)
      refuse(step, fmt::format("{} reduces gradients over data parallelism, but the scenario has dp × cp = 1",
                               to_string(*a)),
             "drop the REDUCE_GRAD actions");
    if (after < last[c])
      refuse(step, fmt::format("{} comes before the stage's last backward ({} at step {}): its gradients are not "
                               "complete",
                               to_string(*a), to_string(*actions[pass_step[static_cast<size_t>(last[c])]]),
                               pass_step[static_cast<size_t>(last[c])]),
             "move it after that pass");
    if (!settings.overlap_reduce && after != passes - 1)
      refuse(step, fmt::format("{}: without parallel.overlap_grad_reduce every gradient is reduced after the rank's "
                               "last pass (Megatron-LM's finalize_model_grads)",
                               to_string(*a)),
             "move the REDUCE_GRAD actions to the end of the rank's list, or set parallel.overlap_grad_reduce: true");
    if (out.reduce_after[c] >= 0)
      refuse(step, fmt::format("{} is listed twice (first at step {})", to_string(*a), reduce_step[c]),
             "reduce each stage once");
    out.reduce_after[c] = after;
    reduce_step[c] = step;
    out.reduce_order.push_back(static_cast<int32_t>(c));
  }
  const size_t end = actions.empty() ? 0 : actions.size() - 1;
  for (size_t c = 0; c < chunks; ++c) {
    const int32_t stage = virtual_stage(shape, rank, static_cast<int32_t>(c));
    if (settings.reduce && out.reduce_after[c] < 0)
      refuse(end, fmt::format("stage {} has no {}REDUCE_GRAD, though the rank places its data-parallel actions",
                              stage, stage),
             "add it after the stage's last backward, or leave every DP action to the pass");
    if (settings.unshard && !gathered[c])
      refuse(end, fmt::format("stage {} has no {}UNSHARD, though the rank places its data-parallel actions", stage,
                              stage),
             "add it before the rank's first pass, or leave every DP action to the pass");
  }
  return out;
}

}  // namespace lacuna::schedule
