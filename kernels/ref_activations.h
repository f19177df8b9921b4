// CPU reference activations of a transformer MLP and the residual add
// (docs/kernels.md: GELU [t·f_r], SWIGLU [t, f_r], RESIDUAL_ADD [t_sp·h]).
//
// Storage T (float, or double for finite-difference tests), math in double;
// call with an explicit T: ref::gelu_forward<float>(...). Elementwise, no
// global state; a size mismatch throws lacuna::Error.
#pragma once

#include <cstdint>
#include <span>

namespace lacuna::kernels::ref {

enum class GeluKind {
  kTanh,  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))): Megatron's bias_gelu / approximate="tanh"
  kErf,   // 0.5·x·(1 + erf(x/√2)): the exact GeLU, torch's default
};

// y = gelu(x), n = x.size() = y.size().
template <typename T>
void gelu_forward(std::span<const T> x, GeluKind kind, std::span<T> y);

// dx = dy·gelu'(x).
template <typename T>
void gelu_backward(std::span<const T> x, std::span<const T> dy, GeluKind kind, std::span<T> dx);

// SwiGLU on x[t, 2f], as Megatron's `x0, x1 = torch.chunk(x, 2, dim=-1);
// silu(x0) * x1`: in each row the FIRST f columns are the gate (through SiLU),
// the LAST f the up projection. y[t, f] = silu(gate)·up.
template <typename T>
void swiglu_forward(std::span<const T> x, std::int64_t t, std::int64_t f, std::span<T> y);

// dx[t, 2f] in the same [gate | up] layout: dgate = dy·up·silu'(gate), dup = dy·silu(gate).
template <typename T>
void swiglu_backward(std::span<const T> x, std::span<const T> dy, std::int64_t t, std::int64_t f,
                     std::span<T> dx);

// out = a + b (out may alias a or b). Its backward is the identity to both
// inputs: the gradient dy flows unchanged to the residual and to the branch.
template <typename T>
void residual_add(std::span<const T> a, std::span<const T> b, std::span<T> out);

}  // namespace lacuna::kernels::ref
