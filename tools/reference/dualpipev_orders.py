#!/usr/bin/env python3
"""DualPipeV's order per rank, from its authors' runtime, in lacuna's action IR.

Runs DualPipeV.step of deepseek-ai/DualPipe (dualpipe/dualpipev.py; the
expected orders in sim/schedule/dualpipev_test.cpp came from commit 3da1bbea)
unmodified, with torch stubbed out and the compute and communication methods
overridden: each forward, backward, zero-bubble backward (I, its weight pass
queued) and weight-queue pop (W) is logged instead of computed, an overlapped
_forward_backward_compute_chunk as "F&B". Phase 0 of rank r is stage r,
phase 1 stage 2*pp - 1 - r (the V layout).

    git clone https://github.com/deepseek-ai/DualPipe && cd DualPipe
    python3 /path/to/lacuna/tools/reference/dualpipev_orders.py PP MICROBATCHES

Needs no torch and no GPU. docs/schedules.md#dualpipev.
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
from dualpipe.dualpipev import DualPipeV
from dualpipe.utils import WeightGradStore

class Rec(DualPipeV):
    def __init__(self, pp, rank):
        self.num_ranks = pp; self.rank = rank
        self.is_first_rank = rank == 0; self.is_last_rank = rank == pp - 1
        self.out = []; self.q = []; self.batch_dim = 0
    def st(self, phase): return self.rank if phase == 0 else 2 * self.num_ranks - 1 - self.rank
    def _forward_compute_chunk(self, phase):
        mb = self.current_f_chunk_id[phase]; self.current_f_chunk_id[phase] += 1
        self.out.append(f"{self.st(phase)}F{mb}")
    def _backward_compute_chunk(self, phase, enable_zb=False):
        mb = self.current_b_chunk_id[phase]; self.current_b_chunk_id[phase] += 1
        if enable_zb:
            self.out.append(f"{self.st(phase)}I{mb}"); self.q.append(f"{self.st(phase)}W{mb}")
        else:
            self.out.append(f"{self.st(phase)}B{mb}")
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

comm.set_p2p_tensor_shapes([(1,)]); comm.set_p2p_tensor_dtype("bf16")
pp, m = int(sys.argv[1]), int(sys.argv[2])
for r in range(pp):
    x = Rec(pp, r)
    x.step(num_chunks=m, criterion=lambda *a: None)
    assert not x.q
    print(f"rank {r}: " + " ".join(x.out))
