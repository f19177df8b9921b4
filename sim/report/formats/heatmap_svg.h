// The straggler heat map (`lacuna simulate --heatmap FILE`,
// docs/critical-path.md#heat-map): two panels of one cell per GPU, laid out
// node by node (a node's GPUs side by side, several nodes per row), coloured
// by the GPU's compute time and by its peer wait, like MegaScale's straggler
// heat maps. A slow GPU shows dark in the compute panel and light in the
// wait panel, its peers the other way round. Cells of ranks on the critical
// path are outlined. Legible at 12,288 GPUs (1,536 nodes × 8: 16 nodes per
// row, 4 px cells); deterministic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "sim/proto/program.pb.h"

namespace lacuna::report {

struct HeatmapData {
  TimeNs iteration;
  // Per global rank (Program.ranks), in ns: busy time of the main compute
  // stream, and Σ (start − issued) of its collectives and transfers.
  std::vector<int64_t> compute_ns;
  std::vector<int64_t> wait_ns;
  std::vector<uint8_t> on_path;  // per global rank, 1: outlined; empty: none
  bool folded = false;           // values are those of each rank's representative
};

std::string render_heatmap(const ir::Program& program, const HeatmapData& data);

}  // namespace lacuna::report
