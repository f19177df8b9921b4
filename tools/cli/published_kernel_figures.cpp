#include "tools/cli/published_kernel_figures.h"

namespace lacuna::cli {
namespace {

// Sources.
constexpr const char* kNvBlog =
    "NVIDIA, CUDA 11 Features Revealed, Fig. 6 (cuBLAS, A100), read off the figure [R≈]";
constexpr const char* kMamf = "stas00/ml-engineering compute/accelerator/README.md, MAMF table [R]";
constexpr const char* kMeas = "shared/reference/models-and-hardware.md §2, 8192³ bf16 measured [R]";
constexpr const char* kTriton =
    "triton-lang/triton python/tutorials/gluon/07-persistence.py @020989b, Hopper cuBLAS column [R]";
constexpr const char* kFa2A100 = "Dao-AILab/flash-attention assets/flash2_a100_fwd_bwd_benchmark.png [R]";
constexpr const char* kFa2A100Occluded =
    "Dao-AILab/flash-attention assets/flash2_a100_fwd_bwd_benchmark.png, label occluded [R≈]";
constexpr const char* kFa3Fwd = "FlashAttention-3 paper (Shah et al. 2024), forward figure, cuDNN bars [R]";
constexpr const char* kFa3FwdBwd =
    "FlashAttention-3 paper, cuDNN: forward [R] with backward [M] (transcription), combined [I]";

}  // namespace

const std::vector<PublishedGemm>& published_gemms() {
  static const std::vector<PublishedGemm> v = {
      // A100 square GEMMs (256–1280 chose gemm_max_split_k before the fit to
      // measured kernels; every GEMM figure is a check since: presets.cpp [FIT]).
      {"a100-80gb-sxm", 256, 256, 256, 5, kNvBlog, false},
      {"a100-80gb-sxm", 512, 512, 512, 28, kNvBlog, false},
      {"a100-80gb-sxm", 768, 768, 768, 65, kNvBlog, false},
      {"a100-80gb-sxm", 1024, 1024, 1024, 88, kNvBlog, false},
      {"a100-80gb-sxm", 1280, 1280, 1280, 152, kNvBlog, false},
      {"a100-80gb-sxm", 1536, 1536, 1536, 148, kNvBlog, false},
      {"a100-80gb-sxm", 1792, 1792, 1792, 202, kNvBlog, false},
      {"a100-80gb-sxm", 2048, 2048, 2048, 195, kNvBlog, false},
      {"a100-80gb-sxm", 2304, 2304, 2304, 245, kNvBlog, false},
      {"a100-80gb-sxm", 2560, 2560, 2560, 230, kNvBlog, false},
      {"a100-80gb-sxm", 2816, 2816, 2816, 238, kNvBlog, false},
      {"a100-80gb-sxm", 3072, 3072, 3072, 235, kNvBlog, false},
      {"a100-80gb-sxm", 3328, 3328, 3328, 248, kNvBlog, false},
      {"a100-80gb-sxm", 3584, 3584, 3584, 242, kNvBlog, false},
      {"a100-80gb-sxm", 3840, 3840, 3840, 260, kNvBlog, false},
      {"a100-80gb-sxm", 4096, 4096, 4096, 260, kNvBlog, false},
      {"a100-80gb-sxm", 4352, 4352, 4352, 246, kNvBlog, false},
      {"a100-80gb-sxm", 4608, 4608, 4608, 276, kNvBlog, false},
      {"a100-80gb-sxm", 5120, 5120, 5120, 261, kNvBlog, false},
      {"a100-80gb-sxm", 5632, 5632, 5632, 278, kNvBlog, false},
      {"a100-80gb-sxm", 6144, 6144, 6144, 282, kNvBlog, false},
      {"a100-80gb-sxm", 8192, 8192, 8192, 291, kNvBlog, false},
      // The A100 GEMM efficiency before its fit to measured kernels (now a check).
      {"a100-80gb-sxm", 1024, 10240, 5120, 271.2, kMamf, false},
      // The Hopper GEMM efficiency before its fit to measured kernels (now a check).
      {"h100-sxm", 8192, 8192, 8192, 798, kMeas, false},
      {"h100-sxm", 2048, 2048, 13312, 794.5, kMamf, false},
      // The K sweep gemm_k_overhead was fitted to before the fit to measured kernels
      // (its level is 17 % below the two above).
      {"h100-sxm", 8192, 8192, 512, 588.15, kTriton, false},
      {"h100-sxm", 8192, 8192, 1024, 588.32, kTriton, false},
      {"h100-sxm", 8192, 8192, 2048, 615.58, kTriton, false},
      {"h100-sxm", 8192, 8192, 4096, 646.3, kTriton, false},
      {"h100-sxm", 8192, 8192, 8192, 661.11, kTriton, false},
      {"h100-sxm", 8192, 8192, 16384, 665.49, kTriton, false},
  };
  return v;
}

const std::vector<PublishedAttention>& published_attention() {
  static const std::vector<PublishedAttention> v = {
      // A100, FlashAttention-2, forward+backward: non-causal curves derive the ATTENTION parameters.
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 512, 64, false, 132, kFa2A100, true},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 1024, 64, false, 153, kFa2A100Occluded, true},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 2048, 64, false, 162, kFa2A100, true},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 4096, 64, false, 171, kFa2A100, true},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 8192, 64, false, 175, kFa2A100, true},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 16384, 64, false, 176, kFa2A100, true},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 512, 128, false, 151, kFa2A100Occluded, true},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 1024, 128, false, 173, kFa2A100Occluded, true},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 2048, 128, false, 187, kFa2A100, true},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 4096, 128, false, 196, kFa2A100, true},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 8192, 128, false, 201, kFa2A100, true},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 16384, 128, false, 203, kFa2A100, true},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 512, 64, true, 88, kFa2A100, false},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 1024, 64, true, 119, kFa2A100, false},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 2048, 64, true, 140, kFa2A100, false},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 4096, 64, true, 156, kFa2A100, false},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 8192, 64, true, 165, kFa2A100, false},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 16384, 64, true, 171, kFa2A100, false},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 512, 128, true, 99, kFa2A100, false},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 1024, 128, true, 133, kFa2A100, false},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 2048, 128, true, 155, kFa2A100, false},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 4096, 128, true, 173, kFa2A100, false},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 8192, 128, true, 182, kFa2A100, false},
      {"a100-80gb-sxm", "FA2", "fwd+bwd", 16384, 128, true, 189, kFa2A100, false},
      // H100, cuDNN, forward+backward (non-causal; backward published only there): derive.
      {"h100-sxm", "cuDNN", "fwd+bwd", 512, 64, false, 282.6, kFa3FwdBwd, true},
      {"h100-sxm", "cuDNN", "fwd+bwd", 1024, 64, false, 354.8, kFa3FwdBwd, true},
      {"h100-sxm", "cuDNN", "fwd+bwd", 2048, 64, false, 395.0, kFa3FwdBwd, true},
      {"h100-sxm", "cuDNN", "fwd+bwd", 4096, 64, false, 414.4, kFa3FwdBwd, true},
      {"h100-sxm", "cuDNN", "fwd+bwd", 8192, 64, false, 426.1, kFa3FwdBwd, true},
      {"h100-sxm", "cuDNN", "fwd+bwd", 16384, 64, false, 427.1, kFa3FwdBwd, true},
      {"h100-sxm", "cuDNN", "fwd+bwd", 512, 128, false, 342.8, kFa3FwdBwd, true},
      {"h100-sxm", "cuDNN", "fwd+bwd", 1024, 128, false, 444.7, kFa3FwdBwd, true},
      {"h100-sxm", "cuDNN", "fwd+bwd", 2048, 128, false, 500.2, kFa3FwdBwd, true},
      {"h100-sxm", "cuDNN", "fwd+bwd", 4096, 128, false, 526.2, kFa3FwdBwd, true},
      {"h100-sxm", "cuDNN", "fwd+bwd", 8192, 128, false, 539.0, kFa3FwdBwd, true},
      {"h100-sxm", "cuDNN", "fwd+bwd", 16384, 128, false, 536.3, kFa3FwdBwd, true},
      // H100, cuDNN, forward alone: checks (lacuna has one efficiency for both passes).
      {"h100-sxm", "cuDNN", "fwd", 512, 64, false, 335, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 1024, 64, false, 373, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 2048, 64, false, 395, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 4096, 64, false, 408, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 8192, 64, false, 412, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 16384, 64, false, 413, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 512, 128, false, 497, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 1024, 128, false, 574, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 2048, 128, false, 617, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 4096, 128, false, 609, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 8192, 128, false, 600, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 16384, 128, false, 595, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 512, 64, true, 225, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 1024, 64, true, 288, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 2048, 64, true, 334, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 4096, 64, true, 363, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 8192, 64, true, 379, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 16384, 64, true, 388, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 512, 128, true, 315, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 1024, 128, true, 410, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 2048, 128, true, 484, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 4096, 128, true, 518, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 8192, 128, true, 529, kFa3Fwd, false},
      {"h100-sxm", "cuDNN", "fwd", 16384, 128, true, 539, kFa3Fwd, false},
  };
  return v;
}

}  // namespace lacuna::cli
