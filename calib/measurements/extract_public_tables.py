#!/usr/bin/env python3
"""Turn public measured per-kernel tables into lacuna's measured kernel tables.

Writes, next to this script (format: README.md in this directory):

  vidur-a100.kernels.csv, vidur-h100.kernels.csv
      from microsoft/vidur data/profiling/compute/{a100,h100}/<org>/<model>/mlp.csv
      (read from a bare git mirror of microsoft/vidur, at its HEAD);
  lacuna-h100-gemm.kernels.csv
      from fp8_gemm_h100.csv (calib/device/fp8_gemm_bench.py, our own run).

Standard library only. The output is a pure function of the inputs: re-running
gives byte-identical files.

Usage: python3 calib/measurements/extract_public_tables.py /path/to/vidur.git
"""
import argparse
import csv
import io
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = "gpu,class,pass,dtype,shape,time_us,group,label"

# ---------------------------------------------------------------------------
# microsoft/vidur
# ---------------------------------------------------------------------------

VIDUR_GPUS = (("a100", "a100-80gb-sxm"), ("h100", "h100-sxm"))
# Training-like token counts: the forward GEMM m of a micro-batch.
VIDUR_TOKENS = (128, 256, 384, 512, 768, 1024, 1536, 2048, 2560, 3072, 3584, 4096)
# From vidur/config/model_config.py: (norm, post_attn_norm). Every model not
# listed is an error, so a new model in the mirror is looked at before use.
VIDUR_MODELS = {
    "Qwen/Qwen-72B": ("rms_norm", True),
    "codellama/CodeLlama-34b-Instruct-hf": ("rms_norm", True),
    "internlm/internlm-20b": ("rms_norm", True),
    "meta-llama/Llama-2-70b-hf": ("rms_norm", True),
    "meta-llama/Llama-2-7b-hf": ("rms_norm", True),
    "meta-llama/Meta-Llama-3-70B": ("rms_norm", True),
    "meta-llama/Meta-Llama-3-8B": ("rms_norm", True),
    "microsoft/phi-2": ("layer_norm", False),
}
CLASS_ORDER = ("EMBEDDING", "RMSNORM", "LAYERNORM", "GEMM", "SWIGLU", "GELU", "RESIDUAL_ADD")


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout


def vidur_rows(model, text, gpu, norm, post_attn_norm, stats):
    """Lacuna rows (sort key, row) of one mlp.csv; stats counts what was skipped."""
    name = model.split("/")[1]
    out = []
    for r in csv.DictReader(io.StringIO(text)):
        tokens = int(r["num_tokens"])
        if tokens not in VIDUR_TOKENS:
            continue
        nh, nkv, h = int(r["n_head"]), int(r["n_kv_head"]), int(r["n_embd"])
        ffn, vocab, tp = int(r["n_expanded_embd"]), int(r["vocab_size"]), int(r["num_tensor_parallel_workers"])
        gated = {"True": True, "False": False}[r["use_gated_mlp"]]
        stats["source_rows"] += 1
        if h % nh or ((nh + 2 * nkv) * (h // nh)) % tp or (nh * (h // nh)) % tp or ffn % tp:
            stats["inexact_rows"] += 1
            continue
        hd = h // nh
        lab = f"{name} tp{tp}"
        ops = [
            ("attn_pre_proj", "GEMM", (tokens, (nh + 2 * nkv) * hd // tp, h), "qkv"),
            ("attn_post_proj", "GEMM", (tokens, h, nh * hd // tp), "proj"),
            ("mlp_up_proj", "GEMM", (tokens, (2 if gated else 1) * ffn // tp, h), "fc1"),
            ("mlp_down_proj", "GEMM", (tokens, h, ffn // tp), "fc2"),
        ]
        ncls = "RMSNORM" if norm == "rms_norm" else "LAYERNORM"
        ops.append(("input_layernorm", ncls, (tokens, h), "input_layernorm"))
        if post_attn_norm:
            ops.append(("post_attention_layernorm", ncls, (tokens, h), "post_attention_layernorm"))
        if gated:
            ops.append(("mlp_act", "SWIGLU", (tokens, ffn // tp), "silu_and_mul"))
        else:
            ops.append(("mlp_act", "GELU", (tokens * ffn // tp,), "gelu"))
        if post_attn_norm:
            # One kernel: residual + mlp_out. Without post_attn_norm (phi-2) the
            # timed add is attn + mlp + residual, two kernels: not one kernel, skipped.
            ops.append(("add", "RESIDUAL_ADD", (tokens * h,), "residual_add"))
        else:
            stats["two_kernel_add_skipped"] += 1
        if vocab % tp == 0:
            ops.append(("emb", "EMBEDDING", (tokens, h, vocab // tp), "embedding"))
        else:
            stats["emb_inexact_skipped"] += 1
        for op, cls, shape, what in ops:
            med = r.get(f"time_stats.{op}.median", "")
            if med == "" or float(med) <= 0:
                stats["no_time_skipped"] += 1
                continue
            us = float(med) * 1000.0
            row = (gpu, cls, "fwd", "fp16", " ".join(str(x) for x in shape), f"{us:.3f}", name,
                   f"{lab} {what}")
            out.append(((CLASS_ORDER.index(cls), tp, tokens, op), row))
    return out


def write(path, comments, rows):
    lines = ["# " + c if c else "#" for c in comments] + [HEADER] + [",".join(r) for r in rows]
    with open(path, "w", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


def dedup(keyed):
    """Keep the first of rows equal in (gpu, class, pass, dtype, shape, group)."""
    seen, out = set(), []
    for key, row in keyed:
        k = row[:5] + (row[6],)
        if k in seen:
            continue
        seen.add(k)
        out.append((key, row))
    return out


def extract_vidur(repo):
    commit = git(repo, "rev-parse", "HEAD").strip()
    files = git(repo, "ls-tree", "-r", "--name-only", "HEAD", "data/profiling/compute").split("\n")
    written = []
    for dev, gpu in VIDUR_GPUS:
        pat = re.compile(rf"^data/profiling/compute/{dev}/([^/]+/[^/]+)/mlp\.csv$")
        paths = sorted(p for p in files if pat.match(p))
        stats = {"source_rows": 0, "inexact_rows": 0, "two_kernel_add_skipped": 0,
                 "emb_inexact_skipped": 0, "no_time_skipped": 0}
        groups = []
        for p in paths:
            model = pat.match(p).group(1)
            if model not in VIDUR_MODELS:
                sys.exit(f"{p}: model {model} not in VIDUR_MODELS (check vidur/config/model_config.py)")
            norm, post = VIDUR_MODELS[model]
            text = git(repo, "show", f"HEAD:{p}")
            has_post = "time_stats.post_attention_layernorm.median" in text.split("\n", 1)[0]
            if has_post != post:
                sys.exit(f"{p}: post_attention_layernorm column disagrees with VIDUR_MODELS")
            keyed = dedup(vidur_rows(model, text, gpu, norm, post, stats))
            groups.append(sorted(keyed))
        rows = [row for g in groups for _, row in g]
        counts = {}
        for row in rows:
            counts[row[1]] = counts.get(row[1], 0) + 1
        comments = [
            f"source: github.com/microsoft/vidur commit {commit}",
            f"paths: data/profiling/compute/{dev}/<org>/<model>/mlp.csv for "
            + " ".join(pat.match(p).group(1) for p in paths),
            f"device: vidur's '{dev}' compute profile; docs/profiling.md says one '{dev}' folder serves both "
            + ("its A100 80GB PCIe (Azure NC96ads_A100_v4) and A100 DGX 80GB nodes"
               if dev == "a100" else "its H100 NVL (pairwise NVLink) and H100 DGX nodes")
            + f" and does not say which GPU measured it; mapped to lacuna preset {gpu}",
            "dtype: fp16 (vidur/profiling/mlp/mlp_wrapper.py: model.to(dtype=torch.float16); "
            "vidur/profiling/common/model_config.py dtype = torch.float16)",
            "timing: vidur's default --profile_method record_function (vidur/profiling/mlp/main.py): "
            "torch.profiler trace of one forward that repeats the block 20 times",
            "(vidur/profiling/mlp/mlp_impl.py GPTModel num_repeat_steps = ACTIVE_STEPS = 20 in mlp_wrapper.py; "
            "embedding 21 times - the published emb means are n/21 so this method was used);",
            "per op the sum of the GPU durations of the kernels launched inside its record_function "
            "(vidur/profiling/utils/record_function_tracer.py; CudaTimer in vidur/profiling/common/cuda_timer.py);",
            "time_us = median over those repeats (time_stats.<op>.median ms x 1000); kineto durations have 1 us resolution",
            "kernels: qkv/proj/fc1/fc2 = F.linear (sarathi ColumnParallelLinear/RowParallelLinear; forward only; "
            "x[tokens,k] times W[n,k]^T; bias inside the timed F.linear for phi-2 qkv and fc1 and Qwen qkv); "
            "RMSNORM = sarathi layernorm_ops.rms_norm; LAYERNORM = torch.nn.LayerNorm;",
            "SWIGLU = sarathi activation_ops.silu_and_mul; GELU = torch.nn.GELU (erf); RESIDUAL_ADD = residual + mlp_out; "
            "EMBEDDING = F.embedding over the vocab_size/tp partition (masking outside the timer)",
            "inference-style forward kernels of one transformer block with TP sharding simulated on one GPU "
            "(tp = num_tensor_parallel_workers shards the weights; no communication is timed)",
            "caveat: inputs of the memory-bound kernels are the previous kernel's output and can be L2-resident "
            "at small sizes (some RESIDUAL_ADD rows exceed the DRAM bandwidth); no cache flush between kernels",
            "not converted: attn_rope (lacuna has no RoPE kernel class); phi-2's add "
            "(attn + mlp + residual: two kernels under one timer); attention.csv files (absent from the mirror)",
            f"kept: num_tokens in {{{' '.join(str(t) for t in VIDUR_TOKENS)}}} (training-like sizes) of "
            f"{stats['source_rows']} such source rows; skipped for inexact division: {stats['inexact_rows']} rows "
            f"and {stats['emb_inexact_skipped']} embeddings; skipped for no time: {stats['no_time_skipped']}",
            "duplicates of (gpu class pass dtype shape group) keep the first in file order "
            "(norm and add rows do not depend on tp: the tp1 measurement is kept)",
            "rows: " + " ".join(f"{c}={counts[c]}" for c in CLASS_ORDER if c in counts) + f" total={len(rows)}",
            "generated by calib/measurements/extract_public_tables.py",
        ]
        out = os.path.join(HERE, f"vidur-{dev}.kernels.csv")
        write(out, comments, rows)
        written.append((out, len(rows)))
    return written


# ---------------------------------------------------------------------------
# calib/measurements/fp8_gemm_h100.csv (calib/device/fp8_gemm_bench.py)
# ---------------------------------------------------------------------------

def extract_lacuna_gemm():
    src = os.path.join(HERE, "fp8_gemm_h100.csv")
    with open(src) as f:
        lines = f.read().split("\n")
    device = re.sub(r"^#\s*device:\s*", "", lines[0]).strip()
    body = []
    for ln in lines[1:]:
        if ln.startswith("kernel,"):  # the cast/amax section that follows the GEMMs
            break
        if ln:
            body.append(ln)
    rows = []
    passes = {"fprop": "fwd", "dgrad": "dgrad", "wgrad": "wgrad"}
    for dt in ("bf16", "fp8"):
        for r in csv.DictReader(io.StringIO("\n".join(body))):
            group = re.sub(r"-fc\d+$", "", r["shape"].split()[0])
            # FP8 as Transformer Engine runs it: fast accumulation for fprop,
            # split (2x) for dgrad and wgrad (TE module/base.py _2X_ACC_*).
            col = "bf16_ms" if dt == "bf16" else ("fp8_fast_ms" if r["pass"] == "fprop" else "fp8_ms")
            rows.append(("h100-sxm", "GEMM", passes[r["pass"]], dt, f"{r['m']} {r['n']} {r['k']}",
                         f"{float(r[col]) * 1000.0:.3f}", group, r["shape"]))
    comments = [
        "source: calib/device/fp8_gemm_bench.py run on one GPU; its output is calib/measurements/fp8_gemm_h100.csv",
        f"device: {device}",
        "timing: CUDA events around each call; median of 50 timed calls after 10 warm-ups (timed() in the script); "
        "inputs rotated over buffers > 3x L2; random normal values",
        "bf16: torch.matmul(A[m,k], B[n,k].t()) in bfloat16 (cuBLAS; TN layout for every pass)",
        "fp8: torch._scaled_mm(A8[m,k], B8[n,k].t(), per-tensor scales = 1, out_dtype=bfloat16), E4M3 both operands, "
        "accumulation as Transformer Engine runs it: fast for fwd (the fp8_fast_ms column), split (2x) for dgrad and "
        "wgrad (the fp8_ms column; TE module/base.py _2X_ACC_FPROP/DGRAD/WGRAD)",
        "shape m n k as in the source: fwd (tokens out in), dgrad (tokens in out), wgrad (in out tokens); "
        "all three timed with the same TN operand layout, not the NN/NT layout of a bf16 framework backward",
        "group = the layer's model (gpt3-175b-tp4, llama3-70b-tp4-cp2, mixtral-expert, square); label = the source's shape column",
        "not converted: the cast/transpose/amax bandwidth rows at the end of the source",
        "generated by calib/measurements/extract_public_tables.py",
    ]
    out = os.path.join(HERE, "lacuna-h100-gemm.kernels.csv")
    write(out, comments, rows)
    return [(out, len(rows))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("vidur", help="path of a (bare) git clone of github.com/microsoft/vidur")
    args = ap.parse_args()
    written = extract_vidur(args.vidur) + extract_lacuna_gemm()
    for path, n in written:
        print(f"{os.path.relpath(path)}: {n} rows")


if __name__ == "__main__":
    main()
