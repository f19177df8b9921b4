// A counter-based random number generator: every random value lacuna samples
// is a pure function of a key (seed, purpose and up to four 32-bit
// coordinates such as rank, stream, op and iteration), never of a generator
// state. So a sampled value does not depend on the order in which events pop,
// on how many threads run, or on whether ranks are folded: the same key gives
// the same value in every run.
//
// The bits come from Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel
// random numbers: as easy as 1, 2, 3", SC'11): a 10-round bijection of a
// 128-bit counter under a 64-bit key that passes TestU01's BigCrush for any
// counter sequence. The counter holds the coordinates; the key holds the
// seed. Checked against Random123's known-answer vectors (counter_rng_test.cpp).
#pragma once

#include <array>
#include <cstdint>

namespace lacuna {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Philox4x32 with 10 rounds (Random123's philox4x32_10).
constexpr std::array<uint32_t, 4> philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  constexpr uint64_t kM0 = 0xD2511F53u;
  constexpr uint64_t kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u;
  constexpr uint32_t kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    const uint64_t p0 = kM0 * ctr[0];
    const uint64_t p1 = kM1 * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
  }
  return ctr;
}

// What a draw is for. Each purpose is its own stream of numbers: the speed of
// GPU 5 and the noise of rank 5's op 0 never share bits. Values are part of
// the key, so they never change (append new ones).
enum class RngPurpose : uint16_t {
  kGpuSpeed = 1,        // (rank)
  kStragglerHost = 2,   // (node)
  kKernelNoise = 3,     // (rank, stream, op | pass, iteration)
  kKernelTail = 4,      // (rank, stream, op | pass, iteration)
  kHostPausePhase = 5,  // (rank): which iterations of the period pause
  kHostPauseOp = 6,     // (rank, iteration): which forward op the pause precedes
  kLaunchSkew = 7,      // (rank, stream, op, iteration)
  kLinkFlap = 8,        // (port, flap index)
  kKernelNoisePass = 9, // (rank, phase + 8 · chunk, microbatch, iteration)
  kKernelTailPass = 10, // (rank, phase + 8 · chunk, microbatch, iteration)
  kMoeGammaNormal = 11,  // (layer, expert, microbatch | attempt << 20, iteration): Dirichlet's gamma draws
  kMoeGammaAccept = 12,  // (layer, expert, microbatch | attempt << 20, iteration)
  kMoeTokenCount = 13,   // (layer, expert, microbatch, iteration): the expert's multinomial share
  kFailureArrival = 14,  // (run, failure index): time to a whole run's next failure (sim/goodput)
  kFailureCause = 15,    // (run, failure index): which component failed
};

// The key of one draw. `a`..`d` are the purpose's coordinates (e.g. rank,
// stream, op, iteration); unused ones stay 0. `stream` shares a word with
// the purpose, so it must be < 2^16 (the engine allows 1024 streams).
struct RngKey {
  uint64_t seed = 0;
  RngPurpose purpose = RngPurpose::kGpuSpeed;
  uint32_t a = 0;
  uint32_t b = 0;  // < 2^16
  uint32_t c = 0;
  uint32_t d = 0;
};

// 128 random bits of a key.
constexpr std::array<uint32_t, 4> random_bits(const RngKey& k) {
  const PhiloxCounter ctr{k.a, (k.b & 0xFFFFu) << 16 | static_cast<uint32_t>(k.purpose), k.c, k.d};
  return philox4x32_10(ctr, PhiloxKey{static_cast<uint32_t>(k.seed), static_cast<uint32_t>(k.seed >> 32)});
}

// Two independent uniforms in the open interval (0, 1), 53 bits each (words
// 0-1 and 2-3 of the block): never exactly 0 or 1, so logarithms are finite.
struct UniformPair {
  double first = 0;
  double second = 0;
};
constexpr UniformPair uniform_pair(const RngKey& k) {
  const auto w = random_bits(k);
  const uint64_t x = (uint64_t{w[0]} << 32 | w[1]) >> 11;
  const uint64_t y = (uint64_t{w[2]} << 32 | w[3]) >> 11;
  constexpr double kScale = 1.0 / 9007199254740992.0;  // 2^-53
  return {(static_cast<double>(x) + 0.5) * kScale, (static_cast<double>(y) + 0.5) * kScale};
}
constexpr double uniform(const RngKey& k) { return uniform_pair(k).first; }

}  // namespace lacuna
