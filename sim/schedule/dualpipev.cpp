#include "sim/schedule/dualpipev.h"

#include <deque>
#include <string>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna::schedule {
namespace {

// One rank's order, built the way DualPipeV.step walks it: per phase (0: the
// rank's first stage, 1: its second) the next microbatch to run forward and
// backward, and the weight passes deferred by zero-bubble backwards.
class RankOrder {
 public:
  RankOrder(int32_t pp, int32_t rank) : stage_{rank, 2 * pp - 1 - rank} {}

  void forward(int phase, bool overlaps_next = false) {
    ScheduleAction a = pass(ActionType::kForward, phase, forwards_[phase]++);
    a.overlaps_next = overlaps_next;
    out_.push_back(std::move(a));
  }
  // `zero_bubble`: only the input gradient now; the weight pass is queued
  // (the authors' WeightGradStore).
  void backward(int phase, bool zero_bubble = false) {
    const int32_t mb = backwards_[phase]++;
    out_.push_back(pass(zero_bubble ? ActionType::kBackwardInput : ActionType::kBackward, phase, mb));
    if (zero_bubble) deferred_.push_back({phase, mb});
  }
  // DualPipe's overlapped pair: a forward of one phase with a backward of the other.
  void forward_backward(int forward_phase, int backward_phase) {
    forward(forward_phase, /*overlaps_next=*/true);
    backward(backward_phase);
  }
  // The oldest deferred weight pass (WeightGradStore.pop: first in, first out).
  void weight() {
    const auto [phase, mb] = deferred_.front();
    deferred_.pop_front();
    out_.push_back(pass(ActionType::kBackwardWeight, phase, mb));
  }
  bool drained() const { return deferred_.empty(); }
  RankActions take() { return std::move(out_); }

 private:
  ScheduleAction pass(ActionType type, int phase, int32_t microbatch) const {
    ScheduleAction a;
    a.type = type;
    a.stage = stage_[phase];
    a.microbatch = microbatch;
    return a;
  }

  int32_t stage_[2];
  int32_t forwards_[2] = {0, 0}, backwards_[2] = {0, 0};
  std::deque<std::pair<int, int32_t>> deferred_;
  RankActions out_;
};

}  // namespace

ActionSchedule dualpipev_schedule(int32_t pp, int32_t microbatches) {
  if (pp < 1) throw Error(SourceLocation{}, fmt::format("DualPipeV needs pp >= 1, got {}", pp), "");
  if (microbatches < 2 * pp)
    throw Error(SourceLocation{}, fmt::format("DualPipeV needs at least 2·pp = {} microbatches, got {}", 2 * pp,
                                              microbatches),
                "raise the microbatch count (the authors' runtime asserts the same)");
  ActionSchedule out;
  for (int32_t r = 0; r < pp; ++r) {
    RankOrder o(pp, r);
    const bool last_rank = r == pp - 1;
    // 1: forwards of the first stage.
    for (int32_t i = 0; i < 2 * (pp - r - 1); ++i) o.forward(0);
    // 2: forwards of both stages.
    for (int32_t i = 0; i < r + 1; ++i) {
      o.forward(0);
      o.forward(1);
    }
    // 3: backward input, weight, forward of the second stage (zero bubble).
    for (int32_t i = 0; i < pp - r - 1; ++i) {
      o.backward(1, /*zero_bubble=*/true);
      o.weight();
      o.forward(1);
    }
    // 4: the steady state, two overlapped pairs per step. The last rank runs
    // its first pair back to back ("to further reduce bubble size").
    for (int32_t i = 0; i < microbatches - 2 * pp + r + 1; ++i) {
      if (i == 0 && last_rank) {
        o.forward(0);
        o.backward(1);
      } else {
        o.forward_backward(0, 1);
      }
      o.forward_backward(1, 0);
    }
    // 5: a backward of the second stage, then a pair.
    for (int32_t i = 0; i < pp - r - 1; ++i) {
      o.backward(1);
      o.forward_backward(1, 0);
    }
    // 6: backwards of both stages; from the middle on (one pass earlier on
    // odd ranks) they defer their weight passes.
    const int32_t step6 = r + 1;
    bool zero_bubble = false;
    for (int32_t i = 0; i < step6; ++i) {
      if (i == step6 / 2 && r % 2 == 1) zero_bubble = true;
      o.backward(1, zero_bubble);
      if (i == step6 / 2 && r % 2 == 0) zero_bubble = true;
      o.backward(0, zero_bubble);
    }
    // 7: a deferred weight pass, then a zero-bubble backward of the first stage.
    for (int32_t i = 0; i < pp - r - 1; ++i) {
      o.weight();
      o.backward(0, /*zero_bubble=*/true);
    }
    // 8: the remaining weight passes.
    for (int32_t i = 0; i < r + 1; ++i) o.weight();
    if (!o.drained()) throw Error(SourceLocation{}, fmt::format("DualPipeV rank {}: weight passes left over", r), "");
    out.push_back(o.take());
  }
  return out;
}

}  // namespace lacuna::schedule
