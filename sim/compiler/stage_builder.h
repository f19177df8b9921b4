// Internal to the compiler: builds one pipeline stage's rank class
// (build_stage_program), one responsibility per file:
//   stage_builder.cpp    the order of the iteration and the forward / backward passes
//   stage_p2p.cpp        pipeline p2p, overlapped (streams per direction) or
//                        blocking (Megatron's batched calls)
//   stage_dp.cpp         DP buckets (gathers, reductions, NaN checks), the
//                        gradient buffer's zeroing, synchronous collectives,
//                        the batch broadcast and the loss reduction
//   stage_optimizer.cpp  finalize_model_grads and the optimizer step
//   stage_fp8.cpp        FP8 delayed scaling's amax reductions
// docs/compiler.md describes what each emits.
#pragma once

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "sim/compiler/pass_emission.h"
#include "sim/compiler/stage_emitter.h"
#include "sim/schedule/p2p_calls.h"

namespace lacuna::compiler {

class StageBuilder {
 public:
  explicit StageBuilder(const StageInputs& in);
  StageProgram build();

 private:
  // --- passes (stage_builder.cpp): coroutines that suspend after each
  // collective (pass_emission.h); run_pass runs one to its end.
  PassEmission forward(int32_t action_index, schedule::Action a);
  PassEmission backward(int32_t action_index, schedule::Action a);
  // A schedule file's lone R: the chunk's checkpointed layers re-run
  // forward for that microbatch, ahead of its backward, which then runs
  // without them (docs/schedules.md#recompute-actions).
  PassEmission recompute(schedule::Action a);
  void run_pass(int32_t action_index);
  // DualPipe's F&B: passes i (a forward) and i + 1 (a backward of another
  // stage) emitted in turns, switching at each collective, each with its own
  // emitter (its own pending waits). True when it could: the pair's stages
  // are the LLM's only, and no blocking p2p call sits between them; else the
  // caller runs them in order.
  bool overlapped_pair(int32_t action_index);
  // The chunk's first forward: waits for the gathers of the DP buckets that
  // start at (segment, layer), but the first (waited for before the pass).
  void wait_gathers(int32_t chunk, int32_t segment, int64_t layer, const OpContext& ctx);
  // The chunk's last backward: hands the next bucket (`reduced`) to the DP
  // stream when it starts at (segment, layer), but the last (after the pass).
  void hand_off_at(int32_t chunk, int32_t segment, int64_t layer, size_t& reduced);
  // The emitter of the pass being emitted.
  Emitter& em() { return *em_; }
  const ModuleWork& work(const Segment& seg) const { return *modules_.at(static_cast<size_t>(seg.module)); }

  // --- pipeline p2p (stage_p2p.cpp)
  int64_t wire_bytes(int32_t boundary) const;
  void gather_received(int32_t boundary, const OpContext& ctx);
  int64_t tag(int64_t direction, int64_t receiver_stage, int64_t microbatch) const;
  // Fills an ir::Send or ir::Recv (they carry the same fields).
  template <class Message>
  void set_p2p(Message* msg, int32_t peer_slot, int32_t boundary, int32_t channel, int64_t tag_value) const;
  void receive_into_compute(StreamId stream, EventId event, int32_t peer_slot, int32_t channel, int64_t tag_value,
                            int32_t boundary, const OpContext& ctx);
  void send_from_compute(StreamId stream, EventId event, int32_t peer_slot, int32_t channel, int64_t tag_value,
                         int32_t boundary, const OpContext& ctx);
  // How this rank's stage `vs` reaches its neighbouring stage `other`
  // (vs ± 1): the peer slot toward the rank that holds it and the streams of
  // that (neighbour, tensor kind) (class_builder.h); `remote` false when this
  // rank holds `other` too (the V layout's turn).
  struct Hop {
    bool remote = false;
    int32_t peer_slot = 0;
    StreamId send_stream = StreamId::kSendFwd, recv_stream = StreamId::kRecvFwd;
    EventId to_send = EventId::kComputeToSendFwd, received = EventId::kRecvFwdToCompute;
    EventId sent = EventId::kSendFwdToCompute;
  };
  // `activation`: a forward's activation (else a backward's gradient).
  Hop hop(int32_t vs, int32_t other, bool activation) const;
  void emit_blocking_calls_after(int32_t action_index);  // -1: before the first action
  void emit_call(const schedule::P2pCall& call);

  // --- DP and synchronous collectives (stage_dp.cpp)
  void dp_collective(ir::CollectiveKind kind, int32_t slot, int32_t chunk, int64_t bytes, int32_t module,
                     const OpContext& base_ctx);
  void sync_now(ir::CollectiveKind kind, int32_t slot, int64_t bytes, const OpContext& ctx);
  void bucket_reduction(int32_t chunk, const DpBucket& bucket);
  void bucket_nan_check(const DpBucket& bucket);
  void hand_off(const std::vector<const DpBucket*>& group, int32_t chunk);
  void gather_parameters();
  // Chunk c's parameter gathers on the DP stream (gather_parameters; a
  // schedule file's UNSHARD placed after a pass, gather_after_pass).
  void gather_chunk(int32_t chunk);
  void gather_after_pass(int32_t i);
  void zero_grad_buffers();
  void reduce_after_last_backward();
  void reduce_after_pass(int32_t i);
  void mirror_reductions();
  // Of `trained` parameters, `expert` of them routed experts, those this rank
  // updates and whose reduced gradients it keeps: all, or with the
  // distributed optimizer its 1/(dp·cp) shard of the dense ones and its
  // 1/expert_dp shard of the experts'.
  int64_t updated_parameters(int64_t trained, int64_t expert) const;
  void broadcast_batch(const OpContext& ctx);
  void after_loss(const OpContext& ctx);

  // --- the optimizer step (stage_optimizer.cpp)
  void finalize_and_step();

  // --- FP8 delayed scaling (stage_fp8.cpp)
  void plan_amax_reductions();
  // Pass `i`'s reduction, unless a schedule file left it out.
  void amax_reduction(int32_t i, bool forward, const OpContext& ctx);

  const StageInputs& in_;
  ClassBuilder b_;
  Emitter e_;
  Emitter e_pair_;      // the backward of an overlapped pair
  Emitter* em_ = &e_;   // em()
  const scenario::Execution& x_;
  const model::LayerShape& shape_;
  int32_t chunks_ = 0;       // virtual stages on this rank (pipeline.virtual_stages)
  int32_t microbatches_ = 0;
  int32_t num_vs_ = 0;       // virtual stages of the pipeline
  bool p2p_ = false;         // pp > 1
  bool blocking_ = false;    // Megatron's blocking p2p calls
  bool scatter_gather_ = false;
  bool dp_ops_ = false;      // dp × cp > 1
  bool first_pp_ = false, last_pp_ = false;
  bool mirrored_ = false;    // the bidirectional layout: every stage twice (mirror_reductions)
  ModuleWork llm_;
  std::vector<const ModuleWork*> modules_;  // index = Op.module
  std::vector<std::vector<Segment>> segments_;  // per virtual stage
  // The message after virtual stage k and the module it belongs to (that of
  // the stage's last segment, whose output it is).
  std::vector<int64_t> boundary_bytes_;
  std::vector<int32_t> boundary_module_;
  std::vector<std::vector<schedule::P2pCall>> calls_after_;  // [after + 1]
  std::vector<int32_t> first_forward_, last_backward_;  // per chunk: action index
  // (chunk, microbatch) whose recompute ran as an R pass of its own.
  std::set<std::pair<int32_t, int32_t>> recomputed_;
  std::vector<int32_t> reduce_order_;  // chunks in the order their backward finishes (or REDUCE_GRAD order)
  // Per chunk, the pass after which its gradients go to DP (its last
  // backward, or where a schedule file's REDUCE_GRAD puts it); the chunks
  // in the order their parameters are gathered.
  std::vector<int32_t> reduce_after_, gather_order_;
  // Per chunk, the pass after which its gathers are issued (-1: at
  // iteration start; a schedule file's UNSHARD may place them later).
  std::vector<int32_t> gather_after_;
  int64_t grad_bytes_ = 0;             // per parameter, as reduced
  // Parameters this rank holds and trains, the trained ones per module
  // (index = Op.module), and with SP the norm weights whose gradients are
  // partial per TP rank.
  int64_t parameters_ = 0, trained_ = 0, sp_norm_parameters_ = 0;
  int64_t expert_parameters_ = 0;  // routed experts (reduced and sharded over expert DP)
  bool expert_dp_ops_ = false;     // MoE with expert DP > 1
  std::vector<int64_t> trained_by_module_;
  std::vector<int64_t> trained_by_chunk_, expert_by_chunk_;  // trained and routed-expert parameters per chunk
  std::vector<std::vector<DpBucket>> buckets_;  // per chunk, gradient-ready order
  std::vector<std::vector<int64_t>> gathered_;  // per chunk and bucket: kDpToCompute after its gather
  int64_t dp_records_ = 0;  // kDpToCompute after the last DP collective
  OpContext dp_ctx_{ir::DP_SYNC, 0, 0, -1};
  // FP8 delayed scaling: the FP8 GEMMs of this rank's LLM layers (0: no
  // amax reductions), and whether the amax group has other ranks.
  int64_t amax_gemms_ = 0;
  bool amax_group_ = false;
};

}  // namespace lacuna::compiler
