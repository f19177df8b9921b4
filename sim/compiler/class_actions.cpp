#include "sim/compiler/class_actions.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "sim/core/error.h"

namespace lacuna::compiler {
namespace {

using schedule::ActionType;

// What a pass kernel belongs to before the backward is split: F, R, or the
// microbatch's backward (input and weight gradient kernels together).
enum class Family : uint8_t { kForward, kRecompute, kBackward };

struct PassKernel {
  int32_t module, chunk, microbatch;
  Family family;
  bool weight;  // a BACKWARD_WEIGHT kernel
};

struct PassOfKernels {
  ActionType type;
  int32_t module, chunk, microbatch;
  std::vector<int32_t> kernels;  // indices into the class's pass kernels, ascending
};

bool pass_phase(ir::Phase phase, Family& family, bool& weight) {
  weight = false;
  switch (phase) {
    case ir::FORWARD: family = Family::kForward; return true;
    case ir::RECOMPUTE: family = Family::kRecompute; return true;
    case ir::BACKWARD_INPUT: family = Family::kBackward; return true;
    case ir::BACKWARD_WEIGHT: family = Family::kBackward; weight = true; return true;
    default: return false;
  }
}

// The backward kernels of one (module, chunk, microbatch) as passes: I then W
// when every input-gradient kernel comes first (the zero-bubble split), else
// one B (a full backward interleaves them, each layer's weight gradient
// after its input gradient).
void split_backward(const std::vector<PassKernel>& all, const std::vector<int32_t>& ks, PassOfKernels base,
                    std::vector<PassOfKernels>& out) {
  int32_t last_input = -1, first_weight = -1;
  for (int32_t k : ks) {
    if (!all[static_cast<size_t>(k)].weight) last_input = k;
    else if (first_weight < 0) first_weight = k;
  }
  const bool split = last_input >= 0 && first_weight > last_input;
  if (!split) {
    base.type = last_input < 0 ? ActionType::kBackwardWeight : ActionType::kBackward;
    base.kernels = ks;
    out.push_back(std::move(base));
    return;
  }
  PassOfKernels input = base, weight = base;
  input.type = ActionType::kBackwardInput;
  weight.type = ActionType::kBackwardWeight;
  for (int32_t k : ks) (all[static_cast<size_t>(k)].weight ? weight : input).kernels.push_back(k);
  out.push_back(std::move(input));
  out.push_back(std::move(weight));
}

}  // namespace

schedule::RankActions class_actions(const ir::RankClass& rank_class, const StageOf& stage_of,
                                    const std::vector<std::string>& module_names) {
  const ir::Stream* compute = nullptr;
  for (const ir::Stream& s : rank_class.streams())
    if (s.name() == "compute") compute = &s;
  if (compute == nullptr)
    throw Error("class " + rank_class.name() + " has no stream named \"compute\": its passes cannot be read back");
  std::vector<PassKernel> kernels;
  for (const ir::Op& op : compute->ops()) {
    Family family;
    bool weight;
    if (!op.has_compute() || !pass_phase(op.phase(), family, weight)) continue;
    if (op.module() < 0 || static_cast<size_t>(op.module()) >= module_names.size())
      throw Error("class " + rank_class.name() + ": an op of module " + std::to_string(op.module()) + ", but " +
                  std::to_string(module_names.size()) + " modules are named");
    kernels.push_back({op.module(), op.chunk(), op.microbatch(), family, weight});
  }
  // Kernels by (module, chunk, microbatch, family), in stream order.
  std::map<std::tuple<int32_t, int32_t, int32_t, Family>, std::vector<int32_t>> groups;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const PassKernel& p = kernels[k];
    groups[{p.module, p.chunk, p.microbatch, p.family}].push_back(static_cast<int32_t>(k));
  }
  std::vector<PassOfKernels> passes;
  for (const auto& [key, ks] : groups) {
    const auto& [module, chunk, microbatch, family] = key;
    PassOfKernels base{ActionType::kForward, module, chunk, microbatch, {}};
    if (family == Family::kBackward) {
      split_backward(kernels, ks, base, passes);
      continue;
    }
    base.type = family == Family::kForward ? ActionType::kForward : ActionType::kRecompute;
    base.kernels = ks;
    passes.push_back(std::move(base));
  }
  // A recompute and its microbatch's backward interleave layer by layer
  // (each checkpointed group is recomputed right before its backward): they
  // do not cut each other, and the recompute reads as one R before the B.
  std::vector<int32_t> owner(kernels.size(), -1), partner(passes.size(), -1);
  std::map<std::tuple<int32_t, int32_t, int32_t>, int32_t> recompute_of;
  for (size_t i = 0; i < passes.size(); ++i) {
    for (int32_t k : passes[i].kernels) owner[static_cast<size_t>(k)] = static_cast<int32_t>(i);
    if (passes[i].type == ActionType::kRecompute)
      recompute_of[{passes[i].module, passes[i].chunk, passes[i].microbatch}] = static_cast<int32_t>(i);
  }
  for (size_t i = 0; i < passes.size(); ++i) {
    if (passes[i].type != ActionType::kBackward && passes[i].type != ActionType::kBackwardInput) continue;
    const auto it = recompute_of.find({passes[i].module, passes[i].chunk, passes[i].microbatch});
    if (it == recompute_of.end()) continue;
    partner[i] = it->second;
    partner[static_cast<size_t>(it->second)] = static_cast<int32_t>(i);
  }
  // Whether kernels a < b of pass i are in one piece: only its partner's
  // kernels lie between them.
  const auto contiguous = [&](size_t i, int32_t a, int32_t b) {
    for (int32_t k = a + 1; k < b; ++k)
      if (owner[static_cast<size_t>(k)] != partner[i]) return false;
    return true;
  };
  // Each pass's consecutive pieces, in stream order.
  struct Piece {
    int32_t first;  // stream-order index of its first kernel
    size_t pass;
    int32_t begin, end;  // kernels [begin, end) of the pass
  };
  std::vector<Piece> pieces;
  std::vector<int32_t> piece_count(passes.size(), 0);
  for (size_t i = 0; i < passes.size(); ++i) {
    const std::vector<int32_t>& ks = passes[i].kernels;
    int32_t begin = 0;
    for (int32_t j = 1; j <= static_cast<int32_t>(ks.size()); ++j) {
      if (j < static_cast<int32_t>(ks.size()) && contiguous(i, ks[static_cast<size_t>(j - 1)], ks[static_cast<size_t>(j)]))
        continue;
      pieces.push_back({ks[static_cast<size_t>(begin)], i, begin, j});
      ++piece_count[i];
      begin = j;
    }
  }
  // A recompute reads right before its backward, wherever its first kernel
  // ran (the backward of layers it does not checkpoint, e.g. the output
  // layer's, starts first).
  for (Piece& piece : pieces) {
    const int32_t q = partner[piece.pass];
    if (passes[piece.pass].type == ActionType::kRecompute && q >= 0)
      piece.first = std::min(piece.first, passes[static_cast<size_t>(q)].kernels.front());
  }
  std::sort(pieces.begin(), pieces.end(), [&](const Piece& a, const Piece& b) {
    const bool ra = passes[a.pass].type == ActionType::kRecompute, rb = passes[b.pass].type == ActionType::kRecompute;
    return a.first != b.first ? a.first < b.first : ra > rb;
  });
  schedule::RankActions out;
  out.reserve(pieces.size());
  for (size_t k = 0; k < pieces.size(); ++k) {
    const Piece& piece = pieces[k];
    const PassOfKernels& p = passes[piece.pass];
    schedule::ScheduleAction a;
    a.type = p.type;
    a.stage = stage_of(p.module, p.chunk);
    a.microbatch = p.microbatch;
    a.module = module_names[static_cast<size_t>(p.module)];
    if (piece_count[piece.pass] > 1) a.kernels = schedule::KernelRange{piece.begin, piece.end};
    // A whole recompute whose kernels interleave with its whole backward's,
    // right after it: "R&B", Megatron-LM's placement. One that ran before
    // its backward's first kernel reads as a lone R (a one-layer stage's
    // recompute too: its kernels cannot tell).
    const int32_t q = partner[piece.pass];
    if (p.type == ActionType::kRecompute && q >= 0 && piece_count[piece.pass] == 1 &&
        piece_count[static_cast<size_t>(q)] == 1 && k + 1 < pieces.size() &&
        pieces[k + 1].pass == static_cast<size_t>(q) &&
        p.kernels.back() > passes[static_cast<size_t>(q)].kernels.front())
      a.overlaps_next = true;
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace lacuna::compiler
