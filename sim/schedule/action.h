// The action IR: a pipeline schedule as printable data, one ordered list of
// actions per pipeline rank (docs/schedules.md#the-action-ir).
//
// The text form follows PyTorch pipelining's `_Action`
// (torch/distributed/pipelining/schedules.py: `[stage][type][microbatch]`,
// "1F0", "0SEND_B3", "2UNSHARD"), read there and written anew here, with
// three extensions: an optional module prefix ("vit:0F1", for an encoder; no
// prefix is the LLM), an optional kernel range ("0F1@4-9", kernels 4 to 8
// of the pass, the cut Optimus places into a bubble), and DualPipe's
// overlapped pair ("0F5&7B1"). The stage is the
// *virtual* stage, global across the pipeline, as in PyTorch; the schedule
// builder (schedule.h) numbers chunks per rank, and `to_actions` /
// `to_schedule` convert with the layout (Megatron-LM's: chunk c of rank r
// holds stage c·pp + r).
//
// Whole schedules print as one line per rank ("rank 0: 0F0 0F1 0B0 ...") or
// as PyTorch's CSV (a row per rank, one action per cell, an empty cell an idle
// step), and parse back; `format_grid` draws the rank × step table that error
// messages quote.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/schedule/schedule.h"

namespace lacuna::schedule {

enum class ActionType : uint8_t {
  // Compute passes.
  kForward,         // F
  kBackward,        // B: input and weight gradient together
  kBackwardInput,   // I: input gradient only (zero-bubble schedules)
  kBackwardWeight,  // W: weight gradient only
  kRecompute,       // R: the forward recomputed before its backward (activation checkpointing)
  // Pipeline communication (PyTorch's names).
  kSendForward,   // SEND_F: the stage's output activation to the next stage
  kRecvForward,   // RECV_F: the stage's input activation from the previous stage
  kSendBackward,  // SEND_B: the input gradient to the previous stage
  kRecvBackward,  // RECV_B: the output gradient from the next stage
  // Per-stage collectives, no microbatch.
  kUnshard,      // UNSHARD: gather the stage's parameters (FSDP / ZeRO-3, distributed optimizer)
  kReshard,      // RESHARD: drop the gathered parameters
  kReduceGrad,   // REDUCE_GRAD: the data-parallel gradient reduction of the stage
  kAmaxReduce,   // AMAX: FP8 scaling's amax reduction
  // An encoder's output crossing to the LLM's ranks (heterogeneous layouts).
  kBoundarySend,  // BSEND
  kBoundaryRecv,  // BRECV
};

// The type's token in the text form ("F", "SEND_F", ...).
std::string_view type_token(ActionType t);
bool is_compute(ActionType t);
// Types that name a microbatch (compute, p2p and boundary transfers); the
// per-stage collectives do not.
bool has_microbatch(ActionType t);

// Kernels [begin, end) of a compute pass, in the order the compiler emits
// them; absent: the whole pass.
struct KernelRange {
  int32_t begin = 0;
  int32_t end = 0;
  bool operator==(const KernelRange&) const = default;
};

struct ScheduleAction {
  ActionType type = ActionType::kForward;
  int32_t stage = 0;        // virtual stage, global
  int32_t microbatch = -1;  // -1 for the per-stage collectives
  std::string module;       // empty: the LLM; else the encoder's name
  std::optional<KernelRange> kernels;
  // Sends and receives only: issued in one batched call with the next
  // action (Megatron-LM's batch_isend_irecv). Written "0SEND_F3+0RECV_B1".
  bool joins_next = false;
  // A forward: DualPipe's overlapped pair with the next action, a backward
  // (B or I) of another stage, written "0F5&7B1" (the "F&B" of the
  // DeepSeek-V3 report). The compiler runs the pair back to back, forward
  // first, as DualPipe's runtime does for a module without an
  // overlapped_forward_backward (docs/schedules.md#dualpipev).
  // A recompute: interleaved with the next action, its own backward,
  // checkpointed group by group, "3R1&3B1" (Megatron-LM's full recompute;
  // docs/schedules.md#recompute-actions).
  bool overlaps_next = false;
  bool operator==(const ScheduleAction&) const = default;
};

// An action of the LLM (no module, no kernel range, not joined or paired):
// what the generators and the passes write.
inline ScheduleAction llm_action(ActionType type, int32_t stage, int32_t microbatch) {
  ScheduleAction a;
  a.type = type;
  a.stage = stage;
  a.microbatch = microbatch;
  return a;
}

// Sends and receives (pipeline and boundary): what can join a batched call.
bool is_transfer(ActionType t);

// The builder's pass (schedule.h) of a compute action: F, B, I, W and R;
// nullopt for every communication action.
std::optional<Pass> pass_of(ActionType t);
// And back.
ActionType action_type_of(Pass p);
// Whether to_schedule keeps `a` as one of its rank's passes: an LLM compute
// action, except a recompute paired with its own backward ("R&B"), which is
// that backward recomputing inside itself, layer by layer: the builder's
// default for a backward without an R (docs/schedules.md#recompute-actions).
bool builder_pass(const std::optional<ScheduleAction>& a);

// "vit:0F1@4-9". Round-trips through parse_action.
std::string to_string(const ScheduleAction& a);

// Parses one action. `where` names the place for errors ("sched.txt:3:12").
// Throws lacuna::Error naming it and the token for anything else.
ScheduleAction parse_action(std::string_view token, const std::string& where);

// One list per pipeline rank; an idle step (an empty CSV cell) is nullopt.
using RankActions = std::vector<std::optional<ScheduleAction>>;
using ActionSchedule = std::vector<RankActions>;

// One line per rank, "rank R: a b c", idle steps as "_", a batched call's
// actions joined by "+", an overlapped forward-backward pair by "&".
std::string format_schedule(const ActionSchedule& s);
// PyTorch's CSV: a row per rank, actions comma-separated, idle steps empty.
std::string format_csv(const ActionSchedule& s);

// Parses either form (detected per file: a line starting "rank " is the text
// form, otherwise CSV). Blank lines and lines starting with '#' are skipped.
// `file` names the text in errors (file:line:column and the token).
ActionSchedule parse_schedule(std::string_view text, const std::string& file);

// The rank × step table PyTorch's _format_pipeline_order prints: a header of
// ranks, a row per step. `first_step`..`last_step` (inclusive, clamped) limit
// the rows; `mark` (rank, step) is starred, and with more than nine ranks only
// the nine around it are shown.
std::string format_grid(const ActionSchedule& s, int32_t first_step = 0, int32_t last_step = INT32_MAX,
                        std::optional<std::pair<int32_t, int32_t>> mark = std::nullopt);

// The error every schedule check throws for the action at rank `rank`, step
// `step` of `s`: "rank R, step S: what" and the grid around the step (the
// step starred), located in `file`.
[[noreturn]] void refuse_at(const ActionSchedule& s, int32_t rank, size_t step, const std::string& file,
                            const std::string& what, const std::string& fix);

// The layout the LLM actions of `s` follow (every action's stage on the rank
// that layout gives it): looped (Megatron-LM's) when they fit it, else V when
// the pipeline has two chunks and they fit that; V-placed actions whose
// microbatches each stay in one half of the stages (the first half of the
// microbatches in stages 0 to pp − 1) are DualPipe's bidirectional layout.
// Throws (naming the rank, step and action, with the grid) when they fit
// neither.
StageLayout infer_layout(const ActionSchedule& s, const PipelineShape& shape, const std::string& file);

// "chunk c of rank r holds stage c·pp + r", or the V or bidirectional
// layout's rule: for messages.
std::string layout_rule(const PipelineShape& shape);

// The compute passes of the builder's schedule (schedule.h) as actions, in
// the layout `shape` describes (Megatron-LM's: stage = chunk·pp + rank).
ActionSchedule to_actions(const std::vector<std::vector<Action>>& schedule, const PipelineShape& shape);

// Back to the builder's form: the LLM's compute passes only (communication
// actions are the lowering's; they are checked, then left out), each stage
// mapped to its chunk. Throws (with the grid) for an action the builder's
// form cannot hold: a stage not on its rank in Megatron-LM's layout, an
// encoder's action or a kernel range. An "R&B" pair is its backward alone
// (builder_pass); a lone R is a Pass::kRecompute.
std::vector<std::vector<Action>> to_schedule(const ActionSchedule& s, const PipelineShape& shape,
                                             const std::string& file);

// Per rank, the index (into to_schedule's list of that rank's passes) of each
// forward that runs overlapped with the pass after it (DualPipe's F&B pair,
// ScheduleAction::overlaps_next). Empty lists for a schedule without pairs.
std::vector<std::vector<int32_t>> overlapped_pairs(const ActionSchedule& s);

}  // namespace lacuna::schedule
