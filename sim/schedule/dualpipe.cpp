#include "sim/schedule/dualpipe.h"

#include <algorithm>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/schedule/dualpipe_rank_order.h"

namespace lacuna::schedule {

ActionSchedule dualpipe_schedule(int32_t pp, int32_t microbatches) {
  if (pp < 2 || pp % 2 != 0)
    throw Error(SourceLocation{}, fmt::format("DualPipe needs an even pp of at least 2, got {}", pp),
                "use an even pipeline size (the authors' runtime asserts num_ranks % 2 == 0), or DualPipeV");
  if (microbatches < 2 * pp || microbatches % 2 != 0)
    throw Error(SourceLocation{}, fmt::format("DualPipe needs an even microbatch count of at least 2·pp = {}, got {}",
                                              2 * pp, microbatches),
                "raise the microbatch count to an even number (the authors' runtime asserts the same)");
  const int32_t half_ranks = pp / 2, half_microbatches = microbatches / 2;
  ActionSchedule out;
  for (int32_t r = 0; r < pp; ++r) {
    // Module 0 runs the pipeline that starts at rank 0, module 1 the other.
    // The authors' step() names them by phase, flipped on the second half
    // of the ranks, so that phase 0 is always the pipeline coming from the
    // nearer end.
    dualpipe_detail::RankOrder o(r, 2 * pp - 1 - r, 0, half_microbatches);
    const int flip = r >= half_ranks ? 1 : 0;
    const int p0 = flip, p1 = 1 - flip;
    const int32_t h = std::min(r, pp - 1 - r);  // half_rank
    const bool middle = r == half_ranks - 1 || r == half_ranks;
    // 1: forwards of phase 0.
    for (int32_t i = 0; i < 2 * (half_ranks - h - 1); ++i) o.forward(p0);
    // 2: forwards of both phases.
    for (int32_t i = 0; i < h + 1; ++i) {
      o.forward(p0);
      o.forward(p1);
    }
    // 3: backward input, weight, forward of phase 1 (zero bubble).
    for (int32_t i = 0; i < half_ranks - h - 1; ++i) {
      o.backward(p1, /*zero_bubble=*/true);
      o.weight();
      o.forward(p1);
    }
    // 4: the steady state, two overlapped pairs per step. The middle ranks
    // run their first pair back to back ("to further reduce bubble size").
    for (int32_t i = 0; i < half_microbatches - pp + h + 1; ++i) {
      if (i == 0 && middle) {
        o.forward(p0);
        o.backward(p1);
      } else {
        o.forward_backward(p0, p1);
      }
      o.forward_backward(p1, p0);
    }
    // 5: a backward of phase 1, then a pair.
    for (int32_t i = 0; i < half_ranks - h - 1; ++i) {
      o.backward(p1);
      o.forward_backward(p1, p0);
    }
    // 6: backwards of both phases; from the middle on (one pass earlier on
    // odd half-ranks) they defer their weight passes.
    const int32_t step6 = h + 1;
    bool zero_bubble = false;
    for (int32_t i = 0; i < step6; ++i) {
      if (i == step6 / 2 && h % 2 == 1) zero_bubble = true;
      o.backward(p1, zero_bubble);
      if (i == step6 / 2 && h % 2 == 0) zero_bubble = true;
      o.backward(p0, zero_bubble);
    }
    // 7: a deferred weight pass, then a zero-bubble backward of phase 0.
    for (int32_t i = 0; i < half_ranks - h - 1; ++i) {
      o.weight();
      o.backward(p0, /*zero_bubble=*/true);
    }
    // 8: the remaining weight passes.
    for (int32_t i = 0; i < h + 1; ++i) o.weight();
    if (!o.drained()) throw Error(SourceLocation{}, fmt::format("DualPipe rank {}: weight passes left over", r), "");
    out.push_back(o.take());
  }
  return out;
}

}  // namespace lacuna::schedule
