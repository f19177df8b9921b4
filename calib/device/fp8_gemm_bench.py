#!/usr/bin/env python3
"""BF16 vs FP8 GEMM throughput and FP8 cast bandwidth on the local GPU.

The measurement behind the FP8 GEMM efficiency of docs/fp8.md#measured:
cuBLASLt through PyTorch (torch.matmul for BF16, torch._scaled_mm with
per-tensor scales for FP8 E4M3, the kernel Transformer Engine's per-tensor
recipes call), on the forward, dgrad and wgrad shapes of the linear layers of
two validation scenarios. Median of 50 timed runs after 10 warm-ups, CUDA
events, inputs rotated over buffers larger than L2, random non-zero values.

Usage: python3 calib/device/fp8_gemm_bench.py > out.csv
"""
import statistics
import sys

import torch

PEAK = {"bf16": 989e12, "fp8": 1979e12}  # H100 SXM dense (preset h100-sxm)


def layer_shapes():
    # (name, tokens, in, out): GEMM of tokens x in times in x out.
    gpt3 = [("gpt3-175b-tp4 qkv", 2048, 12288, 3 * 12288 // 4), ("gpt3-175b-tp4 proj", 2048, 12288 // 4, 12288),
            ("gpt3-175b-tp4 fc1", 2048, 12288, 4 * 12288 // 4), ("gpt3-175b-tp4 fc2", 2048, 4 * 12288 // 4, 12288)]
    llama = [("llama3-70b-tp4-cp2 qkv", 4096, 8192, (8192 + 2 * 1024) // 4),
             ("llama3-70b-tp4-cp2 proj", 4096, 8192 // 4, 8192),
             ("llama3-70b-tp4-cp2 fc1", 4096, 8192, 2 * 28672 // 4),
             ("llama3-70b-tp4-cp2 fc2", 4096, 28672 // 4, 8192)]
    mixtral = [("mixtral-expert-fc1 (8192 tok)", 8192, 4096, 2 * 14336), ("mixtral-expert-fc2 (8192 tok)", 8192, 14336, 4096)]
    return gpt3 + llama + mixtral + [("square 8192", 8192, 8192, 8192)]


def timed(fn, reps=50, warm=10):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(times)


def gemm_pair(m, n, k):
    """Median seconds of C[m,n] = A[m,k] B[k,n] in BF16 and in FP8 (TN)."""
    nbuf = max(2, int(3 * 50e6 // (2 * (m * k + n * k))) + 1)  # > 3x L2 in total
    a16 = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) for _ in range(nbuf)]
    b16 = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(nbuf)]
    a8 = [x.to(torch.float8_e4m3fn) for x in a16]
    b8 = [x.to(torch.float8_e4m3fn) for x in b16]
    one = torch.ones((), device="cuda", dtype=torch.float32)
    i = [0]

    def bf16():
        j = i[0] = (i[0] + 1) % nbuf
        torch.matmul(a16[j], b16[j].t())

    def fp8():
        j = i[0] = (i[0] + 1) % nbuf
        torch._scaled_mm(a8[j], b8[j].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    def fp8_fast():
        j = i[0] = (i[0] + 1) % nbuf
        torch._scaled_mm(a8[j], b8[j].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)

    # Correctness of the FP8 path against BF16 on the same (FP8-representable) inputs.
    ref = torch.matmul(a8[0].to(torch.float64), b8[0].to(torch.float64).t())
    got = torch._scaled_mm(a8[0], b8[0].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16).to(torch.float64)
    rel = (torch.linalg.norm(got - ref) / torch.linalg.norm(ref)).item()
    t16, t8, t8f = timed(bf16), timed(fp8), timed(fp8_fast)
    del a16, b16, a8, b8
    torch.cuda.empty_cache()
    return t16, t8, t8f, rel


def cast_bandwidth(tokens, hidden):
    x = [torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    i = [0]

    def cast():
        j = i[0] = (i[0] + 1) % 4
        x[j].to(torch.float8_e4m3fn)

    def cast_t():
        j = i[0] = (i[0] + 1) % 4
        x[j].t().contiguous().to(torch.float8_e4m3fn)

    def amax():
        j = i[0] = (i[0] + 1) % 4
        torch.amax(x[j].abs())

    n = tokens * hidden
    return [("cast bf16->fp8", timed(cast), 3 * n), ("transpose+cast (two kernels)", timed(cast_t), 7 * n),
            ("amax (abs + max, two kernels)", timed(amax), 6 * n)]


def main():
    torch.manual_seed(0)
    dev = torch.cuda.get_device_name()
    print(f"# device: {dev}; torch {torch.__version__}; cuda {torch.version.cuda}", flush=True)
    # fp8: split (2x) accumulation, what Transformer Engine uses for dgrad and
    # wgrad; fp8_fast: fast accumulation, what it uses for fprop
    # (TE module/base.py _2X_ACC_FPROP = False, _2X_ACC_DGRAD/WGRAD = True).
    print("shape,pass,m,n,k,bf16_ms,bf16_tflops,bf16_eff,fp8_ms,fp8_tflops,fp8_eff,fp8_speedup,fp8_rel_err,"
          "fp8_fast_ms,fp8_fast_tflops,fp8_fast_eff")
    for name, tok, din, dout in layer_shapes():
        for pas, (m, n, k) in (("fprop", (tok, dout, din)), ("dgrad", (tok, din, dout)), ("wgrad", (din, dout, tok))):
            t16, t8, t8f, rel = gemm_pair(m, n, k)
            f = 2.0 * m * n * k
            print(f"{name},{pas},{m},{n},{k},{t16*1e3:.4f},{f/t16/1e12:.1f},{f/t16/PEAK['bf16']:.3f},"
                  f"{t8*1e3:.4f},{f/t8/1e12:.1f},{f/t8/PEAK['fp8']:.3f},{t16/t8:.3f},{rel:.2e},"
                  f"{t8f*1e3:.4f},{f/t8f/1e12:.1f},{f/t8f/PEAK['fp8']:.3f}", flush=True)
    print("kernel,tokens,hidden,ms,GB_per_s")
    for tok, h in ((2048, 12288), (8192, 8192)):
        for label, t, nbytes in cast_bandwidth(tok, h):
            print(f"{label},{tok},{h},{t*1e3:.4f},{nbytes/t/1e9:.0f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
