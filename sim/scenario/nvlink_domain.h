// NVLink domains (docs/network.md#nvlink-domains): the GPUs joined by one
// NVLink switch fabric. An HGX/DGX node is one domain of gpus_per_node GPUs;
// a GB200/GB300 NVL72 rack is one domain of 72 GPUs on 18 four-GPU trays
// (nodes), joined through its NVLink Switch trays. Every consumer (topology,
// collective model, compiler, MoE dispatch) takes the domain size from here so
// that they agree.
#pragma once

#include <cstdint>

#include "sim/proto/scenario.pb.h"

namespace lacuna::scenario {

// cluster.nvlink_domain_gpus when set and positive, else gpus_per_node (at
// least 1).
int64_t nvlink_domain_gpus(const Cluster& cluster);

// Nodes (trays) per NVLink domain: nvlink_domain_gpus / gpus_per_node, at least
// 1. Validation makes the division exact.
int64_t nodes_per_nvlink_domain(const Cluster& cluster);

// The NVLink domain of a node: node / nodes_per_nvlink_domain.
int64_t nvlink_domain_of_node(const Cluster& cluster, int64_t node);

}  // namespace lacuna::scenario
