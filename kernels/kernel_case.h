// One kernel of the program IR at one shape, with its inputs resident and
// ready to run: what `lacuna calibrate` times and what the executor (runtime/)
// runs for a Compute op. The CPU form runs the reference kernels of ref_*.h
// (kernels/cpu_case.h); the GPU form runs the CUDA kernels and cuBLAS
// (kernels/gpu_case.h). Both take the op's class, variant and shape exactly as
// program.proto defines them.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "sim/proto/program.pb.h"

namespace lacuna::kernels {

class KernelCase {
 public:
  virtual ~KernelCase() = default;
  KernelCase() = default;
  KernelCase(const KernelCase&) = delete;
  KernelCase& operator=(const KernelCase&) = delete;

  // Runs the kernel once on the next of its rotating input sets and returns
  // how long it took in nanoseconds: CUDA events around the launch on a GPU
  // (after the launch completed), the steady clock on the CPU. Never returns a
  // negative time; failures throw lacuna::Error.
  virtual double run_once_ns() = 0;

  // e.g. "GEMM fwd [4096,4608,12288] bf16 cuBLAS"; for progress and errors.
  virtual std::string describe() const = 0;

  // Bytes of inputs and outputs this case keeps resident (all rotating sets).
  virtual int64_t resident_bytes() const = 0;
};

// "GEMM fwd [512,768,256]": class, variant and shape, for progress lines and
// errors (variants: fwd, bwd-input, bwd-weight).
std::string describe_op(ir::OpClass op_class, ir::KernelVariant variant, std::span<const std::int64_t> shape);
std::string describe_op(const ir::Compute& op);

}  // namespace lacuna::kernels
