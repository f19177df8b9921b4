#include "sim/search/plan_space.h"

#include <algorithm>
#include <charconv>
#include <map>

#include <fmt/format.h>

#include "sim/core/option_text.h"
#include "sim/core/error.h"
#include "sim/placement/compile.h"
#include "sim/scenario/moe.h"
#include "sim/scenario/nvlink_domain.h"

namespace lacuna::search {
namespace {

Error flag_error(const std::string& flag, const std::string& what, const std::string& fix = {}) {
  return Error(SourceLocation{flag, 0, 0, {}}, what, fix);
}

bool parse_int(std::string_view text, int64_t& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

template <class T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The applicable values of a dimension that the dimension allows, in the
// applicable order. Where a switch does not exist for the shape (one
// applicable value: the distributed optimizer without data parallelism),
// a --fix of it does not apply and the shape keeps that value.
template <class T, class List>
std::vector<T> allowed_in(const std::vector<T>& dim, const List& applicable, bool strict = false) {
  std::vector<T> out;
  for (const T& v : applicable)
    if (contains(dim, v)) out.push_back(v);
  if (!strict && out.empty() && std::size(applicable) == 1) out.assign(std::begin(applicable), std::end(applicable));
  return out;
}
template <class T>
std::vector<T> allowed(const std::vector<T>& dim, std::initializer_list<T> applicable) {
  return allowed_in<T>(dim, applicable);
}

std::vector<int64_t> range(int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  for (int64_t v = lo; v <= hi; ++v) out.push_back(v);
  return out;
}

}  // namespace

GpuRange parse_gpu_range(const std::string& text) {
  GpuRange r;
  const size_t dots = text.find("..");
  bool ok = false;
  if (dots == std::string::npos) {
    ok = parse_int(text, r.lo);
    r.hi = r.lo;
  } else {
    ok = parse_int(std::string_view(text).substr(0, dots), r.lo) &&
         parse_int(std::string_view(text).substr(dots + 2), r.hi);
  }
  if (!ok || r.lo < 1 || r.hi < r.lo || r.hi > 1'000'000) {
    throw flag_error("‹gpus›", "expected a GPU count or a range LO..HI (1 ≤ LO ≤ HI ≤ 10^6), got \"" + text + "\"",
                     "e.g. ‹gpus 2048..8192›");
  }
  return r;
}

std::vector<std::string> fixable_fields() {
  return {"cluster.num_nodes",          "parallel.tp",        "parallel.sequence_parallel", "parallel.cp",
          "parallel.pp",                "parallel.virtual_stages", "parallel.dp",           "training.micro_batch",
          "parallel.recompute",         "parallel.distributed_optimizer", "parallel.overlap_grad_reduce",
          "execution.tp_comm_overlap",  "execution.pipeline_p2p", "schedule.kind",            "placement.kind",
          "parallel.layer_split",       "parallel.ep",        "parallel.expert_tp"};
}

std::vector<Placement> scenario_placements(const scenario::LoadedScenario& loaded) {
  if (loaded.spec.model().encoders_size() == 0) return {Placement::kNone};
  std::vector<Placement> out;
  for (scenario::PlacementKind kind : placement::applicable_placements(loaded)) {
    switch (kind) {
      case scenario::MEGATRON_BASELINE: out.push_back(Placement::kMegatronBaseline); break;
      case scenario::MEGATRON_BALANCED: out.push_back(Placement::kMegatronBalanced); break;
      case scenario::OPTIMUS: out.push_back(Placement::kOptimus); break;
      case scenario::HETEROGENEOUS:
        out.push_back(Placement::kHeteroColocated);
        out.push_back(Placement::kHeteroNonColocated);
        break;
      case scenario::MEGATRON_ENCODER_PP: out.push_back(Placement::kMegatronEncoderPp); break;
      case scenario::MEGATRON_LAYER_SPLIT: out.push_back(Placement::kMegatronLayerSplit); break;
      default: break;
    }
  }
  return out;
}

Dimensions make_dimensions(const scenario::Scenario& base, const std::optional<GpuRange>& gpus,
                           const std::vector<std::string>& fixes, const std::vector<Placement>& placements) {
  const int64_t gpn = base.cluster().gpus_per_node();
  const int64_t layers = base.model().llm().num_layers();
  Dimensions d;
  if (gpus) {
    for (int64_t n = (gpus->lo + gpn - 1) / gpn; n * gpn <= gpus->hi; ++n) d.num_nodes.push_back(n);
    if (d.num_nodes.empty()) {
      throw flag_error("‹gpus›", fmt::format("no whole number of {}-GPU nodes lies in {}..{}", gpn, gpus->lo, gpus->hi),
                       fmt::format("use a range that holds a multiple of {}", gpn));
    }
  } else {
    d.num_nodes = {base.cluster().num_nodes()};
  }
  // TP inside an NVLink domain (Megatron-LM's practice; beyond it TP runs on
  // the NICs): powers of two up to the domain's GPUs, the node's on HGX/DGX
  // clusters, up to 64 on an NVL72 rack (docs/search.md#the-space).
  const int64_t domain = scenario::nvlink_domain_gpus(base.cluster());
  for (int64_t t = 1; t <= domain; t *= 2) d.tp.push_back(t);
  d.cp = {1, 2, 4, 8};
  d.pp = range(1, std::min<int64_t>(layers, 128));
  d.virtual_stages = range(1, std::min<int64_t>(layers, 64));
  d.micro_batch = {1, 2, 4, 8, 16};
  d.sequence_parallel = {false, true};
  d.distributed_optimizer = {false, true};
  d.dp_overlap = {false, true};
  d.tp_comm_overlap = {false, true};
  d.p2p_overlapped = {false, true};
  d.recompute = {scenario::RECOMPUTE_NONE, scenario::RECOMPUTE_SELECTIVE, scenario::RECOMPUTE_FULL};
  d.schedule = {scenario::ONE_F_ONE_B, scenario::ZB_H1, scenario::INTERLEAVED_1F1B};
  d.split = {LayerSplit::kEven, LayerSplit::kLightLast};
  d.placement = placements;
  if (base.model().encoders_size() > 0 && base.model().encoders(0).has_layout()) {
    const auto& l = base.model().encoders(0).layout();
    d.encoder_pp_layout = std::pair<int64_t, int64_t>{std::max<int64_t>(1, l.tp()), std::max<int64_t>(1, l.pp())};
  }
  const bool moe = scenario::has_moe(base);
  if (moe) {
    // Every EP size validation allows: the divisors of num_experts
    // (Megatron-LM arguments.py: experts a multiple of the EP size); expert
    // TP as TP, inside a node.
    const int64_t experts = base.model().llm().moe().num_experts();
    d.ep.clear();
    for (int64_t e = 1; e <= experts; ++e)
      if (experts % e == 0) d.ep.push_back(e);
    d.expert_tp.clear();
    for (int64_t t = 1; t <= domain; t *= 2) d.expert_tp.push_back(t);
  }

  std::map<std::string, std::string> seen;
  for (const std::string& fix : fixes) {
    const size_t eq = fix.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == fix.size()) {
      throw flag_error("‹fix›", "expected FIELD=VALUE[,VALUE...], got \"" + fix + "\"", "e.g. ‹fix parallel.tp=8›");
    }
    const std::string field = fix.substr(0, eq);
    const std::string text = fix.substr(eq + 1);
    const std::string where = option_ref("fix", field);
    if (!contains(fixable_fields(), field)) {
      std::string list;
      for (const std::string& f : fixable_fields()) list += (list.empty() ? "" : ", ") + f;
      throw flag_error(where, "\"" + field + "\" is not a search dimension",
                       "fix one of " + list + " (other scenario fields: ‹set FIELD=VALUE›)");
    }
    if (auto [it, fresh] = seen.emplace(field, text); !fresh) {
      throw flag_error(where, "fixed twice (\"" + it->second + "\" and \"" + text + "\"): the constraints contradict",
                       "give one ‹fix› per field, with a comma-separated list for several values");
    }
    const std::vector<std::string> values = split_commas(text);
    auto ints = [&](int64_t lo, int64_t hi) {
      std::vector<int64_t> out;
      for (const std::string& v : values) {
        int64_t x = 0;
        if (!parse_int(v, x) || x < lo || x > hi) {
          throw flag_error(where, fmt::format("expected whole numbers in {}..{}, got \"{}\"", lo, hi, v));
        }
        if (!contains(out, x)) out.push_back(x);
      }
      return out;
    };
    auto bools = [&] {
      std::vector<bool> out;
      for (const std::string& v : values) {
        if (v != "true" && v != "false") throw flag_error(where, "expected true or false, got \"" + v + "\"");
        if (!contains(out, v == "true")) out.push_back(v == "true");
      }
      return out;
    };
    if (field == "cluster.num_nodes") {
      if (gpus) throw flag_error(where, "contradicts ‹gpus›: both set the GPU count", "give one of them");
      d.num_nodes = ints(1, 1'000'000);
    } else if (field == "parallel.ep" || field == "parallel.expert_tp") {
      if (!moe) {
        throw flag_error(where, "the model has no experts (model.llm.moe.num_experts is 0)",
                         "search ep and expert_tp only for an MoE scenario");
      }
      (field == "parallel.ep" ? d.ep : d.expert_tp) = ints(1, 1'000'000);
    } else if (field == "parallel.tp") {
      d.tp = ints(1, 1'000'000);
    } else if (field == "parallel.cp") {
      d.cp = ints(1, 1'000'000);
    } else if (field == "parallel.pp") {
      d.pp = ints(1, layers);
    } else if (field == "parallel.virtual_stages") {
      d.virtual_stages = ints(1, layers);
    } else if (field == "parallel.dp") {
      const std::vector<int64_t> v = ints(1, 1'000'000);
      if (v.size() != 1) throw flag_error(where, "takes one value (dp follows from the GPUs and the other sizes)");
      d.dp = v.front();
    } else if (field == "training.micro_batch") {
      d.micro_batch = ints(1, base.training().global_batch());
    } else if (field == "parallel.sequence_parallel") {
      d.sequence_parallel = bools();
    } else if (field == "parallel.distributed_optimizer") {
      d.distributed_optimizer = bools();
    } else if (field == "parallel.overlap_grad_reduce") {
      d.dp_overlap = bools();
    } else if (field == "execution.tp_comm_overlap") {
      d.tp_comm_overlap = bools();
    } else if (field == "execution.pipeline_p2p") {
      d.p2p_overlapped.clear();
      for (const std::string& v : values) {
        if (v != "P2P_BLOCKING" && v != "P2P_OVERLAPPED") {
          throw flag_error(where, "expected P2P_BLOCKING or P2P_OVERLAPPED, got \"" + v + "\"");
        }
        if (!contains(d.p2p_overlapped, v == "P2P_OVERLAPPED")) d.p2p_overlapped.push_back(v == "P2P_OVERLAPPED");
      }
    } else if (field == "parallel.recompute") {
      d.recompute.clear();
      for (const std::string& v : values) {
        scenario::Recompute r{};
        if (!scenario::Recompute_Parse(v, &r)) {
          throw flag_error(where, "expected RECOMPUTE_NONE, RECOMPUTE_SELECTIVE or RECOMPUTE_FULL, got \"" + v + "\"");
        }
        if (!contains(d.recompute, r)) d.recompute.push_back(r);
      }
    } else if (field == "schedule.kind") {
      d.schedule.clear();
      for (const std::string& v : values) {
        scenario::ScheduleKind k{};
        if (!scenario::ScheduleKind_Parse(v, &k) || k == scenario::SCHEDULE_UNSPECIFIED || k == scenario::CUSTOM) {
          throw flag_error(where, "expected GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B or ZB_H1, got \"" + v + "\"");
        }
        if (!contains(d.schedule, k)) d.schedule.push_back(k);
      }
    } else if (field == "parallel.layer_split") {
      d.split.clear();
      for (const std::string& v : values) {
        if (v != "even" && v != "light-last") throw flag_error(where, "expected even or light-last, got \"" + v + "\"");
        const LayerSplit s = v == "even" ? LayerSplit::kEven : LayerSplit::kLightLast;
        if (!contains(d.split, s)) d.split.push_back(s);
      }
    } else if (field == "placement.kind") {
      std::vector<Placement> chosen;
      for (const std::string& v : values) {
        bool found = false;
        for (Placement p : placements) {
          const std::string name = placement_name(p);
          if (v == name || (v == "heterogeneous" && name.rfind("hetero-", 0) == 0)) {
            found = true;
            if (!contains(chosen, p)) chosen.push_back(p);
          }
        }
        if (!found) {
          std::string list;
          for (Placement p : placements) list += (list.empty() ? "" : ", ") + std::string(placement_name(p));
          throw flag_error(where, "\"" + v + "\" is not a placement of this scenario", "use one of: " + list);
        }
      }
      d.placement = chosen;
    }
  }
  return d;
}

std::vector<Plan> enumerate_plans(const scenario::Scenario& base, const Dimensions& d,
                                  const std::vector<std::string>& constraints, size_t limit) {
  const int64_t gpn = base.cluster().gpus_per_node();
  const int64_t layers = base.model().llm().num_layers();
  std::vector<Plan> out;
  auto refuse_size = [&] {
    throw flag_error("‹fix›", fmt::format("the search space holds more than {} plans", limit),
                     "narrow it with ‹fix› (e.g. ‹fix parallel.tp=8›) or a smaller ‹gpus› range");
  };
  // (ep, expert_tp), ep varying slowest; one (0, 0) for a dense scenario.
  std::vector<std::pair<int64_t, int64_t>> expert_layouts;
  for (int64_t ep : d.ep)
    for (int64_t xtp : d.expert_tp) expert_layouts.emplace_back(ep, xtp);
  for (int64_t nodes : d.num_nodes) {
    const int64_t gpus = nodes * gpn;
    for (int64_t tp : d.tp) {
      if (gpus % tp != 0) continue;
      for (bool sp : allowed(d.sequence_parallel, tp > 1 ? std::initializer_list<bool>{false, true}
                                                         : std::initializer_list<bool>{false})) {
        for (bool tpo : allowed(d.tp_comm_overlap, sp ? std::initializer_list<bool>{false, true}
                                                      : std::initializer_list<bool>{false})) {
          for (int64_t cp : d.cp) {
            if (gpus % (tp * cp) != 0) continue;
            for (int64_t pp : d.pp) {
              if (pp > layers || gpus % (tp * cp * pp) != 0) continue;
              const int64_t dp = gpus / (tp * cp * pp);
              if (d.dp && *d.dp != dp) continue;
              for (LayerSplit split : d.split) {
                if (split == LayerSplit::kEven && layers % pp != 0) continue;
                if (split == LayerSplit::kLightLast && pp < 2) continue;
                for (int64_t v : d.virtual_stages) {
                  if (v > 1 && pp == 1) continue;  // model chunks need a pipeline
                  int64_t last = 0;
                  if (split == LayerSplit::kEven) {
                    if ((layers / pp) % v != 0) continue;
                  } else {
                    // The largest last stage, a multiple of v, lighter than
                    // the others, with the rest splitting evenly in chunks.
                    for (int64_t x = v; x < layers; x += v) {
                      const int64_t rest = layers - x;
                      if (rest % ((pp - 1) * v) != 0) continue;
                      if (x < rest / (pp - 1)) last = x;
                    }
                    if (last == 0) continue;
                  }
                  // The schedules that differ for this shape (a plain
                  // vector: an initializer_list's array would not outlive
                  // this statement).
                  std::vector<scenario::ScheduleKind> kinds;
                  if (pp == 1) {
                    kinds = {scenario::ONE_F_ONE_B};
                  } else if (v > 1) {
                    kinds = {scenario::INTERLEAVED_1F1B};
                  } else {
                    kinds = {scenario::ONE_F_ONE_B, scenario::ZB_H1, scenario::GPIPE};
                  }
                  for (scenario::ScheduleKind kind : allowed_in<scenario::ScheduleKind>(d.schedule, kinds, /*strict=*/pp > 1)) {
                    for (int64_t mb : d.micro_batch) {
                      for (scenario::Recompute rc : d.recompute) {
                        const bool data_parallel = dp * cp > 1;
                        for (bool dopt : allowed(d.distributed_optimizer, data_parallel
                                                                               ? std::initializer_list<bool>{false, true}
                                                                               : std::initializer_list<bool>{false})) {
                          for (bool ovl : allowed(d.dp_overlap, data_parallel ? std::initializer_list<bool>{false, true}
                                                                              : std::initializer_list<bool>{false})) {
                            for (bool p2p : allowed(d.p2p_overlapped, pp > 1 ? std::initializer_list<bool>{false, true}
                                                                             : std::initializer_list<bool>{false})) {
                              for (Placement place : d.placement) {
                               for (const auto& [ep, xtp] : expert_layouts) {
                                if (out.size() >= limit) refuse_size();
                                int64_t plan_dp = dp;
                                if (place == Placement::kMegatronEncoderPp) {
                                  const int64_t etp = d.encoder_pp_layout ? d.encoder_pp_layout->first : tp;
                                  const int64_t epp = d.encoder_pp_layout ? d.encoder_pp_layout->second : 1;
                                  const int64_t per_replica = cp * (tp * pp + etp * epp);
                                  if (gpus % per_replica != 0) continue;
                                  plan_dp = gpus / per_replica;
                                }
                                // Megatron-Core regroups a stage's tp·cp·dp
                                // ranks as expert_tp × ep × expert_dp.
                                if (ep > 0 && (tp * cp * plan_dp) % (ep * xtp) != 0) continue;
                                Plan p;
                                p.num_nodes = nodes;
                                p.dp = plan_dp;
                                p.tp = static_cast<int32_t>(tp);
                                p.cp = static_cast<int32_t>(cp);
                                p.pp = static_cast<int32_t>(pp);
                                p.virtual_stages = static_cast<int32_t>(v);
                                p.micro_batch = static_cast<int32_t>(mb);
                                p.split = split;
                                p.last_stage_layers = static_cast<int32_t>(last);
                                p.sequence_parallel = sp;
                                p.tp_comm_overlap = tpo;
                                p.distributed_optimizer = dopt;
                                p.dp_overlap = ovl;
                                p.p2p_overlapped = p2p;
                                p.recompute = rc;
                                p.schedule = kind;
                                p.placement = place;
                                p.ep = static_cast<int32_t>(ep);
                                p.expert_tp = static_cast<int32_t>(xtp);
                                out.push_back(p);
                               }
                              }
                            }
                          }
                        }
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  if (out.empty()) {
    std::string given;
    for (const std::string& c : constraints) given += (given.empty() ? "" : ", ") + c;
    throw flag_error(constraints.empty() ? "SCENARIO" : "‹fix›",
                     "the search space is empty: no plan has tp·cp·pp dividing the GPU count with the allowed values" +
                         (given.empty() ? std::string() : " under " + given),
                     "relax a ‹fix›, or widen ‹gpus›");
  }
  return out;
}

}  // namespace lacuna::search
