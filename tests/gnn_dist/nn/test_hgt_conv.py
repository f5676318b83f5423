"""HGTConv equals PyG's ``HGTConv`` with the same weights (forward and gradients), with and without
the skip term, with heads; rows without in-edges, self-loops and duplicate edges included; its
sources may be split (the ``overlap`` schedule's groups) and its destinations taken in any subset
(a sub-block) with the same result; a node type no relation enters gets the mapped zero message
and the skip term."""

from __future__ import annotations

import pytest
import torch

from gnn_dist.nn import Block
from gnn_dist.nn.block_types import BlockTypes
from gnn_dist.nn.decomposable import propagate_groups
from gnn_dist.nn.hgt_conv import HGTConv
from gnn_dist.pipeline.block_split import split_block
from test_rgcn_conv import N, R, T, typed_block

TOL = dict(rtol=1e-5, atol=1e-5)


def pyg_inputs(block, x, src, dst, et):
    """PyG's dicts: per type its rows of ``x``, per relation its edges in per-type ids."""
    node_type, rel = block.types.node_type[:N], block.types.rel_types
    rows = [torch.nonzero(node_type == t).flatten() for t in range(T)]
    pos = torch.empty(N, dtype=torch.long)
    for r_ in rows:
        pos[r_] = torch.arange(r_.numel())
    x_dict = {f"n{t}": x[rows[t]] for t in range(T)}
    edges = {(f"n{int(rel[r, 0])}", f"r{r}", f"n{int(rel[r, 1])}"): torch.stack([pos[src[et == r]], pos[dst[et == r]]])
             for r in range(R)}
    return x_dict, edges, rows


def copy_to_pyg(ours: HGTConv, pyg) -> None:
    h, d = ours.heads, ours.out_channels // ours.heads
    with torch.no_grad():
        ours.p_rel.uniform_(0.5, 1.5)
        if ours.skip is not None:
            ours.skip.normal_()
        for t in range(T):
            pyg.kqv_lin.lins[f"n{t}"].weight.copy_(ours.kqv_weight[t].t())
            pyg.kqv_lin.lins[f"n{t}"].bias.copy_(ours.kqv_bias[t])
            pyg.out_lin.lins[f"n{t}"].weight.copy_(ours.out_weight[t].t())
            pyg.out_lin.lins[f"n{t}"].bias.copy_(ours.out_bias[t])
            if ours.skip is not None:
                pyg.skip[f"n{t}"].copy_(ours.skip[t:t + 1])
        pyg.k_rel.weight.view(h, R, d, d).copy_(ours.k_rel.transpose(0, 1))
        pyg.v_rel.weight.view(h, R, d, d).copy_(ours.v_rel.transpose(0, 1))
        for r, key in enumerate(pyg.p_rel.keys()):
            pyg.p_rel[key].copy_(ours.p_rel[r:r + 1])


@pytest.mark.parametrize("f_in,f_out,heads", [(6, 6, 2), (6, 4, 1), (5, 8, 4)])
def test_equals_pyg_hgtconv(f_in, f_out, heads):
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    block, src, dst, et = typed_block(1)
    torch.manual_seed(0)
    ours = HGTConv(f_in, f_out, R, T, heads=heads)
    x = torch.randn(N, f_in, requires_grad=True)
    x_dict, edges, rows = pyg_inputs(block, x, src, dst, et)
    pyg = pyg_nn.HGTConv(f_in, f_out, ([f"n{t}" for t in range(T)], list(edges)), heads=heads)
    copy_to_pyg(ours, pyg)
    a = ours(block, x)
    out = pyg(x_dict, edges)
    b = torch.empty_like(a)
    for t in range(T):
        b = b.index_copy(0, rows[t], out[f"n{t}"])
    torch.testing.assert_close(a, b, **TOL)
    assert (a[N - 5:] != 0).all()   # rows without in-edges: the mapped zero message (and the skip term)
    w = torch.randn_like(a)
    skip = f_in == f_out
    assert (ours.skip is not None) == skip
    ga = torch.autograd.grad((a * w).sum(), [x, ours.kqv_weight, ours.k_rel, ours.v_rel, ours.p_rel]
                             + ([ours.skip] if skip else []))
    gb = torch.autograd.grad((b * w).sum(), [x, pyg.kqv_lin.lins["n1"].weight, pyg.k_rel.weight, pyg.v_rel.weight,
                                             *pyg.p_rel.values()] + (list(pyg.skip.values()) if skip else []))
    h, d = heads, f_out // heads
    torch.testing.assert_close(ga[0], gb[0], **TOL)
    torch.testing.assert_close(ga[1][1].t(), gb[1], **TOL)
    torch.testing.assert_close(ga[2].transpose(0, 1), gb[2].view(h, R, d, d), **TOL)
    torch.testing.assert_close(ga[3].transpose(0, 1), gb[3].view(h, R, d, d), **TOL)
    torch.testing.assert_close(ga[4], torch.cat(gb[4:4 + R]), **TOL)
    if skip:
        torch.testing.assert_close(ga[5], torch.cat(gb[4 + R:]), **TOL)
    assert ga[2].abs().sum() > 0 and ga[3].abs().sum() > 0


def test_split_sources_and_sub_blocks_give_the_same_rows():
    block, *_ = typed_block(3, num_halo=20)
    conv = HGTConv(6, 6, R, T, heads=2)
    x = torch.randn(block.num_src, 6, requires_grad=True)
    whole = conv(block, x)
    split = split_block(block)
    grouped = propagate_groups(conv, block, (split.inner, x[:N]), (split.halo, lambda: x[N:]))
    torch.testing.assert_close(grouped, whole, rtol=1e-5, atol=1e-6)
    g_whole, = torch.autograd.grad(whole.square().sum(), x)
    g_grouped, = torch.autograd.grad(grouped.square().sum(), x)
    torch.testing.assert_close(g_grouped, g_whole, rtol=1e-5, atol=1e-6)
    rows = torch.tensor([7, 3, 44, 0, 12, 48])
    sub, src_rows = block.sub_block(rows)
    torch.testing.assert_close(conv(sub, x[src_rows]), whole[rows], rtol=1e-5, atol=1e-6)


def test_a_type_no_relation_enters_gets_the_mapped_zero_message_and_the_skip():
    """Nodes 0-2 of type 0, 3-4 of type 1; one relation, type 0 -> type 1: nothing enters type 0."""
    src, dst = torch.tensor([0, 1, 2]), torch.tensor([3, 3, 4])
    indptr = torch.tensor([0, 0, 0, 0, 2, 3])
    block = Block.from_csr(indptr=indptr, indices=src, num_src=5, in_degree=torch.bincount(dst, minlength=5),
                           out_degree=torch.bincount(src, minlength=5), self_loops=torch.zeros(5, dtype=torch.long),
                           src_original_ids=torch.arange(5))
    block.types = BlockTypes(torch.tensor([0, 0, 0, 1, 1]), torch.zeros(3, dtype=torch.long), torch.tensor([[0, 1]]), 2)
    conv = HGTConv(4, 4, 1, 2)
    x = torch.randn(5, 4)
    out = conv(block, x)
    beta = torch.sigmoid(conv.skip[0])
    want = beta * conv.out_bias[0] + (1 - beta) * x[:3]
    torch.testing.assert_close(out[:3], want, **TOL)
    assert not torch.allclose(out[3:], (beta * conv.out_bias[1] + (1 - beta) * x[3:]))


def test_a_block_without_types_is_refused_in_one_line():
    block, *_ = typed_block(4)
    block.types = None
    with pytest.raises(ValueError, match=r"no node and edge types \(a homogeneous graph\); HGT runs on a typed"):
        HGTConv(6, 6, R, T)(block, torch.randn(N, 6))
