#include "sim/placement/hetero_layouts.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/cost/memory_peak.h"
#include "sim/engine/simulator.h"
#include "sim/placement/compile.h"
#include "sim/placement/modules.h"
#include "sim/placement/recompute_fit.h"

namespace lacuna::placement {
namespace {

int64_t at_least_1(int64_t v) { return v > 0 ? v : 1; }

int64_t gpus_per_node(const scenario::Scenario& spec) {
  // The cluster's node size; 8 when unset (the compiler's default, hetero_plan.cpp).
  return spec.cluster().has_gpus_per_node() && spec.cluster().gpus_per_node() > 0 ? spec.cluster().gpus_per_node()
                                                                                 : 8;
}

int64_t llm_world(const scenario::Scenario& spec) {
  const auto& p = spec.parallel();
  return at_least_1(p.tp()) * at_least_1(p.cp()) * at_least_1(p.pp()) * at_least_1(p.dp());
}

int32_t llm_microbatches(const scenario::Scenario& spec) {
  const int64_t per = at_least_1(spec.training().micro_batch()) * at_least_1(spec.parallel().dp());
  return static_cast<int32_t>(std::max<int64_t>(1, spec.training().global_batch() / per));
}

// TP sizes the encoder's shapes allow: dividing its heads, key/value heads and
// FFN, within one node (Megatron keeps TP groups on NVLink).
bool tp_fits_shapes(const scenario::Encoder& enc, int64_t tp, int64_t gpn) {
  const auto& t = enc.transformer();
  const int64_t kv = t.num_kv_heads() > 0 ? t.num_kv_heads() : t.num_attention_heads();
  return tp <= gpn && t.num_attention_heads() % tp == 0 && kv % tp == 0 && t.ffn_hidden_size() % tp == 0;
}

// The DP relation the boundary needs (one DP divides the other) and whole
// batch shards; fan-in on an island also splits each LLM microbatch.
bool dp_relates(const scenario::Scenario& spec, int64_t dp, bool island) {
  const int64_t dpl = at_least_1(spec.parallel().dp());
  const int64_t gb = spec.training().global_batch();
  if (dp % dpl != 0 && dpl % dp != 0) return false;
  if (gb % dp != 0) return false;
  if (island && dp > dpl && spec.training().micro_batch() % (dp / dpl) != 0) return false;
  return true;
}

scenario::ModuleLayout make_layout(const scenario::Scenario& spec, const scenario::Encoder& enc, int64_t tp,
                                   int64_t pp, int64_t dp, int64_t first_rank) {
  scenario::ModuleLayout l;
  l.set_tp(tp);
  l.set_cp(1);  // MegatronMIMO's default encoder CP (shared/reference/mllm-systems.md §2)
  l.set_pp(pp);
  l.set_dp(dp);
  l.set_virtual_stages(1);
  l.set_first_rank(first_rank);
  // Sequence parallelism as the LLM's, where the encoder's tokens split.
  l.set_sequence_parallel(spec.parallel().sequence_parallel() && tp > 1 && enc.transformer().seq_length() % tp == 0);
  l.set_recompute(scenario::RECOMPUTE_NONE);  // fit_recompute raises it as far as HBM needs
  return l;
}

scenario::LoadedScenario with_layouts(const scenario::LoadedScenario& s, const std::vector<scenario::ModuleLayout>& l,
                                      std::optional<int64_t> num_nodes) {
  scenario::LoadedScenario out = s;
  for (size_t e = 0; e < l.size(); ++e) *out.spec.mutable_model()->mutable_encoders(static_cast<int>(e))->mutable_layout() = l[e];
  out.spec.mutable_placement()->set_kind(scenario::HETEROGENEOUS);
  if (num_nodes) out.spec.mutable_cluster()->set_num_nodes(*num_nodes);
  return out;
}

std::string recompute_text(const ir::ModuleInfo& m) {
  switch (m.recompute()) {
    case scenario::RECOMPUTE_SELECTIVE: return "selective recompute";
    case scenario::RECOMPUTE_FULL:
      return m.recompute_num_layers() > 0 ? fmt::format("full recompute of {} layers", m.recompute_num_layers())
                                          : std::string("full recompute");
    default: return "no recompute";
  }
}

std::string ms(int64_t ns) { return fmt::format("{:.2f} ms", static_cast<double>(ns) / 1e6); }

std::string layouts_text(const ir::Program& p) {
  std::string out;
  for (int i = 1; i < p.info().modules_size(); ++i) {
    const auto& m = p.info().modules(i);
    out += fmt::format("{}{} TP{} PP{} DP{}, {}", out.empty() ? "" : "; ", m.name(), m.tp(), m.pp(), m.dp(),
                       recompute_text(m));
    if (m.first_rank() > 0)
      out += fmt::format(" on an island of {} GPUs (ranks {}–{})", m.num_ranks(), m.first_rank(),
                         m.first_rank() + m.num_ranks() - 1);
  }
  return out;
}

int64_t simulate_folded_ns(const ir::Program& p, const cost::CostModel& cost) {
  // Fixed-duration network (no CommunicationModel): the analytic one.
  return engine::Simulator(p, cost, {.fold = true}).run().end_time.count();
}

// The given island encoder over HBM: a located error naming its island size.
void check_given_islands(const scenario::LoadedScenario& s, const ir::Program& p) {
  for (int e = 0; e < s.spec.model().encoders_size(); ++e) {
    const auto& l = s.spec.model().encoders(e).layout();
    const int32_t first = static_cast<int32_t>(l.first_rank());
    const int32_t n = static_cast<int32_t>(at_least_1(l.tp()) * at_least_1(l.cp()) * at_least_1(l.pp()) *
                                           at_least_1(l.dp()));
    if (ranks_fit(p, first, first + n)) continue;
    throw Error(s.locations.locate("model.encoders[" + std::to_string(e) + "].layout.dp"),
                fmt::format("encoder {}'s island of {} GPUs (tp·cp·pp·dp) cannot hold it even at the most recompute "
                            "that helps: {}",
                            e, n, infeasibility_reason(p)),
                "give the island more GPUs (layout.dp or layout.pp), or leave the layout out and let `lacuna "
                "compare` size the island");
  }
}

}  // namespace

std::string_view hetero_mode_name(HeteroMode mode) {
  return mode == HeteroMode::kColocated ? "colocated" : "non-colocated";
}

std::vector<scenario::ModuleLayout> colocated_candidates(const scenario::LoadedScenario& s, int e) {
  const auto& spec = s.spec;
  const auto& enc = spec.model().encoders(e);
  const int64_t world = llm_world(spec), gpn = gpus_per_node(spec), layers = enc.transformer().num_layers();
  // Encoder pipeline depths dividing the LLM's, as Optimus enumerates
  // colocated encoder plans (shared/reference/mllm-systems.md §1): every GPU
  // then holds whole encoder stages beside its LLM stage.
  const int64_t llm_pp = at_least_1(spec.parallel().pp());
  std::vector<scenario::ModuleLayout> out;
  for (int64_t pp = 1; pp <= llm_pp; ++pp) {
    if (llm_pp % pp != 0 || layers <= 0 || layers % pp != 0) continue;
    for (int64_t tp = 1; tp <= world / pp; ++tp) {
      if ((world / pp) % tp != 0 || !tp_fits_shapes(enc, tp, gpn)) continue;
      const int64_t dp = world / pp / tp;
      if (!dp_relates(spec, dp, false)) continue;
      out.push_back(make_layout(spec, enc, tp, pp, dp, 0));
    }
  }
  return out;
}

std::vector<scenario::ModuleLayout> island_candidates(const scenario::LoadedScenario& s, int e, int32_t island_gpus,
                                                      int32_t first_rank) {
  const auto& spec = s.spec;
  const auto& enc = spec.model().encoders(e);
  const int64_t gpn = gpus_per_node(spec), layers = enc.transformer().num_layers();
  std::vector<scenario::ModuleLayout> out;
  for (int64_t pp = 1; pp <= island_gpus; ++pp) {
    if (island_gpus % pp != 0 || layers <= 0 || layers % pp != 0) continue;
    for (int64_t tp = 1; tp <= island_gpus / pp; ++tp) {
      if ((island_gpus / pp) % tp != 0 || !tp_fits_shapes(enc, tp, gpn)) continue;
      const int64_t dp = island_gpus / pp / tp;
      if (!dp_relates(spec, dp, true)) continue;
      out.push_back(make_layout(spec, enc, tp, pp, dp, first_rank));
    }
  }
  return out;
}

int64_t module_period_ns(const ir::Program& p, int32_t module, int32_t microbatches, const cost::CostModel& cost) {
  std::vector<bool> used(static_cast<size_t>(p.classes_size()), false);
  for (const auto& r : p.ranks()) used[static_cast<size_t>(r.class_id())] = true;
  int64_t worst = 0;
  for (int32_t c = 0; c < p.classes_size(); ++c) {
    if (!used[static_cast<size_t>(c)]) continue;
    int64_t ns = 0;
    for (const ir::Stream& st : p.classes(c).streams()) {
      if (st.kind() != ir::COMPUTE) continue;
      for (const ir::Op& op : st.ops()) {
        if (!op.has_compute() || op.module() != module) continue;
        ns += op.compute().fixed_duration_ns() > 0 ? op.compute().fixed_duration_ns() : cost.compute(op.compute()).count();
      }
    }
    worst = std::max(worst, ns);
  }
  return worst / std::max(1, microbatches);
}

bool ranks_fit(const ir::Program& p, int32_t first, int32_t last) {
  const Bytes capacity = cost::hbm_capacity_bytes(p.cluster());
  if (capacity <= Bytes::zero()) return true;
  std::vector<int8_t> seen(static_cast<size_t>(p.classes_size()), 0);
  for (int32_t r = std::max(0, first); r < std::min(last, p.ranks_size()); ++r) {
    const int32_t c = p.ranks(r).class_id();
    if (seen[static_cast<size_t>(c)]) continue;
    seen[static_cast<size_t>(c)] = 1;
    if (cost::class_memory(p, c).peak > capacity) return false;
  }
  return true;
}

HeteroChoice choose_heterogeneous(const scenario::LoadedScenario& s, HeteroMode mode) {
  const auto cost = cost::make_analytic_cost_model(s.spec.cluster(), s.spec.training().precision());
  return choose_heterogeneous(s, mode, *cost);
}

HeteroChoice choose_heterogeneous(const scenario::LoadedScenario& s, HeteroMode mode, const cost::CostModel& cost) {
  const auto& spec = s.spec;
  const int n_enc = spec.model().encoders_size();
  if (n_enc == 0)
    throw Error(s.locations.locate("model.encoders"), "the heterogeneous placement needs at least one encoder",
                "add model.encoders");
  HeteroChoice out;
  out.mode = mode;
  out.scenario_nodes = spec.cluster().num_nodes();
  const bool colocated = mode == HeteroMode::kColocated;
  const int64_t gpn = gpus_per_node(spec), world = llm_world(spec);
  const int64_t llm_nodes = (world + gpn - 1) / gpn;
  const int32_t microbatches = llm_microbatches(spec);
  auto periods = [&](const ir::Program& p) {
    const ir::Program alone = compile_as(llm_only(s), scenario::MEGATRON_BASELINE, cost);
    out.llm_period_ns = module_period_ns(alone, 0, microbatches, cost);
    out.island_period_ns = 0;
    for (int e = 0; e < n_enc; ++e)
      out.island_period_ns = std::max(out.island_period_ns, module_period_ns(p, e + 1, microbatches, cost));
  };

  bool given = true;
  for (const auto& e : spec.model().encoders())
    given = given && e.has_layout() && (e.layout().first_rank() == 0) == colocated;
  if (given) {
    out.scenario = with_layouts(s, {}, std::nullopt);
    out.program = compile_as(out.scenario, scenario::HETEROGENEOUS, cost);
    out.candidates = 1;
    out.cluster_nodes = out.scenario.spec.cluster().num_nodes();
    if (!colocated) {
      check_given_islands(out.scenario, out.program);
      out.island_gpus = out.program.ranks_size() - static_cast<int32_t>(world);
      periods(out.program);
    }
    out.description = layouts_text(out.program) + " (the scenario's layout)";
    return out;
  }
  out.derived = true;

  if (colocated) {
    std::vector<std::vector<scenario::ModuleLayout>> cands(static_cast<size_t>(n_enc));
    std::vector<scenario::ModuleLayout> current;
    for (int e = 0; e < n_enc; ++e) {
      cands[static_cast<size_t>(e)] = colocated_candidates(s, e);
      if (cands[static_cast<size_t>(e)].empty())
        throw Error(s.locations.locate("model.encoders[" + std::to_string(e) + "]"),
                    fmt::format("encoder {}: no colocated layout on the LLM's {} GPUs: no TP (within a node) divides "
                                "its heads, key/value heads, FFN and the LLM's world with a DP related to the LLM's",
                                e, world),
                    "give the encoder a layout, or change the LLM's parallel plan");
      current.push_back(cands[static_cast<size_t>(e)].front());
    }
    // One pass, encoder by encoder, the others as chosen so far (exact for
    // one encoder).
    std::optional<ir::Program> best_program;
    for (int e = 0; e < n_enc; ++e) {
      std::optional<scenario::ModuleLayout> best;
      bool best_fits = false;
      int64_t best_ns = 0;
      std::string first_error;
      for (const auto& cand : cands[static_cast<size_t>(e)]) {
        std::vector<scenario::ModuleLayout> l = current;
        l[static_cast<size_t>(e)] = cand;
        const scenario::LoadedScenario sc = with_layouts(s, l, std::nullopt);
        ir::Program p;
        try {
          p = compile_as(sc, scenario::HETEROGENEOUS, cost);
        } catch (const Error& err) {
          ++out.not_buildable;
          if (first_error.empty()) first_error = err.problem();
          continue;
        }
        ++out.candidates;
        const bool fits = cost::program_feasibility(p).fits();
        out.pruned_by_memory += !fits;
        if (!fits && best && best_fits) continue;  // never chosen: no need to time it
        const int64_t ns = simulate_folded_ns(p, cost);
        // Fitting beats not fitting; then the shorter iteration; ties: the
        // enumeration order (smaller TP).
        if (!best || (fits && !best_fits) || (fits == best_fits && ns < best_ns)) {
          best = cand;
          best_fits = fits;
          best_ns = ns;
          best_program = std::move(p);
        }
      }
      if (!best)
        throw Error(s.locations.locate("model.encoders[" + std::to_string(e) + "]"),
                    fmt::format("encoder {}: none of its {} colocated layouts can be built: {}", e,
                                cands[static_cast<size_t>(e)].size(), first_error),
                    "give the encoder a layout (first_rank 0), or change the LLM's rank order");
      current[static_cast<size_t>(e)] = *best;
    }
    out.scenario = with_layouts(s, current, std::nullopt);
    out.program = std::move(*best_program);
    out.cluster_nodes = out.scenario.spec.cluster().num_nodes();
    out.description = fmt::format("{} (searched: {} layouts compiled, {} over HBM)", layouts_text(out.program),
                                  out.candidates, out.pruned_by_memory);
    return out;
  }

  // Non-colocated: an island of whole nodes per encoder, sized encoder by
  // encoder (later encoders start at one node).
  const ir::Program alone = compile_as(llm_only(s), scenario::MEGATRON_BASELINE, cost);
  const int64_t llm_period = module_period_ns(alone, 0, microbatches, cost);
  std::vector<int64_t> nodes(static_cast<size_t>(n_enc), 1);
  std::vector<scenario::ModuleLayout> current(static_cast<size_t>(n_enc));
  auto first_rank_of = [&](int e) {
    int64_t r = world;
    for (int i = 0; i < e; ++i) r += nodes[static_cast<size_t>(i)] * gpn;
    return static_cast<int32_t>(r);
  };
  auto total_nodes = [&] {
    int64_t n = llm_nodes;
    for (int64_t k : nodes) n += k;
    return n;
  };
  for (int e = 0; e < n_enc; ++e) {
    const auto c = island_candidates(s, e, static_cast<int32_t>(gpn), first_rank_of(e));
    if (c.empty())
      throw Error(s.locations.locate("model.encoders[" + std::to_string(e) + "]"),
                  fmt::format("encoder {}: no layout of a {}-GPU island suits its shapes and the LLM's DP", e, gpn),
                  "give the encoder a layout");
    current[static_cast<size_t>(e)] = c.front();
  }
  std::optional<ir::Program> chosen_program;
  for (int e = 0; e < n_enc; ++e) {
    struct Best {
      scenario::ModuleLayout layout;
      int64_t nodes = 0, period = 0;
      ir::Program program;
    };
    std::optional<Best> balanced, fastest;
    std::string last_reason, first_error;
    // Sizes ascending, so the first balanced island is the smallest; within
    // one size pp, then tp ascending, the first that fits HBM and keeps up
    // (less TP and PP: less replicated work and fewer bubbles). The island
    // never needs more nodes than the LLM has (it would then be the bigger
    // module): up to that size, the fastest island that fits is taken.
    for (int64_t n = 1; n <= llm_nodes && !balanced; ++n) {
      nodes[static_cast<size_t>(e)] = n;
      const int32_t first = first_rank_of(e);
      const bool last_size = n == llm_nodes;
      for (const auto& cand : island_candidates(s, e, static_cast<int32_t>(n * gpn), first)) {
        std::vector<scenario::ModuleLayout> l = current;
        l[static_cast<size_t>(e)] = cand;
        // Later islands follow this one back to back.
        for (int i = e + 1; i < n_enc; ++i) l[static_cast<size_t>(i)].set_first_rank(first_rank_of(i));
        const scenario::LoadedScenario sc = with_layouts(s, l, total_nodes());
        // A lower bound first: the period without recompute (recompute only
        // adds kernels). One compile instead of a recompute search.
        int64_t bound = 0;
        try {
          const RecomputeRequest req = recompute_request(sc, scenario::HETEROGENEOUS);
          bound = module_period_ns(compile_with_recompute(sc, scenario::HETEROGENEOUS, cost)(req.requested), e + 1,
                                   microbatches, cost);
        } catch (const Error& err) {
          ++out.not_buildable;
          if (first_error.empty()) first_error = err.problem();
          continue;
        }
        if (bound > llm_period && !last_size) continue;  // cannot keep up at any recompute
        ir::Program p = compile_as(sc, scenario::HETEROGENEOUS, cost);
        ++out.candidates;
        if (!ranks_fit(p, first, first + static_cast<int32_t>(n * gpn))) {
          ++out.pruned_by_memory;
          last_reason = infeasibility_reason(p);
          continue;
        }
        const int64_t period = module_period_ns(p, e + 1, microbatches, cost);
        if (period <= llm_period) {
          balanced = Best{cand, n, period, std::move(p)};
          break;
        }
        if (!fastest || period < fastest->period) fastest = Best{cand, n, period, std::move(p)};
      }
    }
    std::optional<Best>& pick = balanced ? balanced : fastest;
    if (!pick)
      throw Error(s.locations.locate("model.encoders[" + std::to_string(e) + "]"),
                  fmt::format("encoder {} fits no island of up to {} GPUs (the LLM's {} nodes) even at the most "
                              "recompute that helps: {}",
                              e, llm_nodes * gpn, llm_nodes, last_reason.empty() ? first_error : last_reason),
                  "give the encoder a layout, a larger HBM, or use a colocated placement");
    nodes[static_cast<size_t>(e)] = pick->nodes;
    current[static_cast<size_t>(e)] = pick->layout;
    chosen_program = std::move(pick->program);
  }
  for (int i = 0; i < n_enc; ++i) current[static_cast<size_t>(i)].set_first_rank(first_rank_of(i));
  out.scenario = with_layouts(s, current, total_nodes());
  // Compiled with every island at its final size (the last encoder's program
  // already is, for one encoder).
  out.program = n_enc == 1 ? std::move(*chosen_program) : compile_as(out.scenario, scenario::HETEROGENEOUS, cost);
  out.cluster_nodes = total_nodes();
  out.island_gpus = out.program.ranks_size() - static_cast<int32_t>(world);
  periods(out.program);
  out.description =
      fmt::format("{}; per LLM microbatch: island {} vs LLM {}; cluster {} nodes (LLM {} + islands {}{}) "
                  "(searched: {} layouts compiled, {} over HBM)",
                  layouts_text(out.program), ms(out.island_period_ns), ms(out.llm_period_ns), out.cluster_nodes,
                  llm_nodes, out.cluster_nodes - llm_nodes,
                  out.scenario_nodes > 0 && out.scenario_nodes != out.cluster_nodes
                      ? fmt::format("; the scenario's cluster has {}", out.scenario_nodes)
                      : std::string(),
                  out.candidates, out.pruned_by_memory);
  return out;
}

}  // namespace lacuna::placement
