#!/usr/bin/env python3
"""Tests of the GPU-campaign scripts that need no GPU and no torch (stdlib only).

kernel_bench.py --check accepts a good table and names file:line:field of each
bad row; the shape arity per class; --grid is deterministic and valid;
kernel_bench.py and torch_step.py --help, --check and --emit-only never import
torch (a poisoned `torch` package on PYTHONPATH proves it); campaign --cpu
passes without lacuna. CTest: calib/device/tests.cmake (label quick).
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import kernel_bench as kb  # noqa: E402

HEADER = "gpu,class,pass,dtype,shape,time_us,group,label"

GOOD = """# a comment
# another
gpu,class,pass,dtype,shape,time_us,group,label
h100-sxm,GEMM,fwd,bf16,2048 9216 12288,,gpt3,qkv fwd
h100-sxm,GEMM,dgrad,bf16,2048 12288 9216,,gpt3,qkv dgrad
h100-sxm,GEMM,wgrad,fp8,12288 9216 2048,579.5,gpt3,qkv wgrad measured
h100-sxm,GEMM,fwd,bf16,4096 4096 7168 4,,moe,expert fc1 batched
h100-sxm,ATTENTION,fwd,bf16,1 32 4096 4096 128 1 8,,llama,core
h100-sxm,ATTENTION,dgrad,bf16,1 32 2048 4096 128 1 8,,llama,core cp2
h100-sxm,ATTENTION,fwd,bf16,1 32 4096 4096 128 1 8 1024,,llama,windowed
h100-sxm,RMSNORM,fwd,bf16,4096 4096,,llama,norm
h100-sxm,RMSNORM,dgrad,bf16,4096 4096,,llama,norm
h100-sxm,LAYERNORM,fwd,fp16,2048 12288,,gpt3,norm

h100-sxm,SWIGLU,dgrad,bf16,4096 14336,,llama,act
h100-sxm,GELU,fwd,bf16,25165824,,gpt3,act
h100-sxm,RESIDUAL_ADD,dgrad,bf16,16777216,,llama,residual
h100-sxm,EMBEDDING,wgrad,bf16,4096 4096 128256,,llama,embedding
h100-sxm,CROSS_ENTROPY,fwd,bf16,4096 128256,,llama,loss
h100-sxm,OPTIMIZER,fwd,bf16,1000000,,llama,adam
h100-sxm,OPTIMIZER,fwd,bf16,1000000 4,,llama,grad norm
h100-sxm,ELEMENTWISE,wgrad,bf16,1000000 10,,llama,grad accum
h100-sxm,ELEMENTWISE,fwd,bf16,1000000,,llama,dropout
h100-sxm,SOFTMAX,dgrad,fp8,4096 64,,moe,router fp8 has no recipe
"""


def poisoned_env():
    """An environment whose `import torch` fails loudly."""
    d = tempfile.mkdtemp(prefix="no-torch-")
    os.makedirs(os.path.join(d, "torch"))
    with open(os.path.join(d, "torch", "__init__.py"), "w", encoding="utf-8") as f:
        f.write("raise ImportError('torch must not be imported here')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = d + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHON"] = sys.executable
    return env


ENV = poisoned_env()
atexit.register(shutil.rmtree, os.path.dirname(ENV["PYTHONPATH"].split(os.pathsep)[0] + "/"), True)


def run(*args, script="kernel_bench.py"):
    return subprocess.run([sys.executable, os.path.join(HERE, script), *args], capture_output=True, text=True,
                          env=ENV, timeout=60)


class Tmp(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, text):
        p = os.path.join(self.dir.name, name)
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
        return p


class CheckTest(Tmp):
    def test_accepts_good_table(self):
        p = self.write("good.kernels.csv", GOOD)
        r = run("--check", p)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"{p}: 20 rows, valid", r.stdout)
        lines = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines()[2:]}
        # class rows recipe none: the windowed attention and the fp8 softmax have no recipe.
        self.assertEqual(lines["GEMM"], ["4", "4", "0"])
        self.assertEqual(lines["ATTENTION"], ["3", "2", "1"])
        self.assertEqual(lines["SOFTMAX"], ["1", "0", "1"])
        self.assertEqual(lines["OPTIMIZER"], ["2", "2", "0"])

    def test_rejects_bad_rows_with_file_line_field(self):
        bad = {
            "h100-sxm,CONV,fwd,bf16,1 2,,g,l": "class",
            "h100-sxm,GEMM,bwd,bf16,1 2 3,,g,l": "pass",
            "h100-sxm,OPTIMIZER,dgrad,bf16,100,,g,l": "pass",
            "h100-sxm,GEMM,fwd,int8,1 2 3,,g,l": "dtype",
            "h100-sxm,GEMM,fwd,bf16,1 2,,g,l": "shape",
            "h100-sxm,GEMM,fwd,bf16,1 0 3,,g,l": "shape",
            "h100-sxm,GEMM,fwd,bf16,1 -2 3,,g,l": "shape",
            "h100-sxm,GEMM,fwd,bf16,1 2.5 3,,g,l": "shape",
            "h100-sxm,RMSNORM,fwd,bf16,,,g,l": "shape",
            "h100-sxm,ATTENTION,fwd,bf16,1 32 128 128 64 2 8,,g,l": "shape",
            "h100-sxm,ATTENTION,fwd,bf16,1 32 128 128 64 1 6,,g,l": "shape",
            "h100-sxm,GEMM,fwd,bf16,1 2 3,-4,g,l": "time_us",
            "h100-sxm,GEMM,fwd,bf16,1 2 3,abc,g,l": "time_us",
            "h100-sxm,GEMM,fwd,bf16,1 2 3,,,l": "group",
            "H100 SXM,GEMM,fwd,bf16,1 2 3,,g,l": "gpu",
            "h100-sxm,GEMM,fwd,bf16,1 2 3,,g,label, with comma": "row",
        }
        good = "h100-sxm,GEMM,fwd,bf16,8 8 8,,g,fine"
        text = HEADER + "\n" + good + "\n" + "\n".join(bad) + "\n"
        p = self.write("bad.kernels.csv", text)
        r = run("--check", p)
        self.assertEqual(r.returncode, 1)
        for i, field in enumerate(bad.values()):
            self.assertIn(f"{p}:{i + 3}:{field}:", r.stderr, f"row {i + 3} ({field}):\n{r.stderr}")
        self.assertNotIn(f"{p}:2:", r.stderr)
        self.assertIn(f"{len(bad)} bad rows", r.stdout)

    def test_rejects_bad_header(self):
        p = self.write("h.kernels.csv", "# c\ngpu,class,pass,dtype,shape,time,group,label\n")
        r = run("--check", p)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"{p}:2:header:", r.stderr)
        p = self.write("empty.kernels.csv", "# only comments\n")
        r = run("--check", p)
        self.assertEqual(r.returncode, 1)
        self.assertIn(":header:", r.stderr)

    def test_missing_file(self):
        r = run("--check", os.path.join(self.dir.name, "absent.csv"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("absent.csv:0:file:", r.stderr)


class ArityTest(unittest.TestCase):
    ARITIES = {
        "GEMM": (3, 4), "ATTENTION": (7, 8), "LAYERNORM": (2,), "RMSNORM": (2,), "GELU": (1,), "SWIGLU": (2,),
        "RESIDUAL_ADD": (1,), "EMBEDDING": (3,), "CROSS_ENTROPY": (2,), "OPTIMIZER": (1, 2), "ELEMENTWISE": (1, 2),
        "SOFTMAX": (2,),
    }

    def errors(self, cls, shape, pas="fwd", dtype="bf16"):
        fields = ["h100-sxm", cls, pas, dtype, " ".join(str(x) for x in shape), "", "g", "l"]
        return [f for f, _ in kb.validate_fields(fields)[0]]

    def test_every_class_listed(self):
        self.assertEqual(set(self.ARITIES), set(kb.CLASSES))

    def test_arity_per_class(self):
        for cls, arities in self.ARITIES.items():
            for n in range(1, 10):
                shape = [8] * n
                if cls == "ATTENTION" and n >= 7:
                    shape[5] = 1
                errs = self.errors(cls, shape)
                if n in arities:
                    self.assertEqual(errs, [], f"{cls} with {n} entries")
                else:
                    self.assertEqual(errs, ["shape"], f"{cls} with {n} entries")

    def test_attention_rules(self):
        self.assertEqual(self.errors("ATTENTION", [1, 32, 128, 128, 64, 0, 8]), [])
        self.assertEqual(self.errors("ATTENTION", [1, 32, 128, 128, 64, 1, 32, 64]), [])
        self.assertEqual(self.errors("ATTENTION", [1, 32, 128, 128, 64, 3, 8]), ["shape"])
        self.assertEqual(self.errors("ATTENTION", [1, 32, 128, 128, 0, 1, 8]), ["shape"])
        self.assertEqual(self.errors("ATTENTION", [1, 32, 128, 128, 64, 1, 12]), ["shape"])

    def test_passes(self):
        self.assertEqual(self.errors("GEMM", [8, 8, 8], "wgrad"), [])
        self.assertEqual(self.errors("EMBEDDING", [8, 8, 8], "wgrad"), [])
        self.assertEqual(self.errors("EMBEDDING", [8, 8, 8], "dgrad"), ["pass"])
        self.assertEqual(self.errors("ATTENTION", [1, 2, 8, 8, 8, 1, 2], "wgrad"), ["pass"])
        self.assertEqual(self.errors("OPTIMIZER", [8], "fwd"), [])
        self.assertEqual(self.errors("OPTIMIZER", [8], "dgrad"), ["pass"])
        self.assertEqual(self.errors("ELEMENTWISE", [8, 10], "wgrad"), [])

    def test_static_recipes(self):
        self.assertTrue(kb.static_recipe("GEMM", "fwd", "fp8", (16, 16, 16))[0])
        self.assertFalse(kb.static_recipe("RMSNORM", "fwd", "fp8", (16, 16))[0])
        self.assertFalse(kb.static_recipe("ATTENTION", "fwd", "bf16", (1, 2, 64, 64, 64, 1, 2, 32))[0])
        self.assertTrue(kb.static_recipe("ATTENTION", "fwd", "bf16", (1, 2, 64, 256, 64, 1, 2))[0])  # CP causal
        self.assertFalse(kb.static_recipe("ATTENTION", "fwd", "bf16", (1, 2, 96, 256, 64, 1, 2))[0])
        self.assertTrue(kb.static_recipe("ATTENTION", "dgrad", "bf16", (1, 2, 96, 256, 64, 0, 2))[0])


class GridTest(Tmp):
    def test_deterministic_and_valid(self):
        a = run("--grid", "--gpu", "h100-sxm", "--emit-only")
        b = run("--grid", "--gpu", "h100-sxm", "--emit-only")
        self.assertEqual(a.returncode, 0, a.stderr)
        self.assertEqual(a.stdout, b.stdout)
        p = self.write("grid.kernels.csv", a.stdout)
        r = run("--check", p)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        t = kb.read_table(p)
        self.assertEqual(t.errors, [])
        rows = t.rows
        self.assertEqual(len(rows), len(kb.grid_shapes()))
        self.assertEqual(len({r.key for r in rows}), len(rows))
        for r in rows:
            self.assertEqual(r.get("gpu"), "h100-sxm")
            self.assertEqual(r.get("group"), "grid")
            self.assertEqual(r.get("time_us"), "")
            self.assertTrue(r.get("label"))
            self.assertTrue(kb.static_recipe(r.get("class"), r.get("pass"), r.get("dtype"), r.shape)[0])
        gemm = [r.shape for r in rows if r.get("class") == "GEMM"]
        squares = [s[0] for s in gemm if s[0] == s[1] == s[2]]
        self.assertEqual(squares, [1024, 1536, 2048, 2816, 4096, 5888, 8192, 11520, 16384])
        self.assertTrue(all(s % 256 == 0 for s in squares))
        self.assertIn((8192, 8192, 512), gemm)
        self.assertIn((8192, 8192, 16384), gemm)
        for m in (256, 512, 1024, 2048):
            self.assertIn((m, 8192, 8192), gemm)
        self.assertTrue(all(r.get("pass") == "fwd" for r in rows if r.get("class") == "GEMM"))
        att = [r for r in rows if r.get("class") == "ATTENTION"]
        self.assertLessEqual(len(att), 40)
        self.assertEqual({r.shape[5] for r in att}, {0, 1})
        for cls in ("RMSNORM", "LAYERNORM", "SWIGLU"):
            self.assertIn((16384, 12288), [r.shape for r in rows if r.get("class") == cls])
        self.assertIn((2048 * 4096,), [r.shape for r in rows if r.get("class") == "RESIDUAL_ADD"])

    def test_emit_keeps_bad_rows_unmeasured(self):
        text = HEADER + "\nh100-sxm,GEMM,fwd,bf16,8 8 8,,g,ok\nh100-sxm,EMBEDDING,dgrad,bf16,8 8 8,,g,odd pass\n"
        p = self.write("mixed.kernels.csv", text)
        out = os.path.join(self.dir.name, "mixed.out.csv")
        r = run(p, "--emit-only", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"{p}:3:pass:", r.stderr)
        with open(out, encoding="utf-8") as f:
            self.assertEqual([ln for ln in f.read().splitlines() if not ln.startswith("#")], text.splitlines())

    def test_grid_needs_gpu(self):
        r = run("--grid", "--emit-only")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--gpu", r.stderr)

    def test_emit_keeps_rows_and_comments_in_order(self):
        p = self.write("in.kernels.csv", GOOD)
        out = os.path.join(self.dir.name, "out.kernels.csv")
        r = run(p, "--grid", "--gpu", "h100-sxm", "--emit-only", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out, encoding="utf-8") as f:
            lines = f.read().splitlines()
        self.assertTrue(lines[0].startswith("# "))
        body = lines[1:1 + len(GOOD.splitlines())]
        self.assertEqual(body, GOOD.splitlines())
        self.assertEqual(sum(1 for ln in lines if ln == HEADER), 1)
        self.assertEqual(run("--check", out).returncode, 0)
        self.assertEqual(len(kb.read_table(out).rows), 20 + len(kb.grid_shapes()))


class NoTorchTest(unittest.TestCase):
    def test_poison_works(self):
        r = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, env=ENV)
        self.assertNotEqual(r.returncode, 0)

    def test_help_without_torch(self):
        for script in ("kernel_bench.py", "torch_step.py"):
            r = run("--help", script=script)
            self.assertEqual(r.returncode, 0, f"{script}: {r.stderr}")
            self.assertIn("usage:", r.stdout)
        r = run("--help", script="torch_step.py")
        for flag in ("--hidden", "--ffn", "--heads", "--kv-heads", "--layers", "--seq", "--micro-batch",
                     "--micro-batches", "--vocab", "--swiglu", "--gelu", "--rmsnorm", "--layernorm", "--dtype"):
            self.assertIn(flag, r.stdout)
        r = run("--help")
        for flag in ("--check", "--grid", "--gpu", "--emit-only", "--budget-s", "--device", "--max-rows", "-o"):
            self.assertIn(flag, r.stdout)

    def test_import_does_not_load_torch(self):
        self.assertNotIn("torch", sys.modules)

    def test_campaign_cpu_without_lacuna(self):
        env = dict(ENV, LACUNA_BIN=os.path.join(tempfile.gettempdir(), "no-such-lacuna"))
        r = subprocess.run(["bash", os.path.join(HERE, "campaign"), "--cpu"], capture_output=True, text=True,
                           env=env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("skipping kernel-shapes", r.stdout)
        self.assertIn("campaign --cpu: OK", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=1)
