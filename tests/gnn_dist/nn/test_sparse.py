from __future__ import annotations

import pytest
import torch

from gnn_dist.nn import Block, sddmm, spmm
from gnn_dist.nn import sparse as sparse_mod


def dense_adj(block: Block, values: torch.Tensor) -> torch.Tensor:
    a = torch.zeros(block.num_dst, block.num_src, dtype=values.dtype)
    return a.index_put((block.dst_index, block.indices), values, accumulate=True)


@pytest.fixture
def halo_block(kit) -> Block:
    return kit.split(*kit.random_graph(2), 2, seed=0)[0]


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_spmm_equals_dense(halo_block, reduce):
    b = halo_block
    assert b.num_halo > 0
    x = torch.randn(b.num_src, 5, dtype=torch.float64)
    vals = torch.rand(b.num_edges, dtype=torch.float64)
    expect = dense_adj(b, vals) @ x
    if reduce == "mean":
        expect = expect / b.in_count.clamp(min=1).unsqueeze(1)
    torch.testing.assert_close(spmm(b, x, vals, reduce=reduce), expect)
    torch.testing.assert_close(spmm(b, x), dense_adj(b, torch.ones(b.num_edges, dtype=torch.float64)) @ x)


def test_spmm_gradcheck(halo_block):
    b = halo_block
    x = torch.randn(b.num_src, 3, dtype=torch.float64, requires_grad=True)
    vals = torch.rand(b.num_edges, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, v: spmm(b, x, v), (x, vals))
    assert torch.autograd.gradcheck(lambda x, v: spmm(b, x, v, reduce="mean"), (x, vals))
    assert torch.autograd.gradcheck(lambda x: spmm(b, x), (x,))


def test_sddmm_in_chunks(halo_block, monkeypatch):
    b = halo_block
    monkeypatch.setattr(sparse_mod, "_CHUNK_ELEMENTS", 7)  # many chunks
    a = torch.randn(b.num_dst, 3, dtype=torch.float64)
    x = torch.randn(b.num_src, 3, dtype=torch.float64)
    torch.testing.assert_close(sddmm(b, a, x), (a[b.dst_index] * x[b.indices]).sum(1))


def test_no_edges_and_no_destinations():
    b = Block.from_graph([0, 0, 0, 0], torch.zeros(0, dtype=torch.long))
    x = torch.randn(3, 2, requires_grad=True)
    out = spmm(b, x, reduce="mean")
    assert torch.equal(out, torch.zeros(3, 2))
    out.sum().backward()
    assert torch.equal(x.grad, torch.zeros(3, 2))
    empty = Block.from_graph([0, 1], [0], dst_nodes=torch.zeros(0, dtype=torch.long))
    assert empty.num_dst == 0 and spmm(empty, torch.randn(0, 4)).shape == (0, 4)


def test_errors(halo_block):
    b = halo_block
    x = torch.randn(b.num_src, 2)
    with pytest.raises(ValueError, match=r"spmm: edge_values has shape \[3\] but the block has \d+ edges"):
        spmm(b, x, torch.ones(3))
    with pytest.raises(ValueError, match=r"edge_values has dtype torch.float64 but x_src has torch.float32"):
        spmm(b, x, torch.ones(b.num_edges, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"reduce must be 'sum' or 'mean', got 'max'"):
        spmm(b, x, reduce="max")
    with pytest.raises(ValueError, match=r"x_src must be a floating-point tensor, got torch.int64"):
        spmm(b, torch.ones(b.num_src, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"spmm: x_src has 1 rows but the block has num_src"):
        spmm(b, torch.ones(1, 2))
