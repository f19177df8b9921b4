#include "sim/placement/optimus_timeline.h"

#include <algorithm>
#include <limits>

#include "sim/core/error.h"
#include "sim/engine/simulator.h"
#include "sim/placement/class_edit.h"

namespace lacuna::placement::optimus {
namespace {

constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();

BubbleKind kind_of_stream(ir::StreamKind k) {
  switch (k) {
    case ir::PP_RECV:
    case ir::PP_SEND:
      return BubbleKind::kPp;
    case ir::TP_COMM:
    case ir::CP_COMM:
      return BubbleKind::kTp;
    case ir::DP_COMM:
      return BubbleKind::kDp;
    default:
      return BubbleKind::kOther;
  }
}

// Records the compute stream of one representative rank per stage: every op's
// start and end, and for waits the kind of the stream that released them.
class ComputeRecorder : public engine::Observer {
 public:
  explicit ComputeRecorder(const ir::Program& program) : program_(program) {
    const int32_t stages = program.classes_size();
    slots_.resize(static_cast<size_t>(stages));
    for (int32_t c = 0; c < stages; ++c) {
      Slot& s = slots_[static_cast<size_t>(c)];
      s.stream = find_stream(program.classes(c), "compute");
      if (s.stream < 0) throw Error("Optimus: LLM class " + program.classes(c).name() + " has no compute stream");
      const size_t n = static_cast<size_t>(program.classes(c).streams(s.stream).ops_size());
      s.start.assign(n, kUnset);
      s.end.assign(n, kUnset);
      s.cause.assign(n, BubbleKind::kOther);
    }
  }

  void on_run_begin(const engine::RunInfo& info) override {
    rank_to_stage_.assign(static_cast<size_t>(program_.ranks_size()), -1);
    // The lowest simulated rank of each class stands for its stage.
    for (int32_t r : info.simulated_ranks) {
      const int32_t c = program_.ranks(r).class_id();
      Slot& s = slots_[static_cast<size_t>(c)];
      if (s.rank < 0 || r < s.rank) s.rank = r;
    }
    for (size_t c = 0; c < slots_.size(); ++c)
      if (slots_[c].rank >= 0) rank_to_stage_[static_cast<size_t>(slots_[c].rank)] = static_cast<int32_t>(c);
  }

  void on_op_end(const engine::OpSpan& span) override {
    const int32_t stage = rank_to_stage_[static_cast<size_t>(span.rank)];
    if (stage < 0) return;
    Slot& s = slots_[static_cast<size_t>(stage)];
    s.last_end = std::max(s.last_end, span.end.count());
    if (span.stream != s.stream) return;
    s.start[static_cast<size_t>(span.op)] = span.start.count();
    s.end[static_cast<size_t>(span.op)] = span.end.count();
  }

  void on_wait_end(const engine::OpSpan& span, const engine::WaitCause& cause) override {
    const int32_t stage = rank_to_stage_[static_cast<size_t>(span.rank)];
    if (stage < 0 || !cause.valid) return;
    Slot& s = slots_[static_cast<size_t>(stage)];
    if (span.stream != s.stream) return;
    const auto& cls = program_.classes(program_.ranks(span.rank).class_id());
    s.cause[static_cast<size_t>(span.op)] = kind_of_stream(cls.streams(cause.stream).kind());
  }

  struct Slot {
    int32_t rank = -1;
    int32_t stream = -1;
    int64_t last_end = 0;
    std::vector<int64_t> start, end;
    std::vector<BubbleKind> cause;
  };
  const std::vector<Slot>& slots() const { return slots_; }

 private:
  const ir::Program& program_;
  std::vector<Slot> slots_;
  std::vector<int32_t> rank_to_stage_;
};

bool is_kernel(const ir::Op& op) { return op.has_compute(); }

StageTimeline read_stage(const ir::RankClass& cls, const ComputeRecorder::Slot& slot, int32_t stage) {
  const auto& ops = cls.streams(slot.stream).ops();
  const int32_t n = ops.size();
  for (int32_t i = 0; i < n; ++i)
    if (slot.end[static_cast<size_t>(i)] == kUnset)
      throw Error("Optimus: LLM stage " + std::to_string(stage) + " compute op " + std::to_string(i) +
                  " did not run in the LLM-only simulation");
  StageTimeline t;
  t.rank = slot.rank;
  t.compute_stream = slot.stream;
  t.end_ns = slot.last_end;
  // The LLM's first pass kernel (the gradient buffer's memset at the
  // iteration start is DP_SYNC housekeeping, not the end of the PRE bubble).
  int32_t first_kernel = -1;
  for (int32_t i = 0; i < n && first_kernel < 0; ++i)
    if (is_kernel(ops[i]) && ops[i].phase() != ir::DP_SYNC) first_kernel = i;
  t.post_position = -1;
  for (int32_t i = 0; i < n && t.post_position < 0; ++i)
    if (ops[i].phase() == ir::OPTIMIZER_STEP) t.post_position = i;
  if (first_kernel < 0 || t.post_position < 0 || t.post_position < first_kernel)
    throw Error("Optimus: LLM stage " + std::to_string(stage) +
                " has no kernel before its optimizer step (the bubble scheduler needs both)");
  int32_t optimizer = -1;
  for (int32_t i = t.post_position; i < n && optimizer < 0; ++i)
    if (is_kernel(ops[i]) && ops[i].compute().op_class() == ir::OPTIMIZER) optimizer = i;
  if (optimizer < 0) throw Error("Optimus: LLM stage " + std::to_string(stage) + " has no optimizer kernel");
  // PRE encoder work goes after the iteration's gradient-buffer memsets
  // (zero_grad_buffer clears every module's gradients before any forward)
  // when they come first. Without overlapped parameter gathers the stream
  // first waits for the previous step's gathers, then zeroes: the work goes
  // before that wait, where the GPU idles, and the PRE bubble ends where the
  // memsets start (work that overruns it delays them and every LLM op after).
  t.pre_position = 0;
  t.pre_start_ns = 0;
  t.pre_end_ns = slot.start[static_cast<size_t>(first_kernel)];
  if (n > 0 && is_kernel(ops[0])) {
    while (t.pre_position < n && is_kernel(ops[t.pre_position]) && ops[t.pre_position].phase() == ir::DP_SYNC)
      ++t.pre_position;
    if (t.pre_position > 0) t.pre_start_ns = slot.end[static_cast<size_t>(t.pre_position - 1)];
  } else {
    for (int32_t i = 0; i < first_kernel; ++i)
      if (is_kernel(ops[i])) {
        t.pre_end_ns = slot.start[static_cast<size_t>(i)];
        break;
      }
  }
  t.post_start_ns = slot.start[static_cast<size_t>(t.post_position)];
  t.post_end_ns = slot.start[static_cast<size_t>(optimizer)];
  // The whole optimizer step as the LLM-only run timed it, from its first
  // kernel to the compute stream's last op: the gradient norm's all-reduce
  // and host syncs, the clip, Adam, the weight copy, the step statistics.
  t.optimizer_ns = slot.end[static_cast<size_t>(n - 1)] - t.post_end_ns;
  for (const ir::Stream& st : cls.streams())
    for (const ir::Op& op : st.ops())
      t.step_sync |= op.has_collective() && op.phase() == ir::OPTIMIZER_STEP;

  // Blocked waits in [from, to), all or only those the DP stream released.
  auto blocked = [&](int32_t from, int32_t to, bool dp_only) {
    int64_t total = 0;
    for (int32_t i = from; i < to; ++i)
      if (ops[i].has_wait() && (!dp_only || slot.cause[static_cast<size_t>(i)] == BubbleKind::kDp))
        total += slot.end[static_cast<size_t>(i)] - slot.start[static_cast<size_t>(i)];
    return total;
  };
  t.pre_wait_ns = blocked(0, first_kernel, false);
  t.pre_dp_ns = blocked(0, first_kernel, true);
  t.post_wait_ns = blocked(t.post_position, optimizer, false);
  t.post_dp_ns = blocked(t.post_position, optimizer, true);

  t.first_backward_ns = std::numeric_limits<int64_t>::max();
  for (int32_t i = 0; i < n; ++i) {
    if (!is_kernel(ops[i])) continue;
    const ir::Phase ph = ops[i].phase();
    if (ph == ir::FORWARD) t.last_forward_end_ns = std::max(t.last_forward_end_ns, slot.end[static_cast<size_t>(i)]);
    if (ph == ir::BACKWARD_INPUT || ph == ir::BACKWARD_WEIGHT || ph == ir::RECOMPUTE)
      t.first_backward_ns = std::min(t.first_backward_ns, slot.start[static_cast<size_t>(i)]);
  }
  if (t.first_backward_ns == std::numeric_limits<int64_t>::max()) t.first_backward_ns = t.post_start_ns;

  int64_t memory = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (!is_kernel(ops[i])) continue;
    ++t.kernels;
    memory += ops[i].compute().memory_delta_bytes();
    t.peak_activation = std::max(t.peak_activation, Bytes(memory));
  }

  // Runs of consecutive waits between the first kernel and the POST position.
  for (int32_t i = first_kernel + 1; i < t.post_position;) {
    if (!ops[i].has_wait()) {
      ++i;
      continue;
    }
    const int32_t first = i;
    int64_t longest = 0;
    BubbleKind kind = BubbleKind::kOther;
    for (; i < t.post_position && ops[i].has_wait(); ++i) {
      const int64_t blocked = slot.end[static_cast<size_t>(i)] - slot.start[static_cast<size_t>(i)];
      if (blocked > longest) {
        longest = blocked;
        kind = slot.cause[static_cast<size_t>(i)];
      }
    }
    if (longest <= 0) continue;
    Bubble b;
    b.start_ns = slot.start[static_cast<size_t>(first)];
    b.end_ns = slot.end[static_cast<size_t>(i - 1)];
    b.position = first;
    b.kind = kind;
    t.bubbles.push_back(b);
  }
  return t;
}

}  // namespace

const char* bubble_kind_name(BubbleKind kind) {
  switch (kind) {
    case BubbleKind::kPre:
      return "PRE";
    case BubbleKind::kPost:
      return "POST";
    case BubbleKind::kPp:
      return "PP";
    case BubbleKind::kTp:
      return "TP";
    case BubbleKind::kDp:
      return "DP";
    case BubbleKind::kOther:
      return "other";
  }
  return "?";
}

int64_t StageTimeline::bubble_ns() const {
  int64_t total = pre_end_ns + (post_end_ns - post_start_ns);
  for (const Bubble& b : bubbles) total += b.length();
  return total;
}

BubbleProfile bubble_profile(const LlmTimeline& llm) {
  BubbleProfile sum;
  for (const StageTimeline& st : llm.stages) {
    sum.dp_all_gather_ns += st.pre_dp_ns;
    sum.pp_warmup_ns += st.pre_wait_ns - st.pre_dp_ns;
    sum.dp_reduce_scatter_ns += st.post_dp_ns;
    sum.pp_cooldown_ns += st.post_wait_ns - st.post_dp_ns;
    for (const Bubble& b : st.bubbles) {
      if (b.kind == BubbleKind::kTp) {
        sum.tp_ns += b.length();
      } else if (b.kind == BubbleKind::kPp && b.end_ns <= st.first_backward_ns) {
        sum.pp_warmup_ns += b.length();  // waiting for the next input before the first backward
      } else if (b.kind == BubbleKind::kPp && b.start_ns >= st.last_forward_end_ns) {
        sum.pp_cooldown_ns += b.length();  // waiting for the next gradient after the last forward
      } else {
        sum.pp_other_ns += b.length();
      }
    }
  }
  // Every stage has the same number of GPUs: the mean over stages is the mean over GPUs.
  const auto n = static_cast<int64_t>(std::max<size_t>(1, llm.stages.size()));
  return {sum.dp_all_gather_ns / n, sum.pp_warmup_ns / n,    sum.pp_other_ns / n,
          sum.tp_ns / n,            sum.pp_cooldown_ns / n, sum.dp_reduce_scatter_ns / n};
}

LlmTimeline llm_timeline(const ir::Program& llm, const cost::CostModel& cost) {
  if (llm.info().cp() > 1)
    throw Error("Optimus: the LLM has cp = " + std::to_string(llm.info().cp()) +
                "; the bubble scheduler handles cp = 1 only");
  engine::Simulator sim(llm, cost, {.fold = true});
  ComputeRecorder recorder(llm);
  sim.add_observer(&recorder);
  const auto result = sim.run();

  LlmTimeline out;
  out.iteration_ns = result.end_time.count();
  out.microbatches = llm.info().num_microbatches();
  for (int32_t c = 0; c < llm.classes_size(); ++c) {
    const auto& slot = recorder.slots()[static_cast<size_t>(c)];
    if (slot.rank < 0) throw Error("Optimus: LLM class " + std::to_string(c) + " was not simulated");
    out.stages.push_back(read_stage(llm.classes(c), slot, c));
  }

  // Dependency points on stage 0, chunk 0.
  const int32_t m = out.microbatches;
  const auto& slot = recorder.slots()[0];
  const auto& ops = llm.classes(0).streams(slot.stream).ops();
  out.forward_start_ns.assign(static_cast<size_t>(m), kUnset);
  out.backward_end_ns.assign(static_cast<size_t>(m), kUnset);
  out.forward_position.assign(static_cast<size_t>(m), -1);
  out.backward_position.assign(static_cast<size_t>(m), -1);
  for (int32_t i = 0; i < ops.size(); ++i) {
    const ir::Op& op = ops[i];
    if (op.chunk() != 0 || op.microbatch() < 0 || op.microbatch() >= m) continue;
    const size_t mb = static_cast<size_t>(op.microbatch());
    if (op.phase() == ir::FORWARD) {
      if (out.forward_position[mb] < 0) out.forward_position[mb] = i;
      if (is_kernel(op) && out.forward_start_ns[mb] == kUnset)
        out.forward_start_ns[mb] = slot.start[static_cast<size_t>(i)];
    } else if (op.phase() == ir::BACKWARD_INPUT && is_kernel(op)) {
      out.backward_end_ns[mb] = slot.end[static_cast<size_t>(i)];
      out.backward_position[mb] = i + 1;
    }
  }
  for (int32_t i = 0; i < m; ++i)
    if (out.forward_start_ns[static_cast<size_t>(i)] == kUnset || out.backward_end_ns[static_cast<size_t>(i)] == kUnset)
      throw Error("Optimus: LLM stage 0 has no forward / input-gradient kernel of microbatch " + std::to_string(i) +
                  " on its first model chunk");
  return out;
}

}  // namespace lacuna::placement::optimus
