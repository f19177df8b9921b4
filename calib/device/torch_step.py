#!/usr/bin/env python3
"""One rank's training step of a transformer stage, in plain PyTorch, profiled.

Builds a stage of --layers transformer layers at a scenario's per-rank shapes
on one GPU (TP = 1), as Megatron-LM's layer runs them: pre-norm, QKV linear,
optional RoPE, SDPA (cuDNN backend, else flash, else memory-efficient), output
projection, residual add, norm, FC1, activation (SwiGLU on the two halves of
FC1's output, or tanh GeLU), FC2, residual add. With --vocab > 0 the stage
also has the word embedding in front and the final norm, logits linear and
cross entropy behind (a first-and-last stage). Parameters are bf16 (or fp16)
with fp32 master weights in the optimizer: after the micro-batches the bf16
gradients are copied into fp32, fused Adam (torch.optim.Adam(fused=True))
steps the fp32 masters, and the bf16 weights are copied back -- the kernels
lacuna's optimizer step models (sim/model/kernels.h) in plain-torch form.

It runs --warmup-steps steps, then one step of --micro-batches
forward+backward micro-batches and the optimizer step under torch.profiler
(CUDA activity), and writes JSON:

  kernels        [{"name", "stream", "start_ns", "dur_ns", "class"}], start_ns
                 relative to the step's first kernel; class a lacuna OpClass
                 guessed from the kernel name (kernel_class below)
  class_totals   {class: {"count", "dur_ns"}}
  step_ns        the profiled step's GPU span (first kernel start to last end)
  step_wall_ns   median wall time of unprofiled steps (synchronised)
  host_gap_ns_per_op  the host's time per launched kernel, measured on an
                 unprofiled step with the GPU kept busy: before each
                 micro-batch's forward+backward (and before the optimizer
                 step) a torch.cuda._sleep long enough to cover the host's
                 launches is queued, so the host never waits for the GPU;
                 the wall time (perf_counter) of the Python calls that launch
                 the work -- forward, loss.backward() (whose kernels the
                 autograd engine's thread launches while the caller blocks),
                 optimizer step -- is divided by the number of kernels the
                 profiled step launched for the same work. Reported overall
                 and per phase (forward+backward, optimizer), with the
                 process CPU time per kernel alongside.
  config, device, versions

Usage:
  python3 calib/device/torch_step.py --hidden 4096 --ffn 14336 --heads 32 --kv-heads 8 \\
      --layers 2 --seq 4096 --micro-batch 1 --micro-batches 4 --swiglu --rmsnorm -o step.json
torch is imported only after the arguments are parsed (--help works without it).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Profile one training step of a transformer stage (plain PyTorch, "
                                             "TP=1) and write its kernel spans and host overhead as JSON.")
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--ffn", type=int, default=0, help="FFN width (default 4 x hidden)")
    ap.add_argument("--heads", type=int, default=0, help="attention heads (default hidden / 128)")
    ap.add_argument("--kv-heads", type=int, default=0, help="key/value heads (default = heads)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=0, help="0: no embedding / logits / loss")
    act = ap.add_mutually_exclusive_group()
    act.add_argument("--swiglu", dest="act", action="store_const", const="swiglu")
    act.add_argument("--gelu", dest="act", action="store_const", const="gelu")
    norm = ap.add_mutually_exclusive_group()
    norm.add_argument("--rmsnorm", dest="norm", action="store_const", const="rmsnorm")
    norm.add_argument("--layernorm", dest="norm", action="store_const", const="layernorm")
    ap.add_argument("--bias", action="store_true", help="linear layers with biases (GPT); default none (Llama)")
    ap.add_argument("--rope", action="store_true", help="apply rotary embeddings to q and k (eager)")
    ap.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    ap.add_argument("--warmup-steps", type=int, default=2)
    ap.add_argument("--timed-steps", type=int, default=3, help="unprofiled steps timed for step_wall_ns")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: smoke path only")
    ap.add_argument("--name", default="", help="a label stored in the JSON")
    ap.add_argument("-o", "--output", default="-", help="JSON output (default stdout)")
    ap.set_defaults(act="swiglu", norm="rmsnorm")
    a = ap.parse_args(argv)
    a.ffn = a.ffn or 4 * a.hidden
    a.heads = a.heads or max(1, a.hidden // 128)
    a.kv_heads = a.kv_heads or a.heads
    if a.hidden % a.heads or a.heads % a.kv_heads:
        ap.error("hidden must be a multiple of heads, heads a multiple of kv-heads")
    return a


def kernel_class(name, norm_class):
    """A lacuna OpClass guessed from a CUDA kernel's name."""
    n = name.lower()
    if any(s in n for s in ("flash", "fmha", "sdpa", "attention", "attn")):
        return "ATTENTION"
    if any(s in n for s in ("gemm", "cutlass", "sm90_xmma", "xmma", "nvjet", "cublas", "wgmma", "matmul")):
        return "GEMM"
    if "rms" in n or "layer_norm" in n or "layernorm" in n:
        return norm_class
    if "adam" in n:
        return "OPTIMIZER"
    if "silu" in n:
        return "SWIGLU"
    if "gelu" in n:
        return "GELU"
    if "nll_loss" in n or "log_softmax" in n or "cross_entropy" in n:
        return "CROSS_ENTROPY"
    if "softmax" in n:
        return "SOFTMAX"
    if "embedding" in n or "indexselect" in n or "index_select" in n:
        return "EMBEDDING"
    if any(s in n for s in ("elementwise", "vectorized", "unrolled", "memset", "memcpy", "foreach", "multi_tensor")):
        return "ELEMENTWISE"
    return "OTHER"


def build(args, torch):
    nn, F = torch.nn, torch.nn.functional
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    dev = torch.device(args.device)
    H, A, KV = args.hidden, args.heads, args.kv_heads
    D = H // A

    def make_norm():
        if args.norm == "layernorm":
            return nn.LayerNorm(H, eps=1e-5)
        if hasattr(nn, "RMSNorm"):
            return nn.RMSNorm(H, eps=1e-5)

        class RMS(nn.Module):  # old torch: eager RMSNorm
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(torch.ones(H))

            def forward(self, x):
                return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * self.weight
        return RMS()

    sdpa_ctx = [None]

    def attention(q, k, v):
        gqa = KV < A
        if not hasattr(F, "scaled_dot_product_attention"):  # old torch (CPU smoke)
            if gqa:
                k, v = k.repeat_interleave(A // KV, 1), v.repeat_interleave(A // KV, 1)
            s = (q @ k.transpose(-2, -1)) / math.sqrt(D)
            mask = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1)
            return torch.softmax(s.float().masked_fill(mask, float("-inf")), -1).to(q.dtype) @ v
        if gqa and sdpa_ctx[0][1]:
            k, v = k.repeat_interleave(A // KV, 1), v.repeat_interleave(A // KV, 1)
            gqa = False
        with sdpa_ctx[0][0]():
            if gqa:
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    rope = [None]

    def apply_rope(x):  # x [b, heads, s, d]; rotate-half form
        cos, sin = rope[0]
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return x * cos + torch.cat((-x2, x1), -1) * sin

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = make_norm(), make_norm()
            self.qkv = nn.Linear(H, (A + 2 * KV) * D, bias=args.bias)
            self.proj = nn.Linear(A * D, H, bias=args.bias)
            self.fc1 = nn.Linear(H, 2 * args.ffn if args.act == "swiglu" else args.ffn, bias=args.bias)
            self.fc2 = nn.Linear(args.ffn, H, bias=args.bias)

        def forward(self, x):  # x [b, s, h]
            b, s, _ = x.shape
            qkv = self.qkv(self.norm1(x))
            q, k, v = qkv.split([A * D, KV * D, KV * D], -1)
            q = q.view(b, s, A, D).transpose(1, 2)
            k = k.view(b, s, KV, D).transpose(1, 2)
            v = v.view(b, s, KV, D).transpose(1, 2)
            if args.rope:
                q, k = apply_rope(q), apply_rope(k)
            o = attention(q, k, v).transpose(1, 2).reshape(b, s, A * D)
            x = x + self.proj(o)
            y = self.fc1(self.norm2(x))
            if args.act == "swiglu":
                g, u = torch.chunk(y, 2, -1)
                y = F.silu(g) * u
            else:
                try:
                    y = F.gelu(y, approximate="tanh")
                except TypeError:
                    y = F.gelu(y)
            return x + self.fc2(y)

    class Stage(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(args.vocab, H) if args.vocab else None
            self.layers = nn.ModuleList(Layer() for _ in range(args.layers))
            if args.vocab:
                self.final_norm = make_norm()
                self.logits = nn.Linear(H, args.vocab, bias=False)

        def forward(self, inp, target):
            x = self.embed(inp) if self.embed is not None else inp
            for layer in self.layers:
                x = layer(x)
            if self.embed is None:
                return x
            logits = self.logits(self.final_norm(x))
            return F.cross_entropy(logits.view(-1, args.vocab).float(), target.view(-1))

    model = Stage().to(device=dev, dtype=dt)
    for p in model.parameters():  # weights like an initialised model (normal, small, non-zero)
        with torch.no_grad():
            if p.dim() > 1:
                p.normal_(0, 0.02)
    if args.rope:
        pos = torch.arange(args.seq, device=dev, dtype=torch.float32)
        inv = 1.0 / (10000 ** (torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D))
        ang = torch.outer(pos, inv)
        ang = torch.cat((ang, ang), -1)
        rope[0] = (ang.cos().to(dt), ang.sin().to(dt))

    # The SDPA backend: cuDNN, else flash, else memory-efficient (GQA expanded if none takes enable_gqa).
    import contextlib
    sdpa_ctx[0] = (contextlib.nullcontext, False)
    backend = "math (cpu)" if args.device == "cpu" else "default"
    if args.device == "cuda" and hasattr(F, "scaled_dot_product_attention"):
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            import warnings
            found = False
            for expand in ([False, True] if KV < A else [False]):
                for name, attr in (("cudnn", "CUDNN_ATTENTION"), ("flash", "FLASH_ATTENTION"),
                                   ("efficient", "EFFICIENT_ATTENTION")):
                    be = getattr(SDPBackend, attr, None)
                    if be is None:
                        continue
                    sdpa_ctx[0] = ((lambda be=be: sdpa_kernel([be])), expand)
                    try:
                        q = torch.randn(args.micro_batch, A, args.seq, D, device=dev, dtype=dt, requires_grad=True)
                        k = torch.randn(args.micro_batch, KV, args.seq, D, device=dev, dtype=dt, requires_grad=True)
                        v = torch.randn_like(k, requires_grad=True)
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            attention(q, k, v).sum().backward()
                        torch.cuda.synchronize()
                        backend = name + (" (gqa expanded)" if expand and KV < A else "")
                        found = True
                        break
                    except (RuntimeError, TypeError):
                        continue
                if found:
                    break
            if not found:
                sdpa_ctx[0] = (contextlib.nullcontext, False)
        except ImportError:
            pass
    return model, backend


class Trainer:
    def __init__(self, args, torch, model):
        self.args, self.torch, self.model = args, torch, model
        dev = torch.device(args.device)
        self.params = [p for p in model.parameters()]
        self.master = [p.detach().float().clone().requires_grad_(True) for p in self.params]
        try:
            self.opt = torch.optim.Adam(self.master, lr=1e-5, fused=True)
        except (TypeError, RuntimeError, ValueError):  # old torch / CPU
            self.opt = torch.optim.Adam(self.master, lr=1e-5)
        mb, s = args.micro_batch, args.seq
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
        g = torch.Generator(device="cpu").manual_seed(0)
        if args.vocab:
            self.inputs = [torch.randint(0, args.vocab, (mb, s), generator=g).to(dev) for _ in range(args.micro_batches)]
            self.targets = [torch.randint(0, args.vocab, (mb, s), generator=g).to(dev)
                            for _ in range(args.micro_batches)]
        else:
            self.inputs = [torch.randn(mb, s, args.hidden, generator=g).to(dev, dt).requires_grad_(True)
                           for _ in range(args.micro_batches)]
            self.targets = [None] * args.micro_batches
            self.dout = torch.randn(mb, s, args.hidden, generator=g).to(dev, dt)

    def micro_batch(self, i):
        out = self.model(self.inputs[i], self.targets[i])
        if self.args.vocab:
            (out / self.args.micro_batches).backward()
        else:  # a middle stage: the output gradient comes from the next stage
            out.backward(self.dout)

    def optimizer_step(self):
        torch = self.torch
        for p, m in zip(self.params, self.master):
            if p.grad is not None:
                m.grad = p.grad.float()  # bf16 gradient into fp32
        self.opt.step()
        with torch.no_grad():
            for p, m in zip(self.params, self.master):
                p.copy_(m)  # fp32 master into the bf16 weight
        for p in self.params:
            p.grad = None
        for m in self.master:
            m.grad = None

    def step(self):
        for i in range(self.args.micro_batches):
            self.micro_batch(i)
        self.optimizer_step()


def main(argv=None):
    args = parse_args(argv)
    t_begin = time.perf_counter()
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("torch_step: no CUDA device (use --device cpu for the smoke path)")
    torch.manual_seed(0)
    cuda = args.device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    norm_class = "RMSNORM" if args.norm == "rmsnorm" else "LAYERNORM"

    model, backend = build(args, torch)
    tr = Trainer(args, torch, model)
    for _ in range(args.warmup_steps):
        tr.step()
    sync()

    # Unprofiled steps: wall time per step.
    walls = []
    for _ in range(max(1, args.timed_steps)):
        t0 = time.perf_counter()
        tr.step()
        sync()
        walls.append(time.perf_counter() - t0)
    step_wall = statistics.median(walls)

    # Host time per launch: the GPU kept busy by a sleep queued ahead of each part.
    sleep = getattr(torch.cuda, "_sleep", None) if cuda else None
    cycles_per_s = 2.0e9
    host = {"fwd_bwd_s": 0.0, "optimizer_s": 0.0, "cpu_s": 0.0}
    per_mb = step_wall / (args.micro_batches + 1)
    c0 = time.process_time()
    for i in range(args.micro_batches):
        sync()
        if sleep:
            sleep(int(min(2.0, 2.0 * per_mb + 1e-3) * cycles_per_s))
        t0 = time.perf_counter()
        tr.micro_batch(i)
        host["fwd_bwd_s"] += time.perf_counter() - t0
    sync()
    if sleep:
        sleep(int(min(2.0, 2.0 * per_mb + 1e-3) * cycles_per_s))
    t0 = time.perf_counter()
    tr.optimizer_step()
    host["optimizer_s"] += time.perf_counter() - t0
    host["cpu_s"] = time.process_time() - c0
    sync()

    # The profiled step.
    from torch.profiler import ProfilerActivity, profile
    import tempfile
    acts = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    with profile(activities=acts) as prof:
        for i in range(args.micro_batches):
            tr.micro_batch(i)
        if sleep:
            sleep(1)  # a marker kernel (spin_kernel) between the micro-batches and the optimizer step
        tr.optimizer_step()
        sync()
    with tempfile.NamedTemporaryFile("w+", suffix=".json", delete=False) as f:
        path = f.name
    prof.export_chrome_trace(path)
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)
    os.unlink(path)
    cats = ("kernel", "gpu_memset", "gpu_memcpy") if cuda else ("cpu_op", "")
    events = trace if isinstance(trace, list) else trace.get("traceEvents", [])
    evs = [e for e in events if str(e.get("cat", "")).lower().replace(" ", "_") in cats and e.get("ph") == "X"]
    if not cuda:  # smoke path: top-level CPU ops stand in for kernels
        evs = [e for e in evs if str(e.get("name", "")).startswith("aten::")]
    evs.sort(key=lambda e: float(e["ts"]))
    t_first = float(evs[0]["ts"]) if evs else 0.0
    marker = next((i for i, e in enumerate(evs) if "spin_kernel" in str(e.get("name", ""))), None)
    if marker is not None:
        evs.pop(marker)
        t_first = float(evs[0]["ts"]) if evs else 0.0
    kernels, totals = [], {}
    for e in evs:
        name = str(e.get("name", ""))
        cls = kernel_class(name, norm_class)
        start = int(round((float(e["ts"]) - t_first) * 1000))
        dur = int(round(float(e.get("dur", 0)) * 1000))
        stream = (e.get("args") or {}).get("stream", e.get("tid"))
        kernels.append({"name": name, "stream": stream, "start_ns": start, "dur_ns": dur, "class": cls})
        t = totals.setdefault(cls, {"count": 0, "dur_ns": 0})
        t["count"] += 1
        t["dur_ns"] += dur
    step_ns = max((k["start_ns"] + k["dur_ns"] for k in kernels), default=0)
    # The optimizer part's kernels: those after the marker kernel (without it:
    # after the last GEMM / attention kernel, an approximation).
    if marker is not None:
        n_fb = marker
    else:
        n_fb = 1 + max((i for i, k in enumerate(kernels) if k["class"] in ("GEMM", "ATTENTION")), default=-1)
    n_opt = len(kernels) - n_fb
    n_all = max(1, len(kernels))
    out = {
        "name": args.name,
        "config": {k: getattr(args, k) for k in ("hidden", "ffn", "heads", "kv_heads", "layers", "seq", "micro_batch",
                                                 "micro_batches", "vocab", "act", "norm", "bias", "rope", "dtype")},
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda,
                     "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None},
        "attention_backend": backend,
        "parameters": sum(p.numel() for p in model.parameters()),
        "step_ns": step_ns,
        "step_wall_ns": int(step_wall * 1e9),
        "host_gap_ns_per_op": int((host["fwd_bwd_s"] + host["optimizer_s"]) * 1e9 / n_all),
        "host": {
            "method": "wall time of the launching Python calls (forward, loss.backward(), optimizer step) on an "
                      "unprofiled step with a torch.cuda._sleep queued ahead of each part so the host never waits, "
                      "divided by the kernels the profiled step launched for that part (split by a marker kernel "
                      "queued between the micro-batches and the optimizer step)",
            "fwd_bwd_ns_per_op": int(host["fwd_bwd_s"] * 1e9 / max(1, n_fb)),
            "optimizer_ns_per_op": int(host["optimizer_s"] * 1e9 / max(1, n_opt)),
            "process_cpu_ns_per_op": int(host["cpu_s"] * 1e9 / n_all),
            "fwd_bwd_wall_ns": int(host["fwd_bwd_s"] * 1e9),
            "optimizer_wall_ns": int(host["optimizer_s"] * 1e9),
            "kernels_fwd_bwd": n_fb,
            "kernels_optimizer": n_opt,
            "gpu_kept_busy": bool(sleep),
            "split_by_marker": marker is not None,
        },
        "class_totals": totals,
        "kernels": kernels,
        "runtime_s": round(time.perf_counter() - t_begin, 1),
    }
    text = json.dumps(out, indent=1)
    if args.output == "-":
        print(text)
    else:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    summary = ", ".join(f"{c} {v['dur_ns'] / 1e6:.2f} ms" for c, v in sorted(totals.items(), key=lambda kv: -kv[1]["dur_ns"]))
    print(f"torch_step {args.name or ''}: {len(kernels)} kernels, GPU span {step_ns / 1e6:.2f} ms, wall "
          f"{step_wall * 1e3:.2f} ms, host {out['host_gap_ns_per_op'] / 1e3:.2f} us/kernel, attention {backend}; "
          f"{summary}; {out['runtime_s']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
