#include "kernels/cpu_case.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ref_activations.h"
#include "kernels/ref_attention.h"
#include "kernels/ref_checks.h"
#include "kernels/ref_cross_entropy.h"
#include "kernels/ref_norms.h"
#include "sim/core/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace lacuna::kernels {
namespace {

const char* class_name(ir::OpClass c) {
  const std::string& n = ir::OpClass_Name(c);
  return n.empty() ? "OP_CLASS?" : n.c_str();
}

// SplitMix64: fast, seeded, good enough for benchmark inputs.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Magnitude in [0.5, 1.5), random sign: never zero.
  float value() {
    const std::uint64_t r = next();
    const float mag = 0.5f + static_cast<float>(r >> 40) * (1.0f / static_cast<float>(1ull << 24));
    return (r & 1) ? mag : -mag;
  }
};

void fill_random(std::vector<float>& v, Rng& rng) {
  for (float& x : v) x = rng.value();
}

// ---------------------------------------------------------------- the case

// One set: float buffers in the order of `names`.
using Set = std::vector<std::vector<float>>;

struct CaseSpec {
  std::string description;
  std::vector<std::string> names;
  std::vector<std::int64_t> sizes;      // elements per buffer
  std::int64_t shared_bytes = 0;        // integer data shared by all sets (ids, targets, masks)
  std::function<void(Set&)> init;       // after the random fill (derived inputs: saved stats, ...)
  std::function<void(Set&)> run;        // the kernel
};

class CpuCaseImpl final : public CpuCase {
 public:
  CpuCaseImpl(CaseSpec spec, int sets, std::uint64_t seed) : spec_(std::move(spec)) {
    Rng rng{seed};
    sets_.resize(static_cast<std::size_t>(sets));
    for (Set& s : sets_) {
      s.resize(spec_.names.size());
      for (std::size_t i = 0; i < s.size(); ++i) {
        s[i].resize(static_cast<std::size_t>(spec_.sizes[i]));
        fill_random(s[i], rng);
      }
      if (spec_.init) spec_.init(s);
    }
  }

  double run_once_ns() override {
    next_ = (last_ + 1) % static_cast<int>(sets_.size());
    Set& s = sets_[static_cast<std::size_t>(next_)];
    const auto t0 = std::chrono::steady_clock::now();
    spec_.run(s);
    const auto t1 = std::chrono::steady_clock::now();
    last_ = next_;
    const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
    return std::max(ns, 0.0);
  }

  std::string describe() const override { return spec_.description; }

  std::int64_t resident_bytes() const override {
    std::int64_t per_set = 0;
    for (std::int64_t n : spec_.sizes) per_set += n * static_cast<std::int64_t>(sizeof(float));
    return per_set * static_cast<std::int64_t>(sets_.size()) + spec_.shared_bytes;
  }

  std::span<const float> buffer(std::string_view name) const override {
    const int set = last_ < 0 ? 0 : last_;
    for (std::size_t i = 0; i < spec_.names.size(); ++i)
      if (spec_.names[i] == name) return sets_[static_cast<std::size_t>(set)][i];
    throw Error(spec_.description + ": no buffer named \"" + std::string(name) + "\" (it has " + buffer_names() +
                ")");
  }

  std::string buffer_names() const override {
    std::string out;
    for (const std::string& n : spec_.names) out += (out.empty() ? "" : ", ") + n;
    return out;
  }

  int sets() const override { return static_cast<int>(sets_.size()); }

 private:
  CaseSpec spec_;
  std::vector<Set> sets_;
  int last_ = -1;
  int next_ = 0;
};

// ---------------------------------------------------------------- per class

std::span<const std::int64_t> shape_of(const ir::Compute& op) {
  return {op.shape().data(), static_cast<std::size_t>(op.shape_size())};
}

[[noreturn]] void unsupported(const ir::Compute& op, const std::string& why) {
  throw Error("no CPU kernel for " + describe_op(op.op_class(), op.variant(), shape_of(op)) + ": " + why);
}

std::int64_t checked_product(const ir::Compute& op, std::initializer_list<std::int64_t> dims) {
  std::int64_t p = 1;
  for (std::int64_t d : dims) {
    if (d <= 0) unsupported(op, "every shape entry must be > 0");
    if (p > std::numeric_limits<std::int64_t>::max() / d) unsupported(op, "the size overflows");
    p *= d;
  }
  return p;
}

void want_rank(const ir::Compute& op, int lo, int hi) {
  const int r = op.shape_size();
  if (r < lo || r > hi) {
    unsupported(op, "shape has " + std::to_string(r) + " entries, expected " +
                        (lo == hi ? std::to_string(lo) : std::to_string(lo) + " or " + std::to_string(hi)));
  }
}

void want_variants(const ir::Compute& op, std::initializer_list<ir::KernelVariant> ok) {
  if (std::find(ok.begin(), ok.end(), op.variant()) == ok.end()) {
    std::string list;
    for (ir::KernelVariant v : ok) list += (list.empty() ? "" : ", ") + std::string(ir::KernelVariant_Name(v));
    unsupported(op, std::string("variant ") + ir::KernelVariant_Name(op.variant()) + " is not a kernel of " +
                        class_name(op.op_class()) + " (supported: " + list + ")");
  }
}

std::span<const float> cs(const std::vector<float>& v) { return v; }

CaseSpec gemm_case(const ir::Compute& op) {
  want_rank(op, 3, 4);
  want_variants(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT, ir::VARIANT_BACKWARD_WEIGHT});
  const std::int64_t m = op.shape(0), n = op.shape(1), k = op.shape(2), batch = op.shape_size() == 4 ? op.shape(3) : 1;
  checked_product(op, {m, n, k, batch});
  const std::int64_t mk = checked_product(op, {m, k, batch}), kn = checked_product(op, {k, n, batch}),
                     mn = checked_product(op, {m, n, batch});
  CaseSpec c;
  ref::GemmShape g{m, n, k, false, false};
  switch (op.variant()) {
    case ir::VARIANT_FORWARD:  // C[m,n] = X[m,k]·W[k,n]
      c.names = {"x", "w", "y"};
      break;
    case ir::VARIANT_BACKWARD_INPUT:  // dX[m,n] = dY[m,k]·Wᵀ, W stored [n,k]
      c.names = {"dy", "w", "dx"};
      g.trans_b = true;
      break;
    default:  // dW[m,n] = Xᵀ·dY, X stored [k,m], dY [k,n]
      c.names = {"x", "dy", "dw"};
      g.trans_a = true;
      break;
  }
  c.sizes = {mk, kn, mn};
  c.run = [g, batch, mk1 = mk / batch, kn1 = kn / batch, mn1 = mn / batch](Set& s) {
    for (std::int64_t b = 0; b < batch; ++b) {
      blocked_gemm(std::span<const float>(s[0]).subspan(static_cast<std::size_t>(b * mk1), static_cast<std::size_t>(mk1)),
                   std::span<const float>(s[1]).subspan(static_cast<std::size_t>(b * kn1), static_cast<std::size_t>(kn1)),
                   g, std::span<float>(s[2]).subspan(static_cast<std::size_t>(b * mn1), static_cast<std::size_t>(mn1)));
    }
  };
  return c;
}

CaseSpec attention_case(const ir::Compute& op) {
  want_rank(op, 7, 7);
  want_variants(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  AttentionShape a;
  a.batch = op.shape(0);
  a.heads = op.shape(1);
  a.seq_q = op.shape(2);
  a.seq_kv = op.shape(3);
  a.head_dim = op.shape(4);
  if (op.shape(5) != 0 && op.shape(5) != 1) unsupported(op, "causal (shape[5]) must be 0 or 1");
  a.causal = op.shape(5) == 1;
  a.kv_heads = op.shape(6);
  checked_product(op, {a.batch, a.heads, a.seq_q, a.seq_kv, a.head_dim, a.kv_heads});
  try {
    a.validate();
  } catch (const Error& e) {
    unsupported(op, e.what());
  }
  const AttentionBlocks blocks{64, 64};
  CaseSpec c;
  const std::int64_t q = a.q_elements(), kv = a.kv_elements(), lse = a.lse_elements();
  if (op.variant() == ir::VARIANT_FORWARD) {
    c.names = {"q", "k", "v", "out", "lse"};
    c.sizes = {q, kv, kv, q, lse};
    c.run = [a, blocks](Set& s) {
      auto r = attention_forward_tiled<float>(a, blocks, cs(s[0]), cs(s[1]), cs(s[2]));
      s[3] = std::move(r.out);
      s[4] = std::move(r.lse);
    };
    return c;
  }
  c.names = {"q", "k", "v", "out", "lse", "dout", "dq", "dk", "dv"};
  c.sizes = {q, kv, kv, q, lse, q, q, kv, kv};
  c.init = [a, blocks](Set& s) {  // O and LSE of the forward on these inputs
    auto r = attention_forward_tiled<float>(a, blocks, cs(s[0]), cs(s[1]), cs(s[2]));
    s[3] = std::move(r.out);
    s[4] = std::move(r.lse);
  };
  c.run = [a, blocks](Set& s) {
    auto g = attention_backward_tiled<float>(a, blocks, cs(s[0]), cs(s[1]), cs(s[2]), cs(s[3]), cs(s[4]), cs(s[5]));
    s[6] = std::move(g.dq);
    s[7] = std::move(g.dk);
    s[8] = std::move(g.dv);
  };
  return c;
}

constexpr double kNormEps = 1e-5;

CaseSpec norm_case(const ir::Compute& op) {
  want_rank(op, 2, 2);
  want_variants(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  const ref::NormShape ns{op.shape(0), op.shape(1)};
  const std::int64_t th = checked_product(op, {ns.t, ns.h});
  const bool layer = op.op_class() == ir::LAYERNORM;
  CaseSpec c;
  if (op.variant() == ir::VARIANT_FORWARD) {
    if (layer) {
      c.names = {"x", "gamma", "beta", "y", "mean", "rstd"};
      c.sizes = {th, ns.h, ns.h, th, ns.t, ns.t};
      c.run = [ns](Set& s) {
        ref::layernorm_forward<float>(cs(s[0]), cs(s[1]), cs(s[2]), ns, kNormEps, s[3], s[4], s[5]);
      };
    } else {
      c.names = {"x", "gamma", "y", "rstd"};
      c.sizes = {th, ns.h, th, ns.t};
      c.run = [ns](Set& s) { ref::rmsnorm_forward<float>(cs(s[0]), cs(s[1]), ns, kNormEps, s[2], s[3]); };
    }
    return c;
  }
  if (layer) {
    c.names = {"x", "gamma", "dy", "mean", "rstd", "dx", "dgamma", "dbeta"};
    c.sizes = {th, ns.h, th, ns.t, ns.t, th, ns.h, ns.h};
    c.init = [ns](Set& s) {
      std::vector<float> y(s[0].size()), beta(static_cast<std::size_t>(ns.h), 0.0f);
      ref::layernorm_forward<float>(cs(s[0]), cs(s[1]), cs(beta), ns, kNormEps, y, s[3], s[4]);
    };
    c.run = [ns](Set& s) {
      ref::layernorm_backward<float>(cs(s[0]), cs(s[1]), cs(s[2]), cs(s[3]), cs(s[4]), ns, s[5], s[6], s[7]);
    };
  } else {
    c.names = {"x", "gamma", "dy", "rstd", "dx", "dgamma"};
    c.sizes = {th, ns.h, th, ns.t, th, ns.h};
    c.init = [ns](Set& s) {
      std::vector<float> y(s[0].size());
      ref::rmsnorm_forward<float>(cs(s[0]), cs(s[1]), ns, kNormEps, y, s[3]);
    };
    c.run = [ns](Set& s) { ref::rmsnorm_backward<float>(cs(s[0]), cs(s[1]), cs(s[2]), cs(s[3]), ns, s[4], s[5]); };
  }
  return c;
}

CaseSpec gelu_case(const ir::Compute& op) {
  want_rank(op, 1, 1);
  want_variants(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  const std::int64_t n = checked_product(op, {op.shape(0)});
  CaseSpec c;
  if (op.variant() == ir::VARIANT_FORWARD) {
    c.names = {"x", "y"};
    c.sizes = {n, n};
    c.run = [](Set& s) { ref::gelu_forward<float>(cs(s[0]), ref::GeluKind::kTanh, s[1]); };
  } else {
    c.names = {"x", "dy", "dx"};
    c.sizes = {n, n, n};
    c.run = [](Set& s) { ref::gelu_backward<float>(cs(s[0]), cs(s[1]), ref::GeluKind::kTanh, s[2]); };
  }
  return c;
}

CaseSpec swiglu_case(const ir::Compute& op) {
  want_rank(op, 2, 2);
  want_variants(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  const std::int64_t t = op.shape(0), f = op.shape(1);
  const std::int64_t tf = checked_product(op, {t, f, 2}) / 2;
  CaseSpec c;
  if (op.variant() == ir::VARIANT_FORWARD) {
    c.names = {"x", "y"};
    c.sizes = {2 * tf, tf};
    c.run = [t, f](Set& s) { ref::swiglu_forward<float>(cs(s[0]), t, f, s[1]); };
  } else {
    c.names = {"x", "dy", "dx"};
    c.sizes = {2 * tf, tf, 2 * tf};
    c.run = [t, f](Set& s) { ref::swiglu_backward<float>(cs(s[0]), cs(s[1]), t, f, s[2]); };
  }
  return c;
}

CaseSpec residual_case(const ir::Compute& op) {
  want_rank(op, 1, 1);
  want_variants(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  const std::int64_t n = checked_product(op, {op.shape(0)});
  CaseSpec c;
  // Forward: branch + residual; backward: the two gradient paths summed.
  c.names = {"a", "b", "out"};
  c.sizes = {n, n, n};
  c.run = [](Set& s) { ref::residual_add<float>(cs(s[0]), cs(s[1]), s[2]); };
  return c;
}

CaseSpec cross_entropy_case(const ir::Compute& op) {
  want_rank(op, 2, 2);
  want_variants(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  const ref::CeShape ce{op.shape(0), op.shape(1)};
  const std::int64_t tv = checked_product(op, {ce.t, ce.v});
  auto targets = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(ce.t));
  Rng rng{0xC0FFEEull + static_cast<std::uint64_t>(tv)};
  for (auto& x : *targets) x = static_cast<std::int64_t>(rng.next() % static_cast<std::uint64_t>(ce.v));
  CaseSpec c;
  c.shared_bytes = ce.t * static_cast<std::int64_t>(sizeof(std::int64_t));
  if (op.variant() == ir::VARIANT_FORWARD) {
    c.names = {"logits", "loss"};
    c.sizes = {tv, ce.t};
    c.run = [ce, targets](Set& s) { ref::cross_entropy_forward<float>(cs(s[0]), *targets, ce, s[1]); };
  } else {
    c.names = {"logits", "dlogits"};
    c.sizes = {tv, tv};
    c.run = [ce, targets](Set& s) { ref::cross_entropy_mean_backward<float>(cs(s[0]), *targets, ce, s[1]); };
  }
  return c;
}

CaseSpec softmax_case(const ir::Compute& op) {
  want_rank(op, 2, 2);
  want_variants(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  const std::int64_t rows = op.shape(0), cols = op.shape(1);
  const std::int64_t n = checked_product(op, {rows, cols});
  const float scale = 0.125f;
  CaseSpec c;
  if (op.variant() == ir::VARIANT_FORWARD) {
    c.names = {"x", "y"};
    c.sizes = {n, n};
    c.run = [rows, cols, scale](Set& s) { softmax_forward(cs(s[0]), rows, cols, scale, s[1]); };
  } else {
    c.names = {"y", "dy", "dx"};
    c.sizes = {n, n, n};
    c.init = [rows, cols, scale](Set& s) {  // y: a real softmax output
      std::vector<float> x = s[0];
      softmax_forward(x, rows, cols, scale, s[0]);
    };
    c.run = [rows, cols, scale](Set& s) { softmax_backward(cs(s[0]), cs(s[1]), rows, cols, scale, s[2]); };
  }
  return c;
}

// A streaming pass, shape [elements, bytes_per_element] (ELEMENTWISE copies,
// casts, memsets, accumulations; OPTIMIZER norm / clip passes): a scaled copy
// moving the same bytes (one float read and one written per 8 bytes).
CaseSpec stream_case(const ir::Compute& op) {
  const std::int64_t bytes = checked_product(op, {op.shape(0), op.shape(1)});
  const std::int64_t floats = std::max<std::int64_t>((bytes + 7) / 8, 1);
  CaseSpec c;
  c.names = {"x", "y"};
  c.sizes = {floats, floats};
  c.run = [](Set& s) {
    const auto& x = s[0];
    auto& y = s[1];
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = 0.5f * x[i];
  };
  return c;
}

CaseSpec elementwise_case(const ir::Compute& op) {
  want_rank(op, 1, 2);
  if (op.shape_size() == 2) {
    want_variants(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT, ir::VARIANT_BACKWARD_WEIGHT});
    return stream_case(op);
  }
  want_variants(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  const std::int64_t n = checked_product(op, {op.shape(0)});
  constexpr float kP = 0.1f;
  auto mask = std::make_shared<std::vector<std::uint8_t>>(static_cast<std::size_t>(n));
  Rng rng{0xD209ull + static_cast<std::uint64_t>(n)};
  for (auto& m : *mask) m = (rng.next() % 1000) >= static_cast<std::uint64_t>(kP * 1000) ? 1 : 0;
  CaseSpec c;
  c.shared_bytes = n;
  // Dropout forward (x → y) or backward (dy → dx): the same masked scale.
  c.names = op.variant() == ir::VARIANT_FORWARD ? std::vector<std::string>{"x", "y"}
                                                : std::vector<std::string>{"dy", "dx"};
  c.sizes = {n, n};
  c.run = [mask](Set& s) { dropout_apply(cs(s[0]), *mask, kP, s[1]); };
  return c;
}

CaseSpec embedding_case(const ir::Compute& op) {
  want_rank(op, 3, 3);
  want_variants(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_WEIGHT});
  const std::int64_t t = op.shape(0), h = op.shape(1), v = op.shape(2);
  const std::int64_t th = checked_product(op, {t, h}), vh = checked_product(op, {v, h});
  if (v > std::numeric_limits<std::int32_t>::max()) unsupported(op, "vocabulary too large");
  auto ids = std::make_shared<std::vector<std::int32_t>>(static_cast<std::size_t>(t));
  Rng rng{0xE3BEDull + static_cast<std::uint64_t>(th)};
  for (auto& x : *ids) x = static_cast<std::int32_t>(rng.next() % static_cast<std::uint64_t>(v));
  CaseSpec c;
  c.shared_bytes = t * static_cast<std::int64_t>(sizeof(std::int32_t));
  if (op.variant() == ir::VARIANT_FORWARD) {
    c.names = {"table", "out"};
    c.sizes = {vh, th};
    c.run = [ids, h](Set& s) { embedding_forward(cs(s[0]), *ids, h, s[1]); };
  } else {
    c.names = {"dy", "dtable"};
    c.sizes = {th, vh};
    c.run = [ids, h](Set& s) { embedding_backward(cs(s[0]), *ids, h, s[1]); };
  }
  return c;
}

CaseSpec optimizer_case(const ir::Compute& op) {
  want_rank(op, 1, 2);
  want_variants(op, {ir::VARIANT_FORWARD});
  if (op.shape_size() == 2) return stream_case(op);
  const std::int64_t p = checked_product(op, {op.shape(0)});
  CaseSpec c;
  c.names = {"params", "grads", "m", "v"};
  c.sizes = {p, p, p, p};
  c.init = [](Set& s) {
    for (float& x : s[3]) x = std::abs(x) * 1e-3f;  // second moment: positive
  };
  c.run = [](Set& s) { adam_step(s[0], cs(s[1]), s[2], s[3], AdamConfig{}); };
  return c;
}

CaseSpec spec_for(const ir::Compute& op) {
  switch (op.op_class()) {
    case ir::GEMM:
      return gemm_case(op);
    case ir::ATTENTION:
      return attention_case(op);
    case ir::LAYERNORM:
    case ir::RMSNORM:
      return norm_case(op);
    case ir::GELU:
      return gelu_case(op);
    case ir::SWIGLU:
      return swiglu_case(op);
    case ir::RESIDUAL_ADD:
      return residual_case(op);
    case ir::CROSS_ENTROPY:
      return cross_entropy_case(op);
    case ir::SOFTMAX:
      return softmax_case(op);
    case ir::ELEMENTWISE:
      return elementwise_case(op);
    case ir::EMBEDDING:
      return embedding_case(op);
    case ir::OPTIMIZER:
      return optimizer_case(op);
    default:
      unsupported(op, "the op class has no CPU kernel");
  }
}

std::int64_t read_cache_size_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string s;
  if (!(in >> s) || s.empty()) return 0;
  std::int64_t mult = 1;
  const char unit = s.back();
  if (unit == 'K' || unit == 'k') mult = 1024;
  if (unit == 'M' || unit == 'm') mult = 1024 * 1024;
  if (unit == 'G' || unit == 'g') mult = std::int64_t{1024} * 1024 * 1024;
  if (mult != 1) s.pop_back();
  try {
    return std::stoll(s) * mult;
  } catch (...) {
    return 0;
  }
}

}  // namespace

bool cpu_case_supported(ir::OpClass op_class, ir::KernelVariant variant) {
  switch (op_class) {
    case ir::GEMM:
      return variant == ir::VARIANT_FORWARD || variant == ir::VARIANT_BACKWARD_INPUT ||
             variant == ir::VARIANT_BACKWARD_WEIGHT;
    case ir::ATTENTION:
    case ir::LAYERNORM:
    case ir::RMSNORM:
    case ir::GELU:
    case ir::SWIGLU:
    case ir::RESIDUAL_ADD:
    case ir::CROSS_ENTROPY:
    case ir::SOFTMAX:
      return variant == ir::VARIANT_FORWARD || variant == ir::VARIANT_BACKWARD_INPUT;
    case ir::ELEMENTWISE:  // weight-gradient accumulation streams are BACKWARD_WEIGHT
      return variant == ir::VARIANT_FORWARD || variant == ir::VARIANT_BACKWARD_INPUT ||
             variant == ir::VARIANT_BACKWARD_WEIGHT;
    case ir::EMBEDDING:
      return variant == ir::VARIANT_FORWARD || variant == ir::VARIANT_BACKWARD_WEIGHT;
    case ir::OPTIMIZER:
      return variant == ir::VARIANT_FORWARD;
    default:
      return false;
  }
}

std::int64_t last_level_cache_bytes() {
  static const std::int64_t cached = [] {
#ifdef _SC_LEVEL3_CACHE_SIZE
    const long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) return static_cast<std::int64_t>(l3);
#endif
    std::int64_t best = 0;
    int best_level = 0;
    std::error_code ec;
    const std::filesystem::path dir = "/sys/devices/system/cpu/cpu0/cache";
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (e.path().filename().string().rfind("index", 0) != 0) continue;
      std::ifstream lv(e.path() / "level");
      int level = 0;
      if (!(lv >> level)) continue;
      const std::int64_t size = read_cache_size_file(e.path() / "size");
      if (size > 0 && (level > best_level || (level == best_level && size > best))) {
        best_level = level;
        best = size;
      }
    }
    return best > 0 ? best : std::int64_t{32} << 20;
  }();
  return cached;
}

namespace {

struct CaseSize {
  std::int64_t set_bytes = 0;  // one set's float buffers
  std::int64_t sets = 1;
};

// The sets make_cpu_case allocates for `spec` (and the refusal above the
// resident limit), shared with cpu_case_resident_bytes.
CaseSize case_size(const ir::Compute& op, const CaseSpec& spec, const CpuCaseOptions& options) {
  CaseSize z;
  for (std::int64_t n : spec.sizes) {
    if (n > std::numeric_limits<std::int64_t>::max() / 8 - z.set_bytes) unsupported(op, "the buffers overflow");
    z.set_bytes += n * static_cast<std::int64_t>(sizeof(float));
  }
  if (z.set_bytes + spec.shared_bytes > options.max_resident_bytes) {
    throw Error(spec.description + ": needs " + std::to_string((z.set_bytes + spec.shared_bytes) >> 20) +
                " MiB of buffers, more than the limit of " + std::to_string(options.max_resident_bytes >> 20) +
                " MiB");
  }
  const std::int64_t cache = options.cache_bytes > 0 ? options.cache_bytes : last_level_cache_bytes();
  // Enough sets that one round over them exceeds 2× the cache, within the caps.
  z.sets = z.set_bytes > 0 ? (2 * cache) / z.set_bytes + 1 : 1;
  z.sets = std::clamp<std::int64_t>(z.sets, 1, std::max(1, options.max_sets));
  while (z.sets > 1 && z.sets * z.set_bytes + spec.shared_bytes > options.max_resident_bytes) --z.sets;
  return z;
}

}  // namespace

std::unique_ptr<CpuCase> make_cpu_case(const ir::Compute& op, const CpuCaseOptions& options) {
  CaseSpec spec = spec_for(op);
  spec.description = describe_op(op.op_class(), op.variant(), shape_of(op)) + " fp32 cpu";
  const CaseSize z = case_size(op, spec, options);
  return std::make_unique<CpuCaseImpl>(std::move(spec), static_cast<int>(z.sets), options.seed);
}

std::int64_t cpu_case_resident_bytes(const ir::Compute& op, const CpuCaseOptions& options) {
  CaseSpec spec = spec_for(op);
  spec.description = describe_op(op.op_class(), op.variant(), shape_of(op)) + " fp32 cpu";
  const CaseSize z = case_size(op, spec, options);
  return z.sets * z.set_bytes + spec.shared_bytes;
}

std::unique_ptr<KernelCase> make_cpu_case(const ir::Compute& op) { return make_cpu_case(op, CpuCaseOptions{}); }

// ---------------------------------------------------------------- small kernels

namespace {

constexpr std::int64_t kMR = 6, kNR = 16;     // register tile
constexpr std::int64_t kMC = 120, kKC = 256;  // A block in L2
constexpr std::int64_t kNC = 1024;            // B block in L2 / L3

// acc[MR][NR] = Σ_p a[p][r]·b[p][c] over kc, from MR-row and NR-column panels.
void micro_kernel_generic(std::int64_t kc, const float* __restrict ap, const float* __restrict bp,
                          float* __restrict acc) {
  float c[kMR][kNR] = {};
  for (std::int64_t p = 0; p < kc; ++p) {
    const float* a = ap + p * kMR;
    const float* b = bp + p * kNR;
    for (std::int64_t r = 0; r < kMR; ++r) {
      const float ar = a[r];
      for (std::int64_t j = 0; j < kNR; ++j) c[r][j] += ar * b[j];
    }
  }
  for (std::int64_t r = 0; r < kMR; ++r)
    for (std::int64_t j = 0; j < kNR; ++j) acc[r * kNR + j] = c[r][j];
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same with AVX2 + FMA: 6 × 2 accumulators of 8 floats (12 of 16 ymm registers).
__attribute__((target("avx2,fma"))) void micro_kernel_avx2(std::int64_t kc, const float* __restrict ap,
                                                            const float* __restrict bp, float* __restrict acc) {
  __m256 c[kMR][2];
  for (auto& row : c) row[0] = row[1] = _mm256_setzero_ps();
  for (std::int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(bp + p * kNR);
    const __m256 b1 = _mm256_loadu_ps(bp + p * kNR + 8);
    const float* a = ap + p * kMR;
    for (std::int64_t r = 0; r < kMR; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r);
      c[r][0] = _mm256_fmadd_ps(ar, b0, c[r][0]);
      c[r][1] = _mm256_fmadd_ps(ar, b1, c[r][1]);
    }
  }
  for (std::int64_t r = 0; r < kMR; ++r) {
    _mm256_storeu_ps(acc + r * kNR, c[r][0]);
    _mm256_storeu_ps(acc + r * kNR + 8, c[r][1]);
  }
}
#endif

using MicroKernel = void (*)(std::int64_t, const float*, const float*, float*);

MicroKernel pick_micro_kernel() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return micro_kernel_avx2;
#endif
  return micro_kernel_generic;
}

const MicroKernel micro_kernel = pick_micro_kernel();

}  // namespace

void blocked_gemm(std::span<const float> a, std::span<const float> b, ref::GemmShape s, std::span<float> c) {
  const char* fn = "blocked_gemm";
  if (s.m <= 0 || s.n <= 0 || s.k <= 0) {
    throw Error(std::string(fn) + ": m, n, k must be > 0 (got " + std::to_string(s.m) + ", " + std::to_string(s.n) +
                ", " + std::to_string(s.k) + ")");
  }
  ref::check_size(fn, "A (m·k)", a.size(), static_cast<std::size_t>(s.m * s.k));
  ref::check_size(fn, "B (k·n)", b.size(), static_cast<std::size_t>(s.k * s.n));
  ref::check_size(fn, "C (m·n)", c.size(), static_cast<std::size_t>(s.m * s.n));
  const std::int64_t m = s.m, n = s.n, k = s.k;
  thread_local std::vector<float> apack, bpack;
  alignas(32) float acc[kMR * kNR];
  for (std::int64_t jc = 0; jc < n; jc += kNC) {
    const std::int64_t nc = std::min(kNC, n - jc);
    const std::int64_t npanels = (nc + kNR - 1) / kNR;
    for (std::int64_t pc = 0; pc < k; pc += kKC) {
      const std::int64_t kc = std::min(kKC, k - pc);
      // B[pc:pc+kc, jc:jc+nc] as NR-column panels, zero-padded: bpack[panel][p][j].
      bpack.assign(static_cast<std::size_t>(npanels * kc * kNR), 0.0f);
      for (std::int64_t jp = 0; jp < npanels; ++jp) {
        float* dst = bpack.data() + jp * kc * kNR;
        const std::int64_t j0 = jc + jp * kNR, jw = std::min(kNR, jc + nc - j0);
        for (std::int64_t p = 0; p < kc; ++p)
          for (std::int64_t j = 0; j < jw; ++j)
            dst[p * kNR + j] = s.trans_b ? b[static_cast<std::size_t>((j0 + j) * k + pc + p)]
                                         : b[static_cast<std::size_t>((pc + p) * n + j0 + j)];
      }
      for (std::int64_t ic = 0; ic < m; ic += kMC) {
        const std::int64_t mc = std::min(kMC, m - ic);
        const std::int64_t mpanels = (mc + kMR - 1) / kMR;
        // A[ic:ic+mc, pc:pc+kc] as MR-row panels: apack[panel][p][r].
        apack.assign(static_cast<std::size_t>(mpanels * kc * kMR), 0.0f);
        for (std::int64_t ip = 0; ip < mpanels; ++ip) {
          float* dst = apack.data() + ip * kc * kMR;
          const std::int64_t i0 = ic + ip * kMR, iw = std::min(kMR, ic + mc - i0);
          for (std::int64_t r = 0; r < iw; ++r)
            for (std::int64_t p = 0; p < kc; ++p)
              dst[p * kMR + r] = s.trans_a ? a[static_cast<std::size_t>((pc + p) * m + i0 + r)]
                                           : a[static_cast<std::size_t>((i0 + r) * k + pc + p)];
        }
        for (std::int64_t ip = 0; ip < mpanels; ++ip) {
          const std::int64_t i0 = ic + ip * kMR, iw = std::min(kMR, ic + mc - i0);
          for (std::int64_t jp = 0; jp < npanels; ++jp) {
            const std::int64_t j0 = jc + jp * kNR, jw = std::min(kNR, jc + nc - j0);
            micro_kernel(kc, apack.data() + ip * kc * kMR, bpack.data() + jp * kc * kNR, acc);
            for (std::int64_t r = 0; r < iw; ++r) {
              float* crow = c.data() + (i0 + r) * n + j0;
              const float* arow = acc + r * kNR;
              if (pc == 0)
                for (std::int64_t j = 0; j < jw; ++j) crow[j] = arow[j];
              else
                for (std::int64_t j = 0; j < jw; ++j) crow[j] += arow[j];
            }
          }
        }
      }
    }
  }
}

void softmax_forward(std::span<const float> x, std::int64_t rows, std::int64_t cols, float scale,
                     std::span<float> y) {
  if (rows <= 0 || cols <= 0) throw Error("softmax_forward: rows and cols must be > 0");
  ref::check_size("softmax_forward", "x", x.size(), static_cast<std::size_t>(rows * cols));
  ref::check_size("softmax_forward", "y", y.size(), static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * cols;
    float* yr = y.data() + r * cols;
    float mx = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < cols; ++j) mx = std::max(mx, scale * xr[j]);
    float sum = 0.0f;
    for (std::int64_t j = 0; j < cols; ++j) {
      yr[j] = std::exp(scale * xr[j] - mx);
      sum += yr[j];
    }
    const float inv = 1.0f / sum;
    for (std::int64_t j = 0; j < cols; ++j) yr[j] *= inv;
  }
}

void softmax_backward(std::span<const float> y, std::span<const float> dy, std::int64_t rows, std::int64_t cols,
                      float scale, std::span<float> dx) {
  if (rows <= 0 || cols <= 0) throw Error("softmax_backward: rows and cols must be > 0");
  const auto n = static_cast<std::size_t>(rows * cols);
  ref::check_size("softmax_backward", "y", y.size(), n);
  ref::check_size("softmax_backward", "dy", dy.size(), n);
  ref::check_size("softmax_backward", "dx", dx.size(), n);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* yr = y.data() + r * cols;
    const float* dyr = dy.data() + r * cols;
    float* dxr = dx.data() + r * cols;
    float dot = 0.0f;
    for (std::int64_t j = 0; j < cols; ++j) dot += yr[j] * dyr[j];
    for (std::int64_t j = 0; j < cols; ++j) dxr[j] = scale * yr[j] * (dyr[j] - dot);
  }
}

void dropout_apply(std::span<const float> x, std::span<const std::uint8_t> mask, float p, std::span<float> y) {
  ref::check_size("dropout_apply", "mask", mask.size(), x.size());
  ref::check_size("dropout_apply", "y", y.size(), x.size());
  if (!(p >= 0.0f && p < 1.0f)) throw Error("dropout_apply: p must be in [0, 1)");
  const float keep_scale = 1.0f / (1.0f - p);
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * (mask[i] ? keep_scale : 0.0f);
}

void embedding_forward(std::span<const float> table, std::span<const std::int32_t> ids, std::int64_t hidden,
                       std::span<float> out) {
  if (hidden <= 0 || table.size() % static_cast<std::size_t>(hidden) != 0)
    throw Error("embedding_forward: table size is not a multiple of hidden");
  ref::check_size("embedding_forward", "out", out.size(), ids.size() * static_cast<std::size_t>(hidden));
  const auto vocab = static_cast<std::int64_t>(table.size()) / hidden;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) throw Error("embedding_forward: token id outside the vocabulary");
    std::copy_n(table.data() + ids[i] * hidden, hidden, out.data() + static_cast<std::int64_t>(i) * hidden);
  }
}

void embedding_backward(std::span<const float> dy, std::span<const std::int32_t> ids, std::int64_t hidden,
                        std::span<float> dtable) {
  if (hidden <= 0 || dtable.size() % static_cast<std::size_t>(hidden) != 0)
    throw Error("embedding_backward: table size is not a multiple of hidden");
  ref::check_size("embedding_backward", "dy", dy.size(), ids.size() * static_cast<std::size_t>(hidden));
  const auto vocab = static_cast<std::int64_t>(dtable.size()) / hidden;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) throw Error("embedding_backward: token id outside the vocabulary");
    float* row = dtable.data() + ids[i] * hidden;
    const float* g = dy.data() + static_cast<std::int64_t>(i) * hidden;
    for (std::int64_t j = 0; j < hidden; ++j) row[j] += g[j];
  }
}

void adam_step(std::span<float> params, std::span<const float> grads, std::span<float> m, std::span<float> v,
               const AdamConfig& cfg) {
  ref::check_size("adam_step", "grads", grads.size(), params.size());
  ref::check_size("adam_step", "m", m.size(), params.size());
  ref::check_size("adam_step", "v", v.size(), params.size());
  if (cfg.step < 1) throw Error("adam_step: step must be >= 1");
  const float bc1 = 1.0f - std::pow(cfg.beta1, static_cast<float>(cfg.step));
  const float bc2 = 1.0f - std::pow(cfg.beta2, static_cast<float>(cfg.step));
  const float step_size = cfg.lr / bc1, inv_sqrt_bc2 = 1.0f / std::sqrt(bc2);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const float g = grads[i];
    m[i] = cfg.beta1 * m[i] + (1.0f - cfg.beta1) * g;
    v[i] = cfg.beta2 * v[i] + (1.0f - cfg.beta2) * g * g;
    params[i] -= step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + cfg.eps);
  }
}

}  // namespace lacuna::kernels
