// cluster.nvlink_domain_gpus and max_nvlink_domain_gpus
// (docs/network.md#nvlink-domains). A domain is a whole number of nodes
// (trays), no larger than its switch generation allows, and the cluster is a
// whole number of domains: lacuna models whole NVL72 racks, not a partial last
// rack (a smaller rack is described by a smaller nvlink_domain_gpus).
#include "sim/scenario/checks.h"
#include "sim/scenario/nvlink_domain.h"

namespace lacuna::scenario {

void validate_nvlink_domain(const Scenario& spec, const Checker& c) {
  const Cluster& cl = spec.cluster();
  const int64_t gpn = cl.gpus_per_node();
  if (cl.has_max_nvlink_domain_gpus()) {
    c.count("cluster.max_nvlink_domain_gpus", cl.max_nvlink_domain_gpus(), Limits::kGpus);
    if (cl.max_nvlink_domain_gpus() < gpn)
      c.fail("cluster.max_nvlink_domain_gpus",
             std::to_string(cl.max_nvlink_domain_gpus()) + " is below gpus_per_node (" + std::to_string(gpn) +
                 "): a node's GPUs share one NVLink switch fabric",
             "set it to at least " + std::to_string(gpn) + ", or leave it unset");
  }
  if (!cl.has_nvlink_domain_gpus()) return;  // one domain per node
  const int64_t d = cl.nvlink_domain_gpus();
  c.count("cluster.nvlink_domain_gpus", d, Limits::kGpus,
          "the GPUs of one NVLink switch fabric, e.g. 72 for a GB200 NVL72 rack; leave it unset for one per node");
  if (gpn > 0 && d % gpn != 0)
    c.fail("cluster.nvlink_domain_gpus",
           std::to_string(d) + " is not a multiple of gpus_per_node (" + std::to_string(gpn) +
               "): an NVLink domain is made of whole nodes (trays)",
           "use a multiple of " + std::to_string(gpn) + ", e.g. 72 = 18 trays of 4 GPUs");
  if (cl.has_max_nvlink_domain_gpus() && d > cl.max_nvlink_domain_gpus())
    c.fail("cluster.nvlink_domain_gpus",
           std::to_string(d) + " GPUs is larger than the NVLink switch allows (max_nvlink_domain_gpus " +
               std::to_string(cl.max_nvlink_domain_gpus()) + (cl.preset().empty() ? "" : " of preset \"" + cl.preset() + "\"") +
               ")",
           "use at most " + std::to_string(cl.max_nvlink_domain_gpus()) +
               " GPUs per domain, or a preset whose NVLink switches reach further");
  const int64_t gpus = cl.num_nodes() * gpn;
  if (d > gpus)
    c.fail("cluster.nvlink_domain_gpus",
           std::to_string(d) + " GPUs is larger than the cluster (" + std::to_string(cl.num_nodes()) + " nodes × " +
               std::to_string(gpn) + " = " + std::to_string(gpus) + " GPUs)",
           "set cluster.num_nodes to a multiple of " + std::to_string(gpn > 0 ? d / gpn : d) +
               " (whole domains), or nvlink_domain_gpus to the GPUs the cluster has");
  if (gpn > 0 && d > 0 && d % gpn == 0) {
    const int64_t trays = d / gpn;
    if (cl.num_nodes() % trays != 0)
      c.fail("cluster.num_nodes",
             std::to_string(cl.num_nodes()) + " nodes is not a whole number of NVLink domains of " +
                 std::to_string(trays) + " nodes (" + std::to_string(d) + " GPUs): lacuna models whole domains",
             "use a multiple of " + std::to_string(trays) +
                 " nodes, or set cluster.nvlink_domain_gpus to a size that divides the cluster");
  }
}

}  // namespace lacuna::scenario
