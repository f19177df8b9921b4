#include "sim/variability/moe_load.h"

#include <algorithm>
#include <cmath>

#include "sim/core/counter_rng.h"
#include "sim/core/distributions.h"
#include "sim/core/error.h"

namespace lacuna::variability {
namespace {

// Attempts of the gamma rejection loop before giving up on a key. Marsaglia
// and Tsang's acceptance rate is above 95 % for every shape ≥ 1, so 4095
// failures in a row have probability < 0.05^4095: never.
constexpr uint32_t kMaxAttempts = 4095;
// Microbatches share a key word with the attempt (attempt << 20).
constexpr uint32_t kMicrobatchBits = 20;

RngKey moe_key(uint64_t seed, RngPurpose purpose, uint32_t layer, uint32_t expert, uint32_t microbatch_word,
               uint32_t iteration) {
  return RngKey{seed, purpose, layer, expert & 0xFFFFu, microbatch_word, iteration};
}

double gamma_at_least_one(uint64_t seed, double shape, uint32_t layer, uint32_t expert, uint32_t mb,
                          uint32_t iteration) {
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (uint32_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
    const uint32_t word = mb | attempt << kMicrobatchBits;
    const double x = standard_normal(uniform_pair(moe_key(seed, RngPurpose::kMoeGammaNormal, layer, expert, word, iteration)));
    const double t = 1.0 + c * x;
    if (t <= 0) continue;
    const double v = t * t * t;
    const double u = uniform(moe_key(seed, RngPurpose::kMoeGammaAccept, layer, expert, word, iteration));
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
  return shape;  // unreachable in practice (see kMaxAttempts): the mean
}

}  // namespace

double gamma_draw(uint64_t seed, double shape, uint32_t layer, uint32_t expert, uint32_t microbatch,
                  uint32_t iteration) {
  const uint32_t mb = microbatch & ((1u << kMicrobatchBits) - 1);
  if (shape >= 1) return gamma_at_least_one(seed, shape, layer, expert, mb, iteration);
  // Gamma(a) = Gamma(a + 1) · U^(1/a): the boost's uniform is the second
  // word of the key that the rejection loop never reaches.
  const double g = gamma_at_least_one(seed, shape + 1, layer, expert, mb, iteration);
  const uint32_t word = mb | kMaxAttempts << kMicrobatchBits;
  const double u = uniform(moe_key(seed, RngPurpose::kMoeGammaAccept, layer, expert, word, iteration));
  return g * std::pow(u, 1.0 / shape);
}

int64_t binomial_draw(int64_t n, double p, double u, double z) {
  if (n <= 0 || p <= 0) return 0;
  if (p >= 1) return n;
  const double q = 1 - p;
  const double var = static_cast<double>(n) * p * q;
  if (var >= 30) {
    const int64_t x = std::llround(static_cast<double>(n) * p + z * std::sqrt(var));
    return std::clamp<int64_t>(x, 0, n);
  }
  // Inversion on the smaller tail (Kachitvichyanukul & Schmeiser's BINV):
  // with p ≤ 1/2 and n·p·q < 30 the mean is < 60, so the walk is short and
  // q^n ≥ e^-60 does not underflow.
  const bool flip = p > 0.5;
  const double ps = flip ? q : p;
  const double qs = 1 - ps;
  const double s = ps / qs;
  const double a = static_cast<double>(n + 1) * s;
  double r = std::pow(qs, static_cast<double>(n));
  int64_t x = 0;
  while (u > r && x < n) {
    u -= r;
    ++x;
    r *= a / static_cast<double>(x) - s;
    if (r <= 0) break;  // rounding far in the tail
  }
  return flip ? n - x : x;
}

MoeLoad::MoeLoad(const ir::MoeInfo& moe, uint64_t seed)
    : seed_(seed),
      experts_(std::max(1, moe.num_experts())),
      ep_(std::max(1, moe.ep())),
      top_k_(std::max(1, moe.top_k())),
      alpha_(moe.routing().dirichlet_alpha()),
      dirichlet_(moe.routing().distribution() == scenario::ROUTING_DIRICHLET_MULTINOMIAL) {
  if (experts_ % ep_ != 0) {
    throw Error("MoE load: ep " + std::to_string(ep_) + " does not divide the " + std::to_string(experts_) + " experts");
  }
  if (dirichlet_ && !(alpha_ > 0)) {
    throw Error("MoE load: routing.dirichlet_alpha must be > 0 (got " + std::to_string(alpha_) + ")");
  }
  assignments_ = moe.tokens_per_microbatch() * top_k_;
  balanced_ = assignments_;
  if (moe.capacity_factor() > 0) {
    // Megatron's per-source capacity, ceil(T · k / E · cf) (the compiler's
    // rounding, sim/model/moe.cpp moe_tokens), times the ep sources of the
    // group. Under balanced routing a rank computes min(T · k, capacity · E):
    // what the compiler costed its expert kernels on.
    const double per_source =
        std::ceil(static_cast<double>(assignments_) / experts_ * moe.capacity_factor() - 1e-9);
    capacity_ = static_cast<int64_t>(per_source) * ep_;
    balanced_ = std::min<int64_t>(assignments_, static_cast<int64_t>(per_source) * experts_);
  }
  varies_ = dirichlet_ && !moe.pad_to_capacity() && balanced_ > 0 && experts_ > 1;
}

std::vector<int64_t> MoeLoad::expert_tokens(int32_t layer, int32_t microbatch, uint32_t iteration) const {
  const auto E = static_cast<size_t>(experts_);
  const int64_t total = assignments_ * ep_;
  std::vector<int64_t> out(E, 0);
  if (!dirichlet_) {
    // Exact equal shares; a remainder (N not a multiple of E) goes one token
    // each to the first experts.
    for (size_t e = 0; e < E; ++e) out[e] = total / experts_ + (static_cast<int64_t>(e) < total % experts_ ? 1 : 0);
  } else {
    const auto l = static_cast<uint32_t>(layer);
    const auto m = static_cast<uint32_t>(microbatch);
    std::vector<double> g(E);
    double sum = 0;
    for (size_t e = 0; e < E; ++e) {
      g[e] = gamma_draw(seed_, alpha_, l, static_cast<uint32_t>(e), m, iteration);
      sum += g[e];
    }
    // Multinomial(N, p) as a chain of binomials: expert e takes
    // Binomial(what is left, p_e / the mass left).
    int64_t left = total;
    double mass = sum;
    for (size_t e = 0; e < E && left > 0; ++e) {
      if (e + 1 == E || mass <= 0) {
        out[e] = left;
        break;
      }
      const UniformPair u = uniform_pair(RngKey{seed_, RngPurpose::kMoeTokenCount, l,
                                                static_cast<uint32_t>(e) & 0xFFFFu, m, iteration});
      const double pe = std::clamp(g[e] / mass, 0.0, 1.0);
      out[e] = binomial_draw(left, pe, u.first, standard_normal(u));
      left -= out[e];
      mass -= g[e];
    }
  }
  if (capacity_ > 0) {
    for (int64_t& c : out) c = std::min(c, capacity_);
  }
  return out;
}

std::vector<double> MoeLoad::rank_factors(int32_t layer, int32_t microbatch, uint32_t iteration) const {
  std::vector<double> out(static_cast<size_t>(ep_), 1.0);
  if (!varies_) return out;
  const std::vector<int64_t> tokens = expert_tokens(layer, microbatch, iteration);
  const int32_t local = experts_ / ep_;
  for (int32_t r = 0; r < ep_; ++r) {
    int64_t sum = 0;
    for (int32_t e = r * local; e < (r + 1) * local; ++e) sum += tokens[static_cast<size_t>(e)];
    // A rank whose experts received nothing still launches its kernels; a
    // zero factor would make them free, which the engine refuses. One token
    // is the least work a launched grouped GEMM does.
    out[static_cast<size_t>(r)] = static_cast<double>(std::max<int64_t>(sum, 1)) / static_cast<double>(balanced_);
  }
  return out;
}

const std::vector<double>& MoeLoad::factors(int32_t layer, int32_t microbatch, uint32_t iteration) const {
  const auto key = std::make_tuple(layer, microbatch, iteration);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, rank_factors(layer, microbatch, iteration)).first;
  return it->second;
}

double MoeLoad::factor(int32_t ep_index, int32_t layer, int32_t microbatch, uint32_t iteration) const {
  if (!varies_ || ep_index < 0 || ep_index >= ep_) return 1.0;
  return factors(layer, microbatch, iteration)[static_cast<size_t>(ep_index)];
}

}  // namespace lacuna::variability
