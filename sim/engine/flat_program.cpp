#include "sim/engine/flat_program.h"

#include <algorithm>
#include <cctype>

#include "sim/core/error.h"

namespace lacuna::engine {
namespace {

int32_t endpoint_index(std::vector<Endpoint>& endpoints, Endpoint e) {
  auto it = std::find(endpoints.begin(), endpoints.end(), e);
  if (it != endpoints.end()) return static_cast<int32_t>(it - endpoints.begin());
  endpoints.push_back(e);
  return static_cast<int32_t>(endpoints.size() - 1);
}

}  // namespace

FlatClass flatten_class(const ir::RankClass& cls, int class_id, const cost::CostModel& cost) {
  FlatClass out;
  out.num_events = cls.num_events();
  out.records_per_event.assign(static_cast<size_t>(std::max(0, cls.num_events())), 0);
  size_t total = 0;
  for (const auto& s : cls.streams()) total += static_cast<size_t>(s.ops_size());
  out.ops.reserve(total);
  out.ir.reserve(total);
  for (int s = 0; s < cls.streams_size(); ++s) {
    const auto& stream = cls.streams(s);
    FlatStream fs;
    fs.name = stream.name().empty() ? "stream" + std::to_string(s) : stream.name();
    fs.begin = static_cast<uint32_t>(out.ops.size());
    for (int o = 0; o < stream.ops_size(); ++o) {
      const ir::Op& op = stream.ops(o);
      FlatOp f;
      switch (op.kind_case()) {
        case ir::Op::kCompute: {
          f.kind = OpKind::kCompute;
          const auto& c = op.compute();
          const int64_t ns = c.fixed_duration_ns() > 0 ? c.fixed_duration_ns() : cost.compute(c).count();
          if (ns < 0) {
            throw Error("cost model '" + std::string(cost.name()) + "' returned a negative duration (" +
                        std::to_string(ns) + " ns) for classes[" + std::to_string(class_id) + "].streams[" +
                        std::to_string(s) + "].ops[" + std::to_string(o) + "]");
          }
          f.value = ns;
          break;
        }
        case ir::Op::kCollective: {
          const auto& c = op.collective();
          f.kind = OpKind::kCollective;
          f.collective = c.kind();
          f.slot = c.group_slot();
          f.index = out.num_collectives++;
          f.value = c.bytes();
          f.fixed_ns = c.fixed_duration_ns();
          break;
        }
        case ir::Op::kSend: {
          const auto& p = op.send();
          f.kind = OpKind::kSend;
          f.slot = p.peer_slot();
          f.index = endpoint_index(out.endpoints, Endpoint{p.peer_slot(), p.channel(), true});
          f.value = p.bytes();
          f.tag = p.tag();
          f.fixed_ns = p.fixed_duration_ns();
          break;
        }
        case ir::Op::kRecv: {
          const auto& p = op.recv();
          f.kind = OpKind::kRecv;
          f.slot = p.peer_slot();
          f.index = endpoint_index(out.endpoints, Endpoint{p.peer_slot(), p.channel(), false});
          f.value = p.bytes();
          f.tag = p.tag();
          break;
        }
        case ir::Op::kRecord:
          f.kind = OpKind::kRecord;
          f.slot = op.record().event();
          ++out.records_per_event[static_cast<size_t>(f.slot)];
          break;
        case ir::Op::kWait:
          f.kind = OpKind::kWait;
          f.slot = op.wait().event();
          f.value = op.wait().value();
          break;
        case ir::Op::KIND_NOT_SET:
          throw Error("classes[" + std::to_string(class_id) + "]: op without kind (validate_program not run?)");
      }
      f.host_ns = op.host_ns();
      f.host_sync = op.host_sync();
      f.has_host = f.host_ns != 0 || f.host_sync;
      out.ops.push_back(f);
      out.ir.push_back(&op);
    }
    fs.end = static_cast<uint32_t>(out.ops.size());
    out.streams.push_back(std::move(fs));
  }
  return out;
}

std::string collective_name(ir::CollectiveKind kind) {
  const std::string& n = ir::CollectiveKind_Name(kind);
  return n.empty() ? "collective kind " + std::to_string(static_cast<int>(kind)) : n;
}

std::string group_kind_name(ir::GroupKind kind) {
  std::string n = ir::GroupKind_Name(kind);
  if (n.empty() || kind == ir::GROUP_UNSPECIFIED) return "";
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n;
}

}  // namespace lacuna::engine
