// Published kernel throughputs (cuBLAS GEMMs, FlashAttention / cuDNN
// attention) that `lacuna efficiency` compares its per-shape model against.
// Each figure names its source; `derives` marks the ones a preset parameter
// was derived from (presets.cpp), which are therefore not independent checks.
// Collected in docs/published-figures-notes.md (tags [R] read, [R≈] read off
// a figure, [I] derived, [M] unverified transcription).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lacuna::cli {

struct PublishedGemm {
  std::string preset;  // the lacuna preset of the GPU it was measured on
  int64_t m, n, k;
  double tflops;
  std::string source;
  bool derives;  // a preset parameter was derived from this figure
};

// FlashAttention benchmark convention: batch × seq = 16k tokens, hidden 2048
// (heads = 2048 / head_dim); FLOPs 4·b·s²·h·d per forward (halved when
// causal), backward 2.5× forward. `pass` is "fwd" or "fwd+bwd".
struct PublishedAttention {
  std::string preset;
  std::string kernel;  // "FA2", "cuDNN"
  std::string pass;
  int64_t seq, head_dim;
  bool causal;
  double tflops;
  std::string source;
  bool derives;
};

const std::vector<PublishedGemm>& published_gemms();
const std::vector<PublishedAttention>& published_attention();

}  // namespace lacuna::cli
