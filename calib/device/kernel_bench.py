#!/usr/bin/env python3
"""Measures a measured-kernel table (calib/measurements/README.md) on the local GPU.

Reads a `*.kernels.csv` table whose `time_us` cells are empty (the shapes
`lacuna kernel-shapes` writes, and/or the fit grid of --grid) and writes the
same table with every measurable `time_us` filled in: the median duration, in
microseconds, of one launch of PyTorch's own kernels for that class, pass,
dtype and shape -- the kernels Megatron-LM, Transformer Engine's PyTorch
fallbacks and torchtitan run through PyTorch. Row order and comment lines are
kept; header comments naming the device, the software, the clocks and how the
times were taken are added at the top.

Recipes (shape conventions: calib/measurements/README.md and
sim/proto/program.proto; what each lacuna kernel reads and writes:
sim/model/kernels.h, sim/model/layer.cpp):

  GEMM `m n k [batch]`, bf16 / fp16: torch.matmul (torch.bmm with a batch) in
    the operand layouts of Megatron's linear layers, whose weight W is stored
    [out_features, in_features] row-major:
      fwd    Y[m,n] = X[m,k] . W^T      X row-major [m,k]; W stored [n,k], passed as
                                        the transposed view W.t() ("TN" in cuBLAS terms)
      dgrad  dX[m,n] = dY[m,k] . W      dY row-major [m,k]; W stored [k,n] (out = k,
                                        in = n) row-major, passed as is ("NN")
      wgrad  dW[n,m] = dY^T . X         lacuna m = in, n = out, k = tokens: dY stored
                                        [k,n], X stored [k,m], both passed as
                                        transposed views: dY.t() @ X gives [n,m]
                                        = dW in its [out,in] storage ("NT")
    (Megatron's gradient-accumulation fusion writes the wgrad into the fp32
    main_grad with beta = 1; this measures the bf16-output GEMM.)
    fp8: torch._scaled_mm with per-tensor fp32 scales (Transformer Engine's
    per-tensor recipes), E4M3 operands, bf16 output, on the "TN" layout every
    pass takes in TE (it transposes FP8 copies beforehand, a separate cast
    kernel in lacuna); fast accumulation for fwd, split accumulation for
    dgrad / wgrad (TE's _2X_ACC_*). Needs sm_89+ and m, n, k multiples of 16;
    a batch runs as that many GEMMs inside one timed launch.
  ATTENTION `batch heads seq_q seq_kv head_dim causal kv_heads [window]`:
    torch.nn.functional.scaled_dot_product_attention forced to the cuDNN
    backend (sdpa_kernel(SDPBackend.CUDNN_ATTENTION)), else FLASH_ATTENTION,
    else EFFICIENT_ATTENTION (the header counts which ran); q [b,s,h,d] and
    k, v [b,s,kv,d] passed as [b,h,s,d] transposed views (torchtitan's
    layout); enable_gqa=True when kv_heads < heads (K and V expanded outside
    the timed region when no backend takes GQA; counted in the header). fwd:
    the forward alone. dgrad: torch.autograd.grad of a retained forward (the
    backward kernels alone, events around that call only). A window (8th
    entry) is skipped: SDPA has no sliding-window backend without a mask.
    Causal with seq_q < seq_kv is context parallelism's share of a causal
    attention (Megatron / TE's load-balanced ring): cp = seq_kv / seq_q
    kernels of seq_q^2 / 2 query-key pairs each, as TE runs them: one causal
    seq_q x seq_q block and cp - 1 full blocks of seq_q queries against
    seq_q / 2 keys, timed together as one launch.
  RMSNORM / LAYERNORM `tokens hidden`: F.rms_norm / F.layer_norm with an
    affine weight (and bias), fused CUDA kernels in recent torch. fwd reads x
    and writes y; dgrad is the backward (dx and the weight / bias gradients).
  SWIGLU `tokens ffn_per_rank`: eager silu(gate) * up on the two halves of
    FC1's [tokens, 2 ffn] output (torch.chunk, Megatron's unfused
    bias_swiglu); Megatron fuses it with a jit kernel, eager runs several
    kernels (silu, mul; backward: mul, mul, silu backward, cat): the time is
    their sum, events around the whole op. torch.compile is not used.
  GELU `elements`: F.gelu(approximate="tanh") forward; backward for dgrad.
  RESIDUAL_ADD `elements`: a + b of two bf16 operands (fwd and dgrad alike:
    the backward is the accumulation of the two gradient paths).
  ELEMENTWISE `elements`: a dropout-like read-and-write bf16 pass, x * mask
    with the mask a scalar (read x, write y: the bytes lacuna counts for the
    one-entry shape). `elements bytes_per_element`: a streaming pass by its
    bytes per element: 2 amax (read bf16), 3 cast to fp8, 4 fp32 memset
    (gradient zeroing), 5 masked_fill (bf16 and a bool mask), 6 fp32 -> bf16
    copy (parameter copy), 8 in-place fp32 scale (clip), 10 fp32 += bf16
    (gradient accumulation), 12 fp32 a + b; otherwise a byte copy of the same
    bytes. A second entry >= 256 and a multiple of 64 is `rows hidden` (MoE
    permutation): an index_select of rows.
  SOFTMAX `rows cols`: torch.softmax over the last dim, forward / backward.
  CROSS_ENTROPY `tokens vocab_per_rank`: F.cross_entropy of bf16 logits,
    forward (log_softmax + nll) / backward.
  EMBEDDING `tokens hidden vocab_per_rank`: F.embedding lookup forward; wgrad:
    its backward (embedding_dense_backward into a bf16 gradient).
  OPTIMIZER `parameters`: torch.optim.Adam(fused=True).step() over that many
    fp32 parameters (fp32 grad, m, v), split into tensors of <= 64M elements.
    `parameters 4`: torch._foreach_norm of the fp32 gradients (the
    gradient-norm reduction); `parameters 8`: torch._foreach_mul_ (the clip);
    other bytes: a byte copy of the same bytes.
  Other classes and fp8 outside GEMM: skipped with a message, time left empty.

Timing (CUDA): the first measured row is preceded by ~2 s of 8192^3 bf16
GEMMs (clocks and power settle); every row gets >= 5 warm-up launches, then
launches are timed for max(20 launches, 20 ms), at most 200, in batches queued
behind torch.cuda._sleep so that the GPU runs them back to back and the host's
launch overhead stays out; CUDA events around every launch; the median per
launch is reported. Inputs are random normal (never zero) and rotated over
buffer sets totalling > 3x the L2 cache when one set is smaller. Rows are
measured in (class, shape) order until --budget-s runs out; the rest are left
empty. The output file is rewritten every ~20 s while measuring, so that a
killed run keeps what it measured.

Usage:
  kernel_bench.py --check TABLE [TABLE ...]         validate (no torch needed)
  kernel_bench.py --grid --gpu PRESET --emit-only -o OUT   write the fit grid (no torch)
  kernel_bench.py [TABLE] [--grid --gpu PRESET] -o OUT [--budget-s 300]
                  [--device cuda|cpu] [--max-rows N]       measure
"""
import argparse
import math
import os
import re
import signal
import statistics
import sys
import time

HEADER = "gpu,class,pass,dtype,shape,time_us,group,label"
COLUMNS = HEADER.split(",")

# class -> (allowed shape arities, shape description, allowed passes)
CLASSES = {
    "GEMM": ((3, 4), "m n k [batch]", ("fwd", "dgrad", "wgrad")),
    "ATTENTION": ((7, 8), "batch heads seq_q seq_kv head_dim causal kv_heads [window]", ("fwd", "dgrad")),
    "LAYERNORM": ((2,), "tokens hidden", ("fwd", "dgrad")),
    "RMSNORM": ((2,), "tokens hidden", ("fwd", "dgrad")),
    "GELU": ((1,), "elements", ("fwd", "dgrad")),
    "SWIGLU": ((2,), "tokens ffn_per_rank", ("fwd", "dgrad")),
    "RESIDUAL_ADD": ((1,), "elements", ("fwd", "dgrad")),
    "EMBEDDING": ((3,), "tokens hidden vocab_per_rank", ("fwd", "wgrad")),
    "CROSS_ENTROPY": ((2,), "tokens vocab_per_rank", ("fwd", "dgrad")),
    "OPTIMIZER": ((1, 2), "parameters [bytes_per_parameter]", ("fwd",)),
    "ELEMENTWISE": ((1, 2), "elements [bytes_per_element]", ("fwd", "dgrad", "wgrad")),
    "SOFTMAX": ((2,), "rows cols", ("fwd", "dgrad")),
}
CLASS_ORDER = list(CLASSES)  # program.proto's OpClass order
PASS_ORDER = ("fwd", "dgrad", "wgrad")
DTYPES = ("bf16", "fp16", "fp8")
GPU_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")

MIN_WARMUPS = 5
MIN_REPS, MAX_REPS, MIN_SPAN_S = 20, 200, 0.020
FIRST_WARMUP_S = 2.0
L2_FACTOR = 3.0
MAX_SETS = 256
BATCH = 32  # launches queued behind one sleep
REWRITE_EVERY_S = 20.0
OPT_CHUNK = 64 * 1024 * 1024


def warn(msg):
    print(f"kernel_bench: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------
# The table: parsing and validation (no torch).


class Row:
    def __init__(self, path, line, fields):
        self.path, self.line, self.fields = path, line, fields
        self.shape = ()
        self.time = None  # measured µs (float) or None
        self.bad = False  # failed validation: kept in the output, never measured

    def get(self, col):
        return self.fields[COLUMNS.index(col)]

    @property
    def key(self):
        return (self.get("gpu"), self.get("class"), self.get("pass"), self.get("dtype"), self.shape)

    def text(self):
        f = list(self.fields)
        if self.time is not None:
            f[COLUMNS.index("time_us")] = f"{self.time:.3f}"
        return ",".join(f)


class Table:
    def __init__(self, path):
        self.path = path
        self.items = []  # ("text", line) or ("row", Row), in file order
        self.errors = []  # "file:line:field: message"
        self.bad_lines = set()

    @property
    def rows(self):
        """The valid rows (bad ones stay in items, written back unmeasured)."""
        return [x for kind, x in self.items if kind == "row" and not x.bad]


def parse_shape(text):
    parts = text.split()
    if not parts or not all(re.fullmatch(r"[0-9]+", p) for p in parts):
        return None
    return tuple(int(p) for p in parts)


def validate_fields(fields):
    """Field errors of one row's 8 fields: list of (field, message); and the shape."""
    errs = []
    gpu, cls, pas, dtype, shape_text, time_us, group, _label = fields
    if not GPU_RE.match(gpu):
        errs.append(("gpu", f"{gpu!r} is not a hardware preset name (lowercase letters, digits, '-')"))
    if cls not in CLASSES:
        errs.append(("class", f"unknown class {cls!r} (one of {' '.join(CLASS_ORDER)})"))
    elif pas not in CLASSES[cls][2]:
        errs.append(("pass", f"{pas!r} is not a pass of {cls} (one of {' '.join(CLASSES[cls][2])})"))
    if dtype not in DTYPES:
        errs.append(("dtype", f"unknown dtype {dtype!r} (one of {' '.join(DTYPES)})"))
    shape = parse_shape(shape_text)
    if shape is None:
        errs.append(("shape", f"{shape_text!r} is not integers separated by spaces"))
    elif cls in CLASSES:
        arities, desc, _ = CLASSES[cls]
        if len(shape) not in arities:
            n = " or ".join(str(a) for a in arities)
            errs.append(("shape", f"{cls} takes {n} integers ({desc}), got {len(shape)}"))
        else:
            for i, v in enumerate(shape):
                if cls == "ATTENTION" and i == 5:
                    if v not in (0, 1):
                        errs.append(("shape", f"ATTENTION causal (6th entry) must be 0 or 1, got {v}"))
                elif v <= 0:
                    errs.append(("shape", f"entry {i + 1} must be a positive integer, got {v}"))
            if cls == "ATTENTION" and shape[6] > 0 and shape[1] % shape[6] != 0:
                errs.append(("shape", f"ATTENTION heads {shape[1]} not a multiple of kv_heads {shape[6]}"))
    if time_us.strip():
        try:
            t = float(time_us)
            if not (t > 0 and math.isfinite(t)):
                raise ValueError
        except ValueError:
            errs.append(("time_us", f"{time_us!r} is not empty nor a positive number"))
    if not group.strip():
        errs.append(("group", "empty (the unit of cross-validation: a model, or grid)"))
    return errs, (shape or ())


def read_table(path, text=None):
    t = Table(path)
    if text is None:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            t.errors.append(f"{path}:0:file: {e.strerror}")
            return t
    seen_header = False
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        s = line.strip()
        if not s or s.startswith("#"):
            t.items.append(("text", line))
            continue
        if not seen_header:
            if s.replace(" ", "") != HEADER:
                t.errors.append(f"{path}:{n}:header: expected {HEADER!r}, got {s!r}")
                return t
            seen_header = True
            t.items.append(("header", line))
            continue
        fields = line.split(",")
        if len(fields) != len(COLUMNS):
            t.errors.append(f"{path}:{n}:row: expected {len(COLUMNS)} comma-separated fields "
                            f"({HEADER}; the label has no commas), got {len(fields)}")
            t.bad_lines.add(n)
            t.items.append(("text", line))
            continue
        fields = [x.strip() for x in fields]
        row = Row(path, n, fields)
        errs, row.shape = validate_fields(fields)
        for field, msg in errs:
            t.errors.append(f"{path}:{n}:{field}: {msg}")
        row.bad = bool(errs)
        if errs:
            t.bad_lines.add(n)
        t.items.append(("row", row))
    if not seen_header:
        t.errors.append(f"{path}:{len(text.splitlines()) + 1}:header: no header line {HEADER!r}")
    return t


def static_recipe(cls, pas, dtype, shape):
    """(True, "") when kernel_bench has a recipe for the row, else (False, why). Hardware aside."""
    if cls not in CLASSES:
        return False, f"no recipe for class {cls}"
    if dtype == "fp8" and cls != "GEMM":
        return False, f"fp8 has a recipe for GEMM only, not {cls}"
    if cls == "ATTENTION":
        b, h, sq, skv, d, causal, kvh = shape[:7]
        if len(shape) > 7:
            return False, "sliding-window attention: SDPA has no windowed backend without a mask"
        if causal and sq > skv:
            return False, "causal attention with seq_q > seq_kv"
        if causal and sq < skv and (skv % sq or sq % 2):
            return False, "context-parallel causal attention needs seq_kv a multiple of seq_q (even)"
    return True, ""


def recipe_variant(cls, shape):
    """Which recipe of its class a shape takes, where a class has several ("" otherwise)."""
    if cls == "GEMM" and len(shape) > 3:
        return "batched"
    if cls in ("ELEMENTWISE", "OPTIMIZER") and len(shape) == 2:
        if cls == "ELEMENTWISE" and shape[1] >= 256 and shape[1] % 64 == 0:
            return "rows hidden"
        return f"{shape[1]} bytes/element"
    if cls == "ATTENTION" and shape[5] and shape[2] < shape[3]:
        return "context-parallel causal"
    return ""


# ----------------------------------------------------------------------------
# The fit grid (no torch).


def grid_shapes():
    """[(class, pass, dtype, shape, label)] of the fit grid, deterministic, no duplicates."""
    out, seen = [], set()

    def add(cls, pas, shape, label, dtype="bf16"):
        k = (cls, pas, dtype, tuple(shape))
        if k not in seen:
            seen.add(k)
            out.append((cls, pas, dtype, tuple(shape), label))

    # GEMM squares 1024 .. 16384, step x sqrt(2) rounded to multiples of 256.
    for i in range(9):
        s = int(round(1024 * math.sqrt(2) ** i / 256)) * 256
        add("GEMM", "fwd", (s, s, s), f"grid gemm square {s}")
    for k in (512, 1024, 2048, 4096, 8192, 16384):
        add("GEMM", "fwd", (8192, 8192, k), f"grid gemm k-sweep 8192x8192 k {k}")
    for m in (256, 512, 1024, 2048):
        add("GEMM", "fwd", (m, 8192, 8192), f"grid gemm skinny m {m} n=k=8192")
    # Attention: 10 configurations x causal x {fwd, dgrad} = 40 rows.
    att = [(4, 32, 1024, 128, 32), (2, 32, 2048, 128, 32), (1, 32, 4096, 128, 32), (1, 32, 8192, 128, 32),
           (1, 32, 16384, 128, 32), (4, 64, 1024, 64, 64), (2, 64, 2048, 64, 64), (1, 64, 4096, 64, 64),
           (1, 64, 8192, 64, 64), (2, 32, 4096, 128, 8)]
    for causal in (0, 1):
        for b, h, s, d, kv in att:
            lab = f"grid attention b{b} h{h} kv{kv} s{s} d{d} {'causal' if causal else 'full'}"
            for pas in ("fwd", "dgrad"):
                add("ATTENTION", pas, (b, h, s, s, d, causal, kv), lab)
    # Memory-bound kernels at tokens x hidden.
    for cls in ("RMSNORM", "LAYERNORM", "SWIGLU", "GELU", "RESIDUAL_ADD"):
        for tokens in (2048, 4096, 8192, 16384):
            for hidden in (4096, 8192, 12288):
                two = cls in ("RMSNORM", "LAYERNORM", "SWIGLU")
                shape = (tokens, hidden) if two else (tokens * hidden,)
                what = "ffn" if cls == "SWIGLU" else "hidden"
                for pas in ("fwd",) if cls == "RESIDUAL_ADD" else ("fwd", "dgrad"):
                    add(cls, pas, shape, f"grid {cls.lower()} tokens {tokens} {what} {hidden}")
    return out


def grid_rows(gpu):
    rows = []
    for cls, pas, dtype, shape, label in grid_shapes():
        fields = [gpu, cls, pas, dtype, " ".join(str(x) for x in shape), "", "grid", label]
        r = Row("<grid>", 0, fields)
        r.shape = shape
        rows.append(r)
    return rows


# ----------------------------------------------------------------------------
# Output.


def render(header_comments, table, grid, grid_comment):
    lines = [f"# {c}" for c in header_comments]
    if table is not None:
        for kind, x in table.items:
            lines.append(x.text() if kind == "row" else x)
    else:
        lines.append(HEADER)
    if grid:
        lines.append(f"# {grid_comment}")
        lines.extend(r.text() for r in grid)
    return "\n".join(lines) + "\n"


def write_atomic(path, text):
    if path in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------
# Device information (NVML and CUDA libraries through ctypes).


def nvml_sample():
    """Clocks, power and temperature of GPU 0 through NVML, or None."""
    import ctypes
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    try:
        if lib.nvmlInit_v2() != 0:
            return None
        idx = 0
        vis = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        if vis.isdigit():
            idx = int(vis)
        h = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(idx), ctypes.byref(h)) != 0:
            return None
        out = {}

        def uint(fn, *args):
            v = ctypes.c_uint()
            return v.value if getattr(lib, fn)(h, *args, ctypes.byref(v)) == 0 else None

        out["sm_mhz"] = uint("nvmlDeviceGetClockInfo", ctypes.c_int(1))  # NVML_CLOCK_SM
        out["mem_mhz"] = uint("nvmlDeviceGetClockInfo", ctypes.c_int(2))  # NVML_CLOCK_MEM
        out["sm_max_mhz"] = uint("nvmlDeviceGetMaxClockInfo", ctypes.c_int(1))
        out["mem_max_mhz"] = uint("nvmlDeviceGetMaxClockInfo", ctypes.c_int(2))
        p = uint("nvmlDeviceGetPowerUsage")
        out["power_w"] = p / 1000 if p is not None else None
        p = uint("nvmlDeviceGetEnforcedPowerLimit")
        out["power_limit_w"] = p / 1000 if p is not None else None
        out["temp_c"] = uint("nvmlDeviceGetTemperature", ctypes.c_int(0))  # NVML_TEMPERATURE_GPU
        buf = ctypes.create_string_buffer(96)
        if lib.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(96)) == 0:
            out["driver"] = buf.value.decode(errors="replace")
        buf = ctypes.create_string_buffer(96)
        if lib.nvmlDeviceGetName(h, buf, ctypes.c_uint(96)) == 0:
            out["name"] = buf.value.decode(errors="replace")
        lib.nvmlShutdown()
        return out
    except Exception:  # noqa: BLE001 -- NVML absent or partial: not an error
        return None


def nvml_text(s):
    if not s:
        return "nvml: unavailable"
    f = lambda k, unit, fmt="{:.0f}": (fmt.format(s[k]) + unit) if s.get(k) is not None else "?"  # noqa: E731
    return (f"sm clock {f('sm_mhz', ' MHz')} (max {f('sm_max_mhz', ' MHz')}); mem clock {f('mem_mhz', ' MHz')} "
            f"(max {f('mem_max_mhz', ' MHz')}); power {f('power_w', ' W', '{:.1f}')} "
            f"(limit {f('power_limit_w', ' W')}); temperature {f('temp_c', ' C')}")


def loaded_library(fragment):
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                p = line.split()[-1]
                if fragment in os.path.basename(p):
                    return p
    except OSError:
        pass
    return None


def cublas_version():
    import ctypes
    path = loaded_library("libcublas.so")
    names = [path] if path else []
    names += ["libcublas.so.13", "libcublas.so.12", "libcublas.so"]
    for n in names:
        try:
            lib = ctypes.CDLL(n)
            v = [ctypes.c_int() for _ in range(3)]
            if all(lib.cublasGetProperty(ctypes.c_int(i), ctypes.byref(v[i])) == 0 for i in range(3)):
                return ".".join(str(x.value) for x in v)
        except (OSError, AttributeError):
            continue
    return "unknown"


def cuda_driver_version():
    import ctypes
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int()
        if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
            return f"{v.value // 1000}.{v.value % 1000 // 10}"
    except (OSError, AttributeError):
        pass
    return "unknown"


_GIT = []


def git_revision():
    if _GIT:
        return _GIT[0]
    _GIT.append(_git_revision())
    return _GIT[0]


def _git_revision():
    import subprocess
    try:
        r = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=5,
                           cwd=os.path.dirname(os.path.abspath(__file__)))
        return r.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# ----------------------------------------------------------------------------
# Measuring (torch imported here only).


def short_kernel_name(name):
    """A CUDA kernel's name without template arguments, with its functor where it has one:
    'vectorized_elementwise_kernel[silu_kernel]'."""
    n = name.replace("void ", "").replace("(anonymous namespace)::", "").strip()
    if len(n) <= 60:
        return n.replace(",", ";")
    head = re.split(r"[<(]", n)[0]
    base = head.split("::")[-1]
    inner = [w for w in re.findall(r"\w+", n[len(head):])
             if re.search(r"Functor|_kernel$|Kernel", w) and w != base and not w.startswith("gpu_kernel")]
    return (base + (f"[{inner[0]}]" if inner else ""))[:100]


class Skip(Exception):
    """A row this run cannot measure (no recipe on this device, too large for the CPU path)."""


class Stop(Exception):
    """SIGTERM / SIGINT: write what was measured and exit."""


class Bench:
    def __init__(self, device, seed=0):
        import torch
        self.torch = torch
        self.F = torch.nn.functional
        self.cpu = device == "cpu"
        if not self.cpu and not torch.cuda.is_available():
            raise SystemExit("kernel_bench: no CUDA device (use --device cpu for the smoke path)")
        self.dev = torch.device("cpu" if self.cpu else "cuda")
        torch.manual_seed(seed)
        if self.cpu:
            self.l2 = 32 << 20
            self.cc = (0, 0)
            self.total_mem = 8 << 30
        else:
            p = torch.cuda.get_device_properties(0)
            self.l2 = int(getattr(p, "L2_cache_size", 50 << 20) or (50 << 20))
            self.cc = (p.major, p.minor)
            self.total_mem = p.total_memory
            self.props = p
        self.cycles_per_s = 2.0e9
        self.backends = {}
        self.gqa_expanded = 0
        self.kernel_names = {}  # (class, pass, dtype) -> "names"
        self.warmed = False
        self.dt = {"bf16": torch.bfloat16, "fp16": torch.float16}

    # --- helpers ---
    def randn(self, *shape, dtype=None, grad=False):
        t = self.torch.randn(*shape, device=self.dev, dtype=dtype or self.torch.float32)
        if grad:
            t.requires_grad_(True)
        return t

    def dtype(self, name):
        if name not in self.dt:
            raise Skip(f"no {name} recipe for this class")
        return self.dt[name]

    def sync(self):
        if not self.cpu:
            self.torch.cuda.synchronize()

    @staticmethod
    def nbytes(objs):
        n = 0
        for o in objs:
            if hasattr(o, "element_size"):
                n += o.numel() * o.element_size()
            elif isinstance(o, (list, tuple)):
                n += Bench.nbytes(o)
        return n

    def first_warmup(self, seconds=FIRST_WARMUP_S):
        """~2 s of large GEMMs so that clocks and power reach steady state."""
        if self.cpu or self.warmed:
            return
        self.warmed = True
        torch = self.torch
        a = self.randn(8192, 8192, dtype=torch.bfloat16)
        b = self.randn(8192, 8192, dtype=torch.bfloat16)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(10):
                torch.matmul(a, b)
            torch.cuda.synchronize()
        del a, b

    # --- timing ---
    def time_case(self, make_set, run, budget_left):
        """Median µs of one launch of run(set), rotating over sets totalling > 3x L2."""
        torch = self.torch
        first = make_set()
        sets = [first]
        size = self.nbytes(first if isinstance(first, (list, tuple)) else [first])
        if not self.cpu and size < L2_FACTOR * self.l2:
            want = min(MAX_SETS, int(math.ceil(L2_FACTOR * self.l2 / max(size, 1))) + 1)
            sets += [make_set() for _ in range(want - 1)]
        i = [0]

        def step():
            s = sets[i[0] % len(sets)]
            i[0] += 1
            run(s)

        if self.cpu:
            step()
            ts = []
            for _ in range(3):
                t0 = time.perf_counter()
                step()
                ts.append(time.perf_counter() - t0)
            return statistics.median(ts) * 1e6, 3, len(sets), first
        step()  # first launch: lazy initialisation (plans, handles)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(MIN_WARMUPS - 1):
            step()
        host = (time.perf_counter() - t0) / (MIN_WARMUPS - 1)
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(3):
            step()
        b.record()
        b.synchronize()
        est = max(a.elapsed_time(b) * 1e-3 / 3, 1e-6)
        reps = int(min(MAX_REPS, max(MIN_REPS, math.ceil(MIN_SPAN_S / est))))
        if est * reps > budget_left:
            reps = max(3, int(budget_left / est))
        times = []
        sleep = getattr(torch.cuda, "_sleep", None)
        while len(times) < reps:
            k = min(BATCH, reps - len(times))
            evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(k)]
            if sleep is not None:
                # Long enough for the host to queue the k launches (with their events).
                secs = min(0.5, k * (1.5 * host + 10e-6) + 50e-6)
                sleep(int(secs * self.cycles_per_s))
            for ea, eb in evs:
                ea.record()
                step()
                eb.record()
            evs[-1][1].synchronize()
            times += [ea.elapsed_time(eb) * 1e3 for ea, eb in evs]
        return statistics.median(times), reps, len(sets), first

    def record_kernels(self, key, run, s):
        """Names of the kernels one launch runs (torch.profiler, once per class/pass/dtype)."""
        if self.cpu or key in self.kernel_names:
            return
        import json
        import tempfile
        torch = self.torch
        try:
            from torch.profiler import ProfilerActivity, profile
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                run(s)
                torch.cuda.synchronize()
            with tempfile.NamedTemporaryFile("w+", suffix=".json", delete=False) as f:
                path = f.name
            prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as f:
                trace = json.load(f)
            os.unlink(path)
            names = [short_kernel_name(str(e.get("name", "")))
                     for e in (trace if isinstance(trace, list) else trace.get("traceEvents", []))
                     if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
            counts = {}
            for n in names:
                counts[n] = counts.get(n, 0) + 1
            self.kernel_names[key] = "; ".join(f"{n} x{c}" if c > 1 else n for n, c in counts.items()) or "none seen"
        except Exception as e:  # noqa: BLE001 -- profiling is informative only
            self.kernel_names[key] = f"profiler failed: {type(e).__name__}"

    def measure(self, cls, pas, dtype, shape, budget_left):
        """Median µs of one launch; raises Skip when there is no recipe here."""
        ok, why = static_recipe(cls, pas, dtype, shape)
        if not ok:
            raise Skip(why)
        if self.cpu:
            self.cpu_cap(cls, shape)
        make_set, run = getattr(self, "case_" + cls.lower())(pas, dtype, shape)
        self.first_warmup()
        t, reps, nsets, first = self.time_case(make_set, run, budget_left)
        key = (cls, pas, dtype, recipe_variant(cls, shape))
        if key not in self.kernel_names and not self.cpu:
            self.record_kernels(key, run, first)
        return t, reps, nsets

    def cpu_cap(self, cls, shape):
        prod = 1
        for v in shape:
            prod *= max(v, 1)
        if cls == "GEMM":
            work = 2 * prod
        elif cls == "ATTENTION":
            b, h, sq, skv, d = shape[:5]
            work = 4 * b * h * sq * skv * d
        else:
            work = prod * 50
        if work > 2e8:
            raise Skip("too large for the --device cpu smoke path")

    # --- recipes: each returns (make_set, run) ---
    def case_gemm(self, pas, dtype, shape):
        torch = self.torch
        m, n, k = shape[:3]
        batch = shape[3] if len(shape) > 3 else 1
        if dtype == "fp8":
            return self.case_gemm_fp8(pas, m, n, k, batch)
        dt = self.dtype(dtype)
        bshape = (batch,) if batch > 1 else ()
        mm = torch.bmm if batch > 1 else torch.matmul

        def tr(x):
            return x.transpose(-2, -1)

        if pas == "fwd":  # Y[m,n] = X[m,k] . W^T, W stored [n,k]
            def make_set():
                return [self.randn(*bshape, m, k, dtype=dt), self.randn(*bshape, n, k, dtype=dt)]

            def run(s):
                mm(s[0], tr(s[1]))
        elif pas == "dgrad":  # dX[m,n] = dY[m,k] . W, W stored [out=k, in=n]
            def make_set():
                return [self.randn(*bshape, m, k, dtype=dt), self.randn(*bshape, k, n, dtype=dt)]

            def run(s):
                mm(s[0], s[1])
        else:  # wgrad: dW[n,m] = dY^T . X, dY stored [k,n], X stored [k,m]
            def make_set():
                return [self.randn(*bshape, k, n, dtype=dt), self.randn(*bshape, k, m, dtype=dt)]

            def run(s):
                mm(tr(s[0]), s[1])
        return make_set, run

    def case_gemm_fp8(self, pas, m, n, k, batch):
        torch = self.torch
        if self.cpu or self.cc < (8, 9) or not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
            raise Skip("fp8 GEMM needs torch._scaled_mm on sm_89+")
        if m % 16 or n % 16 or k % 16:
            raise Skip("torch._scaled_mm needs m, n, k multiples of 16")
        one = torch.ones((), device=self.dev, dtype=torch.float32)
        fast = pas == "fwd"

        def make_set():
            return [[self.randn(m, k, dtype=torch.bfloat16).to(torch.float8_e4m3fn) for _ in range(batch)],
                    [self.randn(n, k, dtype=torch.bfloat16).to(torch.float8_e4m3fn) for _ in range(batch)]]

        def run(s):
            for a, b in zip(s[0], s[1]):
                torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast)
        return make_set, run

    def sdpa_call(self, q, k, v, causal, gqa):
        F = self.F
        if not hasattr(F, "scaled_dot_product_attention"):  # old torch (CPU smoke only): math attention
            if gqa:
                r = q.shape[1] // k.shape[1]
                k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
            s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            if causal:
                mask = self.torch.ones(s.shape[-2], s.shape[-1], dtype=self.torch.bool, device=s.device).triu(1)
                s = s.masked_fill(mask, float("-inf"))
            return self.torch.softmax(s.float(), -1).to(q.dtype) @ v
        if gqa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), enable_gqa=True)
        return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))

    def case_attention(self, pas, dtype, shape):
        torch = self.torch
        dt = self.dtype(dtype)
        b, h, sq, skv, d, causal, kvh = shape[:7]
        # Blocks: (q rows, kv offset, kv length, causal). CP causal: one diagonal
        # block and cp - 1 blocks of all queries against half a chunk of keys.
        if causal and sq < skv:
            cp = skv // sq
            blocks = [(sq, 0, sq, True)] + [(sq, sq + j * (sq // 2), sq // 2, False) for j in range(cp - 1)]
        else:
            blocks = [(sq, 0, skv, bool(causal))]
        gqa = kvh < h
        expand = [False]
        backward = pas == "dgrad"

        def views(s):
            q, k, v = s[0], s[1], s[2]
            if expand[0] and gqa:
                k, v = s[3], s[4]
            return q, k, v

        def forward(s):
            q, k, v = views(s)
            outs = []
            for rows, off, length, c in blocks:
                outs.append(self.sdpa_call(q[:, :rows].transpose(1, 2), k[:, off:off + length].transpose(1, 2),
                                           v[:, off:off + length].transpose(1, 2), c, gqa and not expand[0]))
            return outs

        def make_tensors():
            # Inputs require grad in both passes: the training forward (softmax statistics kept for the backward).
            s = [self.randn(b, sq, h, d, dtype=dt, grad=True), self.randn(b, skv, kvh, d, dtype=dt, grad=True),
                 self.randn(b, skv, kvh, d, dtype=dt, grad=True)]
            if expand[0] and gqa:
                r = h // kvh
                s += [s[1].detach().repeat_interleave(r, 2).requires_grad_(True),
                      s[2].detach().repeat_interleave(r, 2).requires_grad_(True)]
            return s

        # Pick the backend: cuDNN, else flash, else memory-efficient (GQA expanded if none takes it).
        ctx, name = self.pick_sdpa_backend(make_tensors, forward, backward, gqa, expand)

        def make_set():
            s = make_tensors()
            if backward:
                with ctx():
                    outs = forward(s)
                dout = [torch.randn_like(o) for o in outs]
                leaves = [t for t in views(s)]
                return [s, outs, dout, leaves]
            return [s]

        def run(st):
            with ctx():
                if backward:
                    torch.autograd.grad(st[1], st[3], grad_outputs=st[2], retain_graph=True)
                else:
                    forward(st[0])
        self.backends[name] = self.backends.get(name, 0) + 1
        if expand[0] and gqa:
            self.gqa_expanded += 1
        return make_set, run

    def pick_sdpa_backend(self, make_tensors, forward, backward, gqa, expand):
        import contextlib
        torch = self.torch
        if self.cpu or not hasattr(self.F, "scaled_dot_product_attention"):
            return contextlib.nullcontext, "math (cpu)"
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
        except ImportError:
            return contextlib.nullcontext, "default (no torch.nn.attention)"
        tries = [("cudnn", "CUDNN_ATTENTION"), ("flash", "FLASH_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION")]
        import warnings
        for exp in ([False, True] if gqa else [False]):
            expand[0] = exp
            for name, attr in tries:
                be = getattr(SDPBackend, attr, None)
                if be is None:
                    continue
                ctx = lambda be=be: sdpa_kernel([be])  # noqa: E731
                try:
                    s = make_tensors()
                    with ctx(), warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        outs = forward(s)
                        if backward:
                            torch.autograd.grad(outs, s[:3] if not (exp and gqa) else [s[0], s[3], s[4]],
                                                grad_outputs=[torch.ones_like(o) for o in outs])
                    torch.cuda.synchronize()
                    del s, outs
                    return ctx, name + (" (gqa expanded)" if exp and gqa else "")
                except (RuntimeError, TypeError):
                    continue
        expand[0] = False
        raise Skip("no SDPA backend (cudnn, flash, efficient) runs this shape")

    def norm_case(self, pas, dtype, shape, layer):
        torch, F = self.torch, self.F
        dt = self.dtype(dtype)
        t, hd = shape
        backward = pas == "dgrad"
        if layer:
            def fwd(x, w, bias):
                return F.layer_norm(x, (hd,), w, bias, 1e-5)
        elif hasattr(F, "rms_norm"):
            def fwd(x, w, bias):
                return F.rms_norm(x, (hd,), w, 1e-5)
        else:  # old torch (CPU smoke only): eager RMSNorm
            def fwd(x, w, bias):
                return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * w

        def make_set():  # inputs require grad in both passes: the training forward (keeps rstd / mean)
            x = self.randn(t, hd, dtype=dt, grad=True)
            w = (1 + 0.1 * self.randn(hd)).to(dt).requires_grad_(True)
            bias = (0.1 * self.randn(hd)).to(dt).requires_grad_(True) if layer else None
            leaves = [x, w] + ([bias] if layer else [])
            if not backward:
                return [x, w, bias]
            y = fwd(x, w, bias)
            return [x, w, bias, y, torch.randn_like(y), leaves]

        def run(s):
            if backward:
                torch.autograd.grad(s[3], s[5], grad_outputs=s[4], retain_graph=True)
            else:
                fwd(s[0], s[1], s[2])
        return make_set, run

    def case_rmsnorm(self, pas, dtype, shape):
        return self.norm_case(pas, dtype, shape, layer=False)

    def case_layernorm(self, pas, dtype, shape):
        return self.norm_case(pas, dtype, shape, layer=True)

    def unary_case(self, pas, make_x, fwd):
        """fwd over inputs make_x() (a list); dgrad: autograd.grad of a retained forward w.r.t. them."""
        torch = self.torch
        backward = pas == "dgrad"

        def make_set():
            xs = make_x()
            if not backward:
                return xs
            for x in xs:
                x.requires_grad_(True)
            y = fwd(*xs)
            return [xs, y, torch.randn_like(y)]

        def run(s):
            if backward:
                torch.autograd.grad(s[1], s[0], grad_outputs=s[2], retain_graph=True)
            else:
                fwd(*s)
        return make_set, run

    def case_swiglu(self, pas, dtype, shape):
        dt = self.dtype(dtype)
        t, f = shape

        def fwd(x):  # Megatron's unfused bias_swiglu: chunk FC1's output, silu(gate) * up
            g, u = self.torch.chunk(x, 2, -1)
            return self.F.silu(g) * u
        return self.unary_case(pas, lambda: [self.randn(t, 2 * f, dtype=dt)], fwd)

    def case_gelu(self, pas, dtype, shape):
        dt = self.dtype(dtype)

        def fwd(x):
            try:
                return self.F.gelu(x, approximate="tanh")
            except TypeError:  # old torch
                return self.F.gelu(x)
        return self.unary_case(pas, lambda: [self.randn(shape[0], dtype=dt)], fwd)

    def case_residual_add(self, pas, dtype, shape):
        dt = self.dtype(dtype)
        n = shape[0]

        def make_set():
            return [self.randn(n, dtype=dt), self.randn(n, dtype=dt)]

        def run(s):
            self.torch.add(s[0], s[1])
        return make_set, run

    def case_softmax(self, pas, dtype, shape):
        dt = self.dtype(dtype)
        r, c = shape
        return self.unary_case(pas, lambda: [self.randn(r, c, dtype=dt)], lambda x: self.torch.softmax(x, -1))

    def case_cross_entropy(self, pas, dtype, shape):
        torch, F = self.torch, self.F
        dt = self.dtype(dtype)
        t, v = shape
        backward = pas == "dgrad"

        def make_set():
            logits = self.randn(t, v, dtype=dt, grad=backward)
            target = torch.randint(0, v, (t,), device=self.dev)
            if not backward:
                return [logits, target]
            loss = F.cross_entropy(logits, target)
            return [logits, target, loss]

        def run(s):
            if backward:
                torch.autograd.grad(s[2], [s[0]], retain_graph=True)
            else:
                F.cross_entropy(s[0], s[1])
        return make_set, run

    def case_embedding(self, pas, dtype, shape):
        torch, F = self.torch, self.F
        dt = self.dtype(dtype)
        t, hd, v = shape
        backward = pas == "wgrad"

        def make_set():
            w = self.randn(v, hd, dtype=dt, grad=backward)
            idx = torch.randint(0, v, (t,), device=self.dev)
            if not backward:
                return [idx, w]
            y = F.embedding(idx, w)
            return [idx, w, y, torch.randn_like(y)]

        def run(s):
            if backward:
                torch.autograd.grad(s[2], [s[1]], grad_outputs=s[3], retain_graph=True)
            else:
                F.embedding(s[0], s[1])
        return make_set, run

    def copy_case(self, nbytes):
        torch = self.torch
        n = max(1, int(nbytes) // 2)

        def make_set():
            return [torch.randint(1, 255, (n,), dtype=torch.uint8, device=self.dev),
                    torch.empty(n, dtype=torch.uint8, device=self.dev)]

        def run(s):
            s[1].copy_(s[0])
        return make_set, run

    def case_elementwise(self, pas, dtype, shape):
        torch = self.torch
        dt = self.dtype(dtype)
        bf, f32 = dt, torch.float32
        n = shape[0]
        if len(shape) == 1:  # dropout-like read-and-write pass: x * mask (mask a scalar)
            return (lambda: [self.randn(n, dtype=bf)]), (lambda s: torch.mul(s[0], 1.1111))
        second = shape[1]
        if second >= 256 and second % 64 == 0:  # MoE permutation: rows x hidden gathered by index
            rows, hd = shape

            def make_set():
                return [self.randn(rows, hd, dtype=bf), torch.randperm(rows, device=self.dev)]
            return make_set, (lambda s: torch.index_select(s[0], 0, s[1]))
        bpe = second
        if bpe == 2:
            return (lambda: [self.randn(n, dtype=bf)]), (lambda s: torch.amax(s[0]))
        if bpe == 3 and hasattr(torch, "float8_e4m3fn") and not self.cpu:
            return (lambda: [self.randn(n, dtype=bf)]), (lambda s: s[0].to(torch.float8_e4m3fn))
        if bpe == 4:
            return (lambda: [self.randn(n, dtype=f32)]), (lambda s: s[0].zero_())
        if bpe == 5:
            def make_set():
                return [self.randn(n, dtype=bf), torch.rand(n, device=self.dev) < 0.5]
            return make_set, (lambda s: s[0].masked_fill(s[1], -10000.0))
        if bpe == 6:
            def make_set():
                return [self.randn(n, dtype=f32), torch.empty(n, dtype=bf, device=self.dev)]
            return make_set, (lambda s: s[1].copy_(s[0]))
        if bpe == 8:
            return (lambda: [self.randn(n, dtype=f32)]), (lambda s: s[0].mul_(0.999))
        if bpe == 10:
            def make_set():
                return [self.randn(n, dtype=f32), self.randn(n, dtype=bf)]
            return make_set, (lambda s: s[0].add_(s[1]))
        if bpe == 12:
            return (lambda: [self.randn(n, dtype=f32), self.randn(n, dtype=f32)]), (lambda s: torch.add(s[0], s[1]))
        return self.copy_case(n * bpe)

    def case_optimizer(self, pas, dtype, shape):
        torch = self.torch
        n = shape[0]
        sizes = [OPT_CHUNK] * (n // OPT_CHUNK) + ([n % OPT_CHUNK] if n % OPT_CHUNK else [])
        if len(shape) == 2:
            bpe = shape[1]
            if bpe == 4 and hasattr(torch, "_foreach_norm"):
                return (lambda: [[self.randn(s) for s in sizes]]), (lambda st: torch._foreach_norm(st[0]))
            if bpe == 8:
                return (lambda: [[self.randn(s) for s in sizes]]), (lambda st: torch._foreach_mul_(st[0], 0.999))
            return self.copy_case(n * bpe)

        def make_set():
            params = [torch.nn.Parameter(self.randn(s)) for s in sizes]
            for p in params:
                p.grad = self.randn(p.numel())
            try:
                opt = torch.optim.Adam(params, lr=1e-4, fused=True)
            except (TypeError, RuntimeError, ValueError):  # old torch / CPU without fused Adam
                opt = torch.optim.Adam(params, lr=1e-4)
            opt.step()  # creates m and v (fp32)
            return [params, opt, [p.grad for p in params]]

        def run(st):
            st[1].step()
        return make_set, run


# ----------------------------------------------------------------------------
# Commands.


def cmd_check(args):
    tables = [read_table(p) for p in args.tables]
    if args.grid:
        if not args.gpu:
            raise SystemExit("kernel_bench: --grid needs --gpu")
        g = Table("<grid>")
        g.items = [("row", r) for r in grid_rows(args.gpu)]
        for r in g.rows:
            for field, msg in validate_fields(r.fields)[0]:
                g.errors.append(f"<grid>:{r.line}:{field}: {msg}")
        tables.append(g)
    if not tables:
        raise SystemExit("kernel_bench: --check needs a table (or --grid)")
    bad = False
    for t in tables:
        for e in t.errors:
            print(e, file=sys.stderr)
        bad |= bool(t.errors)
        counts = {}
        for r in t.rows:
            c = counts.setdefault(r.get("class"), [0, 0, 0])
            c[0] += 1
            ok, _ = static_recipe(r.get("class"), r.get("pass"), r.get("dtype"), r.shape)
            c[1 if ok else 2] += 1
        status = f"{len(t.bad_lines) or len(t.errors)} bad rows" if t.errors else "valid"
        print(f"{t.path}: {len(t.rows)} rows, {status}")
        print(f"  {'class':<14} {'rows':>6} {'recipe':>7} {'none':>6}")
        for cls in CLASS_ORDER:
            if cls in counts:
                c = counts[cls]
                print(f"  {cls:<14} {c[0]:>6} {c[1]:>7} {c[2]:>6}")
    return 1 if bad else 0


def build_output(args):
    """(table or None, grid rows) for emit / measure."""
    if len(args.tables) > 1:
        raise SystemExit("kernel_bench: one input table at most when measuring or emitting")
    table = None
    if args.tables:
        table = read_table(args.tables[0])
        if table.errors:
            for e in table.errors:
                print(e, file=sys.stderr)
            if not any(kind == "header" for kind, _ in table.items):
                raise SystemExit(f"kernel_bench: {args.tables[0]} has no table to measure")
            warn(f"{len(table.bad_lines)} bad rows in {args.tables[0]}: written back as they are, not measured")
    grid = []
    if args.grid:
        if not args.gpu:
            raise SystemExit("kernel_bench: --grid needs --gpu")
        grid = grid_rows(args.gpu)
    if table is None and not grid:
        raise SystemExit("kernel_bench: nothing to do: give a table and/or --grid")
    return table, grid


GRID_COMMENT = ("fit grid (kernel_bench.py --grid): GEMM squares, K sweep and skinny M (fwd); attention full and "
                "causal; norms / SwiGLU / GeLU / residual add over tokens x hidden")


def cmd_emit(args):
    table, grid = build_output(args)
    comments = [f"shape list: python3 calib/device/kernel_bench.py {' '.join(sys.argv[1:])} "
                f"(lacuna {git_revision()}); time_us empty: to be measured"]
    write_atomic(args.output, render(comments, table, grid, GRID_COMMENT))
    n = (len(table.rows) if table else 0) + len(grid)
    warn(f"wrote {n} rows ({len(grid)} grid) to {args.output or 'stdout'}")
    return 0


def sort_key(key):
    gpu, cls, pas, dtype, shape = key
    return (CLASS_ORDER.index(cls), shape, PASS_ORDER.index(pas), DTYPES.index(dtype), gpu)


def cmd_measure(args):
    table, grid = build_output(args)
    rows = (table.rows if table else []) + grid
    groups = {}  # key -> rows
    other_gpu = 0
    for r in rows:
        if r.get("time_us"):
            continue
        if args.gpu and r.get("gpu") != args.gpu:
            other_gpu += 1
            continue
        groups.setdefault(r.key, []).append(r)
    keys = sorted(groups, key=sort_key)
    if args.max_rows is not None:
        keys = keys[:args.max_rows]

    def on_signal(signum, _frame):
        raise Stop(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    nv_before = nvml_sample() if args.device == "cuda" else None
    bench = Bench(args.device, args.seed)
    t_start = time.monotonic()  # the budget counts from here: torch's import and CUDA initialisation are not in it
    torch = bench.torch
    if args.device == "cuda" and nv_before and nv_before.get("sm_max_mhz"):
        bench.cycles_per_s = nv_before["sm_max_mhz"] * 1e6
    info = {"measured": 0, "skipped": 0, "failed": 0, "left": 0, "stop": ""}
    skips = {}

    def comments(final):
        c = [f"source: python3 calib/device/kernel_bench.py {' '.join(sys.argv[1:])} (lacuna {git_revision()})"]
        if bench.cpu:
            c.append("device: cpu (--device cpu smoke path: the times are CPU times and mean nothing for a GPU)")
        else:
            p = bench.props
            c.append(f"device: {p.name} (sm_{p.major}{p.minor}; {p.multi_processor_count} SMs; "
                     f"L2 {bench.l2 / 2**20:.0f} MiB; {p.total_memory / 2**30:.1f} GiB); "
                     f"driver {(nv_before or {}).get('driver', 'unknown')} (CUDA driver API {cuda_driver_version()})")
        compiled = getattr(torch._C, "_cuda_getCompiledVersion", lambda: None)()
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        c.append(f"software: torch {torch.__version__}; CUDA {torch.version.cuda} (compiled {compiled}); cuBLAS "
                 f"{cublas_version() if not bench.cpu else 'n/a'}; cuDNN {cudnn}; python {sys.version.split()[0]}")
        if args.device == "cuda":
            c.append(f"before: {nvml_text(nv_before)}")
            c.append(f"after: {nvml_text(nvml_sample()) if final else '(run in progress)'}")
        if bench.cpu:
            c.append("timing: median of 3 perf_counter timings after one warm-up (smoke path); no rotation")
        else:
            c.append(f"timing: median per launch of max({MIN_REPS} launches; {MIN_SPAN_S * 1e3:.0f} ms) at most "
                     f"{MAX_REPS} after >= {MIN_WARMUPS} warm-ups (first row after {FIRST_WARMUP_S:.0f} s of "
                     f"8192^3 GEMMs); CUDA events around each launch; launches queued behind torch.cuda._sleep (GPU "
                     f"runs them back to back); inputs random normal rotated over > {L2_FACTOR:.0f}x L2; recipes: "
                     f"docstring of calib/device/kernel_bench.py")
        state = "" if final else " (in progress)"
        c.append(f"measured{state}: {info['measured']} of {len(keys)} distinct shapes to measure "
                 f"({sum(len(groups[k]) for k in keys)} rows) in {time.monotonic() - t_start:.0f} s of a "
                 f"{args.budget_s:.0f} s budget; no recipe here {info['skipped']}; failed {info['failed']}; "
                 f"left unmeasured (budget or stop) {info['left']}{'; stopped by ' + info['stop'] if info['stop'] else ''}; "
                 f"rows of another gpu {other_gpu}")
        if skips:
            c.append("skipped: " + "; ".join(f"{k} ({v})" for k, v in sorted(skips.items())))
        if bench.backends:
            c.append("attention backends (distinct shapes): " + "; ".join(
                f"{k} {v}" for k, v in sorted(bench.backends.items())) + f"; gqa expanded {bench.gqa_expanded}")
        for (cls, pas, dt, var), names in sorted(bench.kernel_names.items()):
            c.append(f"kernels {cls} {pas} {dt}{' ' + var if var else ''}: {names}")
        return c

    def flush(final):
        write_atomic(args.output, render(comments(final), table, grid, GRID_COMMENT))

    last_write = time.monotonic()
    idx = 0
    try:
        for idx, key in enumerate(keys):
            _gpu, cls, pas, dtype, shape = key
            left = args.budget_s - (time.monotonic() - t_start)
            if left <= 0:
                info["left"] = len(keys) - idx
                warn(f"budget of {args.budget_s:.0f} s spent: {info['left']} shapes left empty")
                break
            failed = False
            try:
                oom = False
                try:
                    us, reps, nsets = bench.measure(cls, pas, dtype, shape, left)
                except RuntimeError as e:  # out of memory: free the allocator's cache and try once more
                    if bench.cpu or "out of memory" not in str(e):
                        raise
                    oom = True
                if oom:  # outside the except block: the first attempt's tensors are released by now
                    torch.cuda.empty_cache()
                    us, reps, nsets = bench.measure(cls, pas, dtype, shape, left)
                for r in groups[key]:
                    r.time = us
                info["measured"] += 1
                if args.verbose:
                    warn(f"{cls} {pas} {dtype} {' '.join(map(str, shape))}: {us:.3f} us ({reps} reps, {nsets} sets)")
            except Skip as e:
                info["skipped"] += 1
                skips[str(e)] = skips.get(str(e), 0) + 1
                warn(f"skip {cls} {pas} {dtype} {' '.join(map(str, shape))}: {e}")
            except Stop:
                raise
            except Exception as e:  # noqa: BLE001 -- one row's failure (OOM, unsupported) is not the run's
                info["failed"] += 1
                failed = True
                warn(f"failed {cls} {pas} {dtype} {' '.join(map(str, shape))}: {type(e).__name__}: "
                     f"{str(e).splitlines()[0] if str(e) else ''}")
            # Outside the except block, so that the failed row's tensors (held by the traceback) are gone.
            if not bench.cpu:
                try:
                    torch.cuda.synchronize()
                    if failed or torch.cuda.memory_reserved() > 0.6 * bench.total_mem:
                        torch.cuda.empty_cache()
                except RuntimeError as e:  # a sticky CUDA error: nothing more can run in this process
                    info["left"] = len(keys) - idx - 1
                    info["stop"] = f"CUDA error ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
                    warn(f"stopping: {info['stop']}")
                    break
            if time.monotonic() - last_write > REWRITE_EVERY_S:
                warn(f"progress: {idx + 1} of {len(keys)} shapes done ({info['measured']} measured) in "
                     f"{time.monotonic() - t_start:.0f} s")
                if args.output not in (None, "-"):
                    flush(False)
                last_write = time.monotonic()
    except Stop as e:
        info["stop"] = str(e)
        info["left"] = len(keys) - idx
        warn(f"stopped by {e}: writing the {info['measured']} shapes measured")
    flush(True)
    warn(f"measured {info['measured']} of {len(keys)} shapes in {time.monotonic() - t_start:.0f} s "
         f"(skipped {info['skipped']}, failed {info['failed']}, left unmeasured {info['left']}) -> "
         f"{args.output or 'stdout'}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Measure (or check, or emit) a measured-kernel table (calib/measurements/README.md) "
                    "with PyTorch's kernels. torch is imported only to measure.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Recipes and the timing method: see the module docstring (head of this file).")
    ap.add_argument("tables", nargs="*", metavar="TABLE", help="*.kernels.csv input(s); time_us empty = to measure")
    ap.add_argument("-o", "--output", default=None, help="output table (default stdout)")
    ap.add_argument("--gpu", help="lacuna hardware preset of this GPU (gpu column); needed with --grid; when "
                                  "measuring, rows of another gpu are left alone")
    ap.add_argument("--grid", action="store_true", help="append the fit grid (group grid) to the table")
    ap.add_argument("--check", action="store_true", help="validate the table(s) (and the grid with --grid); no torch; "
                                                         "exit 1 naming file:line:field of each bad row")
    ap.add_argument("--emit-only", action="store_true", help="write the table (+ grid) without measuring; no torch")
    ap.add_argument("--budget-s", type=float, default=300.0, help="measuring time budget in seconds (default 300)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: smoke path (CPU times, tiny caps) to exercise the code")
    ap.add_argument("--max-rows", type=int, default=None, help="measure at most N distinct shapes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-v", "--verbose", action="store_true", help="print each measured shape")
    args = ap.parse_args(argv)
    if args.check:
        return cmd_check(args)
    if args.emit_only:
        return cmd_emit(args)
    return cmd_measure(args)


if __name__ == "__main__":
    sys.exit(main())
