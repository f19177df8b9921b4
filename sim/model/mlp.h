// Internal to sim/model: the TP-split MLP of a layer (FC1, activation, FC2 with
// Megatron's f / g communication), shared by the dense layer and the MoE
// layer's shared experts (docs/moe.md). Roles name which MLP a kernel is.
#pragma once

#include <vector>

#include "sim/model/layer.h"

namespace lacuna::model {

struct MlpRoles {
  ir::KernelRole fc1 = ir::ROLE_FC1;
  ir::KernelRole act = ir::ROLE_ACT;
  ir::KernelRole fc2 = ir::ROLE_FC2;
};

// FC1 (column-parallel, after f's communication), bias + activation, FC2
// (row-parallel, before g's communication) over s.tokens() tokens of width
// s.ffn_hidden / s.tp.
void mlp_forward(std::vector<Step>& st, const LayerShape& s, ir::Phase phase, const MlpRoles& roles);
// Its backward in autograd order; FC1's input-gradient reduction (when
// `reduce`) is consumed by `next`.
void mlp_backward(std::vector<Step>& st, const LayerShape& s, const MlpRoles& roles, bool reduce, Consumer next);

// Weight gradient of a linear layer with `rows` rows (and, without
// gradient-accumulation fusion, the add into main_grad).
void linear_wgrad_rows(std::vector<Step>& st, const LayerShape& s, ir::KernelRole role, int64_t in, int64_t out,
                       int64_t rows);

}  // namespace lacuna::model
