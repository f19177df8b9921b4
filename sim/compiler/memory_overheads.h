// Memory a rank holds besides model state and activations
// (docs/memory-model.md#overheads): its process's CUDA context and one set of
// NCCL buffers per communicator it belongs to. Applied once to every program a
// compile path produces, like the host model (compiler/host_model.h), so that
// every placement is charged alike.
#pragma once

#include <cstdint>

#include "sim/proto/program.pb.h"

namespace lacuna::compiler {

// The NCCL communicators rank `rank` belongs to: each distinct group its
// bindings name (a group bound to several slots, e.g. dp and dp_cp with
// cp = 1, is one communicator; -1, a group of one rank, is none), plus one for
// point-to-point when any of its peer slots is bound (pp > 1: Megatron-LM's
// pipeline sends and receives run on the pipeline group's communicator).
int32_t rank_communicators(const ir::Program& program, int32_t rank);

// Sets every class's MemoryBaseline.other_bytes to
//   cuda_context_gib · 2^30 + nccl_communicator_mib · 2^20 · n
// (each term rounded to bytes), n = the most communicators a rank of the class
// belongs to (ranks of one class can differ, e.g. in a heterogeneous
// placement; the class's memory is its worst rank's). From
// cluster.memory_overheads; unset fields count 0. Overwrites other_bytes, so
// applying it twice is harmless.
void apply_memory_overheads(ir::Program& program);

}  // namespace lacuna::compiler
