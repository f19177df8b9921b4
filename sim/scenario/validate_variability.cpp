// The `variability` section (docs/scenario.md#variability): every field in
// range, node and link indices inside the cluster. Runs on the section with
// the preset's defaults resolved, so a default can never be out of range.
#include <set>

#include "sim/proto/program.pb.h"
#include "sim/scenario/checks.h"
#include "sim/scenario/variability.h"

namespace lacuna::scenario {
namespace {

bool is_op_class_name(const std::string& key) {
  if (key == "DEFAULT") return true;
  ir::OpClass c;
  return ir::OpClass_Parse(key, &c) && c != ir::OP_CLASS_UNSPECIFIED;
}

std::string op_class_names() {
  std::string out;
  const auto* d = ir::OpClass_descriptor();
  for (int i = 0; i < d->value_count(); ++i) {
    if (d->value(i)->number() == ir::OP_CLASS_UNSPECIFIED) continue;
    out += std::string(out.empty() ? "" : ", ") + std::string(d->value(i)->name());
  }
  return out + ", DEFAULT";
}

void check_noise(const std::string& path, const KernelNoise& n, const Checker& c) {
  c.real(path + ".cv", n.cv(), 10.0, true);
  c.real(path + ".tail_probability", n.tail_probability(), 1.0, true);
  if (n.tail_probability() == 0) return;
  // No published tail for compute kernels (docs/variability-sources.md §1):
  // a scenario that asks for one gives its shape.
  if (!n.has_tail_alpha()) {
    c.fail(path + ".tail_alpha", "is not set (a tail needs its Pareto shape)",
           "set tail_alpha, e.g. 2, and tail_max_factor, e.g. 4 (the ≈4× max/median of millisecond p2p, "
           "docs/variability-sources.md §1)");
  }
  c.real(path + ".tail_alpha", n.tail_alpha(), 100.0, false);
  if (!n.has_tail_max_factor()) {
    c.fail(path + ".tail_max_factor", "is not set (a tail needs its cap)", "set tail_max_factor ≥ 1, e.g. 4");
  }
  c.real(path + ".tail_max_factor", n.tail_max_factor(), 1000.0, false);
  if (n.tail_max_factor() < 1) {
    c.fail(path + ".tail_max_factor", "must be ≥ 1 (a tail slows a kernel), got " + Checker::fmt(n.tail_max_factor()),
           "use a cap ≥ 1, e.g. 4");
  }
}

}  // namespace

void validate_variability(const Scenario& spec, const Checker& c) {
  const Variability v = resolve_variability(spec.variability(), spec.cluster().preset());
  const std::string p = "variability.";
  if (v.seed() < 0) c.fail(p + "seed", "must be ≥ 0, got " + std::to_string(v.seed()), "use any non-negative integer");
  c.real(p + "gpu_speed_cv", v.gpu_speed_cv(), 1.0, true);
  for (const auto& [key, noise] : v.kernel_noise()) {
    const std::string path = p + "kernel_noise[" + key + "]";
    if (!is_op_class_name(key)) {
      c.fail(path, "unknown op class \"" + key + "\"", "use one of " + op_class_names());
    }
    check_noise(path, noise, c);
  }
  c.enumeration_or_unset(p + "kernel_noise_scope", v.kernel_noise_scope());

  const int64_t nodes = spec.cluster().num_nodes();
  const int64_t gpus = spec.cluster().gpus_per_node();
  const int64_t nics = spec.cluster().nics_per_node();
  const Stragglers& s = v.stragglers();
  c.real(p + "stragglers.host_fraction", s.host_fraction(), 1.0, true);
  if (s.host_fraction() > 0 || s.has_slowdown()) {
    c.real(p + "stragglers.slowdown", s.slowdown(), 100.0, false);
    if (s.slowdown() < 1) {
      c.fail(p + "stragglers.slowdown", "a straggler is slower: the compute-time factor must be ≥ 1, got " +
                                            Checker::fmt(s.slowdown()),
             "use e.g. 1.10 for 10 % slower (MegaScale §6.3)");
    }
  }
  std::set<int64_t> listed;
  for (int i = 0; i < s.hosts_size(); ++i) {
    const std::string path = p + "stragglers.hosts[" + std::to_string(i) + "]";
    const StragglerHost& h = s.hosts(i);
    if (h.node() < 0 || h.node() >= nodes) {
      c.fail(path + ".node", "node " + std::to_string(h.node()) + " is outside the cluster (" +
                                 std::to_string(nodes) + " nodes)",
             "use a node in [0, " + std::to_string(nodes) + ")");
    }
    if (!listed.insert(h.node()).second) {
      c.fail(path + ".node", "node " + std::to_string(h.node()) + " is listed twice", "give each host once");
    }
    c.real(path + ".factor", h.factor(), 100.0, false);
    if (h.factor() < 1) {
      c.fail(path + ".factor", "a straggler is slower: the compute-time factor must be ≥ 1, got " +
                                   Checker::fmt(h.factor()),
             "use e.g. 1.10 for 10 % slower");
    }
  }

  for (int i = 0; i < v.slow_links_size(); ++i) {
    const std::string path = p + "slow_links[" + std::to_string(i) + "]";
    const SlowLink& l = v.slow_links(i);
    if (l.node() < 0 || l.node() >= nodes) {
      c.fail(path + ".node", "node " + std::to_string(l.node()) + " is outside the cluster (" +
                                 std::to_string(nodes) + " nodes)",
             "use a node in [0, " + std::to_string(nodes) + ")");
    }
    c.enumeration(path + ".port", l.port());
    const int64_t count = l.port() == PORT_NIC ? nics : gpus;
    if (l.index() < 0 || l.index() >= count) {
      c.fail(path + ".index", std::string(l.port() == PORT_NIC ? "NIC " : "GPU ") + std::to_string(l.index()) +
                                  " does not exist (" + std::to_string(count) + " per node)",
             "use an index in [0, " + std::to_string(count) + ")");
    }
    c.enumeration_or_unset(path + ".direction", l.direction());
    if (!std::isfinite(l.bandwidth_factor()) || l.bandwidth_factor() <= 0 || l.bandwidth_factor() > 1) {
      c.fail(path + ".bandwidth_factor", "must be in (0, 1] (a fraction of the link's bandwidth), got " +
                                             Checker::fmt(l.bandwidth_factor()),
             "use e.g. 0.5 for a dual-port NIC with one port down (HPN, docs/variability-sources.md §4)");
    }
  }

  const LinkFlaps& f = v.link_flaps();
  c.real(p + "link_flaps.flaps_per_port_per_hour", f.flaps_per_port_per_hour(), 1e6, true);
  c.real(p + "link_flaps.duration_s", f.duration_s(), 1e6, true);
  if (!std::isfinite(f.bandwidth_factor()) || f.bandwidth_factor() < 0 || f.bandwidth_factor() >= 1) {
    c.fail(p + "link_flaps.bandwidth_factor", "must be in [0, 1) (0: the port is down), got " +
                                                  Checker::fmt(f.bandwidth_factor()),
           "use 0 for a port that goes down");
  }
  if (f.flaps_per_port_per_hour() > 0) {
    if (f.duration_s() <= 0) {
      c.fail(p + "link_flaps.duration_s", "must be > 0 when flaps_per_port_per_hour is set",
             "set how long a flap lasts, e.g. 3 (MegaScale: \"several seconds\")");
    }
    if (nics <= 0) c.fail(p + "link_flaps", "the cluster has no NICs to flap", "remove link_flaps");
  }

  const HostPauses& h = v.host_pauses();
  if (h.interval_iterations() < 0 || h.interval_iterations() > 1'000'000'000) {
    c.fail(p + "host_pauses.interval_iterations",
           "must be in [0, 10^9] (0: no pauses), got " + std::to_string(h.interval_iterations()),
           "use e.g. 265 (CPython's generation-2 period measured by marin)");
  }
  c.real(p + "host_pauses.duration_ms", h.duration_ms(), 1e7, true);
  c.real(p + "collective_launch_skew_us", v.collective_launch_skew_us(), 1e7, true);
}

void validate_variability_section(const Variability& v, const Cluster& cluster, const SourceMap& locations) {
  Scenario spec;
  *spec.mutable_cluster() = cluster;
  *spec.mutable_variability() = v;
  validate_variability(spec, Checker(locations));
}

}  // namespace lacuna::scenario
