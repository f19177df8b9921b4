#include "sim/schedule/call_deadlock.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace lacuna::schedule {
namespace {

// One side of a transfer, keyed as the p2p tag is: (gradient?, receiving
// stage, microbatch).
using TransferKey = std::tuple<bool, int32_t, int32_t>;

struct Side {
  int32_t rank = -1;
  size_t call = 0;
  size_t index = 0;  // within the call: sends first, then receives
};

struct RankPasses {
  std::vector<Action> passes;
  std::vector<size_t> step;  // the step of each pass in the rank's actions
};

TransferKey key_of(const PipelineShape& shape, int32_t rank, const Action& a, bool send) {
  const int32_t vs = virtual_stage(shape, rank, a.chunk);
  const bool gradient = a.pass != Pass::kForward;
  // A send names the stage that receives; a receive its own stage.
  const int32_t receiver = !send ? vs : gradient ? vs - 1 : vs + 1;
  return {gradient, receiver, a.microbatch};
}

}  // namespace

void check_blocking_calls(const ActionSchedule& s, const PipelineShape& shape,
                          const std::vector<std::vector<P2pCall>>& calls, const std::string& file) {
  const size_t ranks = calls.size();
  const std::vector<std::vector<Action>> passes = to_schedule(s, shape, file);
  std::vector<RankPasses> rp(ranks);
  for (size_t r = 0; r < ranks && r < s.size(); ++r) {
    rp[r].passes = passes[r];
    for (size_t step = 0; step < s[r].size(); ++step) {
      const auto& a = s[r][step];
      if (builder_pass(a)) rp[r].step.push_back(step);
    }
  }
  // Both sides of every transfer.
  std::map<TransferKey, std::pair<Side, Side>> sides;  // send side, receive side
  std::vector<std::vector<std::vector<bool>>> done(ranks);
  for (size_t r = 0; r < ranks; ++r) {
    done[r].resize(calls[r].size());
    for (size_t k = 0; k < calls[r].size(); ++k) {
      const P2pCall& call = calls[r][k];
      done[r][k].assign(call.sends.size() + call.recvs.size(), false);
      size_t index = 0;
      for (int32_t i : call.sends)
        sides[key_of(shape, static_cast<int32_t>(r), rp[r].passes[static_cast<size_t>(i)], true)].first =
            Side{static_cast<int32_t>(r), k, index++};
      for (int32_t i : call.recvs)
        sides[key_of(shape, static_cast<int32_t>(r), rp[r].passes[static_cast<size_t>(i)], false)].second =
            Side{static_cast<int32_t>(r), k, index++};
    }
  }
  // A transfer without its other side is the compiler's to report; it does
  // not hold the check up.
  for (auto& [key, pair] : sides) {
    if (pair.first.rank >= 0 && pair.second.rank >= 0) continue;
    const Side& one = pair.first.rank >= 0 ? pair.first : pair.second;
    done[static_cast<size_t>(one.rank)][one.call][one.index] = true;
  }
  std::vector<size_t> at(ranks, 0);
  auto reached = [&](const Side& side) { return at[static_cast<size_t>(side.rank)] == side.call; };
  for (bool moved = true; moved;) {
    moved = false;
    for (auto& [key, pair] : sides) {
      const auto& [send, recv] = pair;
      if (send.rank < 0 || recv.rank < 0 || !reached(send) || !reached(recv)) continue;
      auto s_done = done[static_cast<size_t>(send.rank)][send.call][send.index];
      if (s_done) continue;
      s_done = true;
      done[static_cast<size_t>(recv.rank)][recv.call][recv.index] = true;
      moved = true;
    }
    for (size_t r = 0; r < ranks; ++r)
      while (at[r] < calls[r].size() &&
             std::all_of(done[r][at[r]].begin(), done[r][at[r]].end(), [](bool d) { return d; })) {
        ++at[r];
        moved = true;
      }
  }
  // Each stuck rank: its call and the first transfer it waits for.
  std::string stuck;
  int32_t first_rank = -1;
  size_t first_step = 0;
  auto call_text = [&](size_t r, size_t k) {
    const int32_t after = calls[r][k].after;
    if (after < 0) return std::string("before its first pass");
    const size_t step = rp[r].step[static_cast<size_t>(after)];
    return fmt::format("after {} (step {})", to_string(*s[r][step]), step);
  };
  for (size_t r = 0; r < ranks; ++r) {
    if (at[r] >= calls[r].size()) continue;
    const size_t k = at[r];
    const P2pCall& call = calls[r][k];
    std::string waits;
    for (size_t index = 0; index < done[r][k].size() && waits.empty(); ++index) {
      if (done[r][k][index]) continue;
      const bool send = index < call.sends.size();
      const int32_t pass = send ? call.sends[index] : call.recvs[index - call.sends.size()];
      const Action& a = rp[r].passes[static_cast<size_t>(pass)];
      const auto& pair = sides.at(key_of(shape, static_cast<int32_t>(r), a, send));
      const Side& other = send ? pair.second : pair.first;
      const size_t peer = static_cast<size_t>(other.rank);
      waits = fmt::format("{} {} of {}, which rank {} reaches only in its call {}, while it waits in its call {}",
                          send ? "sends the output" : "receives the input",
                          a.pass == Pass::kForward ? "activation" : "gradient",
                          to_string(*s[r][rp[r].step[static_cast<size_t>(pass)]]), peer, call_text(peer, other.call),
                          at[peer] < calls[peer].size() ? call_text(peer, at[peer]) : "(none: it is through)");
    }
    stuck += fmt::format("\n  rank {}: its blocking call {} {}", r, call_text(r, k), waits);
    if (first_rank < 0) {
      first_rank = static_cast<int32_t>(r);
      first_step = call.after < 0 ? 0 : rp[r].step[static_cast<size_t>(call.after)];
    }
  }
  if (first_rank >= 0)
    refuse_at(s, first_rank, first_step, file,
              "the blocking p2p calls deadlock: each rank waits in a call for a transfer its peer makes only in a "
              "later call" +
                  stuck,
              "run it with execution.pipeline_p2p: P2P_OVERLAPPED (transfers posted ahead, as PyTorch's and "
              "DeepSeek's runtimes do), or write the sends and receives out in an order that completes "
              "(docs/schedules.md#blocking-calls-that-deadlock)");
}

}  // namespace lacuna::schedule
