// A transformer layer (and the embedding and LM head around the stack) as the
// ordered kernels one TP×CP shard runs, with the points where TP and CP
// communication must happen. The compiler turns a CommPoint into stream ops;
// sim/model decides only what is communicated, where, and who consumes it.
#pragma once

#include <variant>
#include <vector>

#include "sim/model/kernels.h"
#include "sim/model/layer_shape.h"

namespace lacuna::model {

enum class CommGroup { kTp, kCp };

struct CommPoint {
  CommGroup group = CommGroup::kTp;
  ir::CollectiveKind kind = ir::COLLECTIVE_UNSPECIFIED;
  int64_t bytes = 0;  // nccl-tests size (program.proto, Collective)
  ir::Phase phase = ir::FORWARD;
  // The kernel that needs the result: the next kernel with this role, or, when
  // unspecified, the next kernel that is not a weight gradient (Megatron
  // overlaps a linear layer's dgrad all-reduce with its wgrad GEMM).
  ir::KernelRole consumer = ir::ROLE_UNSPECIFIED;
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

// Activations the head keeps per microbatch between forward and backward:
// final-norm input, logits-GEMM input and the fp32 softmax of the vocab-parallel
// cross entropy.
int64_t head_activation_bytes(const LayerShape& s);

}  // namespace lacuna::model
