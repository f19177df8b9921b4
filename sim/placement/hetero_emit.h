// Heterogeneous placement, private: writing encoder and boundary ops into a
// RankClass. The LLM's compiled classes get encoder work spliced into their
// compute stream and new streams / events beside their own; island classes
// are built from nothing the same way.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/model/layer.h"
#include "sim/model/mllm.h"
#include "sim/placement/class_edit.h"
#include "sim/placement/hetero_plan.h"
#include "sim/proto/program.pb.h"

namespace lacuna::placement::hetero {

// Group slots an encoder's kernels communicate over (-1: the group has one
// rank and the collective is skipped).
struct EncoderSlots {
  int32_t tp = -1;
  int32_t cp = -1;
};

// Turns encoder model steps into compute ops plus TP / CP collectives on the
// "enc_tp" / "enc_cp" streams, as the LLM's stage program does: compute
// records, the comm stream waits, runs the collective and records, and the
// compute stream waits right before the kernel that consumes the result (or
// at flush()).
class StepEmitter {
 public:
  StepEmitter(ClassEditor& ed, EncoderSlots slots) : ed_(ed), slots_(slots) {}

  struct Emitted {
    int32_t last = -1;            // last compute op (index in the compute block)
    int32_t last_recompute = -1;  // last RECOMPUTE kernel
  };
  Emitted emit(const std::vector<model::Step>& steps, const compiler::OpContext& ctx);
  void flush(const compiler::OpContext& ctx);
  void add_memory(int32_t index, Bytes delta);
  void kernel(const model::Kernel& k, compiler::OpContext ctx);

 private:
  struct Pending {
    model::Consumer consumer;
    int32_t event;
    int64_t value;
  };
  void comm(const model::CommPoint& c, compiler::OpContext ctx);

  ClassEditor& ed_;
  EncoderSlots slots_;
  std::vector<Pending> pending_;
};

// One encoder pipeline stage's kernels for one microbatch of `samples`
// samples, and what it keeps in memory (docs/placements.md).
struct StageWork {
  model::LayerShape shape;
  int64_t first_layer = 0;
  int64_t num_layers = 0;
  bool first_stage = true;
  bool last_stage = true;
  bool frozen = false;
  scenario::Recompute recompute = scenario::RECOMPUTE_NONE;
  // Patch embedding (first stage); final norm + projector (last stage).
  std::vector<model::Step> layer_fwd, layer_bwd, patch_fwd, patch_bwd, post_fwd, post_bwd;
  Bytes layer_activation_bytes;            // kept per layer and microbatch (0 when frozen: no autograd)
  Bytes recompute_activation_bytes;        // full recompute re-materialises this
  // Block recompute (EncoderPlan.recompute_num_layers = N > 0): only the
  // stage's first N layers run layer_bwd; the others run layer_bwd_plain and
  // keep layer_activation_bytes_plain (as without recompute).
  int64_t recompute_num_layers = 0;
  std::vector<model::Step> layer_bwd_plain;
  Bytes layer_activation_bytes_plain;
  bool recomputes(int64_t layer) const {
    return recompute_num_layers <= 0 || layer - first_layer < recompute_num_layers;
  }
  Bytes post_activation_bytes;             // final norm input (trained only) + the projector's
  Bytes output_bytes;                      // the boundary tensor, when the rank keeps it until backward
  int64_t p2p_bytes = 0;                   // activation between encoder stages
};

// `keep_output`: the rank holds the stage's output (the vision embeddings,
// whole) from its forward to its backward (colocated: the packed boundary
// tensor lives through the LLM phase).
StageWork stage_work(const scenario::Scenario& spec, const EncoderPlan& enc, int32_t stage, int64_t samples,
                     int64_t llm_hidden, bool keep_output);

// Forward / backward of one microbatch on one stage: kernels, collectives and
// memory deltas. Backward of a frozen encoder runs the projector only.
void emit_forward(StepEmitter& em, const StageWork& w, const compiler::OpContext& ctx);
void emit_backward(StepEmitter& em, const StageWork& w, const compiler::OpContext& ctx);

// Parameters one rank of `stage` holds: trained (projector, and the encoder
// unless frozen) and frozen (bf16 weights only).
struct StageParameters {
  int64_t trained = 0;
  int64_t frozen = 0;
};
StageParameters stage_parameters(const scenario::Scenario& spec, const EncoderPlan& enc, int32_t stage);

// Adds the model state of `p` (trained: weights, fp32 gradients and Adam
// state sharded over `dp_cp` with the distributed optimizer; frozen: bf16
// weights) to a class's baseline.
void add_model_state(ir::MemoryBaseline& mem, const StageParameters& p, int64_t dp_cp, bool distributed_optimizer);

// Group table for the encoder and boundary communicators. Every group gets
// its own entry even when an LLM group has the same ranks: Megatron creates
// separate process groups (NCCL communicators) per module and per bridge,
// and the engine matches collectives per group in issue order, so sharing
// one with the LLM would interleave two independent streams of collectives.
class Groups {
 public:
  explicit Groups(ir::Program& program) : p_(program) {}
  // `key` names the communicator family (e.g. "enc0_tp"); the same key and
  // ranks give the same group.
  int32_t get(const std::string& key, ir::GroupKind kind, const std::vector<int32_t>& ranks);

 private:
  ir::Program& p_;
  std::map<std::pair<std::string, std::vector<int32_t>>, int32_t> index_;
};

}  // namespace lacuna::placement::hetero
