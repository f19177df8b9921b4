#include "sim/schedule/dualpipev.h"

#include <string>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/schedule/dualpipe_rank_order.h"

namespace lacuna::schedule {

ActionSchedule dualpipev_schedule(int32_t pp, int32_t microbatches) {
  if (pp < 1) throw Error(SourceLocation{}, fmt::format("DualPipeV needs pp >= 1, got {}", pp), "");
  if (microbatches < 2 * pp)
    throw Error(SourceLocation{}, fmt::format("DualPipeV needs at least 2·pp = {} microbatches, got {}", 2 * pp,
                                              microbatches),
                "raise the microbatch count (the authors' runtime asserts the same)");
  ActionSchedule out;
  for (int32_t r = 0; r < pp; ++r) {
    dualpipe_detail::RankOrder o(r, 2 * pp - 1 - r);
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
