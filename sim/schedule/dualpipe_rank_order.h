// One rank's order as DeepSeek's DualPipe runtimes build it
// (deepseek-ai/DualPipe, dualpipe/dualpipe.py and dualpipev.py, commit
// 3da1bbea): per module of the rank the next microbatch to run forward and
// backward, and the weight passes that zero-bubble backwards defer to the
// authors' WeightGradStore queue. Shared by dualpipe.cpp and dualpipev.cpp.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>

#include "sim/schedule/action.h"

namespace lacuna::schedule::dualpipe_detail {

class RankOrder {
 public:
  // Module k holds virtual stage `stage[k]` and numbers its microbatches from
  // `first_microbatch[k]`.
  RankOrder(int32_t stage0, int32_t stage1, int32_t first_microbatch0 = 0, int32_t first_microbatch1 = 0)
      : stage_{stage0, stage1}, first_{first_microbatch0, first_microbatch1} {}

  void forward(int module, bool overlaps_next = false) {
    ScheduleAction a = pass(ActionType::kForward, module, forwards_[module]++);
    a.overlaps_next = overlaps_next;
    out_.push_back(std::move(a));
  }
  // `zero_bubble`: only the input gradient now; the weight pass is queued.
  void backward(int module, bool zero_bubble = false) {
    const int32_t k = backwards_[module]++;
    out_.push_back(pass(zero_bubble ? ActionType::kBackwardInput : ActionType::kBackward, module, k));
    if (zero_bubble) deferred_.push_back({module, k});
  }
  // The overlapped pair: a forward of one module with a backward of the other.
  void forward_backward(int forward_module, int backward_module) {
    forward(forward_module, /*overlaps_next=*/true);
    backward(backward_module);
  }
  // The oldest deferred weight pass (WeightGradStore.pop: first in, first out).
  void weight() {
    const auto [module, k] = deferred_.front();
    deferred_.pop_front();
    out_.push_back(pass(ActionType::kBackwardWeight, module, k));
  }
  bool drained() const { return deferred_.empty(); }
  RankActions take() { return std::move(out_); }

 private:
  ScheduleAction pass(ActionType type, int module, int32_t k) const {
    ScheduleAction a;
    a.type = type;
    a.stage = stage_[module];
    a.microbatch = first_[module] + k;
    return a;
  }

  int32_t stage_[2];
  int32_t first_[2];
  int32_t forwards_[2] = {0, 0}, backwards_[2] = {0, 0};
  std::deque<std::pair<int, int32_t>> deferred_;
  RankActions out_;
};

}  // namespace lacuna::schedule::dualpipe_detail
