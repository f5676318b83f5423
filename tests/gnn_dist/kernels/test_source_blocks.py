"""Source blocking in the numba kernels: each row sums its entries in ascending source order, so
walking the sources in cache-sized blocks, or listing a row's edges in another order, gives the
same bits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnn_dist.kernels import numba_available
from gnn_dist.nn import Block
from gnn_dist.nn.sparse import _csr, sddmm, spmm, spmm_scaled
from kernel_cases import patch_caches

pytestmark = pytest.mark.skipif(not numba_available(), reason="numba is not importable")


def _graph(seed: int, nodes: int = 400, edges: int = 6000) -> tuple[torch.Tensor, torch.Tensor]:
    """CSR by destination (``indptr``, sources in a random order within each row, duplicates included)."""
    g = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, nodes, (edges,), generator=g), torch.randint(0, nodes, (edges,), generator=g)
    src = torch.cat([src, src[:50]])
    dst = torch.cat([dst, dst[:50]])
    order = torch.argsort(dst, stable=True)
    indptr = torch.zeros(nodes + 1, dtype=torch.long)
    indptr[1:] = torch.bincount(dst, minlength=nodes).cumsum(0)
    return indptr, src[order]


def _with_l3(monkeypatch, l3_bytes: int) -> None:
    patch_caches(monkeypatch, l2_bytes=1 << 20, l3_bytes=l3_bytes)


def _units(block: Block, width: int, heads: int) -> list[torch.Tensor]:
    """SpMM plain, weighted, per head, scaled; SDDMM; and the backward SpMM (transpose) of each."""
    g = torch.Generator().manual_seed(width + heads)
    x = torch.randn(block.num_src, width, generator=g, requires_grad=True)
    w = torch.rand(block.num_edges, generator=g)
    wh = torch.rand(block.num_edges, heads, generator=g)
    rs, cs = torch.rand(block.num_dst, generator=g), torch.rand(block.num_src, generator=g)
    up = torch.randn(block.num_dst, width, generator=g)
    outs = [spmm(block, x), spmm(block, x, w), spmm(block, x, wh), spmm_scaled(block, x, rs, cs),
            sddmm(block, x[:block.num_dst].detach(), x.detach(), heads=heads)]
    for out in outs[:4]:
        (grad,) = torch.autograd.grad(out, x, up)
        outs.append(grad)
    return [o.detach() for o in outs]


@pytest.mark.parametrize("width,heads", [(16, 1), (128, 4)])
def test_blocked_walk_gives_the_plain_walks_bits(monkeypatch, width, heads):
    from gnn_dist.kernels import numba_cpu
    indptr, indices = _graph(0)
    plain = _units(Block.from_graph(indptr, indices).with_kernels("numba"), width, heads)
    _with_l3(monkeypatch, 4 << 10)   # blocks of 1 KiB of gathered rows: as many as 15 entries a row allow
    block = Block.from_graph(indptr, indices).with_kernels("numba")
    blocked = _units(block, width, heads)
    x = torch.empty(block.num_src, width)
    assert numba_cpu._split(_csr(block), numba_cpu._plan(_csr(block)), x).shape[1] + 1 > 1
    for a, b in zip(plain, blocked):
        assert torch.equal(a, b)


def test_a_rows_edge_order_does_not_change_the_bits():
    indptr, indices = _graph(1)
    g = torch.Generator().manual_seed(3)
    shuffled = indices.clone()
    for r in range(indptr.numel() - 1):        # the same edges, each row's entries in another order
        lo, hi = int(indptr[r]), int(indptr[r + 1])
        shuffled[lo:hi] = indices[lo:hi][torch.randperm(hi - lo, generator=g)]
    a = Block.from_graph(indptr, indices).with_kernels("numba")
    b = Block.from_graph(indptr, shuffled).with_kernels("numba")
    x = torch.randn(a.num_src, 32, generator=g)
    assert torch.equal(spmm(a, x), spmm(b, x))
    sorted_block = Block.from_graph(indptr, torch.cat([indices[int(indptr[r]):int(indptr[r + 1])].sort().values
                                                       for r in range(indptr.numel() - 1)]))
    assert torch.equal(spmm(a, x), spmm(sorted_block.with_kernels("numba"), x))


def test_how_many_source_blocks(monkeypatch):
    from gnn_dist.kernels import numba_cpu
    _with_l3(monkeypatch, 16 << 20)   # blocks of 4 MiB
    rows = 1000

    def blocks(degree: int, num_cols: int, row_bytes: int) -> int:
        return numba_cpu.source_blocks(np.arange(rows + 1) * degree, num_cols, row_bytes)
    assert blocks(40, 100_000, 512) == 13          # 51.2 MB of gathered rows in 4 MiB blocks
    assert blocks(10, 100_000, 512) == 5           # capped: 2 entries a row per block at least
    assert blocks(3, 100_000, 512) == 1            # too few entries a row to pay for a second pass
    assert blocks(40, 8_000, 512) == 1             # 4 MB of gathered rows: one block
    assert numba_cpu.source_blocks(np.zeros(1, dtype=np.int64), 10, 512) == 1


def test_split_marks_where_each_row_enters_the_next_block(monkeypatch):
    from gnn_dist.kernels import numba_cpu
    indptr, indices = _graph(2)
    block = Block.from_graph(indptr, indices)
    csr = _csr(block)
    plan = numba_cpu._plan(csr)
    _with_l3(monkeypatch, 4 << 10)
    split = numba_cpu._split(csr, plan, torch.empty(block.num_src, 16))   # rows of 64 B
    num_blocks = split.shape[1] + 1
    assert num_blocks == numba_cpu.source_blocks(plan.indptr, csr.num_cols, 64) > 2
    width = -(-csr.num_cols // num_blocks)
    for r in range(0, indptr.numel() - 1, 37):
        cols = plan.indices[plan.indptr[r]:plan.indptr[r + 1]]
        assert bool((np.diff(cols) >= 0).all())
        want = np.searchsorted(cols, np.arange(1, num_blocks) * width, side="left")
        assert split[r].tolist() == want.tolist()
