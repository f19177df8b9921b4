#include "sim/report/analyses/comm_kind.h"

namespace lacuna::report {

CommKind comm_kind_of_stream(ir::StreamKind kind) {
  switch (kind) {
    case ir::TP_COMM: return CommKind::kTp;
    case ir::CP_COMM: return CommKind::kCp;
    case ir::PP_SEND:
    case ir::PP_RECV: return CommKind::kPp;
    case ir::DP_COMM: return CommKind::kDp;
    case ir::BOUNDARY: return CommKind::kBoundary;
    case ir::ENCODER_COMM: return CommKind::kEncoder;
    case ir::EP_COMM: return CommKind::kEp;
    default: return CommKind::kNone;
  }
}

CommKind comm_kind(const ir::Program& program, const ir::Stream& stream, const ir::Op& op) {
  if (op.has_collective()) {
    const int32_t slot = op.collective().group_slot();
    if (slot >= 0 && slot < program.group_slots_size()) {
      switch (program.group_slots(slot).kind()) {
        case ir::TP:
        case ir::EXPERT_TP: return CommKind::kTp;
        case ir::EP:
        case ir::EP_INTRA_DOMAIN:
        case ir::EP_INTER_DOMAIN: return CommKind::kEp;
        case ir::CP: return CommKind::kCp;
        case ir::PP: return CommKind::kPp;
        case ir::DP:
        case ir::DP_CP:
        case ir::EXPERT_DP:
        case ir::WORLD:
        // FP8 delayed scaling's amax reduction spans the data-parallel
        // replicas of a stage (tp × cp × dp): a synchronization of DP ranks.
        case ir::AMAX_REDUCTION:
        // The optimizer step's reductions between data-parallel work and the
        // update (tied embeddings between the first and last stage, the
        // gradient norm) count with DP: they are part of the gradient sync.
        case ir::EMBEDDING_GROUP:
        case ir::MODEL_PARALLEL:
        // DualPipe's two copies of a stage summing their gradients.
        case ir::PP_MIRROR: return CommKind::kDp;
        case ir::ENCODER_TP:
        case ir::ENCODER_CP:
        case ir::ENCODER_DP: return CommKind::kEncoder;
        case ir::BOUNDARY_GROUP: return CommKind::kBoundary;
        default: break;
      }
    }
    const CommKind by_stream = comm_kind_of_stream(stream.kind());
    // A collective is communication even on a stream of unspecified kind.
    return by_stream == CommKind::kNone ? CommKind::kDp : by_stream;
  }
  if (op.has_send() || op.has_recv()) {
    switch (stream.kind()) {
      case ir::CP_COMM: return CommKind::kCp;
      case ir::TP_COMM: return CommKind::kTp;
      case ir::DP_COMM: return CommKind::kDp;
      case ir::BOUNDARY: return CommKind::kBoundary;
      case ir::ENCODER_COMM: return CommKind::kEncoder;
      case ir::EP_COMM: return CommKind::kEp;
      default: return CommKind::kPp;
    }
  }
  return comm_kind_of_stream(stream.kind());
}

}  // namespace lacuna::report
