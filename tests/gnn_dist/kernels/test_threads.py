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
