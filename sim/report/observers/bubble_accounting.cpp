#include "sim/report/observers/bubble_accounting.h"

#include <algorithm>
#include <cmath>

#include "sim/cost/memory_peak.h"
#include "sim/report/analyses/comm_kind.h"

namespace lacuna::report {

std::string_view bubble_key(Bubble b) {
  switch (b) {
    case Bubble::kPpWarmup: return "pp_warmup";
    case Bubble::kPpCooldown: return "pp_cooldown";
    case Bubble::kPpOther: return "pp_other";
    case Bubble::kTpExposed: return "tp_exposed";
    case Bubble::kCpExposed: return "cp_exposed";
    case Bubble::kDpExposed: return "dp_exposed";
    case Bubble::kPpExposed: return "pp_exposed";
    case Bubble::kHostOverhead: return "host_overhead";
    case Bubble::kBoundaryExposed: return "boundary_exposed";
    case Bubble::kEncoderCommExposed: return "encoder_comm_exposed";
    case Bubble::kMoeImbalance: return "moe_imbalance";
    case Bubble::kEpExposed: return "ep_exposed";
  }
  return "?";
}

TimeNs RankAccount::idle() const {
  TimeNs sum;
  for (TimeNs t : bubbles) sum += t;
  return sum;
}

Bubble exposed_category(CommKind kind) {
  switch (kind) {
    case CommKind::kTp: return Bubble::kTpExposed;
    case CommKind::kCp: return Bubble::kCpExposed;
    case CommKind::kDp: return Bubble::kDpExposed;
    case CommKind::kBoundary: return Bubble::kBoundaryExposed;
    case CommKind::kEncoder: return Bubble::kEncoderCommExposed;
    case CommKind::kEp: return Bubble::kEpExposed;
    default: return Bubble::kPpExposed;
  }
}

namespace {

TimeNs& slot(RankAccount& acc, Bubble b) { return acc.bubbles[static_cast<int>(b)]; }

}  // namespace

Bytes BubbleAccounting::estimate_bytes(int64_t all_ranks, int64_t simulated, int64_t represented) {
  // index_of_rank_, then per simulated rank its account and live state
  // (and the summary's copy of the account), and the ranks it represents.
  return Bytes(all_ranks * static_cast<int64_t>(sizeof(int32_t)) +
               simulated * static_cast<int64_t>(2 * sizeof(RankAccount) + sizeof(Live)) +
               represented * static_cast<int64_t>(2 * sizeof(int32_t)));
}

namespace {

// Whether the program's expert loads differ between EP ranks: routing drawn
// per microbatch, not balanced, and not padded to capacity. Only then is a
// wait for EP peers load imbalance; otherwise it is a stall like any other
// wait for peers (a late pipeline stage, a straggler), attributed as such.
bool routing_draws(const ir::Program& program) {
  if (!program.info().has_moe()) return false;
  const ir::MoeInfo& moe = program.info().moe();
  return moe.routing().distribution() != scenario::ROUTING_BALANCED && !moe.pad_to_capacity();
}

}  // namespace

void BubbleAccounting::on_run_begin(const engine::RunInfo& info) {
  program_ = info.program;
  const ir::Program& p = *program_;
  index_of_rank_.assign(static_cast<size_t>(p.ranks_size()), -1);
  accounts_.clear();
  live_.clear();
  iterations_ = std::max(1, info.iterations);
  iteration_ends_.assign(static_cast<size_t>(iterations_), TimeNs::zero());
  accounts_.reserve(info.simulated_ranks.size());
  live_.reserve(info.simulated_ranks.size());

  capacity_ = cost::hbm_capacity_bytes(p.cluster());
  fragmentation_ = cost::allocator_fragmentation(p.cluster());

  for (size_t i = 0; i < info.simulated_ranks.size(); ++i) {
    const int32_t rank = info.simulated_ranks[i];
    index_of_rank_[static_cast<size_t>(rank)] = static_cast<int32_t>(i);
    Live live;
    live.class_id = p.ranks(rank).class_id();
    const ir::RankClass& cls = p.classes(live.class_id);
    for (int s = 0; s < cls.streams_size(); ++s) {
      if (cls.streams(s).kind() == ir::COMPUTE) {
        live.main_stream = s;
        break;
      }
    }

    RankAccount acc;
    acc.rank = rank;
    acc.represents = i < info.represents.size() ? info.represents[i] : std::vector<int32_t>{rank};
    acc.baseline_memory = cost::baseline_bytes(cls.memory());
    acc.peak_memory = acc.baseline_memory;
    accounts_.push_back(std::move(acc));
    live_.push_back(live);
  }
}

void BubbleAccounting::stall(Live& live, RankAccount& acc, TimeNs duration) {
  if (duration <= TimeNs::zero()) return;
  // The main stream runs its ops in order, so "no forward has ended yet" means
  // this stall lies before the first forward starts.
  if (!live.seen_forward) {
    slot(acc, Bubble::kPpWarmup) += duration;
  } else {
    live.pending_stall += duration;  // other or cool-down: decided by whether a backward follows
  }
}

void BubbleAccounting::idle_span(Live& live, RankAccount& acc, TimeNs from, TimeNs to) {
  if (to > from) stall(live, acc, to - from);
}

void BubbleAccounting::on_op_end(const engine::OpSpan& span) {
  const int32_t idx = index_of_rank_[static_cast<size_t>(span.rank)];
  if (idx < 0) return;
  Live& live = live_[static_cast<size_t>(idx)];
  RankAccount& acc = accounts_[static_cast<size_t>(idx)];
  const ir::Op& op = *span.ir;
  if (span.iteration < iteration_ends_.size() && span.end > iteration_ends_[span.iteration]) {
    iteration_ends_[span.iteration] = span.end;
  }

  if (op.has_compute() && op.compute().memory_delta_bytes() != 0) {
    live.activations += op.compute().memory_delta_bytes();
    if (live.activations > acc.activation_peak.count()) {
      acc.activation_peak = Bytes(live.activations);
      acc.peak_memory =
          cost::memory_peak_bytes(acc.baseline_memory, Bytes(live.activations), fragmentation_);
    }
  }
  if (op.has_compute() && op.module() > 0 &&
      program_->classes(live.class_id).streams(span.stream).kind() == ir::COMPUTE) {
    acc.encoder_compute += span.end - span.start;
  }
  if (span.stream != live.main_stream) return;

  if (span.iteration != live.iteration) {
    // The main stream moved on to the next iteration: what stalled since the
    // last backward was the previous iteration's cool-down, and the new one
    // warms up again until its first forward.
    slot(acc, Bubble::kPpCooldown) += live.pending_stall;
    live.pending_stall = TimeNs::zero();
    live.seen_forward = false;
    live.iteration = span.iteration;
  }
  idle_span(live, acc, live.cursor, span.ready);
  // Until its host issued the op the stream idles for the host, whatever the
  // op; the rest is attributed from `issued` on. Clamped: an observer source
  // that leaves `issued` unset (0) means a host that was never late.
  const TimeNs issued = std::clamp(span.issued, span.ready, span.end);
  slot(acc, Bubble::kHostOverhead) += issued - span.ready;
  switch (op.kind_case()) {
    case ir::Op::kCompute: {
      idle_span(live, acc, issued, span.start);
      const TimeNs d = span.end - span.start;
      acc.busy += d;
      const int phase = static_cast<int>(op.phase());
      if (phase >= 0 && phase < kNumPhases) acc.busy_by_phase[static_cast<size_t>(phase)] += d;
      if (op.phase() == ir::FORWARD) live.seen_forward = true;
      if (op.phase() == ir::BACKWARD_INPUT || op.phase() == ir::BACKWARD_WEIGHT) {
        slot(acc, Bubble::kPpOther) += live.pending_stall;
        live.pending_stall = TimeNs::zero();
      }
      break;
    }
    case ir::Op::kCollective:
    case ir::Op::kSend:
    case ir::Op::kRecv: {
      const ir::Stream& stream = program_->classes(live.class_id).streams(span.stream);
      const CommKind kind = comm_kind(*program_, stream, op);
      if (kind == CommKind::kEp && op.has_collective() && routing_draws(*program_)) {
        slot(acc, Bubble::kMoeImbalance) += std::max(TimeNs::zero(), span.start - issued);
      } else {
        idle_span(live, acc, issued, span.start);
      }
      slot(acc, exposed_category(kind)) += span.end - span.start;
      break;
    }
    case ir::Op::kWait:
      break;  // attributed in on_wait_end, which knows the cause
    default:
      idle_span(live, acc, issued, span.end);
      break;
  }
  live.cursor = span.end;
}

void BubbleAccounting::on_wait_end(const engine::OpSpan& span, const engine::WaitCause& cause) {
  const int32_t idx = index_of_rank_[static_cast<size_t>(span.rank)];
  if (idx < 0) return;
  Live& live = live_[static_cast<size_t>(idx)];
  if (span.stream != live.main_stream) return;
  RankAccount& acc = accounts_[static_cast<size_t>(idx)];
  // [ready, issued] went to the host in on_op_end.
  const TimeNs issued = std::clamp(span.issued, span.ready, span.end);

  if (cause.valid && cause.op >= 0) {
    const ir::Stream& stream = program_->classes(live.class_id).streams(cause.stream);
    const CommKind kind = comm_kind(*program_, stream, stream.ops(cause.op));
    if (kind != CommKind::kNone) {
      // Until the releasing op was reached, its stream was busy with earlier
      // communication of its kind (e.g. a second DP collective queued behind
      // the first): exposed. Between reached and started it waited for its
      // peers: a dependency stall. Once started: exposed.
      const TimeNs queued_until = std::clamp(cause.ready, issued, span.end);
      const TimeNs started = std::clamp(cause.start, queued_until, span.end);
      slot(acc, exposed_category(kind)) += queued_until - issued;
      if (kind == CommKind::kEp && stream.ops(cause.op).has_collective() && routing_draws(*program_)) {
        // Reached and waiting for its EP peers: the busiest rank's experts
        // set the pace (docs/moe.md#load-imbalance).
        slot(acc, Bubble::kMoeImbalance) += started - queued_until;
      } else {
        idle_span(live, acc, queued_until, started);
      }
      slot(acc, exposed_category(kind)) += span.end - started;
      return;
    }
  }
  idle_span(live, acc, issued, span.end);
}

void BubbleAccounting::on_run_end(TimeNs end) {
  end_ = end;
  for (size_t i = 0; i < accounts_.size(); ++i) {
    Live& live = live_[i];
    RankAccount& acc = accounts_[i];
    slot(acc, Bubble::kPpCooldown) += live.pending_stall;
    live.pending_stall = TimeNs::zero();
    if (end > live.cursor) slot(acc, Bubble::kPpCooldown) += end - live.cursor;
    acc.over_capacity = capacity_ > Bytes::zero() && acc.peak_memory > capacity_;
  }
}

}  // namespace lacuna::report
