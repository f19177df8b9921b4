// Pieces of the JSON outputs shared by `lacuna simulate --json` and
// `lacuna compare --json` (internal to sim/report).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "sim/core/units.h"
#include "sim/proto/program.pb.h"
#include "sim/report/analyses/summary.h"

namespace lacuna::report::json_util {

using Json = nlohmann::ordered_json;

// Division (not · 1e-9) gives the correctly rounded decimal: 6308050 ns → 0.00630805.
inline double secs(int64_t ns) { return static_cast<double>(ns) / 1e9; }
inline double secs(TimeNs t) { return secs(t.count()); }

// {min_s, median_s, max_s, worst_rank}
Json time_stats(const Stats& s);
// [{name, is_encoder, tp, cp, pp, dp, virtual_stages, first_rank, num_ranks,
//   parameters, model_flops_per_iteration, frozen, recompute,
//   recompute_num_layers}, ...]
Json modules(const ir::ProgramInfo& info);
// {fits, over_capacity_ranks, num_gpus, peak_bytes, worst_rank,
//  capacity_bytes} (docs/memory-model.md#feasibility).
Json feasibility(const Summary& s);
// What the Optimus planner decided (times in s and ns).
Json optimus(const ir::OptimusInfo& o);

// Several iterations: {count, steady_state_from, run_time_s, run_time_ns,
// rank_window_s, rank_window_ns, times_s, times_ns}.
Json iterations(const Summary& s);

// One line per top-level key (then `tail`, already formatted, if any):
// "{\n \"key\": value,\n ... }\n".
std::string top_level_lines(const Json& top, const std::string& tail_key = {}, const std::string& tail = {});

}  // namespace lacuna::report::json_util
