from __future__ import annotations

import pytest
import torch
import torch_geometric.nn as pyg
from torch import nn

from gnn_dist.nn import Block, GINConv


def mlp(i: int, o: int) -> nn.Module:
    return nn.Sequential(nn.Linear(i, o), nn.ReLU(), nn.Linear(o, o))


def test_repr_and_parameters():
    conv = GINConv(nn.Linear(16, 32))
    assert repr(conv) == "GINConv(nn=Linear(in_features=16, out_features=32, bias=True))"
    assert dict(conv.named_buffers()).keys() == {"eps"}
    assert dict(GINConv(nn.Linear(2, 2), train_eps=True).named_parameters()).keys() == {"nn.weight", "nn.bias", "eps"}


def test_four_node_graph_matches_pyg(kit):
    block = Block.from_graph(*kit.four_node())
    x = torch.randn(4, 16)
    torch.manual_seed(0)
    conv = GINConv(mlp(16, 32))
    assert conv(block, x).shape == (4, 32)
    kit.assert_matches_pyg(conv, pyg.GINConv(mlp(16, 32)), block, x)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("eps", "train_eps"), [(0.0, False), (0.25, True)])
def test_random_graph_matches_pyg(kit, seed, eps, train_eps):
    torch.manual_seed(seed)
    block = Block.from_graph(*kit.random_graph(seed))
    kit.assert_matches_pyg(GINConv(mlp(8, 5), eps=eps, train_eps=train_eps),
                           pyg.GINConv(mlp(8, 5), eps=eps, train_eps=train_eps), block,
                           torch.randn(block.num_src, 8))


def test_reset_parameters_restores_eps():
    conv = GINConv(nn.Linear(2, 2), eps=0.5, train_eps=True)
    with torch.no_grad():
        conv.eps.fill_(3.0)
    w = conv.nn.weight.clone()
    conv.reset_parameters()
    assert conv.eps.item() == 0.5 and not torch.equal(w, conv.nn.weight)


@pytest.mark.parametrize("num_parts", [2, 3])
def test_split_with_halo_equals_whole_graph(kit, num_parts):
    torch.manual_seed(0)
    indptr, indices = kit.random_graph(9)
    kit.assert_split_equals_global(GINConv(mlp(6, 4), eps=0.1, train_eps=True), indptr, indices,
                                   torch.randn(indptr.numel() - 1, 6), num_parts)


def test_bad_shapes(kit):
    block = Block.from_graph(*kit.four_node())
    with pytest.raises(ValueError, match=r"GINConv\(nn=.*\): x_src has 3 rows but the block has num_src = 4"):
        GINConv(nn.Linear(16, 2))(block, torch.randn(3, 16))


@pytest.mark.parametrize(("make", "width"), [
    (lambda: mlp(8, 3), 3),                                   # a narrowing first map: summed at 3
    (lambda: nn.Linear(8, 3), 3),                             # the network is the narrowing map itself
    (lambda: mlp(8, 12), 8),                                  # a widening one: summed at 8
    (lambda: nn.Sequential(nn.ReLU(), nn.Linear(8, 3)), 8),   # no map first: summed at 8
])
def test_sum_runs_at_the_narrower_width_and_matches_pyg(kit, make, width):
    torch.manual_seed(0)
    block = Block.from_graph(*kit.random_graph(4))
    x = torch.randn(block.num_src, 8)
    conv = GINConv(make(), eps=0.25, train_eps=True)
    ctx, z = conv.begin(block, x)
    assert z.shape == (block.num_src, width) and ctx.x_dst.shape == (block.num_dst, width)
    assert conv.begin(block, x, raw=True)[1].shape[1] == 8    # raw rows are summed as they are
    ref = pyg.GINConv(make(), eps=0.25, train_eps=True)
    kit.assert_matches_pyg(conv, ref, block, x)


def test_narrowing_split_with_halo_equals_whole_graph(kit):
    torch.manual_seed(0)
    indptr, indices = kit.random_graph(5)
    kit.assert_split_equals_global(GINConv(nn.Linear(7, 2), eps=0.1, train_eps=True), indptr, indices,
                                   torch.randn(indptr.numel() - 1, 7), 3)
