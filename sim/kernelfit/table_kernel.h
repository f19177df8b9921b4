// A measured table row as the kernel lacuna's compiler would emit for it: the
// same class, variant and shape, with FLOPs and bytes from the compiler's own
// formulas (sim/model/kernels.h), so that a fitted efficiency times exactly
// what a simulation times.
#pragma once

#include "sim/kernelfit/measured_table.h"
#include "sim/proto/program.pb.h"

namespace lacuna::kernelfit {

// Memory-bound classes take the fused kernel frameworks run (Megatron-LM's
// and Transformer Engine's defaults): a norm reads x and writes y forward,
// reads x and dy and writes dx backward; SwiGLU 3 / 5 accesses; a residual
// add of two operands; ELEMENTWISE [n] a read-and-write pass, [n, b] a
// stream of b bytes per element; OPTIMIZER [n] fused Adam.
ir::Compute kernel_of(const MeasuredKernel& row);

}  // namespace lacuna::kernelfit
