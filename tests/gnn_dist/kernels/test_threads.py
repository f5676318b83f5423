"""A numba kernel launch leaves torch's thread count as it was (no oversubscription).

Starting numba's OpenMP pool resets the process-wide OpenMP thread count; a rank that set
``torch.set_num_threads(1)`` must still run torch ops on one thread afterwards. Checked in a
fresh interpreter, since the pool starts only once per process.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from gnn_dist.kernels import numba_available

SCRIPT = """
import torch
torch.set_num_threads(1)
from gnn_dist.nn import Block, sddmm, spmm
src = torch.randint(0, 500, (5000,))
dst = torch.randint(0, 500, (5000,))
order = dst.argsort()
indptr = torch.zeros(501, dtype=torch.long)
indptr[1:] = torch.bincount(dst, minlength=500).cumsum(0)
block = Block.from_graph(indptr, src[order]).with_kernels("numba")
x = torch.randn(500, 32)
assert block.backend_for(x).name == "numba"
spmm(block, x)
sddmm(block, x, x)
print(torch.get_num_threads())
"""


@pytest.mark.skipif(not numba_available(), reason="numba is not installed")
def test_numba_launch_keeps_torch_thread_count():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "1"


@pytest.mark.skipif(not numba_available(), reason="numba is not installed")
def test_a_small_launch_on_the_calling_thread_gives_the_pools_bits(monkeypatch):
    import torch

    import gnn_dist.kernels.numba_cpu as numba_cpu
    from gnn_dist.nn import Block, sddmm, spmm

    g = torch.Generator().manual_seed(0)
    src, dst = torch.randint(0, 400, (6000,), generator=g), torch.randint(0, 400, (6000,), generator=g)
    order = dst.argsort()
    indptr = torch.zeros(401, dtype=torch.long)
    indptr[1:] = torch.bincount(dst, minlength=400).cumsum(0)
    block = Block.from_graph(indptr, src[order]).with_kernels("numba")
    x = torch.randn(400, 24, generator=g)
    got = {}
    for serial_work in (0, 1 << 62):   # every launch in the pool / every launch on the calling thread
        monkeypatch.setattr(numba_cpu, "SERIAL_WORK", serial_work)
        got[serial_work] = (spmm(block, x), sddmm(block, x, x))
        assert numba_cpu._num_threads(1000) == (1 if serial_work else min(torch.get_num_threads(),
                                                                            numba_cpu.numba.config.NUMBA_NUM_THREADS))
    for a, b in zip(got[0], got[1 << 62]):
        assert torch.equal(a, b)
