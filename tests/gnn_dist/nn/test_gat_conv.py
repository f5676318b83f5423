from __future__ import annotations

import pytest
import torch
import torch_geometric.nn as pyg

from gnn_dist.nn import Block, DropoutKey, GATConv


def test_repr_and_parameters():
    conv = GATConv(16, 32, heads=2)
    assert repr(conv) == "GATConv(16, 32, heads=2)"
    ref = pyg.GATConv(16, 32, heads=2)
    assert {n: p.shape for n, p in conv.named_parameters()} == {n: p.shape for n, p in ref.named_parameters()}
    assert GATConv(16, 32, heads=2, concat=False).bias.shape == (32,)


def test_four_node_graph_matches_pyg(kit):
    block = Block.from_graph(*kit.four_node())
    x = torch.randn(4, 16)
    conv = GATConv(16, 32, heads=2)
    assert conv(block, x).shape == (4, 64)
    kit.assert_matches_pyg(conv, pyg.GATConv(16, 32, heads=2), block, x)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(("heads", "concat", "slope", "bias"),
                         [(1, True, 0.2, True), (3, True, 0.2, True), (3, False, 0.1, True), (2, True, 0.2, False)])
def test_random_graph_matches_pyg(kit, seed, heads, concat, slope, bias):
    torch.manual_seed(seed)
    block = Block.from_graph(*kit.random_graph(seed))
    kw = dict(heads=heads, concat=concat, negative_slope=slope, bias=bias)
    kit.assert_matches_pyg(GATConv(8, 5, **kw), pyg.GATConv(8, 5, **kw), block, torch.randn(block.num_src, 8))


def test_eval_mode_ignores_attention_dropout(kit):
    torch.manual_seed(0)
    block = Block.from_graph(*kit.random_graph(0))
    conv = GATConv(8, 5, heads=2, dropout=0.5).eval()
    kit.assert_matches_pyg(conv, pyg.GATConv(8, 5, heads=2, dropout=0.5).eval(), block, torch.randn(block.num_src, 8))


def test_attention_dropout_is_keyed(kit):
    torch.manual_seed(0)
    block = Block.from_graph(*kit.random_graph(1))
    x = torch.randn(block.num_src, 8)
    conv = GATConv(8, 5, heads=2, dropout=0.5)
    a = conv(block, x, dropout_key=DropoutKey(seed=0, step=3, layer=1))
    b = conv(block, x, dropout_key=DropoutKey(seed=0, step=3, layer=1))
    c = conv(block, x, dropout_key=DropoutKey(seed=0, step=4, layer=1))
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.allclose(a, c)
    assert not torch.allclose(a, conv.eval()(block, x))


def test_attention_dropout_needs_a_key(kit):
    block = Block.from_graph(*kit.four_node())
    with pytest.raises(ValueError, match=r"dropout=0.5 in training mode needs dropout_key"):
        GATConv(4, 4, dropout=0.5)(block, torch.randn(4, 4))


@pytest.mark.parametrize(("num_parts", "heads", "concat"), [(2, 2, True), (3, 3, False)])
def test_split_with_halo_equals_whole_graph(kit, num_parts, heads, concat):
    torch.manual_seed(0)
    indptr, indices = kit.random_graph(11)
    kit.assert_split_equals_global(GATConv(8, 4, heads=heads, concat=concat), indptr, indices,
                                   torch.randn(indptr.numel() - 1, 8), num_parts)


def test_split_with_attention_dropout_equals_whole_graph(kit):
    torch.manual_seed(0)
    indptr, indices = kit.random_graph(12)
    key = DropoutKey(seed=5, step=torch.tensor(7), layer=0)
    kit.assert_split_equals_global(GATConv(8, 4, heads=2, dropout=0.4), indptr, indices,
                                   torch.randn(indptr.numel() - 1, 8), 3,
                                   call=lambda c, b, xs: c(b, xs, dropout_key=key))


def test_bad_arguments_and_shapes(kit):
    with pytest.raises(ValueError, match=r"heads must be >= 1, got 0"):
        GATConv(4, 4, heads=0)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.0"):
        GATConv(4, 4, dropout=1.0)
    block = Block.from_graph(*kit.four_node())
    with pytest.raises(ValueError, match=r"GATConv\(16, 32, heads=1\): x_src has 8 features per row"):
        GATConv(16, 32)(block, torch.randn(4, 8))
