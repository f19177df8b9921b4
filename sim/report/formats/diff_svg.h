// `lacuna diff --svg`: one rank's timeline as predicted (above) and as
// measured (below) on one time scale, every stream a lane, ops coloured by
// phase like the pipeline picture, idle compute hatched, and the bubbles that
// only one run has outlined: red dashed predicted-but-not-observed, black
// observed-but-not-predicted (docs/diff.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sim/report/analyses/diff.h"

namespace lacuna::report {

// The rank to draw: `requested`, or the first compared rank. lacuna::Error
// when the requested rank is not in both timelines or no rank is.
// `option`: the caller's name for the requested rank, in errors.
int32_t diff_svg_rank(const DiffReport& report, std::optional<int32_t> requested, const std::string& option = "rank");

// The standalone SVG document of `rank` (one of report.compared_ranks).
std::string render_diff_svg(const DiffInput& predicted, const DiffInput& measured, const DiffReport& report,
                            int32_t rank);

}  // namespace lacuna::report
