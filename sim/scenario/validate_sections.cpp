// Field-level rules of each section: presence, enum values, ranges.
#include <algorithm>
#include <cmath>
#include <functional>
#include <tuple>
#include <utility>

#include "sim/proto/program.pb.h"
#include "sim/scenario/checks.h"

namespace lacuna::scenario {

void validate_model(const Scenario& spec, const Checker& c) {
  if (!spec.has_model() || !spec.model().has_llm())
    c.fail("model.llm", "the scenario has no model.llm", "add model { llm { num_layers: ... hidden_size: ... } }");
  const auto& m = spec.model().llm();
  const std::string p = "model.llm.";
  Problems out;
  auto count = [&](const char* name, int64_t value, int64_t max, const std::string& fix = {}) {
    return out.check([&] { c.count(p + name, value, max, fix); });
  };
  count("num_layers", m.num_layers(), Limits::kLayers);
  const bool hidden = count("hidden_size", m.hidden_size(), Limits::kHidden);
  const bool heads = count("num_attention_heads", m.num_attention_heads(), Limits::kHeads);
  const bool kv_heads =
      count("num_kv_heads", m.num_kv_heads(), Limits::kHeads,
            "set it equal to num_attention_heads for multi-head attention, lower for grouped-query attention");
  count("ffn_hidden_size", m.ffn_hidden_size(), Limits::kFfn);
  count("vocab_size", m.vocab_size(), Limits::kVocab);
  count("seq_length", m.seq_length(), Limits::kSeq);
  out.check([&] { c.enumeration(p + "activation", m.activation()); });
  out.check([&] { c.enumeration(p + "norm", m.norm()); });
  out.check([&] { c.enumeration(p + "attention_kernel", m.attention_kernel()); });
  out.check([&] {
    if (m.position_embedding() == Transformer::POSITION_UNSPECIFIED)
      c.fail(p + "position_embedding", "position_embedding is not set",
             "set it to one of POSITION_LEARNED, POSITION_ROTARY, POSITION_NONE: POSITION_LEARNED for GPT-2/3-style "
             "models, POSITION_ROTARY for Llama-style");
    c.enumeration(p + "position_embedding", m.position_embedding());
  });
  for (const auto& dropout : {std::pair<const char*, double>{"hidden_dropout", m.hidden_dropout()},
                              std::pair<const char*, double>{"attention_dropout", m.attention_dropout()}}) {
    const char* name = dropout.first;
    const double value = dropout.second;
    out.check([&] {
      if (!std::isfinite(value) || value < 0 || value >= 1)
        c.fail(p + name, std::string(name) + " must be a probability in [0, 1), got " + Checker::fmt(value),
               "use 0 for no dropout or e.g. 0.1 (Megatron-LM's default)");
    });
  }
  if (heads && kv_heads && m.num_attention_heads() % m.num_kv_heads() != 0)
    out.check([&] {
      c.fail(p + "num_kv_heads",
             "num_kv_heads " + std::to_string(m.num_kv_heads()) + " must divide num_attention_heads " +
                 std::to_string(m.num_attention_heads()),
             "use a divisor of " + std::to_string(m.num_attention_heads()));
    });
  if (hidden && heads && m.hidden_size() % m.num_attention_heads() != 0)
    out.check([&] {
      c.fail(p + "num_attention_heads",
             "num_attention_heads " + std::to_string(m.num_attention_heads()) + " must divide hidden_size " +
                 std::to_string(m.hidden_size()),
             "choose heads so that hidden_size / heads is the head dimension (e.g. 128)");
    });
  out.throw_if_any();
}

void validate_training(const Scenario& spec, const Checker& c) {
  const auto& t = spec.training();
  Problems out;
  out.check([&] { c.count("training.global_batch", t.global_batch(), Limits::kBatch); });
  out.check([&] { c.count("training.micro_batch", t.micro_batch(), Limits::kBatch); });
  out.check([&] { c.enumeration("training.precision", t.precision()); });
  out.throw_if_any();
}

namespace {

void check_link(const Checker& c, const LinkSpec& link, const std::string& p,
                const std::function<void(const std::string&, bool)>& need) {
  need(p + ".bandwidth_gb_per_s", link.has_bandwidth_gb_per_s());
  need(p + ".latency_us", link.has_latency_us());
  need(p + ".efficiency", link.has_efficiency());
  c.rate(p + ".bandwidth_gb_per_s", link.bandwidth_gb_per_s(), 1e-3, 1e6, "GB/s");
  c.real(p + ".latency_us", link.latency_us(), 1e6, true);
  c.fraction(p + ".efficiency", link.efficiency());
}

bool valid_op_class_key(const std::string& key) {
  // GEMM_FP8: GEMMs whose math runs in FP8, as a fraction of the FP8 peak
  // (docs/fp8.md#gemm-efficiency).
  if (key == "DEFAULT" || key == "GEMM_FP8") return true;
  ir::OpClass v;
  return ir::OpClass_Parse(key, &v) && v != ir::OP_CLASS_UNSPECIFIED;
}

std::string op_class_keys() {
  std::string out;
  const auto* d = ir::OpClass_descriptor();
  for (int i = 0; i < d->value_count(); ++i)
    if (d->value(i)->number() != 0) out += d->value(i)->name() + ", ";
  return out + "GEMM_FP8, DEFAULT";
}

// The per-shape kernel model (docs/scenario.md#per-shape-kernel-model):
// after the preset has filled it, every field is needed unless `flat: true`
// switches shapes off; whatever is given must be in range either way.
void check_shape_model(const Checker& c, const KernelShapeModel& s, bool preset) {
  const std::string p = "cluster.gpu.shape_model";
  const bool flat = s.has_flat() && s.flat();
  bool every_tile_has_ctas = s.gemm_tiles_size() > 0;
  for (int i = 0; i < s.gemm_tiles_size(); ++i) {
    const GemmTile& t = s.gemm_tiles(i);
    const std::string tp = p + ".gemm_tiles[" + std::to_string(i) + "]";
    c.count(tp + ".m", t.m(), 1024, "the output rows one CTA computes, e.g. 256");
    c.count(tp + ".n", t.n(), 1024, "the output columns one CTA computes, e.g. 128");
    if (t.ctas_per_sm() < 0 || t.ctas_per_sm() > 64)
      c.fail(tp + ".ctas_per_sm", "must be in [0, 64], got " + std::to_string(t.ctas_per_sm()),
             "0 takes gemm_ctas_per_sm");
    every_tile_has_ctas = every_tile_has_ctas && t.ctas_per_sm() > 0;
  }
  auto need = [&](const std::string& field, bool has) {
    if (has || flat) return;
    c.fail(p + "." + field, "is not set",
           std::string(preset ? "set it" : "give the per-shape kernel model (docs/scenario.md#per-shape-kernel-model), "
                                            "use preset: \"h100-sxm\"") +
               ", or set cluster.gpu.shape_model.flat: true to time every kernel at its class efficiency");
  };
  need("gemm_tiles", s.gemm_tiles_size() > 0);
  need("gemm_ctas_per_sm", s.has_gemm_ctas_per_sm() || every_tile_has_ctas);
  need("gemm_k_overhead", s.has_gemm_k_overhead());
  need("gemm_max_split_k", s.has_gemm_max_split_k());
  need("attention_block_q", s.has_attention_block_q());
  need("attention_kv_overhead", s.has_attention_kv_overhead());
  need("attention_head_dim_overhead", s.has_attention_head_dim_overhead());
  if (s.has_gemm_ctas_per_sm()) c.count(p + ".gemm_ctas_per_sm", s.gemm_ctas_per_sm(), 64);
  if (s.has_gemm_k_overhead()) c.real(p + ".gemm_k_overhead", s.gemm_k_overhead(), 1e6, true);
  if (s.has_gemm_max_split_k()) c.count(p + ".gemm_max_split_k", s.gemm_max_split_k(), 64, "1 disables split-K");
  if (s.has_attention_block_q()) c.count(p + ".attention_block_q", s.attention_block_q(), 1024, "e.g. 128");
  if (s.has_attention_kv_overhead()) c.real(p + ".attention_kv_overhead", s.attention_kv_overhead(), 1e7, true);
  if (s.has_attention_head_dim_overhead())
    c.real(p + ".attention_head_dim_overhead", s.attention_head_dim_overhead(), 1e5, true);
}

}  // namespace

void validate_cluster(const Scenario& spec, const Checker& c) {
  const auto& cl = spec.cluster();
  const auto& g = cl.gpu();
  const bool preset = !cl.preset().empty();
  auto need = [&](const std::string& path, bool has) {
    if (has) return;
    if (path == "cluster.num_nodes")
      c.fail(path, "is not set", "set cluster.num_nodes: a preset describes one node, not how many there are");
    c.fail(path, "is not set", preset ? "set it" : "set it or use preset: \"h100-sxm\"");
  };
  Problems out;

  const bool nodes = out.check([&] {
    need("cluster.num_nodes", cl.has_num_nodes());
    c.count("cluster.num_nodes", cl.num_nodes(), Limits::kGpus);
  });
  const bool per_node = out.check([&] {
    need("cluster.gpus_per_node", cl.has_gpus_per_node());
    // A rack-scale NVLink domain (GB200 NVL72) is not one node: its trays are
    // nodes with their own NICs, joined by nvlink_domain_gpus.
    if (cl.gpus_per_node() > Limits::kGpusPerNode)
      c.fail("cluster.gpus_per_node",
             std::to_string(cl.gpus_per_node()) + " is above the supported maximum " +
                 std::to_string(Limits::kGpusPerNode),
             "for GPUs joined by NVLink across nodes (e.g. a GB200 NVL72 rack) give the node (tray) size, "
             "gpus_per_node: 4, and nvlink_domain_gpus: 72 (docs/network.md#nvlink-domains)");
    c.count("cluster.gpus_per_node", cl.gpus_per_node(), Limits::kGpusPerNode);
  });
  if (nodes && per_node)
    out.check([&] {
      if (cl.num_nodes() * cl.gpus_per_node() > Limits::kGpus)
        c.fail("cluster.num_nodes",
               "the cluster has " + std::to_string(cl.num_nodes() * cl.gpus_per_node()) +
                   " GPUs, above the supported maximum " + std::to_string(Limits::kGpus),
               "use fewer nodes");
      validate_nvlink_domain(spec, c);
    });

  // Peaks: the one the precision needs is checked with the plan; any given must be sane.
  const std::pair<const char*, std::pair<bool, double>> peaks[] = {
      {"peak_bf16_tflops", {g.has_peak_bf16_tflops(), g.peak_bf16_tflops()}},
      {"peak_fp16_tflops", {g.has_peak_fp16_tflops(), g.peak_fp16_tflops()}},
      {"peak_fp8_tflops", {g.has_peak_fp8_tflops(), g.peak_fp8_tflops()}},
      {"peak_fp4_tflops", {g.has_peak_fp4_tflops(), g.peak_fp4_tflops()}},
      {"peak_tf32_tflops", {g.has_peak_tf32_tflops(), g.peak_tf32_tflops()}},
      {"peak_fp32_tflops", {g.has_peak_fp32_tflops(), g.peak_fp32_tflops()}},
  };
  for (const auto& peak : peaks)
    if (peak.second.first)
      out.check([&] { c.rate(std::string("cluster.gpu.") + peak.first, peak.second.second, 1e-3, 1e5, "TFLOP/s"); });

  out.check([&] {
    need("cluster.gpu.hbm_bandwidth_gb_per_s", g.has_hbm_bandwidth_gb_per_s());
    c.rate("cluster.gpu.hbm_bandwidth_gb_per_s", g.hbm_bandwidth_gb_per_s(), 1e-3, 1e6, "GB/s");
  });
  out.check([&] {
    need("cluster.gpu.hbm_capacity_gib", g.has_hbm_capacity_gib());
    c.real("cluster.gpu.hbm_capacity_gib", g.hbm_capacity_gib(), 1e5, false);
  });
  out.check([&] {
    need("cluster.gpu.num_sms", g.has_num_sms());
    c.count("cluster.gpu.num_sms", g.num_sms(), Limits::kSms);
  });
  out.check([&] {
    need("cluster.gpu.kernel_overhead_us", g.has_kernel_overhead_us());
    c.real("cluster.gpu.kernel_overhead_us", g.kernel_overhead_us(), 1e6, true);
  });

  // Map order is unspecified: check keys sorted so the problems come in a stable order.
  std::map<std::string, const Efficiency*> eff;
  for (const auto& [k, v] : g.efficiency()) eff.emplace(k, &v);
  for (const auto& entry : eff) {
    const std::string& k = entry.first;
    const Efficiency* v = entry.second;
    out.check([&] {
      const std::string p = "cluster.gpu.efficiency[" + k + "]";
      if (!valid_op_class_key(k)) c.fail(p, "\"" + k + "\" is not an op class", "use one of " + op_class_keys());
      if (v->has_flops()) c.fraction(p + ".flops", v->flops());
      if (v->has_memory()) c.fraction(p + ".memory", v->memory());
    });
  }
  out.check([&] {
    const auto def = eff.find("DEFAULT");
    need("cluster.gpu.efficiency[DEFAULT]", def != eff.end());
    need("cluster.gpu.efficiency[DEFAULT].flops", def->second->has_flops());
    need("cluster.gpu.efficiency[DEFAULT].memory", def->second->has_memory());
  });
  out.check([&] { check_shape_model(c, g.shape_model(), preset); });

  out.check([&] { check_link(c, cl.nvlink(), "cluster.nvlink", need); });
  out.check([&] { need("cluster.nvls", cl.has_nvls()); });
  out.check([&] { check_link(c, cl.nic(), "cluster.nic", need); });
  out.check([&] {
    need("cluster.nics_per_node", cl.has_nics_per_node());
    c.count("cluster.nics_per_node", cl.nics_per_node(), Limits::kGpusPerNode);
  });
  out.check([&] {
    need("cluster.topology", cl.has_topology());
    c.enumeration("cluster.topology", cl.topology());
  });

  // The flow-level network's fabric (its presets are applied and its preset
  // names checked when the network model is built, sim/network).
  const NetworkSpec& net = cl.network();
  for (int i = 0; i < net.tiers_size(); ++i) {
    out.check([&] {
      const SwitchTier& t = net.tiers(i);
      const std::string p = "cluster.network.tiers[" + std::to_string(i) + "]";
      if (t.has_children())
        c.count(p + ".children", t.children(), Limits::kGpus,
                "the number of nodes (first tier) or switch groups under one switch");
      if (t.has_oversubscription()) {
        c.real(p + ".oversubscription", t.oversubscription(), 1e3, false);
        if (t.oversubscription() < 1)
          c.fail(p + ".oversubscription",
                 "must be ≥ 1 (downlink : uplink bandwidth), got " + Checker::fmt(t.oversubscription()),
                 "use 1 for a non-blocking tier, 2 for 2:1, ...");
      }
      if (t.has_latency_us()) c.real(p + ".latency_us", t.latency_us(), 1e6, true);
    });
  }
  // The host and the memory overheads (docs/cost-model.md#host-overheads,
  // docs/memory-model.md#overheads): every field, from the preset or given.
  const HostSpec& host = cl.host();
  const MemoryOverheads& mo = cl.memory_overheads();
  const std::tuple<const char*, bool, double, double> amounts[] = {
      {"cluster.host.kernel_launch_us", host.has_kernel_launch_us(), host.kernel_launch_us(), 1e6},
      {"cluster.host.collective_launch_us", host.has_collective_launch_us(), host.collective_launch_us(), 1e6},
      {"cluster.host.microbatch_overhead_us", host.has_microbatch_overhead_us(), host.microbatch_overhead_us(), 1e9},
      {"cluster.host.iteration_overhead_us", host.has_iteration_overhead_us(), host.iteration_overhead_us(), 1e9},
      {"cluster.memory_overheads.cuda_context_gib", mo.has_cuda_context_gib(), mo.cuda_context_gib(), 1e4},
      {"cluster.memory_overheads.nccl_communicator_mib", mo.has_nccl_communicator_mib(), mo.nccl_communicator_mib(),
       1e7},
      {"cluster.memory_overheads.allocator_fragmentation", mo.has_allocator_fragmentation(),
       mo.allocator_fragmentation(), 10},
  };
  for (const auto& amount : amounts)
    out.check([&] {
      need(std::get<0>(amount), std::get<1>(amount));
      c.real(std::get<0>(amount), std::get<2>(amount), std::get<3>(amount), true);
    });

  out.check([&] { c.enumeration_or_unset("cluster.network.algorithm", net.algorithm()); });
  out.check([&] { c.enumeration_or_unset("cluster.network.protocol", net.protocol()); });
  if (net.has_compute_slowdown_under_comm())
    out.check([&] {
      c.real("cluster.network.compute_slowdown_under_comm", net.compute_slowdown_under_comm(), 10, true);
    });
  out.throw_if_any();
}

namespace {

void check_rank_order(const ParallelPlan& p, const Checker& c) {
  if (p.rank_order().empty()) return;  // Megatron-LM's default tp-cp-dp-pp
  std::vector<std::string> parts;
  std::string cur;
  for (char ch : p.rank_order() + "-") {
    if (ch != '-') {
      cur += ch;
      continue;
    }
    parts.push_back(cur);
    cur.clear();
  }
  std::vector<std::string> want = {"cp", "dp", "pp", "tp"};
  auto sorted = parts;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != want)
    c.fail("parallel.rank_order", "\"" + p.rank_order() + "\" must name each of tp, cp, dp and pp once, joined by \"-\"",
           "write e.g. \"tp-cp-dp-pp\" (Megatron-LM's default, also used when rank_order is empty)");
}

}  // namespace

void validate_parallel(const Scenario& spec, const Checker& c) {
  const auto& p = spec.parallel();
  Problems out;
  out.check([&] { c.count("parallel.tp", p.tp(), Limits::kGpus); });
  out.check([&] { c.count("parallel.cp", p.cp(), Limits::kGpus); });
  out.check([&] { c.count("parallel.pp", p.pp(), Limits::kGpus); });
  out.check([&] { c.count("parallel.dp", p.dp(), Limits::kGpus); });
  out.check([&] {
    c.count("parallel.virtual_stages", p.virtual_stages(), Limits::kVirtualStages,
            "set virtual_stages: 1 (≥ 2 only with schedule INTERLEAVED_1F1B)");
  });
  out.check([&] { c.enumeration("parallel.recompute", p.recompute()); });
  out.check([&] { check_rank_order(p, c); });
  out.check([&] { c.enumeration("schedule.kind", spec.schedule().kind()); });
  out.throw_if_any();
}

}  // namespace lacuna::scenario
