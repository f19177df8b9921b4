// A transformer layer (and the embedding and LM head around the stack) as the
// ordered kernels one TP×CP shard runs, with the points where TP and CP
// communication must happen. The compiler turns a CommPoint into stream ops;
// sim/model decides only what is communicated, where, and who consumes it.
#pragma once

#include <variant>
#include <vector>

#include "sim/core/units.h"
#include "sim/model/kernels.h"
#include "sim/model/layer_shape.h"

namespace lacuna::model {

// kEp: the expert-parallel group (MoE dispatch and combine); kExpertTp: the
// expert tensor-parallel group; kEpIntraDomain / kEpInterDomain: the EP ranks
// of one NVLink domain / with the same position in every domain (hierarchical
// dispatch, docs/moe.md#dispatchers).
enum class CommGroup { kTp, kCp, kEp, kExpertTp, kEpIntraDomain, kEpInterDomain };

// Which later kernel needs a collective's result; the compute stream waits
// for the collective right before it. Every emitter (the compiler's stage
// programs, Optimus, the heterogeneous placements) uses matches().
struct Consumer {
  // Unspecified: the next kernel that is neither a weight gradient (Megatron
  // overlaps a linear layer's input-gradient reduction with its wgrad GEMM)
  // nor a piece of a split GEMM (TP overlap: the pieces run while it moves).
  ir::KernelRole role = ir::ROLE_UNSPECIFIED;
  ir::Phase phase = ir::PHASE_UNSPECIFIED;  // with a role: only a kernel of this phase (unspecified: any)
  int32_t chunk = -1;                       // with a role: only this piece of a split GEMM (-1: any)
  bool matches(const Kernel& k) const {
    if (role == ir::ROLE_UNSPECIFIED) return k.phase != ir::BACKWARD_WEIGHT && k.chunk < 0;
    return k.role == role && (phase == ir::PHASE_UNSPECIFIED || k.phase == phase) && (chunk < 0 || k.chunk == chunk);
  }
};

struct CommPoint {
  CommGroup group = CommGroup::kTp;
  ir::CollectiveKind kind = ir::COLLECTIVE_UNSPECIFIED;
  int64_t bytes = 0;  // nccl-tests size (program.proto, Collective)
  ir::Phase phase = ir::FORWARD;
  Consumer consumer;
};

using Step = std::variant<Kernel, CommPoint>;

// Forward of one layer (phase FORWARD, or RECOMPUTE for full recompute).
std::vector<Step> layer_forward(const LayerShape& s, ir::Phase phase = ir::FORWARD);

// Backward of one layer in execution order, each linear layer's B kernel
// followed by its W kernel (autograd order). Includes the recomputation the
// mode asks for: SELECTIVE re-runs the attention core right before its
// backward, FULL the whole forward (with its communication) first.
std::vector<Step> layer_backward(const LayerShape& s, scenario::Recompute recompute);

// First virtual stage: token (+ learned position) embedding and its TP
// reduction; backward: the scatter-add into the embedding gradient (W).
std::vector<Step> embedding_forward(const LayerShape& s);
std::vector<Step> embedding_backward(const LayerShape& s);

// Last virtual stage: final norm, logits GEMM (vocab-parallel), cross entropy;
// backward: loss gradient, logits B and W, final norm.
std::vector<Step> head_forward(const LayerShape& s);
std::vector<Step> head_backward(const LayerShape& s);

// Memory-bound kernels of a (possibly unfused) norm, forward or backward,
// over `tokens` tokens (docs/kernels.md#fused-kernels).
std::vector<Kernel> norm_kernels(const LayerShape& s, ir::KernelRole role, ir::Phase phase, bool backward,
                                 int64_t tokens);

// Activations the head keeps per microbatch between forward and backward:
// final-norm input, logits-GEMM input and the fp32 softmax of the vocab-parallel
// cross entropy.
Bytes head_activation_bytes(const LayerShape& s);

}  // namespace lacuna::model
