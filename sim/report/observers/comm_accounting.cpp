#include "sim/report/observers/comm_accounting.h"

#include <algorithm>

#include "sim/cost/collective_model.h"
#include "sim/ir/bound_program.h"
#include "sim/report/analyses/comm_kind.h"

namespace lacuna::report {

namespace {

constexpr int kOther = 20;
constexpr int kSendRecv = 7;

constexpr std::array<std::string_view, CommAccounting::kGroups> kGroupNames = {
    "tp",         "cp",         "dp",      "dp_cp",    "world",     "pp",             "encoder_tp",
    "encoder_cp", "encoder_dp", "encoder", "boundary", "embedding", "model_parallel", "ep",
    "expert_tp",  "expert_dp",  "ep_intra_domain", "ep_inter_domain", "amax", "pp_mirror", "other"};
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
    case ir::EP: return 13;
    case ir::EXPERT_TP: return 14;
    case ir::EXPERT_DP: return 15;
    case ir::EP_INTRA_DOMAIN: return 16;
    case ir::EP_INTER_DOMAIN: return 17;
    case ir::AMAX_REDUCTION: return 18;
    case ir::PP_MIRROR: return 19;
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
    case CommKind::kEp: return 13;
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

Bytes CommAccounting::estimate_bytes(const ir::Program& p, int64_t simulated) {
  int32_t group_slots = 0, peer_slots = 0;
  for (const ir::RankBinding& b : p.ranks()) {
    group_slots = std::max(group_slots, b.group_size());
    peer_slots = std::max(peer_slots, b.peer_size());
  }
  int64_t ops = 0, streams = 0;
  for (const ir::RankClass& c : p.classes()) {
    streams += c.streams_size();
    for (const ir::Stream& s : c.streams()) ops += s.ops_size();
  }
  const int64_t ranks = p.ranks_size();
  int64_t bytes = ranks * static_cast<int64_t>(sizeof(int32_t));  // index_of_rank_
  // FlatBindings: the class and every slot's group and peer, per rank.
  bytes += ranks * (1 + group_slots + peer_slots) * static_cast<int64_t>(sizeof(int32_t));
  bytes += simulated * static_cast<int64_t>(sizeof(std::bitset<kGroups * kOps>));
  bytes += ops * static_cast<int64_t>(sizeof(CommFacts)) + streams * static_cast<int64_t>(sizeof(uint32_t));
  bytes += static_cast<int64_t>(p.groups_size()) * static_cast<int64_t>(sizeof(int32_t) + sizeof(int8_t));
  return Bytes(bytes);
}

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
  bindings_.reset();
  class_facts_.clear();
  group_size_.clear();
  group_ordinal_.clear();
  slot_ordinal_.clear();
  if (program_ == nullptr) return;
  const ir::Program& p = *program_;
  bindings_.emplace(p);
  class_facts_.assign(static_cast<size_t>(p.classes_size()), ClassFacts{});
  // Every class: a transfer's send side may be reported for a rank that is
  // not simulated (a folded run's peers).
  for (int32_t c = 0; c < p.classes_size(); ++c) build_facts(c);
  for (const ir::Group& g : p.groups()) {
    group_size_.push_back(g.ranks_size());
    group_ordinal_.push_back(static_cast<int8_t>(group_ordinal(g.kind())));
  }
  for (const auto& s : p.group_slots()) slot_ordinal_.push_back(static_cast<int8_t>(group_ordinal(s.kind())));
}

void CommAccounting::build_facts(int32_t class_id) {
  ClassFacts& c = class_facts_[static_cast<size_t>(class_id)];
  for (const ir::Stream& stream : program_->classes(class_id).streams()) {
    c.stream_begin.push_back(static_cast<uint32_t>(c.ops.size()));
    for (const ir::Op& op : stream.ops()) {
      CommFacts f;
      if (op.has_collective()) {
        f.collective = true;
        f.slot = op.collective().group_slot();
        f.kind = op.collective().kind();
        f.op = static_cast<int8_t>(op_ordinal(f.kind));
        f.bytes = op.collective().bytes();
      } else if (op.has_send()) {
        f.bytes = op.send().bytes();
      }
      f.stream_dimension = static_cast<int8_t>(dimension_ordinal(comm_kind(*program_, stream, op)));
      c.ops.push_back(f);
    }
  }
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
  const CommFacts& c = facts(span.rank, span.stream, span.op);
  if (!c.collective) return;
  const int32_t group_index = bindings_->group(span.rank, c.slot);
  const bool bound = group_index >= 0 && group_index < static_cast<int32_t>(group_size_.size());
  const int32_t size = bound ? group_size_[static_cast<size_t>(group_index)] : 1;
  // The bound group's kind (coinciding slots share the narrowest one, so dp_cp
  // with cp = 1 reads "dp"), else the slot's, else the stream's dimension.
  int g = bound ? group_ordinal_[static_cast<size_t>(group_index)] : -1;
  if (g < 0 && c.slot >= 0 && c.slot < static_cast<int32_t>(slot_ordinal_.size())) {
    g = slot_ordinal_[static_cast<size_t>(c.slot)];
  }
  if (g < 0) g = c.stream_dimension;
  add(span.rank, g, c.op, size, c.bytes, span.start, span.end, bus_factor(c.kind, size));
}

void CommAccounting::on_transfer(const engine::OpSpan& send, const engine::OpSpan& recv) {
  const CommFacts& f = facts(send.rank, send.stream, send.op);
  // Both sides share the transfer's start and end; take the wider span in case
  // a caller reports them apart.
  const TimeNs start = std::max(send.start, recv.start);
  const TimeNs end = std::max(send.end, recv.end);
  add(send.rank, f.stream_dimension, kSendRecv, 2, f.bytes, start, end, 1.0);
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
