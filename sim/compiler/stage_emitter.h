// Internal to the compiler: the pieces a stage program is emitted with.
// Emitter turns the model's steps (kernels and TP / CP communication points)
// into stream ops; ModuleStamp labels what a segment emitted with its module;
// segment_parameters counts what a segment holds.
#pragma once

#include <array>
#include <cstdint>
#include <variant>
#include <vector>

#include "sim/compiler/class_builder.h"
#include "sim/compiler/rank_layout.h"
#include "sim/compiler/stage_program.h"
#include "sim/core/error.h"
#include "sim/model/kernels.h"
#include "sim/model/layer.h"

namespace lacuna::compiler {

enum class Filter { kAll, kInputOnly, kWeightOnly };

inline bool keep(const model::Step& step, Filter f) {
  if (f == Filter::kAll) return true;
  const model::Kernel* k = std::get_if<model::Kernel>(&step);
  const bool weight = k != nullptr && k->phase == ir::BACKWARD_WEIGHT;
  return f == Filter::kWeightOnly ? weight : !weight;
}

// Turns model steps into stream ops. A CommPoint becomes
//   compute: record → comm stream: wait, collective, record
// and a pending wait that the compute stream takes right before the kernel
// consuming the result (CommPoint::consumer), or at the end of the pass.
class Emitter {
 public:
  explicit Emitter(ClassBuilder& b) : b_(b) {}

  struct Emitted {
    int32_t last = -1;            // last compute op emitted (index in the compute stream)
    int32_t last_recompute = -1;  // last RECOMPUTE-phase kernel
  };

  Emitted emit(const std::vector<model::Step>& steps, Filter filter, const OpContext& ctx) {
    Emitted out;
    for (const model::Step& step : steps) emit_step(step, filter, ctx, out);
    return out;
  }

  // One step of emit(); true when it issued a collective (where an
  // overlapped pair switches passes: pass_emission.h).
  bool emit_step(const model::Step& step, Filter filter, const OpContext& ctx, Emitted& out) {
    if (!keep(step, filter)) return false;
    if (const auto* k = std::get_if<model::Kernel>(&step)) {
      kernel(*k, ctx);
      out.last = b_.last_index(StreamId::kCompute);
      if (k->phase == ir::RECOMPUTE) out.last_recompute = out.last;
      return false;
    }
    comm(std::get<model::CommPoint>(step), ctx);
    return true;
  }

  void kernel(const model::Kernel& k, OpContext ctx) {
    ctx.phase = k.phase;
    take_pending(ctx, [&](const Pending& p) { return p.consumer.matches(k); });
    ir::Op* op = b_.add(StreamId::kCompute, ctx);
    *op->mutable_compute() = model::to_compute(k);
    if (k.host_sync) op->set_host_sync(true);
  }

  // Waits for every outstanding collective (end of a pass: what follows, a
  // send or the next pass, needs all of it).
  void flush(const OpContext& ctx) {
    take_pending(ctx, [](const Pending&) { return true; });
  }

  // A TP / CP collective the compute stream waits for at once (a synchronous
  // torch.distributed call on the compute path).
  void collective_now(const model::CommPoint& c, const OpContext& ctx) {
    comm(c, ctx);
    flush(ctx);
  }

  void add_memory(int32_t compute_index, Bytes delta) {
    if (compute_index < 0 || delta == Bytes::zero()) return;
    auto* c = b_.op(StreamId::kCompute, compute_index)->mutable_compute();
    c->set_memory_delta_bytes(c->memory_delta_bytes() + delta.count());
  }

 private:
  struct Pending {
    model::Consumer consumer;
    EventId event;
    int64_t value;
  };

  void comm(const model::CommPoint& c, OpContext ctx) {
    ctx.phase = c.phase;
    const bool tp = c.group == model::CommGroup::kTp;
    // MoE dispatch / combine (every expert group) go on the EP stream.
    const bool ep = c.group != model::CommGroup::kTp && c.group != model::CommGroup::kCp;
    const StreamId stream = ep ? StreamId::kEp : tp ? StreamId::kTp : StreamId::kCp;
    const EventId to = ep ? EventId::kComputeToEp : tp ? EventId::kComputeToTp : EventId::kComputeToCp;
    const EventId from = ep ? EventId::kEpToCompute : tp ? EventId::kTpToCompute : EventId::kCpToCompute;
    const int64_t ready = b_.record(StreamId::kCompute, to, ctx);
    b_.wait(stream, to, ready, ctx);
    auto* coll = b_.add(stream, ctx)->mutable_collective();
    coll->set_kind(c.kind);
    coll->set_group_slot(group_slot(c.group));
    coll->set_bytes(c.bytes);
    pending_.push_back({c.consumer, from, b_.record(stream, from, ctx)});
  }

  static int32_t group_slot(model::CommGroup g) {
    switch (g) {
      case model::CommGroup::kTp: return kSlotTp;
      case model::CommGroup::kCp: return kSlotCp;
      case model::CommGroup::kEp: return kSlotEp;
      case model::CommGroup::kExpertTp: return kSlotExpertTp;
      case model::CommGroup::kEpIntraDomain: return kSlotEpIntraDomain;
      case model::CommGroup::kEpInterDomain: return kSlotEpInterDomain;
    }
    return kSlotTp;
  }

  template <class Pred>
  void take_pending(const OpContext& ctx, Pred pred) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (pred(*it)) {
        b_.wait(StreamId::kCompute, it->event, it->value, ctx);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }

  ClassBuilder& b_;
  std::vector<Pending> pending_;
};


// Labels the ops appended to the class since construction with a module
// (Op.module): the builder knows nothing of modules, and every op of a
// segment, its TP / CP collectives and DP bucket hand-offs included, belongs
// to the segment's module.
class ModuleStamp {
 public:
  explicit ModuleStamp(ClassBuilder& b) : b_(b) {
    for (size_t i = 0; i < start_.size(); ++i) start_[i] = b.last_index(static_cast<StreamId>(i)) + 1;
  }
  void apply(int32_t module) {
    if (module == 0) return;  // the default: LLM programs stay as they were
    for (size_t i = 0; i < start_.size(); ++i) {
      const auto id = static_cast<StreamId>(i);
      for (int32_t j = start_[i]; j <= b_.last_index(id); ++j) b_.op(id, j)->set_module(module);
    }
  }

 private:
  ClassBuilder& b_;
  std::array<int32_t, static_cast<size_t>(StreamId::kCount)> start_{};
};


// Full recompute's re-forward within a layer's backward step list: the
// leading steps of phase RECOMPUTE (model::layer_backward puts the whole
// forward, with its communication, first). Throws InternalError when a
// RECOMPUTE step follows the backward's own, which an R pass could not
// move.
inline size_t recompute_prefix(const std::vector<model::Step>& steps) {
  auto phase = [](const model::Step& s) {
    if (const auto* k = std::get_if<model::Kernel>(&s)) return k->phase;
    return std::get<model::CommPoint>(s).phase;
  };
  size_t n = 0;
  while (n < steps.size() && phase(steps[n]) == ir::RECOMPUTE) ++n;
  for (size_t i = n; i < steps.size(); ++i)
    if (phase(steps[i]) == ir::RECOMPUTE)
      throw InternalError("recompute_prefix: a recompute step inside the backward (internal)");
  return n;
}

// Block recompute (recompute_num_layers): only the first N layers of a
// module in a virtual stage recompute.
inline bool recomputes_layer(const ModuleWork& w, const Segment& seg, int64_t layer) {
  return w.recompute_num_layers <= 0 || layer - seg.first < w.recompute_num_layers;
}

inline int32_t num_virtual_stages(const StageInputs& in) { return in.pipeline.pp * in.pipeline.virtual_stages; }

// Parameters a segment holds on one rank; `trained_only` leaves out frozen
// encoder weights.
int64_t segment_parameters(const StageInputs& in, const Segment& seg, bool trained_only);
// Of those, the LLM's routed-expert parameters (sharded and reduced over
// expert DP).
int64_t segment_expert_parameters(const StageInputs& in, const Segment& seg);

// Layer l's step lists and activation bytes of a module (the MoE ones for
// the LLM's MoE layers).
inline const std::vector<model::Step>& layer_forward_of(const ModuleWork& w, int64_t l) {
  return w.is_moe(l) ? w.moe_layer_forward : w.layer_forward;
}
inline const std::vector<model::Step>& layer_backward_of(const ModuleWork& w, int64_t l, bool full) {
  if (w.is_moe(l)) return full ? w.moe_layer_backward : w.moe_layer_backward_plain;
  return full ? w.layer_backward : w.layer_backward_plain;
}
inline Bytes activation_of(const ModuleWork& w, int64_t l, bool full) {
  if (w.is_moe(l)) return full ? w.moe_layer_activation_bytes : w.moe_layer_activation_bytes_plain;
  return full ? w.layer_activation_bytes : w.layer_activation_bytes_plain;
}
inline Bytes recompute_activation_of(const ModuleWork& w, int64_t l) {
  return w.is_moe(l) ? w.moe_recompute_activation_bytes : w.recompute_activation_bytes;
}

}  // namespace lacuna::compiler
