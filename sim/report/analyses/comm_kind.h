// Which parallelism dimension a communication op belongs to. The bubble
// accounting uses it to name exposed communication and the SVG to pick a lane,
// so both agree on what "TP" or "DP" means.
#pragma once

#include <cstdint>

#include "sim/proto/program.pb.h"

namespace lacuna::report {

// kBoundary: encoder ↔ LLM boundary transfers (BOUNDARY streams,
// BOUNDARY_GROUP collectives); kEncoder: an encoder's own communication
// (ENCODER_COMM streams, ENCODER_TP / _CP / _DP groups).
// kEp: MoE dispatch and combine (EP_COMM streams; EP, EP_INTRA_DOMAIN and
// EP_INTER_DOMAIN groups).
enum class CommKind : uint8_t { kNone, kTp, kCp, kPp, kDp, kBoundary, kEncoder, kEp };

// Collectives: by the kind of their group slot (TP and EXPERT_TP as TP, CP, PP;
// DP, DP_CP, EXPERT_DP, WORLD, AMAX_REDUCTION and PP_MIRROR count as DP; EP* as EP; ENCODER_* as encoder; BOUNDARY_GROUP as boundary), falling back
// to the stream kind when the slot has no kind.
// Send/Recv: CP on a CP_COMM stream, TP on TP_COMM, DP on DP_COMM, boundary on
// BOUNDARY, encoder on ENCODER_COMM, else PP.
// Any other op: by its stream kind (TP_COMM → TP, ..., PP_SEND/PP_RECV → PP);
// kNone for ops on compute streams and streams of unspecified kind.
CommKind comm_kind(const ir::Program& program, const ir::Stream& stream, const ir::Op& op);

// Only by stream kind (the fallback rule above).
CommKind comm_kind_of_stream(ir::StreamKind kind);

}  // namespace lacuna::report
