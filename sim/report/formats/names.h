// Short, stable names for IR enums as they appear in traces, tables and JSON.
// Kept in one place so the trace, the SVG and the summary agree.
#pragma once

#include <string>
#include <string_view>

#include "sim/proto/program.pb.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::report {

std::string_view phase_letter(ir::Phase phase);  // "F", "B", "W", "R", "opt", "dp"
std::string_view phase_key(ir::Phase phase);     // "forward", "backward_input", ...
std::string_view role_name(ir::KernelRole role);  // "qkv", "fc2", ... ("" when unspecified)
std::string_view op_class_name(ir::OpClass op_class);
std::string_view collective_short(ir::CollectiveKind kind);  // "AR", "AG", "RS", ...
std::string_view schedule_name(scenario::ScheduleKind kind);  // "1F1B", "interleaved 1F1B", ...
std::string_view recompute_name(scenario::Recompute recompute);
std::string_view precision_name(scenario::Precision precision);
// "Megatron baseline", "Megatron balanced", "Optimus", "heterogeneous".
std::string_view placement_name(scenario::PlacementKind kind);
// The scenario spelling: "MEGATRON_BASELINE", ... (JSON values).
std::string placement_key(scenario::PlacementKind kind);

// Name of module `module` of a multimodal program (ProgramInfo.modules), e.g.
// "vit-22b"; "module N" when the program does not describe it.
std::string module_name(const ir::Program& program, int32_t module);

// "rank 17 (pp 2 tp 1 dp 0)"; cp appears when the program uses context parallelism.
std::string rank_label(const ir::Program& program, int32_t rank);

}  // namespace lacuna::report
