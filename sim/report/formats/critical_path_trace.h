// The critical path in the Perfetto trace (docs/critical-path.md#trace),
// written through TraceWriter::set_epilogue once the path is known:
// - a process "critical path" (pid = number of ranks + 1, after the link
//   counters' "network") with one track holding every step of the path, on
//   every rank, named "r17 F mb3 L14 qkv" (the rank, then the op's trace
//   name) or "r17 host issue";
// - in each traced rank's process, a thread "critical path" (tid = its
//   streams + 1) with the steps on that rank, under its own streams;
// - flow arrows (cat "critical_path") from step to step where the path moves
//   between two traced ranks.
// Each step's args: rank, stream, op and the op-class key.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/proto/program.pb.h"
#include "sim/report/analyses/op_graph.h"
#include "sim/report/formats/trace_writer.h"

namespace lacuna::report {

void write_critical_path_events(const ir::Program& program, const CriticalPath& path,
                                const std::vector<int32_t>& traced, const TraceWriter::Emit& emit);

}  // namespace lacuna::report
