// Builds one RankClass: a fixed set of streams and one event per
// (producer stream → consumer stream) edge. Events are timeline counters
// (program.proto), so the k-th record of an edge satisfies the wait for value
// k: the builder tracks the counters.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "sim/proto/program.pb.h"

namespace lacuna::compiler {

// kSync: the small synchronous collectives the compute stream waits for at
// once (the loss reported per microbatch, the tied embedding's gradients,
// the gradient norm, the step statistics), apart from the DP stream's buckets.
// kEp: MoE token dispatch and combine (docs/moe.md), last so that dense
// programs keep their stream order.
// kRecvFwd / kSendFwd / kRecvBwd / kSendBwd: activations from pp_prev and to
// pp_next, gradients from pp_next and to pp_prev (Megatron-LM's layout: the
// only directions). The V layout (docs/schedules.md#stage-layouts) also sends
// activations to pp_prev and gradients to pp_next: the four streams after
// kEp, appended so that other programs keep their streams. One stream per
// (neighbour, tensor kind): a rendezvous send blocks its stream, so each
// stream carries one stage boundary's transfers, in microbatch order.
enum class StreamId : int32_t {
  kCompute,
  kTp,
  kCp,
  kRecvFwd,
  kSendFwd,
  kRecvBwd,
  kSendBwd,
  kDp,
  kSync,
  kEp,
  kRecvFwdFromNext,
  kSendFwdToPrev,
  kRecvBwdFromPrev,
  kSendBwdToNext,
  kCount
};

enum class EventId : int32_t {
  kComputeToTp,
  kTpToCompute,
  kComputeToCp,
  kCpToCompute,
  kRecvFwdToCompute,
  kComputeToSendFwd,
  kRecvBwdToCompute,
  kComputeToSendBwd,
  kComputeToDp,
  kDpToCompute,
  // Blocking p2p (Megatron's batched calls): every stream of a call waits for
  // one compute record; compute waits for each transfer's completion.
  kComputeToP2p,
  kSendFwdToCompute,
  kSendBwdToCompute,
  kComputeToSync,
  kSyncToCompute,
  // MoE (appended: a class without EP traffic keeps the events above only).
  kComputeToEp,
  kEpToCompute,
  // The V layout's extra p2p streams (appended likewise).
  kRecvFwdFromNextToCompute,
  kComputeToSendFwdToPrev,
  kSendFwdToPrevToCompute,
  kRecvBwdFromPrevToCompute,
  kComputeToSendBwdToNext,
  kSendBwdToNextToCompute,
  kCount
};

// What the ops being added belong to (copied into each Op): one type for
// every writer of ops, the stage compiler's ClassBuilder and the
// placements' ClassEditor (sim/placement/class_edit.h). `module`: 0 the LLM,
// e + 1 encoder e (Op.module; the stage compiler stamps segments with
// ModuleStamp instead).
struct OpContext {
  ir::Phase phase = ir::PHASE_UNSPECIFIED;
  int32_t microbatch = 0;
  int32_t chunk = 0;
  int32_t layer = -1;
  int32_t module = 0;
};

class ClassBuilder {
 public:
  ClassBuilder();

  // Appends an op (kind unset) to a stream; fill its kind through the pointer,
  // valid until the next add.
  ir::Op* add(StreamId stream, const OpContext& ctx);
  // Records `event` on `stream`; returns the counter value it reaches.
  int64_t record(StreamId stream, EventId event, const OpContext& ctx);
  void wait(StreamId stream, EventId event, int64_t value, const OpContext& ctx);
  // Index of the last op of a stream (-1 if empty), and access to it.
  int32_t last_index(StreamId stream) const;
  ir::Op* op(StreamId stream, int32_t index);
  // The next op added to the compute stream is issued by the host only once
  // the stream has finished everything before it (Op.host_sync: a
  // torch.cuda.synchronize() or .item() on the host).
  void host_sync_next() { sync_next_ = true; }


  // Moves the streams out (empty ones dropped) into a class.
  ir::RankClass finish(const std::string& name);

 private:
  std::array<ir::Stream, static_cast<size_t>(StreamId::kCount)> streams_;
  std::array<int64_t, static_cast<size_t>(EventId::kCount)> counters_{};
  bool sync_next_ = false;
};

}  // namespace lacuna::compiler
