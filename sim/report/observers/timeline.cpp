#include "sim/report/observers/timeline.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include <nlohmann/json.hpp>

#include "sim/ir/bound_program.h"
#include "sim/report/analyses/comm_kind.h"
#include "sim/report/formats/names.h"

namespace lacuna::report {
namespace {

std::string_view comm_suffix(CommKind kind) {
  switch (kind) {
    case CommKind::kTp: return "tp";
    case CommKind::kCp: return "cp";
    case CommKind::kPp: return "pp";
    case CommKind::kDp: return "dp";
    case CommKind::kBoundary: return "boundary";
    case CommKind::kEncoder: return "encoder";
    case CommKind::kEp: return "ep";
    case CommKind::kNone: break;
  }
  return "other";
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string op_class_key(const ir::Program& program, const ir::Stream& stream, const ir::Op& op) {
  switch (op.kind_case()) {
    case ir::Op::kCompute:
      if (op.compute().fixed_duration_ns() > 0) return "compute fixed";
      return "compute " + std::string(op_class_name(op.compute().op_class()));
    case ir::Op::kCollective:
      return "collective " + std::string(collective_short(op.collective().kind())) + " " +
             std::string(comm_suffix(comm_kind(program, stream, op)));
    case ir::Op::kSend: return "send " + std::string(comm_suffix(comm_kind(program, stream, op)));
    case ir::Op::kRecv: return "recv " + std::string(comm_suffix(comm_kind(program, stream, op)));
    default: return "other";
  }
}

TimelineRecorder::TimelineRecorder(const ir::Program& program, RankSpec spec)
    : program_(program), spec_(std::move(spec)) {
  timeline_.selection = spec_.text.empty() ? "pipeline" : spec_.text;
}

void TimelineRecorder::on_run_begin(const engine::RunInfo& info) {
  const std::vector<int32_t> ranks = select_simulated_ranks(spec_, program_, info);
  slot_of_rank_.assign(static_cast<size_t>(program_.ranks_size()), -1);
  timeline_.ranks.clear();
  timeline_.iterations = std::max(1, info.iterations);
  for (int32_t r : ranks) {
    slot_of_rank_[static_cast<size_t>(r)] = static_cast<int32_t>(timeline_.ranks.size());
    TimelineRank tr;
    tr.rank = r;
    tr.label = rank_label(program_, r);
    const ir::RankClass& cls = ir::BoundProgram(program_).rank_class(r);
    for (int s = 0; s < cls.streams_size(); ++s) {
      TimelineStream ts;
      ts.stream = s;
      ts.name = cls.streams(s).name();
      ts.kind = lower(ir::StreamKind_Name(cls.streams(s).kind()));
      tr.streams.push_back(std::move(ts));
    }
    timeline_.ranks.push_back(std::move(tr));
  }
}

int32_t TimelineRecorder::class_index(const std::string& key) {
  auto [it, inserted] = class_of_.emplace(key, static_cast<int32_t>(timeline_.classes.size()));
  if (inserted) timeline_.classes.push_back(key);
  return it->second;
}

void TimelineRecorder::on_op_end(const engine::OpSpan& span) {
  const int32_t slot = slot_of_rank_[static_cast<size_t>(span.rank)];
  if (slot < 0) return;
  const ir::Op& op = *span.ir;
  if (op.kind_case() == ir::Op::kRecord || op.kind_case() == ir::Op::kWait) return;
  const ir::RankClass& cls = ir::BoundProgram(program_).rank_class(span.rank);
  TimelineOp t;
  t.op = span.op;
  t.class_index = class_index(op_class_key(program_, cls.streams(span.stream), op));
  t.phase = static_cast<int32_t>(op.phase());
  t.microbatch = op.phase() >= ir::FORWARD && op.phase() <= ir::RECOMPUTE ? op.microbatch() : -1;
  t.module = op.module();
  t.ready_ns = span.ready.count();
  t.start_ns = span.start.count();
  t.end_ns = span.end.count();
  t.iteration = static_cast<int32_t>(span.iteration);
  timeline_.ranks[static_cast<size_t>(slot)].streams[static_cast<size_t>(span.stream)].ops.push_back(t);
}

void TimelineRecorder::on_run_end(TimeNs /*end*/) {
  // Classes sorted by name, so that the file does not depend on the order in
  // which ops happened to end (a measured run's order varies).
  std::vector<std::string> sorted = timeline_.classes;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> remap(sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i) {
    const int32_t old_index = class_of_.at(sorted[i]);
    remap[static_cast<size_t>(old_index)] = static_cast<int32_t>(i);
    class_of_[sorted[i]] = static_cast<int32_t>(i);
  }
  timeline_.classes = std::move(sorted);
  // Ops end in time order; the file lists them in program order.
  for (TimelineRank& r : timeline_.ranks) {
    for (TimelineStream& s : r.streams) {
      for (TimelineOp& o : s.ops) o.class_index = remap[static_cast<size_t>(o.class_index)];
      std::stable_sort(s.ops.begin(), s.ops.end(),
                       [](const TimelineOp& a, const TimelineOp& b) {
                         return a.iteration != b.iteration ? a.iteration < b.iteration : a.op < b.op;
                       });
    }
  }
}

std::string timeline_json(const Timeline& timeline) {
  using Json = nlohmann::ordered_json;
  const bool several = timeline.iterations > 1;
  // The ops stay compact arrays; `op_fields` names their elements and
  // `phases` the phase numbers, so the file describes itself (and `diff`
  // reads elements by name).
  Json fields = Json::array({"op", "class", "phase", "microbatch", "module", "ready_ns", "start_ns", "end_ns"});
  if (several) fields.push_back("iteration");
  Json phases = Json::array();
  for (int p = 0; p < ir::Phase_ARRAYSIZE; ++p) phases.push_back(std::string(phase_key(static_cast<ir::Phase>(p))));
  std::string out = "{\"selection\":" + Json(timeline.selection).dump() +
                    (several ? ",\"iterations\":" + std::to_string(timeline.iterations) : std::string()) +
                    ",\"op_fields\":" + fields.dump() + ",\"phases\":" + phases.dump() +
                    ",\"classes\":" + Json(timeline.classes).dump() + ",\"ranks\":[";
  for (size_t i = 0; i < timeline.ranks.size(); ++i) {
    const TimelineRank& r = timeline.ranks[i];
    out += i == 0 ? "\n  " : ",\n  ";
    out += "{\"rank\":" + std::to_string(r.rank) + ",\"label\":" + Json(r.label).dump() + ",\"streams\":[";
    for (size_t s = 0; s < r.streams.size(); ++s) {
      const TimelineStream& ts = r.streams[s];
      if (s > 0) out += ',';
      out += "{\"stream\":" + std::to_string(ts.stream) + ",\"name\":" + Json(ts.name).dump() +
             ",\"kind\":" + Json(ts.kind).dump() + ",\"ops\":[";
      for (size_t k = 0; k < ts.ops.size(); ++k) {
        const TimelineOp& o = ts.ops[k];
        if (k > 0) out += ',';
        out += '[';
        for (int64_t v : {int64_t{o.op}, int64_t{o.class_index}, int64_t{o.phase}, int64_t{o.microbatch},
                          int64_t{o.module}, o.ready_ns, o.start_ns, o.end_ns}) {
          out += std::to_string(v);
          out += ',';
        }
        if (several) out += std::to_string(o.iteration) + ',';
        out.back() = ']';
      }
      out += "]}";
    }
    out += "]}";
  }
  out += timeline.ranks.empty() ? "]}" : "\n ]}";
  return out;
}

}  // namespace lacuna::report
