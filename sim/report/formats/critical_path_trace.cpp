#include "sim/report/formats/critical_path_trace.h"

#include <nlohmann/json.hpp>
#include <fmt/format.h>

#include "sim/ir/bound_program.h"
#include "sim/report/formats/format.h"
#include "sim/report/observers/timeline.h"

namespace lacuna::report {

namespace {

std::string json_str(const std::string& s) { return nlohmann::json(s).dump(); }

// Flow ids far above the p2p arrows' (which count from 1).
constexpr uint64_t kFlowBase = uint64_t{1} << 40;

}  // namespace

void write_critical_path_events(const ir::Program& p, const CriticalPath& path, const std::vector<int32_t>& traced,
                                const TraceWriter::Emit& emit) {
  const int32_t pid = p.ranks_size() + 1;
  std::vector<int32_t> lane(static_cast<size_t>(p.ranks_size()), -1);  // tid of a traced rank's path thread
  for (size_t i = 0; i < traced.size(); ++i) {
    const int32_t r = traced[i];
    const int32_t tid = ir::BoundProgram(p).rank_class(r).streams_size() + 1;
    lane[static_cast<size_t>(r)] = tid;
    emit(fmt::format("{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":\"critical path\"}}}}",
                     r, tid));
    emit(fmt::format(
        "{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{}}}}}", r, tid,
        tid - 1));
  }
  emit(fmt::format("{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":\"critical path\"}}}}", pid));
  emit(fmt::format("{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"args\":{{\"sort_index\":{}}}}}", pid,
                   pid));
  emit(fmt::format("{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":1,\"args\":{{\"name\":\"path ({} steps)\"}}}}",
                   pid, path.steps.size()));

  uint64_t flow = kFlowBase;
  const PathStep* prev = nullptr;
  for (const PathStep& s : path.steps) {
    std::string name, key;
    if (s.kind == NodeKind::kHost) {
      name = fmt::format("r{} host issue", s.rank);
      key = "host";
    } else {
      const ir::Stream& stream = ir::BoundProgram(p).rank_class(s.rank).streams(s.stream);
      const ir::Op& op = stream.ops(s.op);
      name = fmt::format("r{} {}", s.rank, op_name(p, s.rank, op));
      key = op_class_key(p, stream, op);
    }
    const std::string slice = fmt::format(
        "\"ts\":{},\"dur\":{},\"name\":{},\"cat\":\"critical_path\",\"args\":{{\"rank\":{},\"stream\":{},\"op\":{},"
        "\"class\":{}}}}}",
        micros_exact(s.start.count()), micros_exact(s.duration().count()), json_str(name), s.rank, s.stream, s.op,
        json_str(key));
    emit(fmt::format("{{\"ph\":\"X\",\"pid\":{},\"tid\":1,{}", pid, slice));
    const int32_t tid = lane[static_cast<size_t>(s.rank)];
    if (tid > 0) emit(fmt::format("{{\"ph\":\"X\",\"pid\":{},\"tid\":{},{}", s.rank, tid, slice));
    // An arrow where the path changes between traced ranks; both ends inside
    // their slices (mid-point), bound to them ("bp":"e").
    if (prev != nullptr && prev->rank != s.rank && tid > 0 && lane[static_cast<size_t>(prev->rank)] > 0) {
      const int64_t from = prev->start.count() + prev->duration().count() / 2;
      const int64_t to = s.start.count() + s.duration().count() / 2;
      emit(fmt::format("{{\"ph\":\"s\",\"bp\":\"e\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":{},\"name\":\"critical path\","
                       "\"cat\":\"critical_path\"}}",
                       flow, prev->rank, lane[static_cast<size_t>(prev->rank)], micros_exact(from)));
      emit(fmt::format("{{\"ph\":\"f\",\"bp\":\"e\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":{},\"name\":\"critical path\","
                       "\"cat\":\"critical_path\"}}",
                       flow, s.rank, tid, micros_exact(to)));
      ++flow;
    }
    prev = &s;
  }
}

}  // namespace lacuna::report
