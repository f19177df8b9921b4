#include "sim/schedule/validate_actions.h"

#include <vector>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna::schedule {
namespace {

// Pass slots per (stage, microbatch): where each ran (rank, step), or -1.
enum Slot : int { kF = 0, kB = 1, kI = 2, kW = 3, kR = 4, kSlots = 5 };

// The pass's slot: Pass's order (schedule.h); -1 for what is not F, B, I, W or R.
int slot_of(ActionType t) {
  const std::optional<Pass> p = pass_of(t);
  return p ? static_cast<int>(*p) : -1;
}
static_assert(static_cast<int>(Pass::kForward) == kF && static_cast<int>(Pass::kBackward) == kB &&
              static_cast<int>(Pass::kBackwardInput) == kI && static_cast<int>(Pass::kBackwardWeight) == kW &&
              static_cast<int>(Pass::kRecompute) == kR);

constexpr const char* kSlotName[kSlots] = {"F", "B", "I", "W", "R"};

class Checker {
 public:
  Checker(const ActionSchedule& s, const PipelineShape& shape, const std::string& file)
      : s_(s), shape_(shape), file_(file), stages_(shape.pp * shape.virtual_stages) {}

  void run() {
    if (static_cast<int32_t>(s_.size()) != shape_.pp)
      throw Error(SourceLocation{file_, 0, 0, "schedule"},
                  fmt::format("the schedule lists {} ranks, but the pipeline has pp = {}", s_.size(), shape_.pp),
                  "write one line per pipeline rank");
    // Every (stage, microbatch) needs a forward and a backward: a file with
    // fewer passes is refused before the per-pass table (stages × microbatches)
    // is sized, so that a huge scenario batch cannot make it large.
    int64_t passes = 0;
    for (const RankActions& r : s_)
      for (const auto& a : r)
        if (a && a->module.empty() && slot_of(a->type) >= 0) ++passes;
    // A microbatch passes through every model stage once (bidirectional:
    // the pp stages of its own pipeline).
    const int32_t visited = model_stages(shape_);
    const int64_t needed = 2 * static_cast<int64_t>(visited) * shape_.microbatches;
    if (passes < needed)
      throw Error(SourceLocation{file_, 0, 0, "schedule"},
                  fmt::format("the schedule lists {} passes, but {} stages × {} microbatches need at least {} (a "
                              "forward and a backward each)",
                              passes, visited, shape_.microbatches, needed),
                  "list every stage's forward and backward of every microbatch");
    where_.assign(static_cast<size_t>(stages_) * static_cast<size_t>(shape_.microbatches) * kSlots, {-1, -1});
    done_.assign(where_.size(), false);
    place();
    complete();
    execute();
  }

 private:
  struct At {
    int32_t rank, step;
  };

  size_t index(int32_t stage, int32_t mb, int slot) const {
    return (static_cast<size_t>(stage) * static_cast<size_t>(shape_.microbatches) + static_cast<size_t>(mb)) * kSlots +
           static_cast<size_t>(slot);
  }

  [[noreturn]] void refuse(int32_t rank, int32_t step, const std::string& what, const std::string& fix) const {
    refuse_at(s_, rank, static_cast<size_t>(step), file_, what, fix);
  }

  // Ranges, layout and duplicates.
  void place() {
    for (int32_t r = 0; r < static_cast<int32_t>(s_.size()); ++r) {
      const RankActions& rank = s_[static_cast<size_t>(r)];
      for (int32_t step = 0; step < static_cast<int32_t>(rank.size()); ++step) {
        const auto& a = rank[static_cast<size_t>(step)];
        if (!a || !a->module.empty()) continue;
        if (a->stage >= stages_)
          refuse(r, step,
                 fmt::format("{} names stage {}, but the pipeline has {} stages (pp {} × virtual stages {})",
                             to_string(*a), a->stage, stages_, shape_.pp, shape_.virtual_stages),
                 fmt::format("number stages 0 to {}", stages_ - 1));
        if (has_microbatch(a->type) && a->microbatch >= shape_.microbatches)
          refuse(r, step,
                 fmt::format("{} names microbatch {}, but the iteration has {}", to_string(*a), a->microbatch,
                             shape_.microbatches),
                 fmt::format("number microbatches 0 to {}", shape_.microbatches - 1));
        if (has_microbatch(a->type) && a->microbatch >= 0 && !stage_runs(shape_, a->stage, a->microbatch))
          refuse(r, step,
                 fmt::format("{} names microbatch {}, which the other pipeline runs ({})", to_string(*a),
                             a->microbatch, layout_rule(shape_)),
                 "move the action to a stage of its microbatch's pipeline");
        if (rank_of_stage(shape_, a->stage) != r)
          refuse(r, step,
                 fmt::format("{} names stage {}, which runs on rank {} ({})", to_string(*a), a->stage,
                             rank_of_stage(shape_, a->stage), layout_rule(shape_)),
                 "move the action to its rank's line");
        const int slot = slot_of(a->type);
        if (slot < 0) continue;
        At& at = where_[index(a->stage, a->microbatch, slot)];
        if (at.rank >= 0)
          refuse(r, step, fmt::format("{} runs twice (first at step {})", to_string(*a), at.step),
                 "list each pass of each microbatch once");
        at = {r, step};
      }
    }
  }

  // Every (stage, microbatch) has F and (B, or I and W).
  void complete() const {
    for (int32_t st = 0; st < stages_; ++st) {
      const int32_t rank = rank_of_stage(shape_, st);
      const int32_t last_step = static_cast<int32_t>(s_[static_cast<size_t>(rank)].size()) - 1;
      for (int32_t mb = 0; mb < shape_.microbatches; ++mb) {
        if (!stage_runs(shape_, st, mb)) continue;
        const At f = where_[index(st, mb, kF)], b = where_[index(st, mb, kB)], i = where_[index(st, mb, kI)],
                 w = where_[index(st, mb, kW)];
        auto missing = [&](const char* pass, const char* fix) {
          refuse(rank, std::max(0, last_step),
                 fmt::format("stage {} never runs {}{}{}", st, st, pass, mb),
                 fix);
        };
        if (f.rank < 0) missing("F", "add the forward");
        if (b.rank >= 0 && (i.rank >= 0 || w.rank >= 0))
          refuse(b.rank, b.step,
                 fmt::format("{}B{} is a full backward, but the same microbatch also has {}", st, mb,
                             i.rank >= 0 ? fmt::format("{}I{}", st, mb) : fmt::format("{}W{}", st, mb)),
                 "use B alone, or I and W");
        if (b.rank < 0 && i.rank < 0) missing("B", "add its backward (B, or I and W)");
        if (i.rank >= 0 && w.rank < 0) missing("W", "a backward-input needs its backward-weight");
        if (w.rank >= 0 && i.rank < 0) missing("I", "a backward-weight needs its backward-input");
        // A recompute re-runs the forward for the backward that follows it
        // (both on this rank: the stage's).
        if (const At rc = where_[index(st, mb, kR)]; rc.rank >= 0) {
          const At back = b.rank >= 0 ? b : i;
          if (rc.step < f.step)
            refuse(rc.rank, rc.step, fmt::format("{}R{} recomputes a forward that has not run ({}F{} is at step {})",
                                                 st, mb, st, mb, f.step),
                   "move the recompute after its forward");
          if (rc.step > back.step)
            refuse(rc.rank, rc.step,
                   fmt::format("{}R{} comes after its backward {}{}{} (step {})", st, mb, st, b.rank >= 0 ? "B" : "I",
                               mb, back.step),
                   "move the recompute before its backward");
        }
      }
    }
  }

  // What action `a` waits for; -1 slot when ready.
  struct Need {
    int32_t stage = -1, mb = -1;
    int slot = -1;
  };
  Need need(const ScheduleAction& a) const {
    const int32_t st = a.stage, mb = a.microbatch;
    auto missing = [&](int32_t s, int slot) { return !done_[index(s, mb, slot)]; };
    switch (slot_of(a.type)) {
      case kF:
        if (has_previous_stage(shape_, st) && missing(st - 1, kF)) return {st - 1, mb, kF};
        return {};
      case kB:
      case kI:
        if (missing(st, kF)) return {st, mb, kF};
        if (has_next_stage(shape_, st)) {
          const int down = where_[index(st + 1, mb, kB)].rank >= 0 ? kB : kI;
          if (missing(st + 1, down)) return {st + 1, mb, down};
        }
        return {};
      case kW:
        if (missing(st, kI)) return {st, mb, kI};
        return {};
      case kR:
        if (missing(st, kF)) return {st, mb, kF};
        return {};
      default: return {};
    }
  }

  // Runs every rank as far as it can; a state where none can move is a deadlock.
  void execute() {
    std::vector<size_t> next(s_.size(), 0);
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t r = 0; r < s_.size(); ++r) {
        const RankActions& rank = s_[r];
        while (next[r] < rank.size()) {
          const auto& a = rank[next[r]];
          if (a && a->module.empty() && slot_of(a->type) >= 0) {
            if (need(*a).slot >= 0) break;
            done_[index(a->stage, a->microbatch, slot_of(a->type))] = true;
          }
          ++next[r];
          moved = true;
        }
      }
    }
    std::string stuck;
    int32_t first = -1;
    for (size_t r = 0; r < s_.size(); ++r) {
      if (next[r] >= s_[r].size()) continue;
      const ScheduleAction& a = *s_[r][next[r]];
      const Need n = need(a);
      const At dep = where_[index(n.stage, n.mb, n.slot)];
      if (first < 0) first = static_cast<int32_t>(r);
      stuck += fmt::format("\n  rank {} step {}: {} waits for {}{}{} (rank {} step {}{})", r, next[r], to_string(a),
                           n.stage, kSlotName[n.slot], n.mb, dep.rank, dep.step,
                           dep.rank == static_cast<int32_t>(r) ? ", later on the same rank" : "");
    }
    if (first >= 0)
      refuse(first, static_cast<int32_t>(next[static_cast<size_t>(first)]),
             "the schedule deadlocks: no rank can run its next action" + stuck,
             "reorder the passes so each runs after what it needs (a forward after the previous stage's, a backward "
             "after its forward and the next stage's backward)");
  }

  const ActionSchedule& s_;
  const PipelineShape& shape_;
  const std::string& file_;
  const int32_t stages_;
  std::vector<At> where_;
  std::vector<bool> done_;
};

}  // namespace

void validate_actions(const ActionSchedule& s, const PipelineShape& shape, const std::string& file) {
  Checker(s, shape, file).run();
}

}  // namespace lacuna::schedule
