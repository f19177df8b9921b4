#!/usr/bin/env python3
"""DualPipe's and DualPipeV's order per rank, from their authors' runtime, in
lacuna's action IR.

Runs DualPipe.step (dualpipe/dualpipe.py) or DualPipeV.step
(dualpipe/dualpipev.py) of deepseek-ai/DualPipe unmodified (the expected
orders in sim/schedule/dualpipe_test.cpp and dualpipev_test.cpp came from
commit 3da1bbea), with torch stubbed out and the compute and communication
methods overridden: each forward, backward, zero-bubble backward (I, its
weight pass queued) and weight-queue pop (W) is logged instead of computed,
an overlapped _forward_backward_compute_chunk as "F&B".

DualPipeV: phase 0 of rank r is stage r, phase 1 stage 2*pp - 1 - r (the V
layout). DualPipe: step() names a rank's two modules by phase, flipped on
the second half of the ranks (phase ^ is_in_second_half: module 0 always
runs the pipeline that starts at rank 0); lacuna's bidirectional layout
numbers module 0 of rank r as stage r and module 1 as stage 2*pp - 1 - r,
and gives the second pipeline the microbatches after the first's
(microbatch k of module 1 is m/2 + k).

    git clone https://github.com/deepseek-ai/DualPipe && cd DualPipe
    python3 /path/to/lacuna/tools/reference/dualpipe_orders.py dualpipe|dualpipev PP MICROBATCHES

Needs no torch and no GPU. docs/schedules.md#dualpipev, #dualpipe.
"""
import sys, types
class _Any:
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return _Any()
    def __getattr__(self, n): return _Any()
    def __getitem__(self, k): return _Any()
def stubmod(name):
    m = types.ModuleType(name)
    m.__getattr__ = lambda n: _Any
    sys.modules[name] = m
    return m
torch = stubmod('torch'); nn = stubmod('torch.nn'); dist = stubmod('torch.distributed'); ag = stubmod('torch.autograd')
class Module: pass
nn.Module = Module; nn.ModuleList = list; torch.nn = nn; torch.distributed = dist; torch.autograd = ag
torch.Tensor = type('Tensor', (), {})
torch.is_grad_enabled = lambda: True
sys.path.insert(0, '.')
import dualpipe.comm as comm
import dualpipe.dualpipe as dp
from dualpipe.dualpipe import DualPipe
from dualpipe.dualpipev import DualPipeV

dp.scatter = lambda inputs, n, dim: [[] for _ in range(n)]

def recorder(base, bidirectional):
    class Rec(base):
        def __init__(self, pp, m, rank):
            self.num_ranks = pp; self.rank = rank; self.m = m
            self.is_first_rank = rank == 0; self.is_last_rank = rank == pp - 1
            self.is_in_second_half = rank >= pp // 2
            self.is_middle_rank = rank == pp // 2 - 1 or rank == pp // 2
            self.out = []; self.q = []; self.batch_dim = 0
        def module(self, phase):
            return phase ^ self.is_in_second_half if bidirectional else phase
        def label(self, module, mb, kind):
            stage = self.rank if module == 0 else 2 * self.num_ranks - 1 - self.rank
            first = self.m // 2 if bidirectional and module == 1 else 0
            return f"{stage}{kind}{mb + first}"
        def _forward_compute_chunk(self, phase):
            phase = self.module(phase)
            mb = self.current_f_chunk_id[phase]; self.current_f_chunk_id[phase] += 1
            self.out.append(self.label(phase, mb, "F"))
        def _backward_compute_chunk(self, phase, enable_zb=False):
            phase = self.module(phase)
            mb = self.current_b_chunk_id[phase]; self.current_b_chunk_id[phase] += 1
            if enable_zb:
                self.out.append(self.label(phase, mb, "I")); self.q.append(self.label(phase, mb, "W"))
            else:
                self.out.append(self.label(phase, mb, "B"))
        def _forward_backward_compute_chunk(self, p0, p1):
            self._forward_compute_chunk(p0); f = self.out.pop()
            self._backward_compute_chunk(p1); b = self.out.pop()
            self.out.append(f + "&" + b)
        def _weight_chunk(self): self.out.append(self.q.pop(0))
        def _recv_forward(self, phase): pass
        def _send_forward(self, phase): pass
        def _recv_backward(self, phase): pass
        def _send_backward(self, phase): pass
        def _commit_and_wait_comm(self): pass
    return Rec

comm.set_p2p_tensor_shapes([(1,)]); comm.set_p2p_tensor_dtype("bf16")
which, pp, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
Rec = recorder(DualPipe, True) if which == "dualpipe" else recorder(DualPipeV, False)
for r in range(pp):
    x = Rec(pp, m, r)
    x.step(num_chunks=m, criterion=lambda *a: None)
    assert not x.q
    print(f"rank {r}: " + " ".join(x.out))
