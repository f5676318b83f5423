"""The layer protocol: every built-in layer aggregated over groups of its source rows (in any
split, the halo rows last) equals the layer on the whole block; the protocol's checks."""

from __future__ import annotations

import pytest
import torch

from gnn_dist.nn import (Block, DecomposableLayer, DropoutKey, GATConv, GCNConv, GINConv, SAGEConv, is_decomposable,
                         propagate, propagate_groups)
from gnn_dist.pipeline.block_split import SplitBlock


def layers() -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    return {"gcn-wide": GCNConv(6, 16), "gcn-narrow": GCNConv(6, 2), "sage-wide": SAGEConv(6, 16),
            "sage-narrow": SAGEConv(6, 2), "gin": GINConv(torch.nn.Linear(6, 5), eps=0.3, train_eps=True),
            "gat": GATConv(6, 4, heads=3), "gat-mean": GATConv(6, 4, heads=2, concat=False, dropout=0.4)}


def halo_block(kit, seed: int) -> Block:
    """Part 0's block of a random graph split in two: destinations, then halo sources."""
    indptr, indices = kit.random_graph(seed, num_nodes=50, num_edges=300)
    owner = torch.randint(0, 2, (50,), generator=torch.Generator().manual_seed(seed))
    block = Block.from_graph(indptr, indices, dst_nodes=torch.nonzero(owner == 0).flatten())
    assert block.num_halo > 0 and bool(block.self_loop_mask.any())
    return block


@pytest.mark.parametrize("name", sorted(layers()))
@pytest.mark.parametrize("split_at", ["destinations", "inner-and-some-halo"])
def test_groups_of_sources_equal_the_whole_layer(kit, name, split_at):
    block = halo_block(kit, 3)
    layer = layers()[name].train()
    key = DropoutKey(5, torch.tensor(2), 1)
    x = torch.randn(block.num_src, 6, generator=torch.Generator().manual_seed(1), requires_grad=True)
    ref = layer(block, x, dropout_key=key) if isinstance(layer, GATConv) else layer(block, x)
    s = block.num_dst if split_at == "destinations" else block.num_dst + block.num_halo // 2
    split = SplitBlock(block, s)
    calls = []

    def rest() -> torch.Tensor:
        calls.append(1)
        return x[s:]
    out = propagate_groups(layer, block, (split.inner, x[:s]), (split.halo, rest), dropout_key=key)
    assert calls == [1]
    torch.testing.assert_close(out, ref, rtol=1e-6, atol=1e-6)
    g = torch.randn(ref.shape, generator=torch.Generator().manual_seed(2))
    grads_ref = torch.autograd.grad(ref, [x, *layer.parameters()], g)
    grads = torch.autograd.grad(out, [x, *layer.parameters()], g)
    for a, b in zip(grads, grads_ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(layers()))
def test_forward_is_the_protocol_on_one_group(kit, name):
    block = halo_block(kit, 4)
    layer = layers()[name].eval()
    x = torch.randn(block.num_src, 6)
    assert is_decomposable(layer) and isinstance(layer, DecomposableLayer)
    torch.testing.assert_close(propagate(layer, block, x), layer(block, x), rtol=0, atol=0)


def test_raw_aggregation_is_refused_by_attention():
    block = Block.from_graph(torch.tensor([0, 1, 2]), torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="cannot aggregate its raw input rows"):
        GATConv(3, 2).begin(block, torch.randn(2, 3), raw=True)


def test_a_subclass_that_overrides_forward_is_not_decomposable():
    class Doubled(GCNConv):
        def forward(self, block, x_src):
            return 2 * super().forward(block, x_src)

    class Renamed(GCNConv):
        pass

    assert not is_decomposable(Doubled(3, 2)) and is_decomposable(Renamed(3, 2))
    assert not is_decomposable(torch.nn.Linear(3, 2))


def test_source_rows_are_checked():
    block = Block.from_graph(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 0, 2]), dst_nodes=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"1 source rows given; the block's first sources are its 2 destinations"):
        GCNConv(3, 2).begin(block, torch.randn(1, 3))
    with pytest.raises(ValueError, match="the source rows have 4 features but in_channels = 3"):
        SAGEConv(3, 2).begin(block, torch.randn(2, 4))
