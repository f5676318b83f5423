from __future__ import annotations

import pytest
import torch
import torch_geometric.nn as pyg

from gnn_dist.nn import Block, SAGEConv


def test_repr_and_parameters():
    conv = SAGEConv(16, 32)
    assert repr(conv) == "SAGEConv(16, 32, aggr=mean)"
    assert {n for n, _ in conv.named_parameters()} == {n for n, _ in pyg.SAGEConv(16, 32).named_parameters()}


def test_four_node_graph_matches_pyg(kit):
    block = Block.from_graph(*kit.four_node())
    x = torch.randn(4, 16)
    conv = SAGEConv(16, 32)
    assert conv(block, x).shape == (4, 32)
    kit.assert_matches_pyg(conv, pyg.SAGEConv(16, 32), block, x)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(("in_channels", "out_channels", "bias"), [(8, 5, True), (5, 8, True), (8, 5, False)])
def test_random_graph_matches_pyg(kit, seed, in_channels, out_channels, bias):
    # out < in takes the linear-first path, out >= in the aggregate-first one
    torch.manual_seed(seed)
    block = Block.from_graph(*kit.random_graph(seed))
    kit.assert_matches_pyg(SAGEConv(in_channels, out_channels, bias=bias),
                           pyg.SAGEConv(in_channels, out_channels, bias=bias), block,
                           torch.randn(block.num_src, in_channels))


@pytest.mark.parametrize(("num_parts", "in_channels", "out_channels"), [(2, 8, 4), (3, 4, 8)])
def test_split_with_halo_equals_whole_graph(kit, num_parts, in_channels, out_channels):
    torch.manual_seed(0)
    indptr, indices = kit.random_graph(7)
    kit.assert_split_equals_global(SAGEConv(in_channels, out_channels), indptr, indices,
                                   torch.randn(indptr.numel() - 1, in_channels), num_parts)


def test_bad_shapes(kit):
    block = Block.from_graph(*kit.four_node())
    with pytest.raises(ValueError, match=r"SAGEConv\(16, 32, aggr=mean\): x_src has 8 features per row"):
        SAGEConv(16, 32)(block, torch.randn(4, 8))
    with pytest.raises(ValueError, match=r"x_src has 5 rows but the block has num_src = 4"):
        SAGEConv(16, 32)(block, torch.randn(5, 16))


@pytest.mark.parametrize(("in_channels", "out_channels", "stacked"), [(12, 4, True), (4, 12, False)])
def test_narrowing_map_computes_the_root_term_with_the_sources(kit, in_channels, out_channels, stacked):
    """Mapping first on the destinations' rows alone, both weights run in one product: the root
    term comes back from ``begin``, equal to ``lin_r`` of the rows (a widening map sums the rows
    first and leaves it to ``update``, as do raw rows)."""
    torch.manual_seed(0)
    block = Block.from_graph(*kit.random_graph(6))
    conv = SAGEConv(in_channels, out_channels)
    x = torch.randn(block.num_dst, in_channels)
    ctx, z = conv.begin(block, x)
    assert (ctx.root is not None) == stacked
    if stacked:
        torch.testing.assert_close(ctx.root, conv.lin_r(x))
        torch.testing.assert_close(z, torch.nn.functional.linear(x, conv.lin_l.weight))
    assert conv.begin(block, x, raw=True)[0].root is None


def test_concat_init_draws_both_maps_and_the_bias_as_one_linear_on_the_concatenation():
    """``init="concat"``: every weight and the bias uniform in ``1/sqrt(2 F_in)`` (the bound of
    ``nn.Linear(2 F_in, F_out)``), half PyG's scale squared; ``"pyg"`` draws what PyG's layer draws."""
    torch.manual_seed(0)
    conv = SAGEConv(200, 300, init="concat")
    bound = 1 / (2 * 200) ** 0.5
    for p in (conv.lin_l.weight, conv.lin_r.weight, conv.lin_l.bias):
        assert float(p.abs().max()) <= bound and float(p.abs().max()) > 0.99 * bound
        assert float(p.std()) == pytest.approx(bound / 3 ** 0.5, rel=0.05)   # uniform, not a narrower law
    torch.manual_seed(0)
    ref = pyg.SAGEConv(200, 300)
    torch.manual_seed(0)
    plain = SAGEConv(200, 300)
    assert torch.equal(plain.lin_l.weight, ref.lin_l.weight) and torch.equal(plain.lin_r.weight, ref.lin_r.weight)
    assert float(plain.lin_r.weight.abs().max()) > 1.4 * bound
    with pytest.raises(ValueError, match="init='xavier' is not one of pyg, concat"):
        SAGEConv(4, 4, init="xavier")
