// NCCL's own cost-model constants, as NCCL uses them to pick an algorithm and a
// protocol. Sources:
//  [T230] NVIDIA/nccl v2.30.7 src/graph/tuning.cc, as transcribed in
//         docs/reference models-and-hardware.md §3 (latencies, NVLS 0.85).
//  [T219] NVIDIA/nccl src/graph/tuning.cc at commit b6475625 (2.19 era), read
//         directly: protocol bandwidth fractions (LL, LL128, tree refinements),
//         which §3 does not list.
// Latencies are in microseconds. Tables are indexed [algorithm][protocol].
#pragma once

#include <array>

namespace lacuna::cost::nccl {

enum class Algorithm { kRing = 0, kTree = 1, kNvls = 2, kDirect = 3 };
enum class Protocol { kLL = 0, kLL128 = 1, kSimple = 2 };

inline constexpr int kNumProtocols = 3;
using PerProtocol = std::array<double, kNumProtocols>;

// Base latency per algorithm, LL / LL128 / Simple [T230].
inline constexpr PerProtocol kRingBaseLatencyUs = {6.6, 14.0, 8.4};
inline constexpr PerProtocol kTreeBaseLatencyUs = {6.8, 14.0, 8.4};
inline constexpr double kNvlsBaseLatencyUs = 0.0;

// Per-hop latency over NVLink, LL / LL128 / Simple [T230].
inline constexpr PerProtocol kRingNvlinkHopUs = {0.6, 1.9, 3.4};
inline constexpr PerProtocol kTreeNvlinkHopUs = {0.6, 1.25, 4.0};
inline constexpr double kNvlsNvlinkHopUs = 25.0;  // Simple only

// Per-hop latency over the network, LL / LL128 / Simple [T230].
inline constexpr PerProtocol kRingNetHopUs = {2.7, 4.0, 14.0};
inline constexpr PerProtocol kTreeNetHopUs = {5.0, 8.5, 14.0};

// Ring LL moves 8-byte lines carrying 4 bytes of data plus flags, and NCCL
// models it at 1/4 of Simple's bus bandwidth for all-reduce, reduce or any
// multi-node ring, 1/3 otherwise [T219].
inline constexpr double kRingLLFractionReduceOrMultiNode = 1.0 / 4.0;
inline constexpr double kRingLLFractionOther = 1.0 / 3.0;
// LL128: 120 useful bytes per 128-byte line; NCCL caps it at 0.92 of Simple,
// 0.7 when a node holds a single rank (ppn < 2, send and receive share the NIC)
// [T219, T230].
inline constexpr double kRingLL128Fraction = 0.92;
inline constexpr double kRingLL128FractionOneRankPerNode = 0.7;

// Tree all-reduce: 0.92 of the bus bandwidth, then halved to algorithm
// bandwidth (every byte goes up and down the tree) [T219, T230].
inline constexpr double kTreeFraction = 0.92;
inline constexpr double kTreeBusToAlg = 0.5;
inline constexpr double kTreeLLFraction = 1.0 / 3.8;                // [T219]
inline constexpr double kTreeLL128FractionSingleNode = 7.0 / 9.0;   // [T219]
inline constexpr double kTreeLL128FractionMultiNode = 120.0 / 128.0;  // [T219]

// NVLink SHARP all-reduce efficiency on Hopper [T230].
inline constexpr double kNvlsEfficiencyHopper = 0.85;

}  // namespace lacuna::cost::nccl
