// Built-in hardware presets. One set of figures per GPU kind, never tuned per
// scenario. Sources (see docs/scenario.md and
// shared/reference/models-and-hardware.md):
//  [DS]   NVIDIA datasheets, dense (no sparsity) tensor-core peaks (§2).
//  [MEAS] single-node measurements: H100 8192³ bf16 GEMM ≈798 TFLOP/s, copy
//         ≈3.0 TB/s; H200 GEMM 769–798 TFLOP/s, copy ≈4.3 TB/s (§2).
//  [NCCL] nccl-tests bus bandwidths (§3): 8×A100 ring all-reduce ≈230 GB/s of
//         300; 8×H100 ring ≈365–370 of 450; HDR NIC ≈24 of 25 GB/s; NDR NIC
//         46–49 of 50 GB/s. Per-hop latencies from NCCL's tuning.cc: NVLink
//         Ring/Tree LL 0.6 µs, network Ring LL 2.7 µs.
// HBM capacity: the marketed "80 GB" / "141 GB" is stored as GiB (an A100 80GB
// reports 81920 MiB = 80 GiB); the difference is below the uncertainty of what
// the CUDA context and allocator leave usable.
#include <google/protobuf/text_format.h>

#include <map>

#include "sim/scenario/scenario.h"

namespace lacuna::scenario {

namespace {

// Efficiency = achieved / peak. Memory-bound classes only set `memory`; their
// `flops` falls back to DEFAULT (their FLOPs are negligible).
//
// [FIT] `lacuna fit-kernels` (sim/kernelfit/, docs/cost-model.md#fitted-to-
// measured-kernels) over the measured kernel tables of calib/measurements/:
//   A100:  build/lacuna fit-kernels calib/measurements/vidur-a100.kernels.csv
//   H100:  build/lacuna fit-kernels calib/measurements/vidur-h100.kernels.csv \
//              calib/measurements/lacuna-h100-gemm.kernels.csv
// vidur = microsoft/vidur 7d47513 data/profiling/compute/{a100,h100}/*/mlp.csv
// (fp16 forward kernels of 7 / 6 public models at 128–4096 tokens, TP 1–8,
// torch profiler kernel durations); lacuna-h100-gemm = our own H100 BF16 and
// FP8 GEMMs, forward, dgrad and wgrad (calib/device/fp8_gemm_bench.py).
// Fitted on the kernels measured at >= ten kernel overheads; the kernel-level
// errors, before and held out, are in docs/cost-model.md. Never fitted to a
// training run or a validation row. Test KernelFit.PresetsAreTheFitOfTheShippedTables
// re-runs the fit and checks every [FIT] value below.
//
// Which kernels were measured, per class: GEMM cuBLAS through F.linear (the
// library every framework calls); RMSNORM sarathi's (vLLM's) fused rms_norm,
// an inference kernel: Transformer Engine's may be faster, the device
// campaign measures torch's fused rms_norm (calib/device/campaign);
// LAYERNORM torch.nn.LayerNorm; SWIGLU sarathi's fused silu_and_mul; GELU
// torch.nn.GELU; RESIDUAL_ADD torch's add; EMBEDDING F.embedding (the
// gather Megatron's VocabParallelEmbedding runs).
//
// [OLD] Not measured in any table yet: the values lacuna had before the fit
// (a reduction at 0.7–0.75 of HBM bandwidth, a stream at 0.8; a plain copy
// ≈0.9 on H100 [MEAS]). The device campaign's table measures them.
constexpr const char* kUnmeasuredMemoryBound = R"pb(
    # [OLD] Unfused attention's scale-mask-softmax: a row reduction.
    efficiency { key: "SOFTMAX" value { memory: 0.75 } }
    efficiency { key: "CROSS_ENTROPY" value { memory: 0.7 } }  # [OLD]
    # [OLD] Fused multi-tensor Adam streams params, grads and two moments.
    efficiency { key: "OPTIMIZER" value { memory: 0.8 } }
    efficiency { key: "ELEMENTWISE" value { memory: 0.8 } }    # [OLD]
    efficiency { key: "DEFAULT" value { flops: 0.5 memory: 0.7 } }  # [OLD]
)pb";

// A100 [FIT], 1783 of 2232 vidur kernels at >= 40 µs.
constexpr const char* kA100MemoryBound = R"pb(
    efficiency { key: "LAYERNORM" value { memory: 0.53 } }     # [FIT] phi-2 only (12 rows, one group)
    efficiency { key: "RMSNORM" value { memory: 0.33 } }       # [FIT] 84 rows
    efficiency { key: "GELU" value { memory: 0.68 } }          # [FIT] phi-2 only
    efficiency { key: "SWIGLU" value { memory: 0.49 } }        # [FIT] 336 rows
    efficiency { key: "RESIDUAL_ADD" value { memory: 0.94 } }  # [FIT] 84 rows
    efficiency { key: "EMBEDDING" value { memory: 0.16 } }     # [FIT] 348 rows
)pb";

// Hopper [FIT] (H100 tables; H200 and Blackwell take the same fractions of
// their own HBM bandwidth: a named transfer rule, docs/cost-model.md).
constexpr const char* kHopperMemoryBound = R"pb(
    # No H100 LayerNorm measured at >= 30 µs: the A100 fraction (transfer rule).
    efficiency { key: "LAYERNORM" value { memory: 0.53 } }
    efficiency { key: "RMSNORM" value { memory: 0.33 } }       # [FIT] 60 rows
    efficiency { key: "GELU" value { memory: 0.76 } }          # [FIT] phi-2 only
    efficiency { key: "SWIGLU" value { memory: 0.59 } }        # [FIT] 240 rows
    # [FIT] at the range's end: a large add streams at 0.97 of 3.35 TB/s and
    # the 3 µs kernel overhead covers the rest.
    efficiency { key: "RESIDUAL_ADD" value { memory: 1.0 } }
    efficiency { key: "EMBEDDING" value { memory: 0.18 } }     # [FIT] 252 rows
)pb";

constexpr const char* kA100Head = R"pb(
  preset: "a100-80gb-sxm"
  gpu {
    name: "NVIDIA A100-SXM4-80GB"
    peak_bf16_tflops: 312   # [DS]
    peak_fp16_tflops: 312   # [DS]
    peak_tf32_tflops: 156   # [DS]; no FP8 on Ampere: peak_fp8_tflops unset
    peak_fp32_tflops: 19.5  # [DS] (CUDA cores)
    hbm_bandwidth_gb_per_s: 2039  # [DS] 2.04 TB/s HBM2e
    hbm_capacity_gib: 80
    num_sms: 108
    # GEMM flops: a perfectly tiled, full-wave, infinitely long-K GEMM
    # (docs/cost-model.md#per-shape-efficiency). [FIT] to 1356 cuBLAS GEMMs of
    # vidur's A100 table (1255 at >= 40 µs), with gemm_k_overhead and
    # gemm_max_split_k below: 0.86 (held out by model: mean |error| 12.8 %,
    # bias +2.3 %). Before the fit: 0.93, from the best single GEMM (MAMF
    # 271.2 TFLOP/s at 1024×10240×5120, stas00/ml-engineering).
    efficiency { key: "GEMM" value { flops: 0.86 memory: 0.8 } }
    # ATTENTION flops: FlashAttention-2 (what Megatron with Transformer Engine
    # runs on Ampere: TE's cuDNN-first rule is for sm90+) at infinite sequence
    # and head dim, with the shape_model's kv and head-dim overheads: a
    # least-squares fit of the model to FA2's published forward+backward
    # non-causal A100 curves (hdim 64 and 128, seq 512–16k, Dao-AILab/
    # flash-attention assets/flash2_a100_fwd_bwd_benchmark.png): 0.77. The
    # causal curves are predictions (docs/cost-model.md).
    efficiency { key: "ATTENTION" value { flops: 0.77 memory: 0.8 } }
    shape_model {
      # cuBLAS's Ampere bf16 tiles in public nsys profiles
      # (ampere_bf16_s16816gemm_bf16_{256x128,128x256}_ldg8_f2f_stages_64x3,
      # ..._128x128_..._stages_32x5). CTAs per SM by shared memory (167,936 B
      # per SM): (256+128)·64·2 B·3 stages = 147,456 B → 1; 128×128 with 5
      # stages of 32: (128+128)·32·2·5 = 81,920 B → 2.
      gemm_tiles { m: 256 n: 128 ctas_per_sm: 1 }
      gemm_tiles { m: 128 n: 256 ctas_per_sm: 1 }
      gemm_tiles { m: 128 n: 128 ctas_per_sm: 2 }
      gemm_ctas_per_sm: 1
      # Prologue + epilogue of a 256×128×64 tile in K (arithmetic; Ampere
      # cuBLAS kernels do not overlap the epilogue): one 64-deep k-step is
      # 256·128·64 MAC at 312e12/2/108 MAC/s per SM = 1.45 µs; a wave's
      # epilogue stores 108 × 256·128·2 B = 7.1 MB at 2039 GB/s = 3.47 µs; plus
      # one k-step of pipeline fill: 64 × (3.47/1.45 + 1) = 217. Range 74
      # (Hopper cuBLAS, measured, epilogue overlapped) – 217.
      # [FIT] 200, with the GEMM efficiency (the arithmetic above gave 217).
      gemm_k_overhead: 200
      # Split-K factors cuBLAS uses are not documented (NVIDIA's cuBLASLt
      # tuning sample tries 2–32). [FIT] over {1, 2, 4, 8, 16}: 4. (Before the
      # fit: 2, matched to NVIDIA's A100 cuBLAS curve for 256–1280³.)
      gemm_max_split_k: 4
      # FlashAttention-2's sm80 forward: kBlockM = 128 query rows per CTA for
      # head dims 64 and 128 (csrc/flash_attn/src/flash_fwd_launch_template.h).
      attention_block_q: 128
      # Least-squares fit over the same FA2 non-causal curves as ATTENTION above.
      attention_kv_overhead: 177
      attention_head_dim_overhead: 22
    }
)pb";
constexpr const char* kA100Tail = R"pb(
    # Launch + ramp of back-to-back kernels, a few µs; Ampere's is the slower.
    kernel_overhead_us: 4
  }
  gpus_per_node: 8
  nvlink { bandwidth_gb_per_s: 300 latency_us: 0.6 efficiency: 0.77 }  # [NCCL] 230/300
  nvls: false
  nic { bandwidth_gb_per_s: 25 latency_us: 2.7 efficiency: 0.96 }  # [NCCL] HDR 200 Gb/s, 24/25
  nics_per_node: 8
  topology: RAIL_OPTIMIZED
  # HGX A100 8-GPU baseboard: 6 NVSwitch gen2 join its 8 GPUs and nothing
  # beyond (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020): an
  # NVLink domain of at most the node.
  max_nvlink_domain_gpus: 8
)pb";

// Hopper compute efficiencies, shared by H100 and H200 (same SMs and clocks).
constexpr const char* kHopperComputeHead = R"pb(
    # GEMM flops: a perfectly tiled, full-wave, infinitely long-K GEMM. [FIT]
    # to 1005 H100 GEMMs, 972 fp16 forward from vidur's H100 table and 33 BF16
    # forward, dgrad and wgrad of our own (859 at >= 30 µs), with
    # gemm_k_overhead below: 0.75 (held out by
    # model: fp16 forward mean |error| 10.6 %, our BF16 dgrad 3.4 %, wgrad
    # 5.2 %). Before the fit: 0.84, from one 8192³ GEMM at ≈798 TFLOP/s [MEAS];
    # our own H100 measured 8192³ at 680 (calib/measurements/fp8_gemm_h100.csv)
    # and Triton's Gluon tutorial 661. H200: same die and clocks, same value.
    efficiency { key: "GEMM" value { flops: 0.75 memory: 0.85 } }
    # GEMM_FP8 flops: GEMMs whose math runs in FP8 (E4M3, per-tensor scales,
    # cuBLASLt via torch._scaled_mm), as a fraction of the FP8 peak. [FIT] to
    # the 33 FP8 forward, dgrad and wgrad GEMMs of our own H100 measurement
    # (calib/device/fp8_gemm_bench.py, calib/measurements/lacuna-h100-gemm.
    # kernels.csv: the GPT-3 TP4, Llama-3-70B TP4·CP2 and Mixtral expert
    # layers and 8192³; fast accumulation for fprop, split for dgrad and wgrad
    # as Transformer Engine runs them), with the GEMM shape model: 0.63.
    # Before the fit: 0.71 (0.84 × the median FP8/BF16 ratio 0.846). H200 and
    # the Blackwell presets reuse it (named assumption, docs/fp8.md#gemm-efficiency).
    efficiency { key: "GEMM_FP8" value { flops: 0.63 } }
    # ATTENTION flops: cuDNN fused attention, which Transformer Engine picks
    # over FlashAttention on sm90+ "for performance reasons" (TE
    # pytorch/attention/dot_product_attention/utils.py, get_attention_backend),
    # at infinite sequence and head dim: least-squares fit of the model to
    # cuDNN's forward+backward non-causal H100 curves (hdim 64 and 128, seq
    # 512–16k) from the FlashAttention-3 paper (Shah et al. 2024): forward
    # figure read [R]; backward figure [M] (two independent transcriptions
    # agree digit for digit; the primary figure was not opened). 0.78. At
    # hdim 128 and 16k this is 0.54 of peak; FA2 reaches 0.34, FA3 ≈0.59.
    efficiency { key: "ATTENTION" value { flops: 0.78 memory: 0.85 } }
    shape_model {
      # cuBLAS's sm90 bf16 tiles in public profiles: tilesize256x128x64 and
      # tilesize128x128x64 (the 64-wide tiles seen in small-batch serving are
      # left out: nothing sourced says how fast they run). One CTA per SM:
      # CUTLASS's sm90 builders size the pipeline to fill shared memory
      # (compute_stage_count_or_override with StageCountAutoCarveout).
      gemm_tiles { m: 256 n: 128 }
      gemm_tiles { m: 128 n: 128 }
      gemm_ctas_per_sm: 1
      # [FIT] 47, with the GEMM efficiency. (Before the fit: 74, least squares
      # of K / (K + k) over cuBLAS at M = N = 8192, K = 512…16384 from Triton's
      # Gluon tutorial 07-persistence.py.) Hopper cuBLAS is warp-specialized
      # and overlaps its epilogue, hence far below the A100's.
      gemm_k_overhead: 47
      # [FIT] over {1, 2, 4, 8, 16}: 2.
      gemm_max_split_k: 2
      # FlashAttention-3's hdim-128 forward: 128 query rows per CTA
      # (hopper/flash_fwd_launch_template.h); cuDNN's block is not published.
      attention_block_q: 128
      # Least-squares fit over the same cuDNN non-causal curves as ATTENTION.
      attention_kv_overhead: 284
      attention_head_dim_overhead: 44
    }
)pb";
constexpr const char* kHopperComputeTail = R"pb(
    # Hopper launches and ramps faster than Ampere: 3 µs.
    kernel_overhead_us: 3
)pb";

// NVLink 4 through NVSwitch gen3 with SHARP; 8 × 400 Gb/s NDR NICs.
constexpr const char* kHopperNode = R"pb(
  gpus_per_node: 8
  nvlink { bandwidth_gb_per_s: 450 latency_us: 0.6 efficiency: 0.82 }  # [NCCL] ≈370/450
  nvls: true
  nic { bandwidth_gb_per_s: 50 latency_us: 2.7 efficiency: 0.95 }  # [NCCL] NDR, 46–49 of 50
  nics_per_node: 8
  topology: RAIL_OPTIMIZED
  # HGX H100/H200 8-GPU baseboard: 4 NVSwitch gen3 join its 8 GPUs. NVIDIA
  # announced an external NVLink Switch System for up to 256 H100 (H100
  # Tensor Core GPU Architecture whitepaper, 2022), but the HGX/DGX nodes these
  # presets describe (and the measurements above) have none: at most the node.
  max_nvlink_domain_gpus: 8
)pb";

constexpr const char* kH100 = R"pb(
  preset: "h100-sxm"
  gpu {
    name: "NVIDIA H100 80GB HBM3"
    peak_bf16_tflops: 989   # [DS]
    peak_fp16_tflops: 989   # [DS]
    peak_fp8_tflops: 1979   # [DS]
    peak_tf32_tflops: 495   # [DS]
    peak_fp32_tflops: 67    # [DS] (CUDA cores)
    hbm_bandwidth_gb_per_s: 3350  # [DS] 3.35 TB/s HBM3
    hbm_capacity_gib: 80
    num_sms: 132
)pb";

constexpr const char* kH200 = R"pb(
  preset: "h200-sxm"
  gpu {
    name: "NVIDIA H200"
    peak_bf16_tflops: 989   # [DS] same die as H100
    peak_fp16_tflops: 989
    peak_fp8_tflops: 1979
    peak_tf32_tflops: 495
    peak_fp32_tflops: 67
    hbm_bandwidth_gb_per_s: 4800  # [DS] 4.8 TB/s HBM3e
    hbm_capacity_gib: 141
    num_sms: 132
)pb";

// Blackwell (docs/hardware.md). Sources:
//  [DSB]  NVIDIA GB200 NVL72 / HGX B200 specification table
//         (nvidia.com/en-us/data-center/gb200-nvl72, "Technical
//         Specifications", per-GPU rows): FP4 20 | 18, FP8/FP6 10 | 9,
//         FP16/BF16 5 | 4.5, TF32 2.5 | 2.2 PFLOPS for GB200 | HGX B200, all
//         "with sparsity" (footnote 1): the dense peaks below are half. FP32 80 |
//         75 TFLOPS; 186 GB HBM3E at 8 TB/s | 180 GB at 7.7 TB/s; NVLink 5
//         1.8 TB/s per GPU (both directions).
//  [DSU]  NVIDIA GB300 NVL72 specification (nvidia.com/en-us/data-center/
//         gb300-nvl72, rack totals over 72 GPUs): FP4 1,440 PFLOPS sparse |
//         1,080 dense → 15 PFLOPS dense per GPU; FP8/FP6 720 sparse → 5 dense;
//         FP16/BF16 360 sparse → 2.5 dense; HBM3E up to 20 TB at 576 TB/s →
//         8 TB/s per GPU; 130 TB/s NVLink; 72 ConnectX-8 800 Gb/s SuperNICs.
//         Per GPU 279 GB HBM3E and TF32 1.25 / FP32 0.08 PFLOPS dense as
//         tabulated from NVIDIA's per-GPU specs in verda.com/blog/
//         gb300-nvl72-architecture (288 GB raw: eight 12-high 36 GB stacks).
//  [RA]   NVIDIA Enterprise Reference Architecture, NVL72 AI factory
//         (docs.nvidia.com/enterprise-reference-architectures/nvl72-ai-
//         factory, "System Hardware & Components"): 18 compute trays of 4 GPUs
//         and 2 Grace CPUs, 9 NVSwitch trays "for full non-blocking P2P
//         connectivity of all 72" GPUs, 4 ConnectX-8 per GB300 tray; GB200
//         trays carry 4 ConnectX-7 400 Gb/s (MLPerf Inference v6.1 Crusoe
//         GB200-NVL72 system description: "for each 4-GPU node: 4x ...
//         ConnectX-7").
//  [NVL5] NVLink 5 switch generation: "Support for up to 576 GPUs in a single
//         NVLink domain" (docs.nvidia.com/base-command-manager/product-
//         manuals/nvidia-mission-control/nvlinkinfo).
//  [DGXB] NVIDIA DGX B200 datasheet: 8 B200 on an HGX baseboard with 2 NVLink
//         5 switch chips (an NVLink domain of the 8 GPUs of the node), 8
//         single-port ConnectX-7 VPI at up to 400 Gb/s.
//  [SMI]  Device queries: HGX B200 reports 148 SMs and 183,359 MiB
//         (pytorch/ao PR #4002 device-query output: "Number of SMs: 148";
//         nvidia-smi in NVIDIA/TensorRT-LLM #10278). GB200: 152 SMs as read
//         from a public GB200 decode-trace analysis (weak: no device query
//         found). GB300: 160 SMs (NVIDIA technical blog "Inside NVIDIA
//         Blackwell Ultra", 2025).
// HBM capacity follows the rule at the top of this file: the marketed GB
// figure is stored as GiB (HGX B200's 180 GB against 183,359 MiB = 179.06 GiB
// reported by nvidia-smi: 0.5 % apart).
//
// Named assumptions (no Blackwell measurement of the same kind was found):
//  [HOP]  Kernel efficiencies, the per-shape model and kernel_overhead_us are
//         Hopper's (kHopperCompute*): same cuBLAS/cuDNN software, tensor cores
//         of the same programming model scaled up. Blackwell's 2-SM UMMA tiles
//         and its faster attention exponent unit are not modelled.
//  [NCCLH] NVLink efficiency 0.82 and NIC efficiency 0.95 are the Hopper
//         nccl-tests fractions; latencies are NCCL's per-hop figures. Cross-
//         check: 811 GB/s all-reduce bus bandwidth measured over 2 GB200 trays
//         (8 GPUs, multi-node NVLink; lixueduan.com/posts/ai/13-gb200-mnnvl-
//         nccl-test) against 0.82 × 900 = 738 for a ring.
constexpr const char* kB200 = R"pb(
  preset: "b200"
  gpu {
    name: "NVIDIA B200"
    peak_bf16_tflops: 2250   # [DSB] 4.5 PFLOPS sparse / 2
    peak_fp16_tflops: 2250   # [DSB]
    peak_fp8_tflops: 4500    # [DSB] 9 PFLOPS sparse / 2
    peak_fp4_tflops: 9000    # [DSB] 18 PFLOPS sparse / 2
    peak_tf32_tflops: 1100   # [DSB] 2.2 PFLOPS sparse / 2
    peak_fp32_tflops: 75     # [DSB]
    hbm_bandwidth_gb_per_s: 7700  # [DSB] 7.7 TB/s
    hbm_capacity_gib: 180    # [DSB] 180 GB; [SMI] 179.06 GiB
    num_sms: 148             # [SMI]
    mx_formats: true         # Blackwell tensor cores run MXFP8 / MXFP4
)pb";

// HGX B200: 8 GPUs on NVLink 5 switches, 8 × 400 Gb/s ConnectX-7 [DGXB].
constexpr const char* kB200Node = R"pb(
  gpus_per_node: 8
  nvlink { bandwidth_gb_per_s: 900 latency_us: 0.6 efficiency: 0.82 }  # [DSB] 1.8 TB/s both ways; [NCCLH]
  nvls: true
  nic { bandwidth_gb_per_s: 50 latency_us: 2.7 efficiency: 0.95 }  # [DGXB] 400 Gb/s; [NCCLH]
  nics_per_node: 8
  topology: RAIL_OPTIMIZED
  max_nvlink_domain_gpus: 8  # [DGXB] no NVLink beyond the baseboard
)pb";

constexpr const char* kGB200 = R"pb(
  preset: "gb200-nvl72"
  gpu {
    name: "NVIDIA GB200"
    peak_bf16_tflops: 2500   # [DSB] 5 PFLOPS sparse / 2
    peak_fp16_tflops: 2500   # [DSB]
    peak_fp8_tflops: 5000    # [DSB] 10 PFLOPS sparse / 2
    peak_fp4_tflops: 10000   # [DSB] 20 PFLOPS sparse / 2
    peak_tf32_tflops: 1250   # [DSB] 2.5 PFLOPS sparse / 2
    peak_fp32_tflops: 80     # [DSB]
    hbm_bandwidth_gb_per_s: 8000  # [DSB] 8 TB/s
    hbm_capacity_gib: 186    # [DSB] 186 GB
    num_sms: 152             # [SMI] (weak)
    mx_formats: true
)pb";

// GB200 NVL72 rack: 18 trays (nodes) of 4 GPUs, one 72-GPU NVLink domain
// through 9 NVLink Switch trays [RA]; per tray 4 × ConnectX-7 400 Gb/s.
constexpr const char* kGB200Node = R"pb(
  gpus_per_node: 4            # [RA] compute tray
  nvlink_domain_gpus: 72      # [RA] 18 trays
  max_nvlink_domain_gpus: 576 # [NVL5]
  nvlink { bandwidth_gb_per_s: 900 latency_us: 0.6 efficiency: 0.82 }  # [DSB]; [NCCLH]
  nvls: true                  # NVLink SHARP in the NVLink Switch trays
  nic { bandwidth_gb_per_s: 50 latency_us: 2.7 efficiency: 0.95 }  # [RA] CX-7 400 Gb/s; [NCCLH]
  nics_per_node: 4
  topology: RAIL_OPTIMIZED
)pb";

constexpr const char* kGB300 = R"pb(
  preset: "gb300-nvl72"
  gpu {
    name: "NVIDIA GB300"
    peak_bf16_tflops: 2500   # [DSU] 360 PFLOPS sparse / 2 / 72
    peak_fp16_tflops: 2500   # [DSU]
    peak_fp8_tflops: 5000    # [DSU] 720 PFLOPS sparse / 2 / 72
    peak_fp4_tflops: 15000   # [DSU] 1,080 PFLOPS dense / 72
    peak_tf32_tflops: 1250   # [DSU]
    peak_fp32_tflops: 80     # [DSU]
    hbm_bandwidth_gb_per_s: 8000  # [DSU] 576 TB/s / 72
    hbm_capacity_gib: 279    # [DSU] 279 GB
    num_sms: 160             # [SMI]
    mx_formats: true
)pb";

// GB300 NVL72 rack: as GB200's, with 4 × ConnectX-8 800 Gb/s per tray [RA].
constexpr const char* kGB300Node = R"pb(
  gpus_per_node: 4
  nvlink_domain_gpus: 72
  max_nvlink_domain_gpus: 576 # [NVL5]
  nvlink { bandwidth_gb_per_s: 900 latency_us: 0.6 efficiency: 0.82 }  # [DSU] 130 TB/s / 72 / 2; [NCCLH]
  nvls: true
  nic { bandwidth_gb_per_s: 100 latency_us: 2.7 efficiency: 0.95 }  # [DSU] CX-8 800 Gb/s; [NCCLH]
  nics_per_node: 4
  topology: RAIL_OPTIMIZED
)pb";

// The host (CPU) side and the memory overheads, the same for every GPU kind
// (the sources measure the software stack, not the GPU; docs/cost-model.md
// #host-overheads, docs/memory-model.md#overheads).
//  kernel_launch_us 7: PyTorch eager dispatch of one op, 5–7 µs
//    (pytorch/pytorch #41383; meta-pytorch/autoparallel PR #146 costs every
//    op at least 7 µs on H100); a torch nn.Linear forward took 13.5 µs of CPU
//    on an H100 DGX (NVIDIA/TransformerEngine #2053). 7 µs: most of a layer's
//    kernels are plain ops, not module calls.
//  collective_launch_us 8: the same dispatch plus NCCL's enqueue, ≈1 µs
//    between group start and end in NCCL's profiler trace (NVIDIA/nccl #1765).
//  microbatch_overhead_us, iteration_overhead_us 0: no published figure for
//    Megatron-LM's per-pass Python work or data loading; the per-op costs
//    above and the host syncs of the execution switches are what is modelled.
//  cuda_context_gib 0.5: 0.47 GiB after the first CUDA op with lazy module
//    loading on A100 (stas00/ml-engineering, performance README; PyTorch
//    maintainers: 300–400 MB, pytorch #107667, #109888).
//  nccl_communicator_mib 656: 688 MB per communicator of more than 2 GPUs,
//    544 MB for 2 (NVIDIA/nccl #964, 4 × A100); up to 1.6 GB in #864.
//  allocator_fragmentation 0.15: GMLake (ASPLOS'24, arXiv 2401.08156)
//    removes 15 % fragmentation on average (up to 33 %) from the PyTorch
//    caching allocator over 8 LLM workloads on A100-80GB; range 0.05–0.33.
constexpr const char* kHostAndMemory = R"pb(
  host {
    kernel_launch_us: 7
    collective_launch_us: 8
    microbatch_overhead_us: 0
    iteration_overhead_us: 0
  }
  memory_overheads { cuda_context_gib: 0.5 nccl_communicator_mib: 656 allocator_fragmentation: 0.15 }
)pb";

// Hopper presets: the GPU block is left open for the shared efficiencies.
std::string hopper(const char* gpu) {
  return std::string(gpu) + kHopperComputeHead + kHopperMemoryBound + kUnmeasuredMemoryBound + kHopperComputeTail + "}" +
         kHopperNode +
         kHostAndMemory;
}

// Blackwell presets: the Hopper compute block [HOP] in the GPU's own block.
std::string blackwell(const char* gpu, const char* node) {
  return std::string(gpu) + kHopperComputeHead + kHopperMemoryBound + kUnmeasuredMemoryBound + kHopperComputeTail +
         "}" + node + kHostAndMemory;
}

std::string a100() {
  return std::string(kA100Head) + kA100MemoryBound + kUnmeasuredMemoryBound + kA100Tail + kHostAndMemory;
}

Cluster parse_preset(const std::string& text) {
  Cluster c;
  // Embedded and covered by tests: a failure here is a programming error.
  if (!google::protobuf::TextFormat::ParseFromString(text, &c)) throw std::logic_error("bad built-in preset");
  return c;
}

const std::map<std::string, Cluster>& presets() {
  static const std::map<std::string, Cluster> table = {
      {"a100-80gb-sxm", parse_preset(a100())},
      {"h100-sxm", parse_preset(hopper(kH100))},
      {"h200-sxm", parse_preset(hopper(kH200))},
      {"b200", parse_preset(blackwell(kB200, kB200Node))},
      {"gb200-nvl72", parse_preset(blackwell(kGB200, kGB200Node))},
      {"gb300-nvl72", parse_preset(blackwell(kGB300, kGB300Node))},
  };
  return table;
}

// Variability defaults (docs/variability.md), the same for every hardware
// preset: the sources are fleet and software measurements, none specific to
// one GPU generation. Every figure is from docs/variability-sources.md (§ in
// brackets) with its tag there; nothing is fitted to an iteration time.
constexpr const char* kVariabilityDefaults = R"pb(
  seed: 0
  # [§2] Rank-to-rank spread inside one healthy production job: per-rank
  # median of identical microbatch work, CV 0.13–0.54 % (ByteDance What-if
  # traces ST and AR, derived [I]); Megatron-LM's StragglerDetector example log
  # shows 0.44 % between its slowest and fastest rank (README_STRAGGLER.md
  # [R]). 0.5 % is the recommended default. The HPC single-GPU fleet study
  # (Sinha et al., 8–32 % average) is a stress case, not a default.
  gpu_speed_cv: 0.005
  # [§1] No per-kernel CV is published for GEMM, attention or memory-bound
  # kernels on A100/H100/H200: kernel noise is off (no map entries). The
  # per-pass scope is what the only production figures (whole microbatches)
  # measure.
  kernel_noise_scope: NOISE_PER_PASS
  # [§3] Straggler hosts off (host_fraction unset = 0). When a scenario draws
  # them, a straggler runs its compute 1.10× longer: MegaScale §5.1 ("about
  # 0.5 % of machines" substantially slower) joined with §6.3 (specific hosts
  # ≈10 % slower in the forward pass) [I].
  stragglers { slowdown: 1.10 }
  # [§4] Link flaps off (no citable per-port rate: HPN's 5K–60K flaps per day
  # lacks a denominator). When a scenario gives a rate, a flap takes the port
  # down ("several seconds", MegaScale §5: 3 s, a labelled assumption).
  link_flaps { duration_s: 3 bandwidth_factor: 0 }
  # [§5] Host pauses off (published MFU baselines use or do not mention
  # synchronised GC). When a scenario gives an interval (≈265 steps, marin's
  # CPython-threshold measurement), a pause lasts 300 ms: the mid-point of
  # What-if §5.4's "100s of milliseconds" [I]; marin's 1.45 s is the stress case.
  host_pauses { duration_ms: 300 }
  # [§6] No separate launch skew (0): arrival skew emerges from the sources
  # above. InferenceX's ≈26 µs host launch jitter is citable only for small
  # collectives.
  collective_launch_skew_us: 0
)pb";

const Variability& variability_defaults() {
  static const Variability v = [] {
    Variability out;
    if (!google::protobuf::TextFormat::ParseFromString(kVariabilityDefaults, &out)) {
      throw std::logic_error("bad built-in variability defaults");
    }
    return out;
  }();
  return v;
}

}  // namespace

Variability variability_preset(const std::string& hardware_preset_name) {
  if (hardware_preset_name.empty()) return Variability{};
  hardware_preset(hardware_preset_name);  // known name, else the usual error
  return variability_defaults();
}

std::vector<std::string> hardware_preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, cluster] : presets()) names.push_back(name);
  return names;
}

GpuSpec best_case_kernel_model(const std::string& preset) {
  GpuSpec g = hardware_preset(preset).gpu();
  auto& eff = *g.mutable_efficiency();
  const bool ampere = preset == "a100-80gb-sxm";
  // The values of the presets before the fit (git 33771ff, presets.cpp):
  // A100 GEMM 0.93 (MAMF's best GEMM), K overhead 217 (arithmetic), split-K
  // 2; Hopper and Blackwell GEMM 0.84 (one 8192³ GEMM), K overhead 74,
  // split-K 2, GEMM_FP8 0.71; every GPU's memory-bound classes at assumed
  // fractions of HBM bandwidth.
  eff["GEMM"].set_flops(ampere ? 0.93 : 0.84);
  if (!ampere) eff["GEMM_FP8"].set_flops(0.71);
  g.mutable_shape_model()->set_gemm_k_overhead(ampere ? 217 : 74);
  g.mutable_shape_model()->set_gemm_max_split_k(2);
  for (const auto& [key, v] : std::map<std::string, double>{{"LAYERNORM", 0.75},
                                                              {"RMSNORM", 0.75},
                                                              {"GELU", 0.8},
                                                              {"SWIGLU", 0.8},
                                                              {"RESIDUAL_ADD", 0.85},
                                                              {"EMBEDDING", 0.6}})
    eff[key].set_memory(v);
  return g;
}

void apply_kernel_model(GpuSpec& gpu, const GpuSpec& model) {
  for (const auto& [key, e] : model.efficiency()) (*gpu.mutable_efficiency())[key] = e;
  const KernelShapeModel& m = model.shape_model();
  if (m.has_gemm_k_overhead()) gpu.mutable_shape_model()->set_gemm_k_overhead(m.gemm_k_overhead());
  if (m.has_gemm_max_split_k()) gpu.mutable_shape_model()->set_gemm_max_split_k(m.gemm_max_split_k());
}

const Cluster& hardware_preset(const std::string& name) {
  const auto& table = presets();
  if (auto it = table.find(name); it != table.end()) return it->second;
  std::string valid;
  for (const auto& n : hardware_preset_names()) valid += (valid.empty() ? "" : ", ") + ("\"" + n + "\"");
  throw Error(SourceLocation{{}, 0, 0, "cluster.preset"}, "unknown hardware preset \"" + name + "\"",
              "use one of " + valid + ", or leave preset empty and give every cluster field");
}

double peak_flops_per_s(const GpuSpec& gpu, Precision precision) {
  auto need = [&](bool has, double tflops, const char* field) {
    if (!has)
      throw Error(SourceLocation{{}, 0, 0, std::string("cluster.gpu.") + field},
                  std::string("the GPU has no ") + field + " (precision " + Precision_Name(precision) +
                      " not supported)",
                  std::string("set cluster.gpu.") + field + " or choose another precision");
    return tflops * 1e12;
  };
  switch (precision) {
    case BF16: return need(gpu.has_peak_bf16_tflops(), gpu.peak_bf16_tflops(), "peak_bf16_tflops");
    case FP16: return need(gpu.has_peak_fp16_tflops(), gpu.peak_fp16_tflops(), "peak_fp16_tflops");
    case FP8: return need(gpu.has_peak_fp8_tflops(), gpu.peak_fp8_tflops(), "peak_fp8_tflops");
    case FP32: return need(gpu.has_peak_fp32_tflops(), gpu.peak_fp32_tflops(), "peak_fp32_tflops");
    default:
      throw Error(SourceLocation{{}, 0, 0, "training.precision"},
                  "precision " + std::to_string(static_cast<int>(precision)) + " has no peak FLOP/s",
                  "use BF16, FP16, FP8 or FP32");
  }
}

}  // namespace lacuna::scenario
