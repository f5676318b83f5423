"""The built-in layers give the same outputs and gradients with each kernel backend (1e-5)."""

from __future__ import annotations

import pytest
import torch

from gnn_dist.kernels import numba_available, triton_available
from gnn_dist.nn import DropoutKey, GATConv, GCNConv, GINConv, SAGEConv
from kernel_cases import random_block

OTHERS = [pytest.param("numba", True, marks=pytest.mark.skipif(not numba_available(), reason="no numba")),
          pytest.param("numba", False, id="numba-noprefetch",
                       marks=pytest.mark.skipif(not numba_available(), reason="no numba")),
          pytest.param("triton", True, marks=pytest.mark.skipif(not triton_available(), reason="no triton"))]
"""Each backend compared with torch (triton: in Triton's interpreter, see the conftest)."""


def _layers():
    torch.manual_seed(0)
    return {
        "gcn": GCNConv(16, 8),                # out < in: project, then aggregate
        "gcn_aggregate": GCNConv(16, 24),     # aggregate, then project
        "sage_project": SAGEConv(16, 8),      # out < in: project, then aggregate
        "sage_aggregate": SAGEConv(16, 24),   # aggregate, then project
        "gat": GATConv(16, 4, heads=3, dropout=0.3),
        "gat_mean": GATConv(16, 5, heads=2, concat=False),
        "gin": GINConv(torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8)),
                       train_eps=True),
    }


@pytest.mark.parametrize("name", list(_layers()))
@pytest.mark.parametrize("other,prefetch", OTHERS)
def test_same_with_each_backend(name, other, prefetch, monkeypatch):
    if not prefetch:
        from gnn_dist.kernels import numba_cpu
        monkeypatch.setattr(numba_cpu, "PREFETCH_AHEAD", 0)
    conv = _layers()[name]
    conv.train()
    block = random_block(4, 60, 400)
    x = torch.randn(block.num_src, 16, generator=torch.Generator().manual_seed(1))
    up = torch.randn(block.num_dst, conv(block, x, DropoutKey(0, 0, 0)).shape[1] if name.startswith("gat")
                     else conv(block, x).shape[1], generator=torch.Generator().manual_seed(2))
    results = {}
    for backend in ("torch", other):
        conv.zero_grad()
        xb = x.clone().requires_grad_()
        block = block.with_kernels(backend)
        out = conv(block, xb, DropoutKey(7, 3, 1)) if name.startswith("gat") else conv(block, xb)
        out.backward(up)
        results[backend] = (out.detach(), xb.grad, {n: p.grad.clone() for n, p in conv.named_parameters()})
    (o1, g1, p1), (o2, g2, p2) = results["torch"], results[other]
    torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(g2, g1, atol=1e-5, rtol=1e-5)
    for n in p1:
        torch.testing.assert_close(p2[n], p1[n], atol=1e-5, rtol=1e-5, msg=n)
