#include "sim/schedule/lower_p2p.h"

#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna::schedule {
namespace {

bool is_pipeline_p2p(ActionType t) { return t >= ActionType::kSendForward && t <= ActionType::kRecvBackward; }

bool is_paired_recompute(const std::optional<ScheduleAction>& a) {
  return a && a->module.empty() && a->type == ActionType::kRecompute && a->overlaps_next;
}

// The transfer that carries action `a`'s input (recv) or output (send).
ScheduleAction transfer(const Action& a, int32_t stage, bool send) {
  const bool forward = a.pass == Pass::kForward;
  ScheduleAction t;
  t.type = forward ? (send ? ActionType::kSendForward : ActionType::kRecvForward)
                   : (send ? ActionType::kSendBackward : ActionType::kRecvBackward);
  t.stage = stage;
  t.microbatch = a.microbatch;
  return t;
}

}  // namespace

bool has_p2p_actions(const ActionSchedule& s) {
  for (const RankActions& r : s)
    for (const auto& a : r)
      if (a && a->module.empty() && is_pipeline_p2p(a->type)) return true;
  return false;
}

ActionSchedule lower_p2p(const ActionSchedule& s, lacuna::scenario::ScheduleKind rule, const PipelineShape& shape) {
  ActionSchedule out(s.size());
  for (size_t r = 0; r < s.size(); ++r) {
    const int32_t rank = static_cast<int32_t>(r);
    std::vector<Action> passes;
    std::vector<ScheduleAction> compute;
    // Data-parallel and amax actions keep their place: [k] follows pass
    // k − 1 (and its calls); [0] leads the rank.
    std::vector<std::vector<ScheduleAction>> kept(1);
    // An "R&B" pair's recompute, in front of its backward (after the calls
    // before that backward: the gradient arrives, then both run).
    std::vector<std::optional<ScheduleAction>> paired;
    std::optional<ScheduleAction> pending;
    for (const auto& a : s[r])
      if (is_paired_recompute(a)) {
        pending = *a;
      } else if (builder_pass(a)) {
        passes.push_back({*pass_of(a->type), a->microbatch, chunk_of_stage(shape, a->stage)});
        compute.push_back(*a);
        paired.push_back(std::exchange(pending, std::nullopt));
        kept.emplace_back();
      } else if (a && a->module.empty() &&
                 (a->type == ActionType::kUnshard || a->type == ActionType::kReshard ||
                  a->type == ActionType::kReduceGrad || a->type == ActionType::kAmaxReduce)) {
        kept.back().push_back(*a);
      }
    const std::vector<P2pCall> calls = blocking_p2p_calls(rule, shape, rank, passes);
    auto emit = [&](const P2pCall& call) {
      const size_t first = out[r].size();
      for (int32_t i : call.sends)
        out[r].push_back(transfer(passes[static_cast<size_t>(i)], compute[static_cast<size_t>(i)].stage, true));
      for (int32_t i : call.recvs)
        out[r].push_back(transfer(passes[static_cast<size_t>(i)], compute[static_cast<size_t>(i)].stage, false));
      for (size_t k = first; k + 1 < out[r].size(); ++k) out[r][k]->joins_next = true;
      // A call between an overlapped pair's passes splits it: the blocking
      // rule sends the forward's output before the backward starts.
      if (first > 0 && first < out[r].size() && out[r][first - 1]) out[r][first - 1]->overlaps_next = false;
    };
    size_t next_call = 0;
    for (int32_t i = -1; i < static_cast<int32_t>(passes.size()); ++i) {
      if (i >= 0 && paired[static_cast<size_t>(i)]) out[r].push_back(paired[static_cast<size_t>(i)]);
      if (i >= 0) out[r].push_back(compute[static_cast<size_t>(i)]);
      if (i < 0) out[r].insert(out[r].end(), kept[0].begin(), kept[0].end());
      for (; next_call < calls.size() && calls[next_call].after == i; ++next_call) emit(calls[next_call]);
      if (i >= 0) out[r].insert(out[r].end(), kept[i + 1].begin(), kept[i + 1].end());
    }
  }
  return out;
}

std::vector<P2pCall> p2p_calls_of(const ActionSchedule& s, int32_t rank, const PipelineShape& shape,
                                  const std::string& file) {
  const RankActions& actions = s[static_cast<size_t>(rank)];
  auto refuse = [&](size_t step, const std::string& what, const std::string& fix) {
    refuse_at(s, rank, step, file, what, fix);
  };
  // The rank's passes: (forward?, stage, microbatch) → index; the backward
  // that sends or receives a gradient is the B or the I.
  std::map<std::tuple<bool, int32_t, int32_t>, int32_t> index;
  std::vector<Action> passes;
  std::vector<size_t> step_of;
  for (size_t step = 0; step < actions.size(); ++step) {
    const auto& a = actions[step];
    if (!builder_pass(a)) continue;
    const Action p{*pass_of(a->type), a->microbatch, chunk_of_stage(shape, a->stage)};
    if (p.pass != Pass::kBackwardWeight && p.pass != Pass::kRecompute)
      index[{p.pass == Pass::kForward, a->stage, a->microbatch}] = static_cast<int32_t>(passes.size());
    passes.push_back(p);
    step_of.push_back(step);
  }
  std::vector<int> received(passes.size(), 0), sent(passes.size(), 0);
  std::vector<P2pCall> calls;
  P2pCall open;
  bool in_call = false;
  int32_t after = -1;
  for (size_t step = 0; step < actions.size(); ++step) {
    const auto& a = actions[step];
    if (builder_pass(a)) {
      if (in_call)
        refuse(step, fmt::format("a batched call is still open ('+') before {}", to_string(*a)),
               "end the call's last send or receive without '+'");
      ++after;  // the passes are numbered in list order
      continue;
    }
    if (!a || !a->module.empty() || !is_pipeline_p2p(a->type)) continue;
    const bool forward = a->type == ActionType::kSendForward || a->type == ActionType::kRecvForward;
    const bool send = a->type == ActionType::kSendForward || a->type == ActionType::kSendBackward;
    const auto it = index.find({forward, a->stage, a->microbatch});
    if (it == index.end())
      refuse(step, fmt::format("{} names no {} pass of stage {}, microbatch {} on this rank", to_string(*a),
                               forward ? "forward" : "backward", a->stage, a->microbatch),
             "send and receive only what the rank's passes produce and consume");
    const int32_t pass = it->second;
    const ActionComm comm = action_comm(shape, rank, passes[static_cast<size_t>(pass)]);
    if (send ? !comm.send : !comm.recv)
      refuse(step,
             fmt::format("{}: stage {} {} nothing {} its {}", to_string(*a), a->stage, send ? "sends" : "receives",
                         send ? "after" : "before", forward ? "forward" : "backward"),
             "the first stage receives no activation and the last no gradient; drop the action");
    if (send && pass > after)
      refuse(step, fmt::format("{} sends the output of a pass that has not run yet (step {})", to_string(*a),
                               step_of[static_cast<size_t>(pass)]),
             "move the send after its pass");
    if (!send && pass <= after)
      refuse(step, fmt::format("{} receives the input of a pass that already ran (step {})", to_string(*a),
                               step_of[static_cast<size_t>(pass)]),
             "move the receive before its pass");
    if (++(send ? sent : received)[static_cast<size_t>(pass)] > 1)
      refuse(step, fmt::format("{} is listed twice", to_string(*a)), "send and receive each tensor once");
    if (!in_call) open = P2pCall{after, {}, {}};
    in_call = a->joins_next;
    (send ? open.sends : open.recvs).push_back(pass);
    if (!in_call) calls.push_back(std::move(open));
  }
  if (in_call)
    refuse(actions.size() - 1, "the rank's last batched call is still open ('+')",
           "end the call's last send or receive without '+'");
  for (size_t i = 0; i < passes.size(); ++i) {
    const ActionComm comm = action_comm(shape, rank, passes[i]);
    const bool forward = passes[i].pass == Pass::kForward;
    const int32_t stage = actions[step_of[i]]->stage;
    if (comm.recv && received[i] == 0)
      refuse(step_of[i],
             fmt::format("{} has no {} before it", to_string(*actions[step_of[i]]),
                         forward ? fmt::format("{}RECV_F{}", stage, passes[i].microbatch)
                                 : fmt::format("{}RECV_B{}", stage, passes[i].microbatch)),
             "with sends and receives written out, every transfer is; or write none and let the p2p pass place them");
    if (comm.send && sent[i] == 0)
      refuse(step_of[i],
             fmt::format("{} has no {} after it", to_string(*actions[step_of[i]]),
                         forward ? fmt::format("{}SEND_F{}", stage, passes[i].microbatch)
                                 : fmt::format("{}SEND_B{}", stage, passes[i].microbatch)),
             "with sends and receives written out, every transfer is; or write none and let the p2p pass place them");
  }
  return calls;
}

}  // namespace lacuna::schedule
