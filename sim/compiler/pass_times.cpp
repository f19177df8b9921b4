#include "sim/compiler/pass_times.h"

#include <map>
#include <utility>

#include "sim/core/error.h"

namespace lacuna::compiler {

PassTimes mean_pass_times(const ir::Program& program, const cost::CostModel& cost) {
  const int32_t microbatch = program.info().num_microbatches() > 1 ? 1 : 0;
  // (pp rank, chunk) → kernel time per kind.
  struct Sums {
    int64_t forward = 0, input = 0, weight = 0;
  };
  std::map<std::pair<int32_t, int32_t>, Sums> stages;
  int64_t p2p_ns = 0;
  bool p2p_found = false;
  for (int32_t r = 0; r < program.ranks_size(); ++r) {
    const ir::RankBinding& b = program.ranks(r);
    if (b.coord().tp() != 0 || b.coord().cp() != 0 || b.coord().dp() != 0) continue;
    const ir::RankClass& cls = program.classes(b.class_id());
    for (const ir::Stream& s : cls.streams()) {
      for (const ir::Op& op : s.ops()) {
        if (!p2p_found && op.has_send() && op.send().bytes() > 0 && op.send().peer_slot() < b.peer_size() &&
            op.send().channel() == 0) {
          const int32_t peer = b.peer(op.send().peer_slot());
          if (peer >= 0 && peer < program.ranks_size()) {
            p2p_ns = cost.p2p(op.send().bytes(), program.ranks(peer).node() == b.node()).count();
            p2p_found = true;
          }
        }
        if (s.kind() != ir::COMPUTE || !op.has_compute() || op.microbatch() != microbatch) continue;
        const int64_t ns = op.compute().fixed_duration_ns() > 0 ? op.compute().fixed_duration_ns()
                                                                 : cost.compute(op.compute()).count();
        Sums& sum = stages[{b.coord().pp(), op.chunk()}];
        switch (op.phase()) {
          case ir::FORWARD: sum.forward += ns; break;
          case ir::BACKWARD_INPUT:
          case ir::RECOMPUTE: sum.input += ns; break;
          case ir::BACKWARD_WEIGHT: sum.weight += ns; break;
          default: break;
        }
      }
    }
  }
  if (stages.empty())
    throw Error(SourceLocation{}, "the program has no pipeline pass to time (no compute on ranks tp = cp = dp = 0)",
                "compile an LLM scenario");
  Sums total;
  for (const auto& [key, s] : stages) {
    total.forward += s.forward;
    total.input += s.input;
    total.weight += s.weight;
  }
  const auto n = static_cast<int64_t>(stages.size());
  PassTimes out;
  out.forward = TimeNs(total.forward / n);
  out.backward_input = TimeNs(total.input / n);
  out.backward_weight = TimeNs(total.weight / n);
  out.p2p = TimeNs(p2p_ns);
  out.stages = static_cast<int32_t>(n);
  return out;
}

}  // namespace lacuna::compiler
