// The greedy follows zbv.py step by step (see zbv.h); names follow its
// structure: `cat` 0, 1, 2 are F, B (input gradient) and W, and its `chunk`
// index counts passes in the order they run: for F, chunk 0 is the first
// half of the V (model chunk 0); for B and W, chunk 0 is the second half
// (model chunk 1), whose backward runs first.
#include "sim/schedule/zbv.h"

#include <algorithm>
#include <array>
#include <deque>
#include <string>
#include <tuple>
#include <vector>

#include "sim/core/error.h"

namespace lacuna::schedule {
namespace {

struct Placed {
  int cat, chunk;
  int32_t micro;
};

struct Attempt {
  std::vector<std::vector<Placed>> order;
  std::vector<int64_t> end_time;
  int64_t max_bubble = 0;
};

class ZbvGreedy {
 public:
  ZbvGreedy(int32_t stages, int32_t micro, const ZbvCosts& c)
      : s_(stages), m_(micro), cost_{c.forward, c.backward_input, c.backward_weight}, comm_(c.comm),
        mem_cost_{c.forward_memory, c.backward_memory, c.weight_memory},
        max_mem_(c.max_memory > 0 ? c.max_memory : c.forward_memory * stages * 2) {}

  Attempt attempt(bool fill_f, bool fill_b, const std::vector<int64_t>* approved) const {
    State st(*this, approved);
    st.run(fill_f, fill_b);
    Attempt out{std::move(st.order), std::move(st.end_time), st.max_stage_bubble(-1)};
    // zbv.py: retry with this attempt's bubbles as the budget while that
    // lowers the largest bubble.
    if (st.max_approved < 0 || out.max_bubble < st.max_approved) {
      Attempt again = attempt(fill_f, fill_b, &st.stage_bubble);
      if (again.max_bubble < out.max_bubble) return again;
    }
    return out;
  }

 private:
  size_t id(int cat, int chunk, int32_t stage, int32_t micro) const {
    return static_cast<size_t>(((static_cast<int64_t>(cat) * 2 + chunk) * s_ + stage) * m_ + micro);
  }

  struct State {
    const ZbvGreedy& g;
    std::vector<std::array<int32_t, 6>> count;
    std::vector<int64_t> end_time, cur_time, mem, stage_bubble;
    std::vector<std::deque<std::pair<int, int32_t>>> pending_w;  // (chunk, micro)
    std::vector<std::vector<Placed>> order;
    std::vector<int64_t> approved;
    int64_t max_approved = -1;

    State(const ZbvGreedy& greedy, const std::vector<int64_t>* approved_bubble)
        : g(greedy), count(static_cast<size_t>(greedy.s_), std::array<int32_t, 6>{}),
          end_time(static_cast<size_t>(6) * greedy.s_ * greedy.m_, -1), cur_time(greedy.s_, 0), mem(greedy.s_, 0),
          stage_bubble(greedy.s_, 0), pending_w(greedy.s_), order(greedy.s_),
          approved(approved_bubble ? *approved_bubble : std::vector<int64_t>(greedy.s_, -1)) {
      max_approved = *std::max_element(approved.begin(), approved.end());
    }

    int32_t& cnt(int32_t stage, int cat, int chunk) { return count[stage][cat * 2 + chunk]; }

    // Python's end_time[-1] where zbv.py indexes with fa_id = -1.
    int64_t end_of(int64_t fa_id) const {
      return fa_id >= 0 ? end_time[static_cast<size_t>(fa_id)] : end_time.back();
    }

    int64_t max_stage_bubble(int32_t stage) const {
      int64_t m = 0;
      for (int64_t b : stage_bubble) m = std::max(m, b);
      if (stage >= 0) m = std::max(m, max_approved - approved[stage]);
      return m;
    }

    void put(int cat, int chunk, int32_t stage) {
      const int64_t no_bubble = cur_time[stage] + g.cost_[cat];
      int64_t t = no_bubble;
      const int32_t k = cnt(stage, cat, chunk);
      if (k >= g.m_) throw InternalError("zbv: a pass scheduled past the last microbatch (internal)");
      if (mem[stage] + g.mem_cost_[cat] > g.max_mem_)
        throw Error(field("max_memory"), "the ZB-V schedule needs more activation memory than the limit allows",
                    "raise the memory limit (default: 2·pp forwards' worth)");
      if (cat < 2 && chunk == 1 && stage < g.s_ - 1)
        t = std::max(t, end_time[g.id(cat, chunk, stage + 1, k)] + g.comm_ + g.cost_[cat]);
      if (cat < 2 && chunk == 0 && stage > 0)
        t = std::max(t, end_time[g.id(cat, chunk, stage - 1, k)] + g.comm_ + g.cost_[cat]);
      if (count[stage][0] > 0) stage_bubble[stage] += t - no_bubble;
      end_time[g.id(cat, chunk, stage, k)] = t;
      cur_time[stage] = t;
      mem[stage] += g.mem_cost_[cat];
      order[stage].push_back({cat, chunk, k});
      if (cat == 1) pending_w[stage].emplace_back(chunk, k);
      ++cnt(stage, cat, chunk);
    }

    void put_w(int32_t stage) {
      const int chunk = pending_w[stage].front().first;
      pending_w[stage].pop_front();
      put(2, chunk, stage);
    }

    // Fill the wait for `fa_id` with pending W passes, then maybe one more.
    void fill(int32_t i, int64_t fa_id, bool extra) {
      while (!pending_w[i].empty() && fa_id >= 0 && end_of(fa_id) + g.comm_ >= cur_time[i] + g.cost_[2]) put_w(i);
      if (!pending_w[i].empty() && end_of(fa_id) + g.comm_ - cur_time[i] > max_stage_bubble(i) - stage_bubble[i] &&
          extra)
        put_w(i);
    }

    void run(bool fill_f, bool fill_b) {
      const int32_t S = g.s_, M = g.m_;
      // Warm-up: chunk 0's forwards down the V, chunk 1's back up, each rank
      // adding chunk-0 forwards while memory allows and the turn is not due.
      for (int32_t i = 0; i < S; ++i) put(0, 0, i);
      for (int32_t i = S - 1; i >= 0; --i) {
        if (i == S - 1) {
          put(0, 1, i);
          continue;
        }
        const int64_t tmp = end_time[g.id(0, 1, i + 1, 0)] + g.comm_;
        while (mem[i] + g.mem_cost_[0] * (2 + i * 2) <= g.max_mem_ && cur_time[i] + g.cost_[0] <= tmp &&
               count[i][0] < M)
          for (int32_t j = 0; j <= i; ++j) put(0, 0, j);
        put(0, 1, i);
      }
      int iter_chunk = 0;
      for (int32_t i = 1; i < S; ++i) {
        while (count[i][0] + count[i][1] < count[i - 1][0] + count[i - 1][1] ||
               (count[i][1] <= count[i - 1][1] && count[i - 1][1] < M)) {
          for (int32_t j = S - 1; j >= i; --j)
            if (count[j][iter_chunk] < M) put(0, iter_chunk, j);
          iter_chunk = 1 - iter_chunk;
        }
      }
      // Steady state: per round, every rank's next backward, then forward.
      for (int32_t round = 0; round < 2 * M; ++round) {
        for (int32_t i = 0; i < S; ++i)
          while (mem[i] + g.mem_cost_[1] > g.max_mem_) {
            if (pending_w[i].empty()) throw InternalError("zbv: memory full with no W pending (internal)");
            put_w(i);
          }
        std::vector<int32_t> b0, b1;
        for (int32_t i = 0; i < S; ++i) {
          if (count[i][3] >= count[i][2]) {
            b0.push_back(i);
          } else if (i == S - 1) {
            b1.push_back(i);
          } else {
            const int64_t fa = static_cast<int64_t>(g.id(1, 1, i + 1, count[i][3]));
            if (end_time[static_cast<size_t>(fa)] >= 0 || count[i][2] >= M)
              b1.push_back(i);
            else
              b0.push_back(i);
          }
        }
        std::vector<std::pair<int32_t, int>> b_ranks;
        for (auto it = b1.rbegin(); it != b1.rend(); ++it) b_ranks.emplace_back(*it, 1);
        for (int32_t i : b0) b_ranks.emplace_back(i, 0);
        for (const auto& [i, chunk] : b_ranks) {
          int64_t fa = -1;
          if (chunk == 1 && i < S - 1) fa = static_cast<int64_t>(g.id(1, 1, i + 1, count[i][3]));
          if (chunk == 0 && i > 0) fa = static_cast<int64_t>(g.id(1, 0, i - 1, count[i][2]));
          fill(i, fa, chunk == 1 || fill_b);
          put(1, chunk, i);
        }
        for (int32_t i = 0; i < S; ++i) {
          if (count[i][1] >= M) continue;
          int item = -1;
          if (count[i][1] >= count[i][0]) {
            item = 0;
          } else if (i == S - 1) {
            item = 1;
          } else if (end_time[g.id(0, 1, i + 1, count[i][1])] >= 0) {
            item = 1;
          } else if (count[i][0] < M) {
            if (i == 0 || end_time[g.id(0, 0, i - 1, count[i][0])] >= 0) item = 0;
          }
          if (item < 0) continue;
          while (mem[i] + g.mem_cost_[0] > g.max_mem_) {
            if (pending_w[i].empty()) throw InternalError("zbv: memory full with no W pending (internal)");
            put_w(i);
          }
          int64_t fa = -1;
          if (item == 0 && i > 0) fa = static_cast<int64_t>(g.id(0, 0, i - 1, count[i][0]));
          if (item == 1 && i < S - 1) fa = static_cast<int64_t>(g.id(0, 1, i + 1, count[i][1]));
          fill(i, fa, fill_f);
          put(0, item, i);
        }
      }
      for (int32_t i = 0; i < S; ++i)
        while (!pending_w[i].empty()) put_w(i);
    }
  };

  int32_t s_, m_;
  std::array<int64_t, 3> cost_;
  int64_t comm_;
  std::array<int64_t, 3> mem_cost_;
  int64_t max_mem_;
};

}  // namespace

ActionSchedule zbv_schedule(int32_t pp, int32_t microbatches, const ZbvCosts& costs) {
  if (pp < 1 || microbatches < 1)
    throw Error(field("pp"), "ZB-V needs at least one pipeline rank and one microbatch, got pp " + std::to_string(pp) +
                                 " and " + std::to_string(microbatches) + " microbatches");
  const ZbvGreedy greedy(pp, microbatches, costs);
  // create_schedule: the best of the four fill variants, the first on ties.
  Attempt best;
  bool have = false;
  for (const bool fill_b : {true, false})
    for (const bool fill_f : {true, false}) {
      Attempt a = greedy.attempt(fill_f, fill_b, nullptr);
      if (!have || a.max_bubble < best.max_bubble) {
        best = std::move(a);
        have = true;
      }
    }
  PipelineShape shape{.pp = pp, .virtual_stages = 2, .microbatches = microbatches};
  shape.layout = StageLayout::kV;
  ActionSchedule out(static_cast<size_t>(pp));
  for (int32_t r = 0; r < pp; ++r)
    for (const Placed& p : best.order[static_cast<size_t>(r)]) {
      const int model_chunk = p.cat == 0 ? p.chunk : 1 - p.chunk;
      ScheduleAction a;
      a.type = p.cat == 0 ? ActionType::kForward : p.cat == 1 ? ActionType::kBackwardInput : ActionType::kBackwardWeight;
      a.stage = virtual_stage(shape, r, model_chunk);
      a.microbatch = p.micro;
      out[static_cast<size_t>(r)].push_back(std::move(a));
    }
  return out;
}

}  // namespace lacuna::schedule
