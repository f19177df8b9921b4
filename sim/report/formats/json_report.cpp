#include "sim/report/formats/json_report.h"

#include <nlohmann/json.hpp>

#include "sim/report/formats/critical_path_report.h"
#include "sim/report/formats/json_util.h"
#include "sim/report/formats/names.h"
#include "sim/report/formats/network_report.h"

namespace lacuna::report {

namespace json_util {

Json time_stats(const Stats& s) {
  Json j;
  j["min_s"] = secs(s.min);
  j["median_s"] = secs(s.median);
  j["max_s"] = secs(s.max);
  j["worst_rank"] = s.worst_rank;
  return j;
}

Json modules(const ir::ProgramInfo& info) {
  Json list = Json::array();
  for (const ir::ModuleInfo& m : info.modules()) {
    Json j;
    j["name"] = m.name();
    j["is_encoder"] = m.is_encoder();
    j["tp"] = m.tp();
    j["cp"] = m.cp();
    j["pp"] = m.pp();
    j["dp"] = m.dp();
    j["virtual_stages"] = m.virtual_stages();
    j["first_rank"] = m.first_rank();
    j["num_ranks"] = m.num_ranks();
    j["parameters"] = m.parameters();
    j["model_flops_per_iteration"] = m.model_flops_per_iteration();
    j["frozen"] = m.frozen();
    j["recompute"] = recompute_name(m.recompute());
    j["recompute_num_layers"] = m.recompute_num_layers();
    list.push_back(std::move(j));
  }
  return list;
}

Json feasibility(const Summary& s) {
  Json j;
  j["fits"] = s.over_capacity_ranks == 0;
  j["over_capacity_ranks"] = s.over_capacity_ranks;
  j["num_gpus"] = s.num_gpus;
  j["peak_bytes"] = s.peak_memory.max;
  j["worst_rank"] = s.peak_memory.worst_rank;
  j["capacity_bytes"] = s.memory_capacity.count();
  return j;
}

Json optimus(const ir::OptimusInfo& o) {
  Json j;
  j["encoder_tp"] = o.encoder_tp();
  j["encoder_pp"] = o.encoder_pp();
  j["encoder_dp"] = o.encoder_dp();
  j["encoder_pipelines_per_llm_pipeline"] = o.encoder_pipelines_per_llm_pipeline();
  j["microbatch_split"] = Json(std::vector<int32_t>(o.microbatch_split().begin(), o.microbatch_split().end()));
  j["llm_only_iteration_s"] = secs(o.llm_only_iteration_ns());
  j["llm_only_iteration_ns"] = o.llm_only_iteration_ns();
  j["estimated_iteration_s"] = secs(o.estimated_iteration_ns());
  j["estimated_iteration_ns"] = o.estimated_iteration_ns();
  j["coarse_efficiency"] = o.coarse_efficiency();
  j["fine_efficiency"] = o.fine_efficiency();
  j["coarse_only"] = o.coarse_only();
  j["plans_evaluated"] = o.plans_evaluated();
  j["plans_pruned_by_memory"] = o.plans_pruned_by_memory();
  j["splits_evaluated"] = o.splits_evaluated();
  j["forward_moves"] = o.forward_moves();
  j["backward_moves"] = o.backward_moves();
  j["kernel_level_cuts"] = o.kernel_level_cuts();
  j["kernel_level_backward_cuts"] = o.kernel_level_backward_cuts();
  j["warmup_deferral"] = o.warmup_deferral();
  j["deferrals_evaluated"] = o.deferrals_evaluated();
  j["llm_megatron_iteration_ns"] = o.llm_megatron_iteration_ns();
  const auto& b = o.bubble_profile();
  Json profile;
  profile["dp_all_gather_ns"] = b.dp_all_gather_ns();
  profile["pp_warmup_ns"] = b.pp_warmup_ns();
  profile["pp_other_ns"] = b.pp_other_ns();
  profile["tp_ns"] = b.tp_ns();
  profile["pp_cooldown_ns"] = b.pp_cooldown_ns();
  profile["dp_reduce_scatter_ns"] = b.dp_reduce_scatter_ns();
  j["llm_bubble_profile"] = profile;
  return j;
}

Json iterations(const Summary& s) {
  Json j;
  j["count"] = s.iterations;
  j["steady_state_from"] = 1;
  j["run_time_s"] = secs(s.run_time);
  j["run_time_ns"] = s.run_time.count();
  j["rank_window_s"] = secs(s.rank_window);
  j["rank_window_ns"] = s.rank_window.count();
  std::vector<double> times_s;
  std::vector<int64_t> times_ns;
  for (TimeNs t : s.iteration_times) {
    times_s.push_back(secs(t));
    times_ns.push_back(t.count());
  }
  j["times_s"] = times_s;
  j["times_ns"] = times_ns;
  return j;
}

std::string top_level_lines(const Json& top, const std::string& tail_key, const std::string& tail) {
  std::string out = "{\n";
  for (auto it = top.begin(); it != top.end(); ++it) {
    out += ' ';
    out += Json(it.key()).dump();
    out += ": ";
    out += it.value().dump();
    out += tail_key.empty() && std::next(it) == top.end() ? "\n" : ",\n";
  }
  if (!tail_key.empty()) {
    out += ' ';
    out += Json(tail_key).dump();
    out += ": ";
    out += tail;
    out += '\n';
  }
  out += "}\n";
  return out;
}

}  // namespace json_util

namespace {

using json_util::Json;
using json_util::secs;
using json_util::time_stats;

// {"profile", "device", "kernels": {exact, interpolated, extrapolated},
//  "time_s": {...}, "time_fraction": {...}, "by_class": {"GEMM": {kernels, time_s, time_fraction}, ...}}
Json coverage_row(const CalibrationCoverage::Row& r) {
  static constexpr const char* kKind[] = {"exact", "interpolated", "extrapolated"};
  Json kernels, time, fraction;
  const int64_t total = r.time_ns();
  for (int k = 0; k < CalibrationCoverage::kKinds; ++k) {
    const auto& sh = r.shares[static_cast<size_t>(k)];
    kernels[kKind[k]] = sh.kernels;
    time[kKind[k]] = secs(sh.time_ns);
    fraction[kKind[k]] = total > 0 ? static_cast<double>(sh.time_ns) / static_cast<double>(total) : 0.0;
  }
  Json j;
  j["kernels"] = std::move(kernels);
  j["time_s"] = std::move(time);
  j["time_fraction"] = std::move(fraction);
  return j;
}

Json calibration_json(const CalibrationCoverage& c) {
  Json j;
  j["profile"] = c.profile;
  j["device"] = c.device;
  const Json total = coverage_row(c.total);
  for (auto it = total.begin(); it != total.end(); ++it) j[it.key()] = it.value();
  Json classes = Json::object();
  for (const auto& r : c.classes) classes[r.op_class] = coverage_row(r);
  j["by_class"] = std::move(classes);
  return j;
}

Json rank_entry(const RankAccount& r, bool folded, bool multimodal, bool moe) {
  Json j;
  if (folded) {
    j["rank"] = r.rank;
    j["ranks"] = r.represents;
  } else {
    j["rank"] = r.rank;
  }
  Json bubbles;
  for (Bubble b : kAllBubbles) {
    if (bubble_shown(b, multimodal, moe)) bubbles[std::string(bubble_key(b))] = secs(r.bubble(b));
  }
  bubbles["total"] = secs(r.idle());
  j["bubble_s"] = std::move(bubbles);
  j["busy_s"] = secs(r.busy);
  Json phases;
  for (int p = 1; p < kNumPhases; ++p) {
    phases[std::string(phase_key(static_cast<ir::Phase>(p)))] = secs(r.busy_by_phase[static_cast<size_t>(p)]);
  }
  j["busy_by_phase_s"] = std::move(phases);
  if (multimodal) j["encoder_compute_s"] = secs(r.encoder_compute);
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
  if (!s.program_digest.empty()) top["program_digest"] = s.program_digest;
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
  if (s.multimodal()) {
    top["placement"] = placement_key(info.placement());
    top["modules"] = json_util::modules(info);
    if (info.has_optimus()) top["optimus"] = json_util::optimus(info.optimus());
  }
  top["iteration_time_s"] = secs(s.iteration_time);
  top["iteration_time_ns"] = s.iteration_time.count();
  if (s.iterations > 1) top["iterations"] = json_util::iterations(s);
  top["tokens_per_iteration"] = info.tokens_per_iteration();
  top["tokens_per_s"] = s.tokens_per_s;
  top["tflops_per_gpu"] = s.tflops_per_gpu;
  top["mfu"] = s.mfu;
  top["hfu"] = s.hfu;
  top["peak_flops_per_gpu"] = info.peak_flops_per_gpu();
  if (info.has_fp8() && info.peak_bf16_flops_per_gpu() > 0 && info.peak_fp8_flops_per_gpu() > 0) {
    // docs/fp8.md#mfu: the same model FLOP/s over each dense peak.
    Json fp8;
    fp8["recipe"] = scenario::Fp8Recipe_Name(info.fp8().recipe());
    fp8["mfu_bf16_peak"] = s.mfu_on(info.peak_bf16_flops_per_gpu());
    fp8["mfu_fp8_peak"] = s.mfu_on(info.peak_fp8_flops_per_gpu());
    fp8["peak_bf16_flops_per_gpu"] = info.peak_bf16_flops_per_gpu();
    fp8["peak_fp8_flops_per_gpu"] = info.peak_fp8_flops_per_gpu();
    fp8["mfu_convention"] = "mfu = model FLOP/s per GPU / dense FP8 peak; mfu_bf16_peak: the same over the dense BF16 peak";
    if (s.fp8) {
      Json classes = Json::array();
      for (const auto& r : s.fp8->ranks) {
        Json rows = Json::array();
        for (const auto& row : r.rows)
          rows.push_back({{"what", row.what}, {"role", row.role}, {"ops", row.ops}, {"time_s", secs(row.time)}});
        classes.push_back({{"class", r.name}, {"rows", std::move(rows)}});
      }
      fp8["breakdown"] = std::move(classes);
    }
    top["fp8"] = std::move(fp8);
  }
  top["model_flops_per_iteration"] = info.model_flops_per_iteration();
  top["hardware_flops_per_iteration"] = info.hardware_flops_per_iteration();
  Json bubbles;
  for (Bubble b : kAllBubbles) {
    if (bubble_shown(b, s.multimodal(), s.moe())) bubbles[std::string(bubble_key(b))] = time_stats(s.bubbles[static_cast<int>(b)]);
  }
  bubbles["total"] = time_stats(s.idle);
  top["bubble_summary"] = std::move(bubbles);
  top["busy_summary"] = time_stats(s.busy);
  if (s.multimodal()) top["encoder_compute_summary"] = time_stats(s.encoder_compute);
  Json memory;
  memory["capacity_bytes"] = s.memory_capacity.count();
  memory["min_bytes"] = s.peak_memory.min;
  memory["median_bytes"] = s.peak_memory.median;
  memory["max_bytes"] = s.peak_memory.max;
  memory["worst_rank"] = s.peak_memory.worst_rank;
  memory["over_capacity_ranks"] = s.over_capacity_ranks;
  top["peak_memory"] = std::move(memory);
  top["feasibility"] = json_util::feasibility(s);
  // Network outputs, only when the caller filled them (docs/outputs.md).
  if (s.comm) top["comm"] = comm_json(*s.comm);
  if (s.links) top["links"] = links_json(*s.links);
  if (s.calibration) top["calibration"] = calibration_json(*s.calibration);
  if (s.critical_path) top["critical_path"] = critical_path_json(*s.critical_path);
  if (s.stragglers) top["stragglers"] = stragglers_json(*s.stragglers);
  if (s.monte_carlo) top["monte_carlo"] = Json::parse(monte_carlo_json(*s.monte_carlo));
  if (s.variability) {
    Json v;
    v["seed"] = s.variability->seed;
    v["sources"] = s.variability->sources;
    v["straggler_hosts"] = s.variability->straggler_hosts;
    v["slowest_rank"] = s.variability->slowest_rank;
    v["slowest_compute_factor"] = s.variability->slowest_factor;
    v["link_flaps"] = s.variability->link_flaps;
    top["variability"] = std::move(v);
  }

  std::string ranks = "[";
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    ranks += i == 0 ? "\n  " : ",\n  ";
    ranks += rank_entry(s.ranks[i], s.folded, s.multimodal(), s.moe()).dump();
  }
  ranks += s.ranks.empty() ? "]" : "\n ]";
  if (s.timeline) ranks += ",\n \"timeline\": " + timeline_json(*s.timeline);
  return json_util::top_level_lines(top, "ranks", ranks);
}

}  // namespace lacuna::report
