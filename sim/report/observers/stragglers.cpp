#include "sim/report/observers/stragglers.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sim/report/formats/names.h"

namespace lacuna::report {

namespace {

std::string group_key(ir::GroupKind kind) {
  switch (kind) {
    case ir::TP: return "tp";
    case ir::CP: return "cp";
    case ir::DP: return "dp";
    case ir::PP: return "pp";
    case ir::DP_CP: return "dp_cp";
    case ir::WORLD: return "world";
    case ir::ENCODER_TP: return "encoder_tp";
    case ir::ENCODER_CP: return "encoder_cp";
    case ir::ENCODER_DP: return "encoder_dp";
    case ir::BOUNDARY_GROUP: return "boundary";
    case ir::EMBEDDING_GROUP: return "embedding";
    case ir::MODEL_PARALLEL: return "model_parallel";
    case ir::EP: return "ep";
    case ir::EXPERT_TP: return "expert_tp";
    case ir::EXPERT_DP: return "expert_dp";
    case ir::EP_INTRA_DOMAIN: return "ep_intra_domain";
    case ir::EP_INTER_DOMAIN: return "ep_inter_domain";
    case ir::AMAX_REDUCTION: return "amax";
    case ir::PP_MIRROR: return "pp_mirror";
    default: return "other";
  }
}

std::string op_key(ir::CollectiveKind kind) {
  switch (kind) {
    case ir::ALL_REDUCE: return "all_reduce";
    case ir::ALL_GATHER: return "all_gather";
    case ir::REDUCE_SCATTER: return "reduce_scatter";
    case ir::ALL_TO_ALL: return "all_to_all";
    case ir::BROADCAST: return "broadcast";
    case ir::REDUCE: return "reduce";
    default: return "collective";
  }
}

// Largest hold first, then the most instances last, then the lowest id and
// the kind's order: a total order, so the output is deterministic.
bool before(const StragglerRow& a, const StragglerRow& b) {
  if (a.cell.hold != b.cell.hold) return a.cell.hold > b.cell.hold;
  if (a.cell.last != b.cell.last) return a.cell.last > b.cell.last;
  if (a.id != b.id) return a.id < b.id;
  if (a.group != b.group) return a.group < b.group;
  return a.op < b.op;
}

}  // namespace

void StragglerAttribution::on_run_begin(const engine::RunInfo& info) {
  program_ = info.program;
  const ir::Program& p = *program_;
  sim_index_.assign(static_cast<size_t>(p.ranks_size()), -1);
  for (size_t i = 0; i < info.simulated_ranks.size(); ++i) {
    sim_index_[static_cast<size_t>(info.simulated_ranks[i])] = static_cast<int32_t>(i);
  }
  num_hosts_ = 0;
  for (const ir::RankBinding& b : p.ranks()) num_hosts_ = std::max(num_hosts_, b.node() + 1);
  group_spans_.assign(static_cast<size_t>(p.groups_size()), 0);
  for (int g = 0; g < p.groups_size(); ++g) {
    const auto& ranks = p.groups(g).ranks();
    for (int32_t r : ranks) {
      if (p.ranks(r).node() != p.ranks(ranks[0]).node()) group_spans_[static_cast<size_t>(g)] = 1;
    }
  }
  host_stamp_.assign(static_cast<size_t>(num_hosts_), -1);
  kinds_.clear();
  peer_wait_.assign(info.simulated_ranks.size(), TimeNs::zero());
  instances_ = straggled_ = 0;
  hold_ = TimeNs::zero();
}

size_t StragglerAttribution::kind_of(ir::GroupKind group, ir::CollectiveKind op) {
  for (size_t k = 0; k < kinds_.size(); ++k) {
    if (kinds_[k].group == group && kinds_[k].op == op) return k;
  }
  kinds_.push_back({group, op, std::vector<StragglerCell>(peer_wait_.size()),
                    std::vector<StragglerCell>(static_cast<size_t>(num_hosts_)),
                    std::vector<std::vector<std::pair<TimeNs, TimeNs>>>(static_cast<size_t>(num_hosts_))});
  return kinds_.size() - 1;
}

void StragglerAttribution::on_op_end(const engine::OpSpan& span) {
  const ir::Op& op = *span.ir;
  if (!op.has_collective() && !op.has_send() && !op.has_recv()) return;
  const int32_t i = sim_index_[static_cast<size_t>(span.rank)];
  if (i >= 0) peer_wait_[static_cast<size_t>(i)] += span.start - std::max(span.issued, span.ready);
}

void StragglerAttribution::on_collective(const engine::CollectiveSpan& c) {
  const size_t n = c.members.size();
  if (n < 2) return;
  const ir::Program& p = *program_;
  const ir::Group& group = p.groups(c.group);
  Kind& kind = kinds_[kind_of(group.kind(), c.members.front().ir->collective().kind())];
  const engine::OpSpan& last = c.members[n - 1];
  const TimeNs hold = last.issued - c.members[n - 2].issued;
  const bool straggled = hold > TimeNs::zero();
  ++instances_;
  hold_ += hold;
  if (straggled) ++straggled_;

  for (const engine::OpSpan& m : c.members) {
    ++kind.ranks[static_cast<size_t>(sim_index_[static_cast<size_t>(m.rank)])].instances;
  }
  if (straggled) {
    StragglerCell& cell = kind.ranks[static_cast<size_t>(sim_index_[static_cast<size_t>(last.rank)])];
    ++cell.last;
    cell.hold += hold;
  }
  if (!group_spans_[static_cast<size_t>(c.group)]) return;
  const int64_t stamp = instances_;
  for (const engine::OpSpan& m : c.members) {
    const int32_t host = p.ranks(m.rank).node();
    if (host_stamp_[static_cast<size_t>(host)] == stamp) continue;
    host_stamp_[static_cast<size_t>(host)] = stamp;
    ++kind.hosts[static_cast<size_t>(host)].instances;
  }
  if (straggled) {
    const auto host = static_cast<size_t>(p.ranks(last.rank).node());
    ++kind.hosts[host].last;
    kind.host_holds[host].emplace_back(c.members[n - 2].issued, last.issued);
  }
}

namespace {

// Total length of the union of intervals (sorts them).
TimeNs union_length(std::vector<std::pair<TimeNs, TimeNs>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  TimeNs total = TimeNs::zero();
  TimeNs begin = TimeNs::zero(), end = TimeNs::zero();
  bool open = false;
  for (const auto& [b, e] : intervals) {
    if (open && b <= end) {
      end = std::max(end, e);
      continue;
    }
    if (open) total += end - begin;
    begin = b;
    end = e;
    open = true;
  }
  if (open) total += end - begin;
  return total;
}

}  // namespace

StragglerSummary StragglerAttribution::summary() const {
  StragglerSummary s;
  s.instances = instances_;
  s.straggled = straggled_;
  s.hold = hold_;
  std::vector<int32_t> rank_of(peer_wait_.size());
  for (size_t r = 0; r < sim_index_.size(); ++r) {
    if (sim_index_[r] >= 0) rank_of[static_cast<size_t>(sim_index_[r])] = static_cast<int32_t>(r);
  }
  for (const Kind& k : kinds_) {
    for (size_t i = 0; i < k.ranks.size(); ++i) {
      if (k.ranks[i].last > 0) s.ranks.push_back({rank_of[i], {}, group_key(k.group), op_key(k.op), k.ranks[i]});
    }
    for (size_t h = 0; h < k.hosts.size(); ++h) {
      if (k.hosts[h].last == 0) continue;
      StragglerCell cell = k.hosts[h];
      cell.hold = union_length(k.host_holds[h]);
      s.hosts.push_back({static_cast<int32_t>(h), {}, group_key(k.group), op_key(k.op), cell});
    }
  }
  std::sort(s.ranks.begin(), s.ranks.end(), before);
  std::sort(s.hosts.begin(), s.hosts.end(), before);
  for (StragglerRow& r : s.ranks) r.label = rank_label(*program_, r.id);
  // A host's ranks take a scan of all ranks: once per distinct host.
  std::map<int32_t, std::string> hosts;
  for (StragglerRow& r : s.hosts) {
    auto [it, fresh] = hosts.try_emplace(r.id);
    if (fresh) it->second = fmt::format("host {} (ranks {})", r.id, host_ranks(*program_, r.id));
    r.label = it->second;
  }
  return s;
}

std::string host_ranks(const ir::Program& program, int32_t node) {
  std::string out;
  int32_t first = -1, prev = -2;
  auto flush = [&] {
    if (first < 0) return;
    if (!out.empty()) out += ", ";
    out += first == prev ? fmt::format("{}", first) : fmt::format("{}–{}", first, prev);
  };
  for (int32_t r = 0; r < program.ranks_size(); ++r) {
    if (program.ranks(r).node() != node) continue;
    if (r != prev + 1) {
      flush();
      first = r;
    }
    prev = r;
  }
  flush();
  return out;
}

}  // namespace lacuna::report
