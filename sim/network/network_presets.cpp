#include "sim/network/network_presets.h"

#include <cmath>
#include <string>

#include "sim/core/error.h"

namespace lacuna::network {
namespace {

// Sources of the presets (docs/network.md):
//  [SPA] NVIDIA DGX SuperPOD reference architecture with DGX A100 systems,
//        RA-09950-001 (2020): scalable units (SU) of 20 DGX A100, one HDR
//        InfiniBand leaf switch per rail per SU (rail-optimized), a spine layer
//        joining 7 SUs (140 nodes), core switches above for larger pods; full
//        bisection (1:1).
//  [SPH] NVIDIA DGX SuperPOD reference architecture with DGX H100 systems,
//        RA-11333-001 (2023): SUs of 32 DGX H100, 8 NDR 400 Gb/s rails, leaf
//        per rail per SU, spine joining 4 SUs (the fully tested 127-node
//        design), core above for larger deployments; 1:1.
//  [MS]  MegaScale (Jiang et al., NSDI 2024), §3 network, as summarised in
//        shared/reference/mllm-systems.md §3: Tomahawk 4 (64 × 400 Gb/s)
//        three-tier CLOS, 1:1 down/up, 8 × 200 Gb/s NICs per server each to a
//        different ToR, up to 64 servers under one ToR group.
//  [LAT] Assumption: one traversal of a switch tier costs 0.5 µs on
//        InfiniBand (Quantum/Quantum-2 cut-through ASIC latency is quoted at
//        0.13–0.33 µs port to port, plus cable and serialisation of a 4 KiB MTU)
//        and 1 µs on RoCE Ethernet (store-and-forward deep-buffer ASIC).
//  [OVL] compute_slowdown_under_comm = 0.1: Lee et al., "Characterizing
//        Compute-Communication Overlap in GPU-Accelerated Distributed Deep
//        Learning" (arXiv 2507.03114, 2025) measure an average compute slowdown
//        of 18.9 % (max 40 %) when GPT/LLaMA compute overlaps NCCL collectives
//        on 4 A100/H100; lacuna applies the factor to every kernel of a rank
//        while any of its NCCL operations (including 1–2-channel p2p) is in
//        flight, so it takes a value below that heavy-overlap average. This
//        choice of 0.1 is an assumption bracketed by the measurement.
//  [QX8] NVIDIA Quantum-X800 Q3400 InfiniBand switch (XDR): 144 ports of
//        800 Gb/s (NVIDIA Quantum-X800 platform datasheet / GTC 2024).
//  [SPX] NVIDIA Spectrum-X800 SN5600 Ethernet switch: 64 ports of 800 GbE
//        (NVIDIA Spectrum-X / SN5600 datasheet).
//  [NVRA] NVIDIA Enterprise Reference Architecture, NVL72 AI factory
//        (docs.nvidia.com/enterprise-reference-architectures/nvl72-ai-factory,
//        "Network Logical Architecture"): the GPU compute (east/west) fabric
//        is a rail-optimized leaf-spine RDMA fabric through each GPU's
//        SuperNIC; the NVLink domain of each rack is separate (not in here).
//  [RDX] Assumption from the radix ([QX8], [SPX]), as [MS]'s aggregation
//        tier: a 1:1 rail leaf gives half its ports to trays, one NIC per tray
//        per rail: 72 trays (4 NVL72 racks) under a Quantum-X800 leaf, 32
//        under an SN5600 leaf at 800 Gb/s (a 400 Gb/s ConnectX-7 on a
//        2 × 400 breakout would double that: set tiers[0].children). One spine
//        tier joins the leaves (no published NVL72 scalable-unit size was
//        found).
//  [B2H] Assumption: HGX B200 clusters take the DGX H100 SuperPOD fabric
//        ([SPH]: 32-node rail-optimized scalable units, 8 rails of 400 Gb/s):
//        a DGX B200 has the same 8 × 400 Gb/s ConnectX-7 rails.
constexpr double kSlowdownUnderComm = 0.1;
constexpr double kInfinibandTierLatencyUs = 0.5;
constexpr double kEthernetTierLatencyUs = 1.0;

void add_tier(scenario::NetworkSpec& spec, const char* name, int64_t children, double latency_us) {
  scenario::SwitchTier* t = spec.add_tiers();
  t->set_name(name);
  if (children > 0) t->set_children(children);
  t->set_oversubscription(1.0);
  t->set_latency_us(latency_us);
}

scenario::NetworkSpec make_preset(const std::string& name) {
  scenario::NetworkSpec spec;
  spec.set_preset(name);
  spec.set_compute_slowdown_under_comm(kSlowdownUnderComm);
  if (name == "dgx-a100") {
    add_tier(spec, "leaf", 20, kInfinibandTierLatencyUs);   // [SPA] 20 nodes per SU
    add_tier(spec, "spine", 7, kInfinibandTierLatencyUs);   // [SPA] 7 SUs per spine group
    add_tier(spec, "core", 0, kInfinibandTierLatencyUs);    // [SPA] joins everything
  } else if (name == "dgx-h100") {
    add_tier(spec, "leaf", 32, kInfinibandTierLatencyUs);   // [SPH] 32 nodes per SU
    add_tier(spec, "spine", 4, kInfinibandTierLatencyUs);   // [SPH] 4 SUs per spine group
    add_tier(spec, "core", 0, kInfinibandTierLatencyUs);
  } else if (name == "megascale") {
    add_tier(spec, "tor", 64, kEthernetTierLatencyUs);  // [MS] 64 servers per ToR group
    // Assumption from the radix [MS]: a 1:1 ToR has 32 × 400 Gb/s uplinks, so
    // an aggregation pod of 64-port switches serves 32 ToRs = 4 ToR groups of
    // 8 rails.
    add_tier(spec, "aggregation", 4, kEthernetTierLatencyUs);
    add_tier(spec, "spine", 0, kEthernetTierLatencyUs);
  } else if (name == "nvl72-quantum-x800") {
    add_tier(spec, "leaf", 72, kInfinibandTierLatencyUs);  // [RDX] 72 trays = 4 racks per rail leaf
    add_tier(spec, "spine", 0, kInfinibandTierLatencyUs);  // [NVRA] leaf-spine
  } else if (name == "nvl72-spectrum-x") {
    add_tier(spec, "leaf", 32, kEthernetTierLatencyUs);    // [RDX] 32 trays per rail leaf at 800 GbE
    add_tier(spec, "spine", 0, kEthernetTierLatencyUs);    // [NVRA]
  } else if (name == "single-switch") {
    add_tier(spec, "switch", 0, kInfinibandTierLatencyUs);  // one non-blocking switch
  } else {
    std::string valid;
    for (const auto& n : network_preset_names()) valid += (valid.empty() ? "" : ", ") + ("\"" + n + "\"");
    throw Error(SourceLocation{{}, 0, 0, "cluster.network.preset"}, "unknown network preset \"" + name + "\"",
                "use one of " + valid + ", or leave it empty to take the GPU preset's fabric");
  }
  return spec;
}


std::string tier_path(int i, const char* leaf) {
  return "cluster.network.tiers[" + std::to_string(i) + "]." + leaf;
}

// A tier's unset fields from the preset's tier at the same index.
void fill_tier(scenario::SwitchTier& tier, const scenario::SwitchTier* preset, int index) {
  if (tier.name().empty()) tier.set_name(preset != nullptr && !preset->name().empty() ? preset->name()
                                                                                        : "tier" + std::to_string(index));
  if (!tier.has_children() && preset != nullptr && preset->has_children()) tier.set_children(preset->children());
  if (!tier.has_oversubscription()) {
    tier.set_oversubscription(preset != nullptr && preset->has_oversubscription() ? preset->oversubscription() : 1.0);
  }
  if (!tier.has_latency_us()) {
    tier.set_latency_us(preset != nullptr && preset->has_latency_us() ? preset->latency_us() : 0.0);
  }
}

void validate(const scenario::NetworkSpec& spec) {
  if (spec.tiers().empty()) {
    throw Error(field("cluster.network.tiers"), "no switch tier", "give at least one tier, or a network preset");
  }
  const int top = spec.tiers_size() - 1;
  for (int i = 0; i <= top; ++i) {
    const scenario::SwitchTier& t = spec.tiers(i);
    if (i < top) {
      if (!t.has_children()) {
        throw Error(field(tier_path(i, "children")), "not set",
                    i == 0 ? "nodes under one switch of this tier" : "switch groups of the tier below under one switch");
      }
      if (t.children() < 1) {
        throw Error(field(tier_path(i, "children")), "must be ≥ 1, got " + std::to_string(t.children()));
      }
    }
    if (!(t.oversubscription() >= 1.0) || !std::isfinite(t.oversubscription())) {
      throw Error(field(tier_path(i, "oversubscription")), "must be ≥ 1, got " + std::to_string(t.oversubscription()),
                  "downlink : uplink bandwidth; 1 is non-blocking");
    }
    if (!(t.latency_us() >= 0.0) || !std::isfinite(t.latency_us())) {
      throw Error(field(tier_path(i, "latency_us")), "must be ≥ 0, got " + std::to_string(t.latency_us()));
    }
  }
  const double s = spec.compute_slowdown_under_comm();
  if (!(s >= 0.0 && s <= 10.0)) {
    throw Error(field("cluster.network.compute_slowdown_under_comm"), "must be in [0, 10], got " + std::to_string(s),
                "0.1 = compute kernels run 10 % slower while an NCCL operation is in flight");
  }
  if (!scenario::NcclAlgorithm_IsValid(spec.algorithm())) {
    throw Error(field("cluster.network.algorithm"), "unknown value " + std::to_string(spec.algorithm()),
                "NCCL_ALGO_AUTO, NCCL_ALGO_RING, NCCL_ALGO_TREE or NCCL_ALGO_NVLS");
  }
  if (!scenario::NcclProtocol_IsValid(spec.protocol())) {
    throw Error(field("cluster.network.protocol"), "unknown value " + std::to_string(spec.protocol()),
                "NCCL_PROTO_AUTO, NCCL_PROTO_LL, NCCL_PROTO_LL128 or NCCL_PROTO_SIMPLE");
  }
}

}  // namespace

std::vector<std::string> network_preset_names() {
  return {"dgx-a100", "dgx-h100", "megascale", "nvl72-quantum-x800", "nvl72-spectrum-x", "single-switch"};
}

scenario::NetworkSpec network_preset(const std::string& name) { return make_preset(name); }

std::string default_network_preset(const scenario::Cluster& cluster) {
  if (cluster.preset() == "a100-80gb-sxm") return "dgx-a100";
  if (cluster.preset() == "h100-sxm" || cluster.preset() == "h200-sxm") return "dgx-h100";
  if (cluster.preset() == "b200") return "dgx-h100";  // [B2H]
  if (cluster.preset() == "gb200-nvl72" || cluster.preset() == "gb300-nvl72") return "nvl72-quantum-x800";
  return "single-switch";
}

scenario::NetworkSpec resolve_network(const scenario::Cluster& cluster) {
  const scenario::NetworkSpec& user = cluster.network();
  const std::string name = user.preset().empty() ? default_network_preset(cluster) : user.preset();
  const scenario::NetworkSpec preset = make_preset(name);
  scenario::NetworkSpec out = user;
  out.set_preset(name);
  if (out.tiers().empty()) {
    *out.mutable_tiers() = preset.tiers();
  } else {
    for (int i = 0; i < out.tiers_size(); ++i) {
      fill_tier(*out.mutable_tiers(i), i < preset.tiers_size() ? &preset.tiers(i) : nullptr, i);
    }
  }
  if (!out.has_compute_slowdown_under_comm()) {
    out.set_compute_slowdown_under_comm(preset.compute_slowdown_under_comm());
  }
  validate(out);
  return out;
}

}  // namespace lacuna::network
