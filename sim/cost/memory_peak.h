// A rank's memory peak, read statically from its compiled program, and
// whether the program fits the GPUs (docs/memory-model.md, "Feasibility").
// One definition, shared by the planners (before simulating), the bubble
// accounting (while simulating) and the reports:
//
//   peak = baseline + A + ceil(fragmentation · A)
//
// baseline = weights + gradients + optimizer + other (MemoryBaseline; other =
// CUDA context + NCCL buffers, compiler/memory_overheads.h), A = the highest
// running sum of the activation deltas (Compute.memory_delta_bytes, applied
// at op end), and the last term the caching allocator's reserve above it.
// Only activations fragment: Megatron-LM allocates weights, the fp32 gradient
// buffer and the optimizer state once, in contiguous buffers
// (DistributedDataParallel's grad buffer, the distributed optimizer's shards),
// while activations are many tensors of varying sizes allocated and freed
// every microbatch, which is where PyTorch's caching allocator fragments.
#pragma once

#include <cstdint>

#include "sim/core/units.h"
#include "sim/proto/program.pb.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::cost {

// ceil(fragmentation · activation_peak); 0 for fragmentation ≤ 0.
Bytes allocator_reserve_bytes(Bytes activation_peak, double fragmentation);

// baseline + activation_peak + allocator_reserve_bytes(activation_peak, fragmentation).
Bytes memory_peak_bytes(Bytes baseline, Bytes activation_peak, double fragmentation);

// weights + gradients + optimizer + other.
Bytes baseline_bytes(const ir::MemoryBaseline& m);

// cluster.memory_overheads.allocator_fragmentation (0 when unset, e.g. a
// program compiled before the field existed).
double allocator_fragmentation(const scenario::Cluster& cluster);

// The GPU's HBM (hbm_capacity_gib · 2^30 bytes, rounded); 0 when unknown.
Bytes hbm_capacity_bytes(const scenario::Cluster& cluster);

// Highest running sum of memory_delta_bytes over one class's ops, taken per
// stream in op order (at least 0: the iteration starts with no activations)
// and summed over the streams that carry compute ops. With one compute stream
// (every compiler path but Optimus' second encoder stream) this is exactly the
// peak the engine reaches, whatever the timing; with several it is an upper
// bound (each stream's running sum never exceeds its own maximum).
Bytes activation_peak_bytes(const ir::RankClass& rank_class);

struct ClassMemory {
  Bytes baseline;
  Bytes activation_peak;
  Bytes reserve;  // allocator_reserve_bytes(activation_peak, fragmentation)
  Bytes peak;     // baseline + activation_peak + reserve
};
ClassMemory class_memory(const ir::Program& program, int32_t class_id);

// Whether every rank of a program fits its GPU's HBM.
struct Feasibility {
  Bytes capacity;              // 0: unknown (then every rank fits)
  int32_t num_ranks = 0;
  int32_t over_capacity_ranks = 0;
  int32_t worst_class = -1;    // the class with the highest peak (lowest id on ties)
  int32_t worst_rank = -1;     // its lowest rank
  ClassMemory worst;           // its memory
  bool fits() const { return over_capacity_ranks == 0; }
};
Feasibility program_feasibility(const ir::Program& program);

}  // namespace lacuna::cost
