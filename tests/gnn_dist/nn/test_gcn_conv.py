from __future__ import annotations

import logging

import pytest
import torch
import torch_geometric.nn as pyg

from gnn_dist.nn import Block, GCNConv


def test_repr_and_parameters():
    conv = GCNConv(16, 32)
    assert repr(conv) == "GCNConv(16, 32)"
    assert {n for n, _ in conv.named_parameters()} == {n for n, _ in pyg.GCNConv(16, 32).named_parameters()}
    assert GCNConv(16, 32, bias=False).bias is None


def test_four_node_graph_matches_pyg(kit):
    block = Block.from_graph(*kit.four_node())
    x = torch.randn(4, 16)
    conv = GCNConv(16, 32)
    out = conv(block, x)
    assert out.shape == (4, 32)
    kit.assert_matches_pyg(conv, pyg.GCNConv(16, 32), block, x)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_graph_matches_pyg(kit, seed):
    torch.manual_seed(seed)
    block = Block.from_graph(*kit.random_graph(seed))
    assert block.self_loop_mask.any() and (block.in_count == 0).any()
    kit.assert_matches_pyg(GCNConv(8, 5), pyg.GCNConv(8, 5), block, torch.randn(block.num_src, 8))


def test_without_bias_matches_pyg(kit):
    block = Block.from_graph(*kit.random_graph(3))
    kit.assert_matches_pyg(GCNConv(6, 6, bias=False), pyg.GCNConv(6, 6, bias=False), block,
                           torch.randn(block.num_src, 6))


@pytest.mark.parametrize("num_parts", [2, 3])
def test_split_with_halo_equals_whole_graph(kit, num_parts):
    torch.manual_seed(0)
    indptr, indices = kit.random_graph(5)
    kit.assert_split_equals_global(GCNConv(8, 4), indptr, indices, torch.randn(indptr.numel() - 1, 8), num_parts)


def test_weighted_block_warns_once_and_ignores_weights(kit, caplog):
    indptr, indices = kit.random_graph(0)
    plain = Block.from_graph(indptr, indices)
    weighted = Block.from_graph(indptr, indices, edge_weight=torch.rand(indices.numel()))
    conv = GCNConv(4, 4)
    x = torch.randn(plain.num_src, 4)
    with caplog.at_level(logging.WARNING, logger="gnn_dist.nn.gcn_conv"):
        out = conv(weighted, x)
        conv(weighted, x)
    assert sum("ignores the block's edge weights" in r.getMessage() for r in caplog.records) == 1
    torch.testing.assert_close(out, conv(plain, x))


def test_bad_shapes(kit):
    block = Block.from_graph(*kit.four_node())
    conv = GCNConv(16, 32)
    with pytest.raises(ValueError, match=r"GCNConv\(16, 32\): x_src has 8 features per row but in_channels = 16"):
        conv(block, torch.randn(4, 8))
    with pytest.raises(ValueError, match=r"x_src has 3 rows but the block has num_src = 4"):
        conv(block, torch.randn(3, 16))
    with pytest.raises(ValueError, match=r"x_src must be a 2-D tensor"):
        conv(block, torch.randn(4))
