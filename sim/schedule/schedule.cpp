// Orderings follow the systems they model, so that a simulated iteration can
// be compared with a measured one pass by pass:
// - GPipe: torch.distributed.pipelining's ScheduleGPipe (backwards in
//   microbatch order, which frees activations first-in first-out).
// - 1F1B: Megatron-LM forward_backward_pipelining_without_interleaving.
// - Interleaved 1F1B: Megatron-LM forward_backward_pipelining_with_interleaving
//   (microbatch groups of pp per chunk).
// - ZB-H1: Qi et al. 2024, "Zero Bubble Pipeline Parallelism", Figure 3 top.
#include "sim/schedule/schedule.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::schedule {
namespace {

using lacuna::scenario::ScheduleKind;

std::string kind_name(ScheduleKind kind) { return lacuna::scenario::ScheduleKind_Name(kind); }

void require(bool ok, const std::string& what, const std::string& fix) {
  if (!ok) throw Error(SourceLocation{}, what, fix);
}

void validate(ScheduleKind kind, const PipelineShape& s) {
  require(kind != lacuna::scenario::CUSTOM, "a CUSTOM schedule is not built: it is read from schedule.actions_file",
          "load it with compiler::load_custom_schedule");
  require(kind == lacuna::scenario::GPIPE || kind == lacuna::scenario::ONE_F_ONE_B ||
              kind == lacuna::scenario::INTERLEAVED_1F1B || kind == lacuna::scenario::ZB_H1,
          "pipeline schedule " + kind_name(kind) + " is not supported",
          "use GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B or ZB_H1");
  require(s.pp >= 1, "pipeline size pp = " + std::to_string(s.pp) + " must be at least 1", "");
  require(s.microbatches >= 1,
          "number of microbatches = " + std::to_string(s.microbatches) + " must be at least 1",
          "make the global batch at least micro_batch × dp");
  require(s.virtual_stages >= 1,
          "virtual_stages = " + std::to_string(s.virtual_stages) + " must be at least 1", "");
  require(s.warmup_deferral >= 0, "warm-up deferral " + std::to_string(s.warmup_deferral) + " is negative", "");
  if (kind != lacuna::scenario::INTERLEAVED_1F1B) {
    require(s.warmup_deferral == 0,
            "warm-up deferral applies to INTERLEAVED_1F1B only, not " + kind_name(kind), "");
    require(s.microbatch_group == 0,
            "a microbatch group per virtual stage applies to INTERLEAVED_1F1B only, not " + kind_name(kind),
            "remove parallel.microbatch_group_size_per_vp_stage");
    require(s.virtual_stages == 1,
            kind_name(kind) + " runs one model chunk per pipeline rank, but virtual_stages = " +
                std::to_string(s.virtual_stages),
            "set virtual_stages to 1, or use INTERLEAVED_1F1B");
    return;
  }
  require(s.pp >= 2, "INTERLEAVED_1F1B needs at least 2 pipeline ranks, pp = " + std::to_string(s.pp),
          "use ONE_F_ONE_B for pp = 1");
  require(s.virtual_stages >= 2,
          "INTERLEAVED_1F1B needs at least 2 model chunks per rank, virtual_stages = " +
              std::to_string(s.virtual_stages),
          "set virtual_stages >= 2, or use ONE_F_ONE_B");
  if (s.microbatch_group == 0) {
    require(s.microbatches % s.pp == 0,
            "INTERLEAVED_1F1B needs the number of microbatches (" + std::to_string(s.microbatches) +
                ") to be a multiple of pp (" + std::to_string(s.pp) +
                "): Megatron-LM assigns chunks to groups of pp microbatches",
            "choose a global batch giving a multiple of " + std::to_string(s.pp) + " microbatches");
    return;
  }
  // Megatron-Core's checks (forward_backward_pipelining_with_interleaving).
  const int32_t n = s.microbatch_group;
  require(n >= s.pp && n <= s.microbatches,
          "a microbatch group of " + std::to_string(n) + " must lie in [pp, microbatches] = [" +
              std::to_string(s.pp) + ", " + std::to_string(s.microbatches) + "]",
          "set parallel.microbatch_group_size_per_vp_stage within that range (0: pp)");
  const int32_t last = s.microbatches % n;
  require(last == 0 || last >= s.pp,
          "the microbatches (" + std::to_string(s.microbatches) + ") leave a last group of " + std::to_string(last) +
              " when grouped by " + std::to_string(n) + ", fewer than pp (" + std::to_string(s.pp) +
              "): Megatron-Core refuses it (dependency bubbles)",
          "choose a group size that divides the microbatches or leaves at least pp");
}

std::vector<Action> gpipe(const PipelineShape& s) {
  std::vector<Action> out;
  for (int32_t mb = 0; mb < s.microbatches; ++mb) out.push_back({Pass::kForward, mb, 0});
  for (int32_t mb = 0; mb < s.microbatches; ++mb) out.push_back({Pass::kBackward, mb, 0});
  return out;
}

std::vector<Action> one_f_one_b(const PipelineShape& s, int32_t rank) {
  const int32_t m = s.microbatches;
  const int32_t warmup = std::min(s.pp - rank - 1, m);
  std::vector<Action> out;
  for (int32_t mb = 0; mb < warmup; ++mb) out.push_back({Pass::kForward, mb, 0});
  for (int32_t i = 0; i < m - warmup; ++i) {
    out.push_back({Pass::kForward, warmup + i, 0});
    out.push_back({Pass::kBackward, i, 0});
  }
  for (int32_t mb = m - warmup; mb < m; ++mb) out.push_back({Pass::kBackward, mb, 0});
  return out;
}

}  // namespace

int32_t interleaved_warmup(const PipelineShape& s, int32_t rank) {
  const int32_t slack = (s.pp - rank - 1) * 2;
  const int32_t deferred = std::clamp(s.warmup_deferral - 2 * rank, 0, slack);
  return std::min(slack - deferred + (s.virtual_stages - 1) * s.group(), s.microbatches * s.virtual_stages);
}

namespace {

// Megatron-Core's schedule table (get_schedule_table): the microbatches in
// groups of N, each group run through chunk 0, then chunk 1, ...; the last
// group takes every microbatch left. With N = pp and microbatches a multiple
// of pp this is Megatron-LM's older numbering (get_model_chunk_id /
// get_microbatch_id_in_model_chunk before core_v0.10.0).
struct TableEntry {
  int32_t microbatch, chunk;
};
std::vector<TableEntry> schedule_table(const PipelineShape& s) {
  const int32_t n = s.group();
  std::vector<TableEntry> table;
  table.reserve(static_cast<size_t>(s.microbatches) * static_cast<size_t>(s.virtual_stages));
  for (int32_t first = 0; first < s.microbatches; first += n) {
    const int32_t end = first + n >= s.microbatches ? s.microbatches : first + n;
    for (int32_t c = 0; c < s.virtual_stages; ++c)
      for (int32_t mb = first; mb < end; ++mb) table.push_back({mb, c});
    if (end == s.microbatches) break;
  }
  return table;
}

// The k-th forward (or backward) of a rank: entry k of the table; backwards
// walk the chunks in reverse (get_model_chunk_id with forward=False).
Action interleaved_step(const PipelineShape& s, const std::vector<TableEntry>& table, int32_t k, bool forward) {
  const TableEntry& e = table[static_cast<size_t>(k)];
  const int32_t chunk = forward ? e.chunk : s.virtual_stages - 1 - e.chunk;
  return {forward ? Pass::kForward : Pass::kBackward, e.microbatch, chunk};
}

std::vector<Action> interleaved(const PipelineShape& s, int32_t rank) {
  const int32_t total = s.microbatches * s.virtual_stages;
  const int32_t warmup = interleaved_warmup(s, rank);
  const std::vector<TableEntry> table = schedule_table(s);
  std::vector<Action> out;
  for (int32_t k = 0; k < warmup; ++k) out.push_back(interleaved_step(s, table, k, true));
  for (int32_t k = 0; k < total - warmup; ++k) {
    out.push_back(interleaved_step(s, table, warmup + k, true));
    out.push_back(interleaved_step(s, table, k, false));
  }
  for (int32_t k = total - warmup; k < total; ++k) out.push_back(interleaved_step(s, table, k, false));
  return out;
}

// 1F1B's F/B order with W split off and deferred: rank r runs W(i − r) right
// after B(i). Deeper ranks, which start their backwards first, thus push B
// upstream without waiting for W, while every rank keeps at most pp
// microbatches between F and W (rank 0's 1F1B peak); the deferred Ws fill the
// cool-down bubbles. Bubble (pp−1)(T_F + T_B − T_W) [ZB paper §2.1].
std::vector<Action> zb_h1(const PipelineShape& s, int32_t rank) {
  const int32_t m = s.microbatches;
  const int32_t warmup = std::min(s.pp - rank - 1, m);
  std::vector<Action> out;
  int32_t next_w = 0;
  auto after_b = [&](int32_t b) {
    if (b - rank >= 0) out.push_back({Pass::kBackwardWeight, next_w++, 0});
  };
  for (int32_t mb = 0; mb < warmup; ++mb) out.push_back({Pass::kForward, mb, 0});
  for (int32_t i = 0; i < m - warmup; ++i) {
    out.push_back({Pass::kForward, warmup + i, 0});
    out.push_back({Pass::kBackwardInput, i, 0});
    after_b(i);
  }
  for (int32_t mb = m - warmup; mb < m; ++mb) {
    out.push_back({Pass::kBackwardInput, mb, 0});
    after_b(mb);
  }
  while (next_w < m) out.push_back({Pass::kBackwardWeight, next_w++, 0});
  return out;
}

}  // namespace

std::vector<std::vector<Action>> build_schedule(ScheduleKind kind, const PipelineShape& shape) {
  validate(kind, shape);
  std::vector<std::vector<Action>> ranks;
  ranks.reserve(static_cast<size_t>(shape.pp));
  for (int32_t r = 0; r < shape.pp; ++r) {
    switch (kind) {
      case lacuna::scenario::GPIPE: ranks.push_back(gpipe(shape)); break;
      case lacuna::scenario::ONE_F_ONE_B: ranks.push_back(one_f_one_b(shape, r)); break;
      case lacuna::scenario::INTERLEAVED_1F1B: ranks.push_back(interleaved(shape, r)); break;
      default: ranks.push_back(zb_h1(shape, r)); break;
    }
  }
  return ranks;
}

std::string to_string(Pass p) {
  switch (p) {
    case Pass::kForward: return "F";
    case Pass::kBackward: return "BW";
    case Pass::kBackwardInput: return "B";
    case Pass::kBackwardWeight: return "W";
    case Pass::kRecompute: return "R";
  }
  return "?";
}

}  // namespace lacuna::schedule
