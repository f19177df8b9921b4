// The kernels a program runs, deduplicated: every distinct (op class, variant,
// shape) of its Compute ops with the FLOPs and bytes the IR gives it and how
// many times it runs per iteration (summed over ranks). Ops with a
// fixed_duration_ns are skipped (their time is given, not modelled). This is
// what `lacuna calibrate --scenario` measures.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/proto/program.pb.h"

namespace lacuna::calibrate {

struct KernelKey {
  ir::OpClass op_class = ir::OP_CLASS_UNSPECIFIED;
  ir::KernelVariant variant = ir::VARIANT_FORWARD;
  std::vector<int64_t> shape;

  auto operator<=>(const KernelKey&) const = default;
  bool operator==(const KernelKey&) const = default;
};

struct KernelUse {
  double flops = 0;   // of one run (IR formulas, docs/kernels.md)
  double bytes = 0;
  int64_t count = 0;  // runs per iteration over all ranks
};

using ShapeSet = std::map<KernelKey, KernelUse>;

// Every Compute op of every rank class, weighted by the ranks bound to it.
ShapeSet extract_shapes(const ir::Program& program);

// Adds `more` into `into` (counts summed; FLOPs and bytes kept from `into`).
void merge_shapes(ShapeSet& into, const ShapeSet& more);

// "GEMM fwd [m,n,k]".
std::string describe(const KernelKey& key);

}  // namespace lacuna::calibrate
