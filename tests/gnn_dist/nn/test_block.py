from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
import torch_geometric.nn as pyg

from gnn_dist.nn import Block, BlockError


def good_arrays() -> dict:
    # destinations 0, 1; sources 0, 1 (inner) and 2 (halo); edges 1->0, 2->0, 0->1, 1->1
    return dict(indptr=np.array([0, 2, 4]), indices=np.array([1, 2, 0, 1], dtype=np.int32), num_src=3,
                in_degree=np.array([2, 2, 5]), out_degree=np.array([1, 2, 1]), self_loops=np.array([0, 1, 0]),
                src_original_ids=np.array([10, 11, 12]))


def test_from_csr_accepts_numpy_and_builds_views():
    block = Block.from_csr(**good_arrays())
    assert (block.num_src, block.num_dst, block.num_halo, block.num_edges) == (3, 2, 1, 4)
    assert block.indices.dtype == torch.long
    assert block.edge_index.tolist() == [[1, 2, 0, 1], [0, 0, 1, 1]]
    assert block.self_loop_mask.tolist() == [False, False, False, True]
    dense = torch.tensor([[0.0, 1, 1], [1, 1, 0]])
    assert torch.equal(block.adj.to_dense(), dense)
    assert torch.equal(block.adj_t.to_dense(), dense.T)
    assert block.adj_t.layout == torch.sparse_csr
    assert block.edge_index is block.edge_index  # cached
    assert repr(block) == "Block(num_src=3, num_dst=2, num_halo=1, num_edges=4, device=cpu)"


def test_to_copies_and_drops_the_cache():
    block = Block.from_csr(**good_arrays())
    _ = block.adj
    moved = block.to("cpu")
    assert moved is not block and "adj" not in moved._cache
    assert torch.equal(moved.adj.to_dense(), block.adj.to_dense())


@pytest.mark.parametrize(("change", "message"), [
    (dict(indptr=np.array([1, 2, 4])), r"indptr\[0\] = 1, expected 0"),
    (dict(indptr=np.array([0, 3, 2])), r"indptr must be non-decreasing, but indptr\[2\] < indptr\[1\]"),
    (dict(indptr=np.array([0, 2, 5])), r"indices has 4 entries but indptr\[-1\] = 5"),
    (dict(indptr=np.zeros(0, dtype=np.int64)), r"indptr must be a 1-D array of length num_dst \+ 1"),
    (dict(indptr=np.array([[0, 2, 4]])), r"indptr must be 1-D, got shape \[1, 3\]"),
    (dict(indices=np.array([1.0, 2, 0, 1])), r"indices must hold integers, got dtype float64"),
    (dict(indices=np.array([1, 3, 0, 1])), r"indices\[1\] = 3 is out of range \[0, num_src=3\)"),
    (dict(num_src=1), r"num_src = 1 is smaller than num_dst = 2"),
    (dict(in_degree=np.array([2, 2])), r"in_degree has 2 entries but num_src = 3"),
    (dict(out_degree=np.array([1, -2, 1])), r"out_degree\[1\] = -2 is negative"),
    (dict(self_loops=np.array([0, 3, 0])), r"self_loops\[1\] = 3 exceeds in_degree\[1\] = 2"),
    (dict(in_degree=np.array([2, 3, 5])), r"in_degree\[1\] = 3 but the block holds 2 in-edges of destination 1"),
    (dict(self_loops=np.array([1, 1, 0])), r"self_loops\[0\] = 1 but the block holds 0 self-loop edges"),
    (dict(src_original_ids=np.array([1, 2])), r"src_original_ids has 2 entries but num_src = 3"),
    (dict(edge_weight=np.ones(3)), r"edge_weight has shape \[3\] but the block has 4 edges"),
    (dict(edge_weight=np.array([1.0, np.nan, 1, 1])), r"edge_weight\[1\] = nan is not finite"),
])
def test_from_csr_errors_name_the_field(change, message):
    with pytest.raises(BlockError, match=message):
        Block.from_csr(**{**good_arrays(), **change})


def test_empty_part():
    block = Block.from_csr(indptr=[0], indices=np.zeros(0, np.int64), num_src=0, in_degree=[], out_degree=[],
                           self_loops=[], src_original_ids=[])
    assert block.edge_index.shape == (2, 0) and block.adj.shape == (0, 0)


def test_from_graph_parts_hold_every_edge_once_with_global_degrees(kit):
    indptr, indices = kit.random_graph(4)
    n = indptr.numel() - 1
    whole = Block.from_graph(indptr, indices)
    blocks = kit.split(indptr, indices, 3, seed=1)
    got: Counter = Counter()
    for b in blocks:
        ids = b.src_original_ids
        halo = ids[b.num_dst:]
        assert torch.equal(halo, torch.sort(halo).values)                 # ascending halo ids
        assert not set(halo.tolist()) & set(ids[:b.num_dst].tolist())
        for name in ("in_degree", "out_degree", "self_loops"):
            assert torch.equal(getattr(b, name), getattr(whole, name)[ids]), name
        got.update(zip(ids[b.indices].tolist(), ids[b.dst_index].tolist()))
    assert got == Counter(zip(whole.indices.tolist(), whole.dst_index.tolist()))
    assert sorted(torch.cat([b.src_original_ids[:b.num_dst] for b in blocks]).tolist()) == list(range(n))


def test_from_graph_errors():
    with pytest.raises(BlockError, match=r"dst_nodes has repeated ids"):
        Block.from_graph([0, 1, 2], [1, 0], dst_nodes=[0, 0])
    with pytest.raises(BlockError, match=r"indices must lie in \[0, 2\), got \[0, 5\]"):
        Block.from_graph([0, 1, 2], [5, 0])
    with pytest.raises(BlockError, match=r"original_ids has 3 entries but the graph has 2 nodes"):
        Block.from_graph([0, 1, 2], [1, 0], original_ids=[4, 5, 6])


def test_pyg_message_passing_layer_runs_on_blocks(kit):
    torch.manual_seed(0)
    indptr, indices = kit.random_graph(6)
    x = torch.randn(indptr.numel() - 1, 8)
    conv = pyg.GraphConv(8, 4)

    def call(c, b, xs):
        return c((xs, xs[:b.num_dst]), b.edge_index, size=(b.num_src, b.num_dst))

    kit.assert_split_equals_global(conv, indptr, indices, x, 3, call=call)
    whole = Block.from_graph(indptr, indices)
    torch.testing.assert_close(call(conv, whole, x), conv(x, whole.edge_index))


def test_dst_rows_is_the_whole_tensor_when_there_are_no_other_rows():
    indptr, indices = torch.tensor([0, 2, 3, 4]), torch.tensor([1, 2, 0, 1])
    whole = Block.from_graph(indptr, indices)
    x = torch.randn(3, 4, requires_grad=True)
    assert whole.dst_rows(x) is x                    # no slice: no zero-fill-and-copy in backward
    part = Block.from_graph(indptr, indices, torch.tensor([0]))
    xp = torch.randn(part.num_src, 4)
    assert part.num_src > part.num_dst == 1 and torch.equal(part.dst_rows(xp), xp[:1])
