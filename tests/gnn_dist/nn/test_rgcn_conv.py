"""RGCNConv equals PyG's ``RGCNConv(aggr="mean")`` with the same weights (forward and gradients),
with a full weight per relation and with bases; its per-type root weights are each type's own;
its sources may be split (the ``overlap`` schedule's groups) and its destinations taken in any
subset (a sub-block) with the same result."""

from __future__ import annotations

import pytest
import torch

from gnn_dist.nn import Block
from gnn_dist.nn.block_types import BlockTypes
from gnn_dist.nn.decomposable import propagate_groups
from gnn_dist.nn.rgcn_conv import RGCNConv
from gnn_dist.pipeline.block_split import split_block

N, E, R, T, F, F_OUT = 50, 400, 4, 3, 6, 5


def typed_block(seed: int = 0, num_halo: int = 0):
    """A random typed block: ``N`` destinations (+ ``num_halo`` halo sources); relation 0 from
    type 0 into itself (with self-loops), relation ``r > 0`` from type ``r % T`` into type
    ``(r + 1) % T``; duplicate edges, rows without in-edges (the last 5)."""
    g = torch.Generator().manual_seed(seed)
    s = N + num_halo
    node_type = torch.randint(0, T, (s,), generator=g)
    rel_types = torch.tensor([[0, 0]] + [[r % T, (r + 1) % T] for r in range(1, R)])
    src, dst, et = [], [], []
    for r in range(R):
        a = torch.nonzero(node_type == rel_types[r, 0]).flatten()
        b = torch.nonzero(node_type[:N - 5] == rel_types[r, 1]).flatten()
        k = E // R
        src.append(a[torch.randint(0, a.numel(), (k,), generator=g)])
        dst.append(b[torch.randint(0, b.numel(), (k,), generator=g)])
        et.append(torch.full((k,), r))
    loops = torch.nonzero(node_type[:N - 5] == 0).flatten()[:3]
    src, dst, et = torch.cat(src + [loops]), torch.cat(dst + [loops]), torch.cat(et + [torch.zeros(3, dtype=torch.long)])
    src, dst, et = torch.cat([src, src[:4]]), torch.cat([dst, dst[:4]]), torch.cat([et, et[:4]])   # duplicates
    order = torch.argsort(dst, stable=True)
    src, dst, et = src[order], dst[order], et[order]
    indptr = torch.zeros(N + 1, dtype=torch.long)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=N), 0)
    block = Block.from_csr(indptr=indptr, indices=src, num_src=s, in_degree=torch.bincount(dst, minlength=s),
                           out_degree=torch.ones(s, dtype=torch.long),
                           self_loops=torch.bincount(dst[src == dst], minlength=s),
                           src_original_ids=torch.arange(s))
    block.types = BlockTypes(node_type, et, rel_types, T)
    return block, src, dst, et


def copy_to_pyg(ours: RGCNConv, pyg) -> None:
    with torch.no_grad():
        pyg.weight.copy_(ours.weight)
        if ours.comp is not None:
            pyg.comp.copy_(ours.comp)
        pyg.root.copy_(ours.root[0])
        ours.bias.normal_()
        pyg.bias.copy_(ours.bias)


@pytest.mark.parametrize("num_bases", [None, 2])
def test_equals_pyg_rgcnconv(num_bases):
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    block, src, dst, et = typed_block(1)
    torch.manual_seed(0)
    ours = RGCNConv(F, F_OUT, R, T, num_bases=num_bases, root_per_type=False)
    pyg = pyg_nn.RGCNConv(F, F_OUT, R, num_bases=num_bases, aggr="mean")
    copy_to_pyg(ours, pyg)
    x = torch.randn(N, F, requires_grad=True)
    a, b = ours(block, x), pyg(x, torch.stack([src, dst]), et)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    weights = [ours.weight, ours.root] + ([ours.comp] if num_bases else [])
    theirs = [pyg.weight, pyg.root] + ([pyg.comp] if num_bases else [])
    ga = torch.autograd.grad((a * a).sum(), [x, *weights])
    gb = torch.autograd.grad((b * b).sum(), [x, *theirs])
    torch.testing.assert_close(ga[0], gb[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ga[1], gb[1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ga[2][0], gb[2], rtol=1e-5, atol=1e-5)
    if num_bases:
        torch.testing.assert_close(ga[3], gb[3], rtol=1e-5, atol=1e-5)


def test_each_type_has_its_own_root():
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    block, src, dst, et = typed_block(2)
    ours = RGCNConv(F, F_OUT, R, T)
    pyg = pyg_nn.RGCNConv(F, F_OUT, R, aggr="mean")
    copy_to_pyg(ours, pyg)
    with torch.no_grad():
        pyg.root.zero_()
    x = torch.randn(N, F)
    want = pyg(x, torch.stack([src, dst]), et)
    types = block.types.node_type[:N]
    want = want + torch.einsum("vf,vfo->vo", x, ours.root[types])
    torch.testing.assert_close(ours(block, x), want, rtol=1e-5, atol=1e-5)


def test_split_sources_and_sub_blocks_give_the_same_rows():
    block, *_ = typed_block(3, num_halo=20)
    conv = RGCNConv(F, F_OUT, R, T, num_bases=3)
    x = torch.randn(block.num_src, F)
    whole = conv(block, x)
    split = split_block(block)
    grouped = propagate_groups(conv, block, (split.inner, x[:N]), (split.halo, lambda: x[N:]))
    torch.testing.assert_close(grouped, whole, rtol=1e-5, atol=1e-6)
    rows = torch.tensor([7, 3, 44, 0, 12])
    sub, src_rows = block.sub_block(rows)
    torch.testing.assert_close(conv(sub, x[src_rows]), whole[rows], rtol=1e-5, atol=1e-6)


def test_a_block_without_types_is_refused_in_one_line():
    block, *_ = typed_block(4)
    block.types = None
    with pytest.raises(ValueError, match=r"no node and edge types \(a homogeneous graph\); R-GCN runs on a typed"):
        RGCNConv(F, F_OUT, R, T)(block, torch.randn(N, F))
