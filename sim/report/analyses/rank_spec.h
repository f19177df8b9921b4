// Which ranks the trace and the SVG draw (the CLI's --trace-ranks). A whole 3,072-rank
// job is far too much to look at, so the default is one pipeline.
//
//   pipeline      ranks with tp = cp = dp = 0, one per pp stage (default)
//   all           every rank
//   0-7,64        ranks and inclusive ranges, comma separated
//   stage:N       every rank with pp == N
//
// In fold mode only simulated ranks exist: each selected rank is replaced by
// the simulated rank that stands for it (duplicates dropped).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/engine/observer.h"
#include "sim/proto/program.pb.h"

namespace lacuna::report {

struct RankSpec {
  enum class Kind { kPipeline, kAll, kList, kStage };
  Kind kind = Kind::kPipeline;
  std::vector<std::pair<int32_t, int32_t>> ranges;  // kList: inclusive [first, last]
  int32_t stage = 0;                                // kStage
  std::string text;                                 // as given, for messages
  std::string option;                               // where it was given (the caller's flag or field), for messages
};

// Throws lacuna::Error (field `option`: the caller's name for the selection,
// e.g. the CLI's "--trace-ranks") for a malformed spec.
RankSpec parse_rank_spec(std::string_view text, std::string option = "ranks");

// Global ranks the spec selects, in display order: by pp stage, then rank.
// Throws lacuna::Error when a listed rank or stage does not exist.
std::vector<int32_t> select_ranks(const RankSpec& spec, const ir::Program& program);

// The simulated ranks to draw: select_ranks mapped to their representatives.
std::vector<int32_t> select_simulated_ranks(const RankSpec& spec, const ir::Program& program,
                                            const engine::RunInfo& info);

}  // namespace lacuna::report
