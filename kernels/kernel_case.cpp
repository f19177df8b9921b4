#include "kernels/kernel_case.h"

namespace lacuna::kernels {
namespace {

const char* variant_short(ir::KernelVariant v) {
  switch (v) {
    case ir::VARIANT_FORWARD:
      return "fwd";
    case ir::VARIANT_BACKWARD_INPUT:
      return "bwd-input";
    case ir::VARIANT_BACKWARD_WEIGHT:
      return "bwd-weight";
    default:
      return "variant?";
  }
}

}  // namespace

std::string describe_op(ir::OpClass op_class, ir::KernelVariant variant, std::span<const std::int64_t> shape) {
  std::string out = ir::OpClass_Name(op_class);
  if (out.empty()) out = "OpClass " + std::to_string(static_cast<int>(op_class));
  out.append(" ").append(variant_short(variant)).append(" [");
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(std::to_string(shape[i]));
  }
  return out + "]";
}

std::string describe_op(const ir::Compute& op) {
  return describe_op(op.op_class(), op.variant(), std::span<const std::int64_t>(op.shape().data(), op.shape().size()));
}

}  // namespace lacuna::kernels
