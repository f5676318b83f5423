"""Random blocks with the awkward cases (shared by the kernel tests) and float64 references."""

from __future__ import annotations

import pytest
import torch

from gnn_dist.kernels import numba_available, triton_available
from gnn_dist.nn import Block

_NEEDS_NUMBA = pytest.mark.skipif(not numba_available(), reason="numba is not importable")
_NEEDS_TRITON = pytest.mark.skipif(not triton_available(), reason="triton is not importable")
BACKENDS = ["torch", pytest.param("numba", marks=_NEEDS_NUMBA), pytest.param("numba-noprefetch", marks=_NEEDS_NUMBA),
            pytest.param("numba-blocked", marks=_NEEDS_NUMBA), pytest.param("triton", marks=_NEEDS_TRITON)]
"""Backends every kernel test runs: ``triton`` runs its kernels in Triton's interpreter on the CPU
(``conftest.py`` sets ``TRITON_INTERPRET=1`` before the kernels are imported)."""


def patch_caches(monkeypatch, *, l2_bytes: int, l3_bytes: int) -> None:
    """Make the numba kernels size their row groups and source blocks for these cache sizes."""
    from gnn_dist.kernels import numba_cpu
    from gnn_dist.kernels.cache_info import CacheSizes
    monkeypatch.setattr(numba_cpu, "cache_sizes", lambda: CacheSizes(l2_bytes=l2_bytes, l3_bytes=l3_bytes,
                                                                      source="test"))


def random_block(seed: int, num_nodes: int = 30, num_edges: int = 120, halo: bool = True) -> Block:
    """Isolated nodes (last fifth), self-loops, duplicate edges, empty rows; a part's block with
    halo rows (destinations in a shuffled order) when ``halo``."""
    g = torch.Generator().manual_seed(seed)
    active = num_nodes - num_nodes // 5
    src = torch.randint(0, active, (num_edges,), generator=g)
    dst = torch.randint(0, active, (num_edges,), generator=g)
    src[:6] = dst[:6]
    src = torch.cat([src, src[:3], src[10:20]])
    dst = torch.cat([dst, dst[:3], dst[10:20]])
    order = torch.argsort(dst, stable=True)
    indptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0)
    indices = src[order]
    if not halo:
        return Block.from_graph(indptr, indices)
    perm = torch.randperm(num_nodes, generator=g)
    return Block.from_graph(indptr, indices, perm[: num_nodes // 2])


def blocks() -> list[tuple[str, Block]]:
    single = Block.from_graph(torch.tensor([0, 3]), torch.tensor([0, 0, 0]))          # one row, loops only
    empty_rows = Block.from_graph(torch.tensor([0, 0, 2, 2, 2]), torch.tensor([3, 1]))  # mostly empty rows
    no_edges = Block.from_graph(torch.tensor([0, 0, 0]), torch.zeros(0, dtype=torch.long))
    # one row gathers 40 sources (a hub: longer than a tile of the Triton kernels), the others a few
    hub_dst = torch.cat([torch.zeros(40, dtype=torch.long), torch.arange(1, 12).repeat_interleave(2)])
    hub_src = torch.cat([torch.arange(40) % 13, torch.arange(22) % 13])
    hub = Block.from_graph(torch.cat([torch.zeros(1, dtype=torch.long), torch.bincount(hub_dst, minlength=13).cumsum(0)]),
                           hub_src)
    return [("halo", random_block(0)), ("whole", random_block(1, halo=False)), ("single_row", single),
            ("empty_rows", empty_rows), ("no_edges", no_edges), ("hub", hub), ("wide", random_block(2, 300, 2000))]


def ref_spmm(block: Block, x: torch.Tensor, values: torch.Tensor | None) -> torch.Tensor:
    """Scatter reference of spmm (``values`` [E] or [E, H]); differentiable."""
    src, dst = block.indices, block.dst_index
    msg = x[src]
    if values is not None:
        v = values if values.dim() == 2 else values.unsqueeze(1)
        heads = v.shape[1]
        msg = (msg.view(-1, heads, x.shape[1] // heads) * v.unsqueeze(2)).reshape(msg.shape)
    return x.new_zeros(block.num_dst, x.shape[1]).index_add(0, dst, msg)


def ref_sddmm(block: Block, a: torch.Tensor, b: torch.Tensor, heads: int) -> torch.Tensor:
    e = block.num_edges
    w = a.shape[1] // heads
    return (a[block.dst_index].view(e, heads, w) * b[block.indices].view(e, heads, w)).sum(2)


def ref_softmax(block: Block, score: torch.Tensor, self_score: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Dense per-row softmax (rows of -inf only give 0), looping over destinations."""
    alpha = torch.zeros_like(score)
    alpha_self = None if self_score is None else torch.zeros_like(self_score)
    for v in range(block.num_dst):
        lo, hi = int(block.indptr[v]), int(block.indptr[v + 1])
        parts = [score[lo:hi]] + ([] if self_score is None else [self_score[v:v + 1]])
        row = torch.cat(parts)
        if row.numel() == 0 or bool(torch.isinf(row).all()):
            continue
        sm = torch.softmax(row, dim=0)
        alpha[lo:hi] = sm[:hi - lo]
        if alpha_self is not None:
            alpha_self[v] = sm[hi - lo]
    return alpha, alpha_self
