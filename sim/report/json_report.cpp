#include "sim/report/json_report.h"

#include <nlohmann/json.hpp>

#include "sim/report/names.h"

namespace lacuna::report {

namespace {

using Json = nlohmann::ordered_json;

// Division (not · 1e-9) gives the correctly rounded decimal: 6308050 ns → 0.00630805.
double secs(int64_t ns) { return static_cast<double>(ns) / 1e9; }
double secs(TimeNs t) { return secs(t.count()); }

Json time_stats(const Stats& s) {
  Json j;
  j["min_s"] = secs(s.min);
  j["median_s"] = secs(s.median);
  j["max_s"] = secs(s.max);
  j["worst_rank"] = s.worst_rank;
  return j;
}

Json rank_entry(const RankAccount& r, bool folded) {
  Json j;
  if (folded) {
    j["rank"] = r.rank;
    j["ranks"] = r.represents;
  } else {
    j["rank"] = r.rank;
  }
  Json bubbles;
  for (Bubble b : kAllBubbles) bubbles[std::string(bubble_key(b))] = secs(r.bubble(b));
  bubbles["total"] = secs(r.idle());
  j["bubble_s"] = std::move(bubbles);
  j["busy_s"] = secs(r.busy);
  Json phases;
  for (int p = 1; p < kNumPhases; ++p) {
    phases[std::string(phase_key(static_cast<ir::Phase>(p)))] = secs(r.busy_by_phase[static_cast<size_t>(p)]);
  }
  j["busy_by_phase_s"] = std::move(phases);
  j["peak_memory_bytes"] = r.peak_memory.count();
  j["over_capacity"] = r.over_capacity;
  return j;
}

}  // namespace

std::string summary_json(const Summary& s) {
  const ir::ProgramInfo& info = s.info;
  Json top;
  top["lacuna_version"] = info.lacuna_version();
  top["scenario"] = s.scenario_name;
  top["scenario_file"] = info.scenario_file();
  top["cost_model"] = s.cost_model;
  top["mode"] = s.folded ? "folded" : "full";
  top["num_gpus"] = s.num_gpus;
  top["simulated_ranks"] = s.simulated_ranks;
  Json plan;
  plan["tp"] = info.tp();
  plan["cp"] = info.cp();
  plan["pp"] = info.pp();
  plan["dp"] = info.dp();
  plan["virtual_stages"] = info.virtual_stages();
  plan["schedule"] = schedule_name(info.schedule());
  plan["microbatches"] = info.num_microbatches();
  plan["global_batch"] = info.global_batch();
  plan["micro_batch"] = info.micro_batch();
  plan["seq_length"] = info.seq_length();
  plan["recompute"] = recompute_name(info.recompute());
  plan["sequence_parallel"] = info.sequence_parallel();
  plan["distributed_optimizer"] = info.distributed_optimizer();
  plan["precision"] = precision_name(info.precision());
  top["plan"] = std::move(plan);
  top["iteration_time_s"] = secs(s.iteration_time);
  top["iteration_time_ns"] = s.iteration_time.count();
  top["tokens_per_iteration"] = info.tokens_per_iteration();
  top["tokens_per_s"] = s.tokens_per_s;
  top["tflops_per_gpu"] = s.tflops_per_gpu;
  top["mfu"] = s.mfu;
  top["hfu"] = s.hfu;
  top["peak_flops_per_gpu"] = info.peak_flops_per_gpu();
  top["model_flops_per_iteration"] = info.model_flops_per_iteration();
  top["hardware_flops_per_iteration"] = info.hardware_flops_per_iteration();
  Json bubbles;
  for (Bubble b : kAllBubbles) bubbles[std::string(bubble_key(b))] = time_stats(s.bubbles[static_cast<int>(b)]);
  bubbles["total"] = time_stats(s.idle);
  top["bubble_summary"] = std::move(bubbles);
  top["busy_summary"] = time_stats(s.busy);
  Json memory;
  memory["capacity_bytes"] = s.memory_capacity.count();
  memory["min_bytes"] = s.peak_memory.min;
  memory["median_bytes"] = s.peak_memory.median;
  memory["max_bytes"] = s.peak_memory.max;
  memory["worst_rank"] = s.peak_memory.worst_rank;
  memory["over_capacity_ranks"] = s.over_capacity_ranks;
  top["peak_memory"] = std::move(memory);

  std::string out = "{\n";
  for (auto it = top.begin(); it != top.end(); ++it) {
    out += ' ';
    out += Json(it.key()).dump();
    out += ": ";
    out += it.value().dump();
    out += ",\n";
  }
  out += " \"ranks\": [";
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    out += i == 0 ? "\n  " : ",\n  ";
    out += rank_entry(s.ranks[i], s.folded).dump();
  }
  out += s.ranks.empty() ? "]\n}\n" : "\n ]\n}\n";
  return out;
}

}  // namespace lacuna::report
