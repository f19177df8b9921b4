#include "sim/variability/variability_model.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/scenario/variability.h"

namespace lacuna::variability {
namespace {

bool is_pass_phase(ir::Phase p) {
  return p == ir::FORWARD || p == ir::BACKWARD_INPUT || p == ir::BACKWARD_WEIGHT || p == ir::RECOMPUTE;
}

bool noise_on(const scenario::KernelNoise& n) { return n.cv() > 0 || n.tail_probability() > 0; }

}  // namespace

VariabilityModel::VariabilityModel(const ir::Program& program, const scenario::Variability& v)
    : program_(program), seed_(static_cast<uint64_t>(v.seed())) {
  // Per rank: its GPU's speed (keyed on the physical GPU, node and local
  // index, so a GPU keeps its speed under any rank mapping) times its host's
  // straggler factor.
  const int32_t num_nodes = static_cast<int32_t>(program.cluster().num_nodes());
  std::vector<double> host_factor(static_cast<size_t>(std::max(num_nodes, 1)), 1.0);
  if (v.stragglers().host_fraction() > 0) {
    for (int32_t n = 0; n < num_nodes; ++n) {
      const double u = uniform(RngKey{seed_, RngPurpose::kStragglerHost, static_cast<uint32_t>(n), 0, 0, 0});
      if (u < v.stragglers().host_fraction()) host_factor[static_cast<size_t>(n)] = v.stragglers().slowdown();
    }
  }
  for (const scenario::StragglerHost& h : v.stragglers().hosts()) {
    if (h.node() >= 0 && h.node() < num_nodes) host_factor[static_cast<size_t>(h.node())] = h.factor();
  }
  std::vector<bool> host_used(host_factor.size(), false);
  const LogNormalMean1 speed(v.gpu_speed_cv());
  rank_factor_.resize(static_cast<size_t>(program.ranks_size()), 1.0);
  for (int r = 0; r < program.ranks_size(); ++r) {
    const ir::RankBinding& b = program.ranks(r);
    double f = 1.0;
    if (v.gpu_speed_cv() > 0) {
      const RngKey key{seed_, RngPurpose::kGpuSpeed, static_cast<uint32_t>(b.node()),
                       static_cast<uint32_t>(b.local_gpu()) & 0xFFFFu, 0, 0};
      f = speed.at(standard_normal(uniform_pair(key)));
    }
    if (b.node() >= 0 && b.node() < num_nodes) {
      f *= host_factor[static_cast<size_t>(b.node())];
      host_used[static_cast<size_t>(b.node())] = true;
    }
    rank_factor_[static_cast<size_t>(r)] = f;
  }
  for (size_t n = 0; n < host_factor.size(); ++n) straggler_hosts_ += host_used[n] && host_factor[n] != 1.0;

  // Kernel noise per op class; DEFAULT fills the classes not listed.
  const auto& map = v.kernel_noise();
  const auto def = map.find("DEFAULT");
  for (size_t c = 0; c < noise_.size(); ++c) {
    const auto it = map.find(ir::OpClass_Name(static_cast<ir::OpClass>(c)));
    const scenario::KernelNoise* n = it != map.end() ? &it->second : (def != map.end() ? &def->second : nullptr);
    if (n == nullptr || !noise_on(*n)) continue;
    Noise& out = noise_[c];
    out.on = true;
    out.lognormal = LogNormalMean1(n->cv());
    out.tail_probability = n->tail_probability();
    out.tail_alpha = n->tail_alpha();
    out.tail_max = n->tail_max_factor();
    any_noise_ = true;
  }
  per_pass_ = v.kernel_noise_scope() == scenario::NOISE_PER_PASS;

  if (v.host_pauses().interval_iterations() > 0 && v.host_pauses().duration_ms() > 0) {
    pause_interval_ = v.host_pauses().interval_iterations();
    pause_ns_ = std::llround(v.host_pauses().duration_ms() * 1e6);
    pause_synchronized_ = v.host_pauses().synchronized();
    pause_slots_.resize(static_cast<size_t>(program.classes_size()));
    for (int c = 0; c < program.classes_size(); ++c) {
      const ir::RankClass& cls = program.classes(c);
      for (int s = 0; s < cls.streams_size(); ++s) {
        if (cls.streams(s).kind() != ir::COMPUTE) continue;
        for (int o = 0; o < cls.streams(s).ops_size(); ++o) {
          const ir::Op& op = cls.streams(s).ops(o);
          if (op.has_compute() && op.phase() == ir::FORWARD) pause_slots_[static_cast<size_t>(c)].push_back({s, o});
        }
      }
    }
  }
  skew_mean_ns_ = v.collective_launch_skew_us() * 1e3;

  // MoE routing: every EP rank draws the same counts from the variability
  // seed, so all agree on who is busiest without exchanging anything.
  if (program.info().has_moe()) {
    moe_ = std::make_unique<MoeLoad>(program.info().moe(), seed_);
    ep_index_.assign(static_cast<size_t>(program.ranks_size()), -1);
    int ep_slot = -1;
    for (int s = 0; s < program.group_slots_size(); ++s) {
      if (program.group_slots(s).kind() == ir::EP) {
        ep_slot = s;
        break;
      }
    }
    if (ep_slot >= 0) {
      for (int r = 0; r < program.ranks_size(); ++r) {
        const ir::RankBinding& b = program.ranks(r);
        if (ep_slot >= b.group_size()) continue;
        const int32_t g = b.group(ep_slot);
        if (g < 0 || g >= program.groups_size()) continue;
        const auto& members = program.groups(g).ranks();
        const auto it = std::lower_bound(members.begin(), members.end(), r);
        if (it != members.end() && *it == r) ep_index_[static_cast<size_t>(r)] = static_cast<int32_t>(it - members.begin());
      }
    }
  }
}

bool moe_imbalance_on(const ir::Program& program) {
  if (!program.info().has_moe()) return false;
  return MoeLoad(program.info().moe(), 0).varies();
}

bool is_routed_expert_kernel(const ir::Op& op) {
  if (!op.has_compute()) return false;
  const ir::KernelRole r = op.compute().role();
  return r == ir::ROLE_EXPERT_FC1 || r == ir::ROLE_EXPERT_ACT || r == ir::ROLE_EXPERT_FC2;
}

int32_t VariabilityModel::ep_index(int32_t rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= ep_index_.size()) return -1;
  return ep_index_[static_cast<size_t>(rank)];
}

const VariabilityModel::Noise& VariabilityModel::noise_of(const ir::Op& op) const {
  const size_t c = static_cast<size_t>(op.compute().op_class());
  return noise_[c < noise_.size() ? c : 0];
}

uint8_t VariabilityModel::perturbs(const ir::Op& op, ir::StreamKind stream_kind) const {
  uint8_t bits = 0;
  if (op.has_compute()) {
    const bool noisy = any_noise_ && noise_of(op).on;
    if (noisy) bits |= engine::kPerturbCompute;
    // The expert load is the same function of (EP index, layer, microbatch,
    // iteration) for every rank, so a fold representative can take its
    // busiest member's (kPerturbFoldable); kernel noise cannot.
    if (moe_load() != nullptr && is_routed_expert_kernel(op)) {
      bits |= engine::kPerturbCompute;
      if (!noisy) bits |= engine::kPerturbFoldable;
    }
    if (pause_interval_ > 0 && op.phase() == ir::FORWARD && stream_kind == ir::COMPUTE) bits |= engine::kPerturbHost;
  }
  if (op.has_collective() && skew_mean_ns_ > 0) bits |= engine::kPerturbHost;
  return bits;
}

double VariabilityModel::compute_factor(const engine::OpRef& ref) const {
  const ir::Op& op = *ref.ir;
  double load = 1.0;
  if (moe_load() != nullptr && is_routed_expert_kernel(op)) {
    // A grouped GEMM's time is linear in its tokens (M = tokens, N and K the
    // expert's fixed hidden sizes): the rank's tokens over the balanced count
    // scale the kernel the compiler costed for balance.
    load = moe_->factor(ep_index(ref.rank), op.layer(), op.microbatch(), ref.iteration);
  }
  const Noise& n = noise_of(op);
  if (!n.on) return load;
  RngKey noise_key;
  RngKey tail_key;
  if (per_pass_ && is_pass_phase(op.phase())) {
    // One draw per pass: every kernel of rank r's forward (or backward, its
    // B and W kernels alike) of microbatch m on chunk k.
    const ir::Phase phase = op.phase() == ir::BACKWARD_WEIGHT ? ir::BACKWARD_INPUT : op.phase();
    const uint32_t pass = static_cast<uint32_t>(phase) + 8u * static_cast<uint32_t>(op.chunk());
    noise_key = RngKey{seed_, RngPurpose::kKernelNoisePass, static_cast<uint32_t>(ref.rank), pass & 0xFFFFu,
                       static_cast<uint32_t>(op.microbatch()), ref.iteration};
    tail_key = noise_key;
    tail_key.purpose = RngPurpose::kKernelTailPass;
  } else {
    noise_key = RngKey{seed_, RngPurpose::kKernelNoise, static_cast<uint32_t>(ref.rank),
                       static_cast<uint32_t>(ref.stream), static_cast<uint32_t>(ref.op), ref.iteration};
    tail_key = noise_key;
    tail_key.purpose = RngPurpose::kKernelTail;
  }
  double f = n.lognormal.at(standard_normal(uniform_pair(noise_key)));
  if (n.tail_probability > 0) {
    const UniformPair u = uniform_pair(tail_key);
    if (u.first < n.tail_probability) f *= pareto_capped(u.second, n.tail_alpha, n.tail_max);
  }
  return f * load;
}

double VariabilityModel::compute_factor_folded(const engine::OpRef& ref, const std::vector<int32_t>& members) const {
  const ir::Op& op = *ref.ir;
  if (moe_load() == nullptr || !is_routed_expert_kernel(op) || noise_of(op).on) {
    return engine::Perturbation::compute_factor_folded(ref, members);
  }
  // The busiest EP index among the members, read from one cached draw.
  const std::vector<double>& f = moe_->factors(op.layer(), op.microbatch(), ref.iteration);
  double out = 0;
  for (int32_t member : members) {
    const int32_t e = ep_index(member);
    out = std::max(out, e >= 0 && static_cast<size_t>(e) < f.size() ? f[static_cast<size_t>(e)] : 1.0);
  }
  return out > 0 ? out : compute_factor(ref);
}

bool VariabilityModel::pauses(int32_t rank, uint32_t iteration) const {
  if (pause_interval_ <= 0) return false;
  // Periodic with a phase: CPython's generation-2 collections recur at a
  // nearly fixed number of steps (docs/variability-sources.md §5), each rank
  // at its own phase unless the job synchronises them.
  const uint32_t who = pause_synchronized_ ? 0xFFFFFFFFu : static_cast<uint32_t>(rank);
  const double u = uniform(RngKey{seed_, RngPurpose::kHostPausePhase, who, 0, 0, 0});
  const auto phase = static_cast<int64_t>(u * static_cast<double>(pause_interval_));
  return (static_cast<int64_t>(iteration) + phase) % pause_interval_ == 0;
}

engine::HostDelay VariabilityModel::host_delay(const engine::OpRef& ref) const {
  engine::HostDelay d;
  const ir::Op& op = *ref.ir;
  if (op.has_collective() && skew_mean_ns_ > 0) {
    const double u = uniform(RngKey{seed_, RngPurpose::kLaunchSkew, static_cast<uint32_t>(ref.rank),
                                    static_cast<uint32_t>(ref.stream), static_cast<uint32_t>(ref.op), ref.iteration});
    d.skew_ns = std::llround(exponential(u, skew_mean_ns_));
  }
  if (op.has_compute() && pause_interval_ > 0 && pauses(ref.rank, ref.iteration)) {
    const auto& slots = pause_slots_[static_cast<size_t>(program_.ranks(ref.rank).class_id())];
    if (!slots.empty()) {
      size_t k = 0;  // synchronized: at the start of the iteration's forward work
      if (!pause_synchronized_) {
        const double u = uniform(RngKey{seed_, RngPurpose::kHostPauseOp, static_cast<uint32_t>(ref.rank), 0,
                                        ref.iteration, 0});
        k = std::min(slots.size() - 1, static_cast<size_t>(u * static_cast<double>(slots.size())));
      }
      if (slots[k].stream == ref.stream && slots[k].op == ref.op) d.pause_ns = pause_ns_;
    }
  }
  return d;
}

double VariabilityModel::slowest_factor() const {
  return rank_factor_.empty() ? 1.0 : *std::max_element(rank_factor_.begin(), rank_factor_.end());
}

int32_t VariabilityModel::slowest_rank() const {
  return rank_factor_.empty()
             ? 0
             : static_cast<int32_t>(std::max_element(rank_factor_.begin(), rank_factor_.end()) - rank_factor_.begin());
}

std::string fold_refusal(const scenario::Variability& v) {
  std::vector<std::string> why;
  if (scenario::any_kernel_noise(v)) why.push_back("kernel noise");
  if (scenario::any_host_pauses(v)) why.push_back("host pauses");
  if (v.collective_launch_skew_us() > 0) why.push_back("collective launch skew");
  if (v.slow_links_size() > 0) why.push_back("slow links");
  if (scenario::any_link_flaps(v)) why.push_back("link flaps");
  if (why.empty()) return {};
  std::string list;
  for (size_t i = 0; i < why.size(); ++i) list += (i == 0 ? "" : (i + 1 == why.size() ? " and " : ", ")) + why[i];
  return "a folded run cannot represent " + list +
         ": they differ op by op or link by link between the ranks of a class, and a folded run simulates one "
         "rank per class (docs/variability.md#fold)";
}

std::vector<std::string> describe(const scenario::Variability& v, const VariabilityModel* model) {
  std::vector<std::string> out;
  if (v.gpu_speed_cv() > 0) {
    std::string line = fmt::format("GPU speed: log-normal, CV {:.2f} % per GPU", 100 * v.gpu_speed_cv());
    out.push_back(line);
  }
  if (v.stragglers().host_fraction() > 0 || v.stragglers().hosts_size() > 0) {
    std::string line = "straggler hosts:";
    if (v.stragglers().host_fraction() > 0) {
      line += fmt::format(" each host with probability {:g} at ×{:g}", v.stragglers().host_fraction(),
                          v.stragglers().slowdown());
    }
    for (const auto& h : v.stragglers().hosts()) line += fmt::format(" node {} ×{:g};", h.node(), h.factor());
    if (line.back() == ';') line.pop_back();
    if (model != nullptr) line += fmt::format(" ({} host{})", model->straggler_hosts(), model->straggler_hosts() == 1 ? "" : "s");
    out.push_back(line);
  }
  if (model != nullptr && (v.gpu_speed_cv() > 0 || model->straggler_hosts() > 0)) {
    out.push_back(fmt::format("slowest rank: {} at ×{:.4f} compute time", model->slowest_rank(), model->slowest_factor()));
  }
  for (const auto& [name, n] : v.kernel_noise()) {
    if (!noise_on(n)) continue;
    std::string line = fmt::format("kernel noise {}: log-normal CV {:g} {}", name, n.cv(),
                                   v.kernel_noise_scope() == scenario::NOISE_PER_PASS ? "per pass" : "per kernel");
    if (n.tail_probability() > 0) {
      line += fmt::format(", tail p {:g} Pareto α {:g} up to ×{:g}", n.tail_probability(), n.tail_alpha(),
                          n.tail_max_factor());
    }
    out.push_back(line);
  }
  for (const auto& l : v.slow_links()) {
    out.push_back(fmt::format("slow link: node {} {} {}{} at {:g} of its bandwidth", l.node(),
                              l.port() == scenario::PORT_NVLINK ? "gpu" : "nic", l.index(),
                              l.port() == scenario::PORT_NVLINK ? " nvlink" : "",
                              l.bandwidth_factor()) +
                  (l.direction() == scenario::LINK_UP ? " (up)" : l.direction() == scenario::LINK_DOWN ? " (down)" : ""));
  }
  if (scenario::any_link_flaps(v)) {
    out.push_back(fmt::format("link flaps: {:g} per NIC port per hour, {:g} s at {:g} of the bandwidth",
                              v.link_flaps().flaps_per_port_per_hour(), v.link_flaps().duration_s(),
                              v.link_flaps().bandwidth_factor()));
  }
  if (scenario::any_host_pauses(v)) {
    out.push_back(fmt::format("host pauses: {:g} ms every {} iterations, {}", v.host_pauses().duration_ms(),
                              v.host_pauses().interval_iterations(),
                              v.host_pauses().synchronized() ? "all ranks together" : "each rank at its own phase"));
  }
  if (v.collective_launch_skew_us() > 0) {
    out.push_back(fmt::format("collective launch skew: exponential, mean {:g} µs", v.collective_launch_skew_us()));
  }
  if (!out.empty()) out.insert(out.begin(), fmt::format("seed {}", v.seed()));
  return out;
}

}  // namespace lacuna::variability
