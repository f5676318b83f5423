"""HeteroConv of a SAGEConv per relation equals PyG's ``HeteroConv({relation: SAGEConv})`` with the
same weights (forward and gradients): each relation's mean over its own in-edges, its root term
on its destinations (also without any in-edge of the relation), the outputs summed (or averaged)
per destination; rows without in-edges, self-loops and duplicate edges included; a node type that
no relation enters gets zeros; a destination subset (a sub-block) gives the same rows."""

from __future__ import annotations

import pytest
import torch

from gnn_dist.nn import SAGEConv
from gnn_dist.nn.hetero_conv import HeteroConv
from test_hgt_conv import TOL, pyg_inputs
from test_rgcn_conv import N, R, T, typed_block


def pyg_result(out: dict, rows: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    b = torch.zeros_like(like)
    for t in range(T):
        if f"n{t}" in out:
            b = b.index_copy(0, rows[t], out[f"n{t}"])
    return b


@pytest.mark.parametrize("aggr,f_in,f_out", [("sum", 6, 4), ("mean", 4, 7)])
def test_equals_pyg_heteroconv_of_sage(aggr, f_in, f_out):
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    block, src, dst, et = typed_block(1)
    torch.manual_seed(0)
    ours = HeteroConv({r: SAGEConv(f_in, f_out) for r in range(R)}, f_out, aggr=aggr)
    x = torch.randn(N, f_in, requires_grad=True)
    x_dict, edges, rows = pyg_inputs(block, x, src, dst, et)
    pyg = pyg_nn.HeteroConv({rel: pyg_nn.SAGEConv(f_in, f_out) for rel in edges}, aggr=aggr)
    with torch.no_grad():
        for r, rel in enumerate(edges):
            mine, theirs = ours.convs[str(r)], pyg.convs[rel]
            theirs.lin_l.weight.copy_(mine.lin_l.weight)
            theirs.lin_l.bias.copy_(mine.lin_l.bias)
            theirs.lin_r.weight.copy_(mine.lin_r.weight)
    a = ours(block, x)
    b = pyg_result(pyg(x_dict, edges), rows, a)
    torch.testing.assert_close(a, b, **TOL)
    assert (a[N - 5:] != 0).any()   # rows without in-edges: the root terms
    w = torch.randn_like(a)
    params = [p for r in range(R) for p in ours.convs[str(r)].parameters()]
    theirs = [p for rel in edges for p in pyg.convs[rel].parameters()]
    ga = torch.autograd.grad((a * w).sum(), [x, *params])
    gb = torch.autograd.grad((b * w).sum(), [x, *theirs])
    for g, h in zip(ga, gb):
        torch.testing.assert_close(g, h, **TOL)


def test_a_relation_block_holds_the_relations_degrees_and_its_destinations_first():
    block, src, dst, et = typed_block(2)
    conv = HeteroConv({r: SAGEConv(3, 3) for r in range(R)}, 3)
    x = torch.randn(N, 3)
    conv(block, x)
    from gnn_dist.nn.hetero_conv import _relation_block
    from gnn_dist.nn.relations import typed_rows

    typed = typed_rows(block)
    for r in range(R):
        t = int(block.types.rel_types[r, 1])
        sub, src_rows = _relation_block(block, typed, r, t)
        assert torch.equal(src_rows[:sub.num_dst], typed.rows[t])   # its destinations are its first sources
        want = torch.bincount(dst[et == r], minlength=N)[typed.rows[t]]
        assert torch.equal(sub.in_degree[:sub.num_dst], want)
        got = sorted(zip(src_rows[sub.indices].tolist(), typed.rows[t][sub.dst_index].tolist()))
        assert got == sorted(zip(src[et == r].tolist(), dst[et == r].tolist()))


def test_a_type_no_relation_enters_gets_zeros_and_sub_blocks_agree():
    block, *_ = typed_block(3, num_halo=10)
    conv = HeteroConv({0: SAGEConv(4, 5), 3: SAGEConv(4, 5)}, 5)   # into types 0 and 1: nothing into type 2
    x = torch.randn(block.num_src, 4)
    out = conv(block, x)
    node_type = block.types.node_type[:N]
    assert (out[node_type == 2] == 0).all() and (out[node_type != 2] != 0).all()
    rows = torch.tensor([7, 3, 44, 0, 12, 48])
    sub, src_rows = block.sub_block(rows)
    torch.testing.assert_close(conv(sub, x[src_rows]), out[rows], **TOL)


def test_gcnconv_is_refused():
    from gnn_dist.nn import GCNConv

    with pytest.raises(ValueError, match="GCNConv normalises by its sources' degrees per relation"):
        HeteroConv({0: GCNConv(3, 3)}, 3)
