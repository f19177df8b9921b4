// The kernels a compiled program runs, as rows of a measured kernel table
// with no time yet: what the device campaign measures (calib/device/campaign,
// `lacuna kernel-shapes`). One row per distinct (class, pass, precision,
// shape), in that order, so that a table row and a compiled kernel of the
// same shape are the same question.
#pragma once

#include <string>
#include <vector>

#include "sim/kernelfit/measured_table.h"
#include "sim/proto/program.pb.h"

namespace lacuna::kernelfit {

struct ProgramShapes {
  std::vector<MeasuredKernel> rows;
  // Compute ops a table cannot hold: a fixed duration (given, not modelled)
  // or a float32 program (the CPU reference kernels).
  int64_t skipped_ops = 0;
};

// Rows take `gpu` and `group`, and as label the role of the shape's first op.
ProgramShapes program_shapes(const ir::Program& program, const std::string& gpu, const std::string& group);

// Adds `more` to `into`, keeping the first row of each (class, pass, dtype,
// shape) and the sort order.
void merge_program_shapes(std::vector<MeasuredKernel>& into, const std::vector<MeasuredKernel>& more);

}  // namespace lacuna::kernelfit
