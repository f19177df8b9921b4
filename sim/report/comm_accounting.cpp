#include "sim/report/comm_accounting.h"

#include <algorithm>

#include "sim/cost/collective_model.h"
#include "sim/ir/bound_program.h"
#include "sim/report/comm_kind.h"

namespace lacuna::report {

namespace {

constexpr int kOther = 13;
constexpr int kSendRecv = 7;

constexpr std::array<std::string_view, CommAccounting::kGroups> kGroupNames = {
    "tp",         "cp",         "dp",      "dp_cp",    "world",     "pp",             "encoder_tp",
    "encoder_cp", "encoder_dp", "encoder", "boundary", "embedding", "model_parallel", "other"};
constexpr std::array<std::string_view, CommAccounting::kOps> kOpNames = {
    "collective", "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv"};

// -1 when the kind says nothing (GROUP_UNSPECIFIED).
int group_ordinal(ir::GroupKind kind) {
  switch (kind) {
    case ir::TP: return 0;
    case ir::CP: return 1;
    case ir::DP: return 2;
    case ir::DP_CP: return 3;
    case ir::WORLD: return 4;
    case ir::PP: return 5;
    case ir::ENCODER_TP: return 6;
    case ir::ENCODER_CP: return 7;
    case ir::ENCODER_DP: return 8;
    case ir::BOUNDARY_GROUP: return 10;
    case ir::EMBEDDING_GROUP: return 11;
    case ir::MODEL_PARALLEL: return 12;
    default: return -1;
  }
}

int dimension_ordinal(CommKind kind) {
  switch (kind) {
    case CommKind::kTp: return 0;
    case CommKind::kCp: return 1;
    case CommKind::kDp: return 2;
    case CommKind::kPp: return 5;
    case CommKind::kEncoder: return 9;
    case CommKind::kBoundary: return 10;
    default: return kOther;
  }
}

int op_ordinal(ir::CollectiveKind kind) {
  const int k = static_cast<int>(kind);
  return k >= 1 && k <= 6 ? k : 0;
}

// nccl-tests' factor; 1 for a kind it does not know (the program validator
// rejects those, but a report must not throw over one).
double bus_factor(ir::CollectiveKind kind, int32_t n) {
  return op_ordinal(kind) == 0 ? 1.0 : cost::bus_bandwidth_factor(kind, n);
}

}  // namespace

std::string_view CommAccounting::group_name(int group) { return kGroupNames.at(static_cast<size_t>(group)); }
std::string_view CommAccounting::op_name(int op) { return kOpNames.at(static_cast<size_t>(op)); }

CommAccounting::CommAccounting() = default;

void CommAccounting::on_run_begin(const engine::RunInfo& info) {
  program_ = info.program;
  iterations_ = std::max(1, info.iterations);
  folded_ = program_ != nullptr && static_cast<int>(info.simulated_ranks.size()) < program_->ranks_size();
  index_of_rank_.assign(program_ != nullptr ? static_cast<size_t>(program_->ranks_size()) : 0, -1);
  for (size_t i = 0; i < info.simulated_ranks.size(); ++i) {
    index_of_rank_[static_cast<size_t>(info.simulated_ranks[i])] = static_cast<int32_t>(i);
  }
  seen_.assign(info.simulated_ranks.size(), {});
  rows_ = {};
}

void CommAccounting::add(int32_t rank, int group, int op, int32_t group_size, int64_t bytes, TimeNs start, TimeNs end,
                         double factor) {
  const int slot = group * kOps + op;
  CommRow& row = rows_[static_cast<size_t>(slot)];
  if (row.ops == 0) {
    row.min_group_size = group_size;
    row.max_group_size = group_size;
  } else {
    row.min_group_size = std::min(row.min_group_size, group_size);
    row.max_group_size = std::max(row.max_group_size, group_size);
  }
  const int32_t idx = index_of_rank_[static_cast<size_t>(rank)];
  if (idx >= 0 && !seen_[static_cast<size_t>(idx)].test(static_cast<size_t>(slot))) {
    seen_[static_cast<size_t>(idx)].set(static_cast<size_t>(slot));
    ++row.ranks;
  }
  ++row.ops;
  row.bytes += bytes;
  const TimeNs duration = end - start;
  row.time += duration;
  if (duration.count() > 0 && bytes > 0 && group_size >= 2) {
    const double s = static_cast<double>(bytes);
    const double busbw = s * factor / duration.seconds();
    row.min_busbw = row.timed.count() == 0 ? busbw : std::min(row.min_busbw, busbw);
    row.timed += duration;
    row.timed_bytes += s;
    row.bus_bytes += s * factor;
  }
}

void CommAccounting::on_op_end(const engine::OpSpan& span) {
  if (!span.ir->has_collective()) return;
  const ir::Collective& c = span.ir->collective();
  const ir::BoundProgram bound(*program_);
  const int32_t slot = c.group_slot();
  const int32_t group_index = bound.group(span.rank, slot);
  const ir::Group* group = group_index >= 0 && group_index < program_->groups_size() ? &program_->groups(group_index)
                                                                                     : nullptr;
  const int32_t size = group != nullptr ? group->ranks_size() : 1;
  // The bound group's kind (coinciding slots share the narrowest one, so dp_cp
  // with cp = 1 reads "dp"), else the slot's, else the stream's dimension.
  int g = group != nullptr ? group_ordinal(group->kind()) : -1;
  if (g < 0 && slot >= 0 && slot < program_->group_slots_size()) g = group_ordinal(program_->group_slots(slot).kind());
  if (g < 0) {
    const ir::Stream& stream = bound.rank_class(span.rank).streams(span.stream);
    g = dimension_ordinal(comm_kind(*program_, stream, *span.ir));
  }
  add(span.rank, g, op_ordinal(c.kind()), size, c.bytes(), span.start, span.end, bus_factor(c.kind(), size));
}

void CommAccounting::on_transfer(const engine::OpSpan& send, const engine::OpSpan& recv) {
  const ir::Stream& stream = ir::BoundProgram(*program_).rank_class(send.rank).streams(send.stream);
  const int g = dimension_ordinal(comm_kind(*program_, stream, *send.ir));
  // Both sides share the transfer's start and end; take the wider span in case
  // a caller reports them apart.
  const TimeNs start = std::max(send.start, recv.start);
  const TimeNs end = std::max(send.end, recv.end);
  add(send.rank, g, kSendRecv, 2, send.ir->send().bytes(), start, end, 1.0);
}

CommSummary CommAccounting::summary() const {
  CommSummary s;
  s.folded = folded_;
  s.simulated_ranks = static_cast<int32_t>(seen_.size());
  s.num_gpus = program_ != nullptr ? program_->ranks_size() : 0;
  for (int slot = 0; slot < kGroups * kOps; ++slot) {
    CommRow row = rows_[static_cast<size_t>(slot)];
    row.iterations = iterations_;
    if (row.ops == 0) continue;
    row.group = group_name(slot / kOps);
    row.op = op_name(slot % kOps);
    s.rows.push_back(row);
  }
  return s;
}

}  // namespace lacuna::report
