"""``--model gine`` (encoder ``Linear(in, hidden)``, then GINEConv layers) against the same model
built from PyG's ``GINEConv`` (as PyG's GINE examples: a node encoder first), dropout on: logits,
the input's and every parameter's gradient to 1e-5. P ranks against one: test_edge_features.py."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from test_edge_features import EDGE_DIM, _against_pyg, _mlp, edge_graph, whole_block

from gnn_dist.models import build_model
from gnn_dist.nn import hash_dropout
from gnn_dist.nn.part import FullGraph


class PyGGINE(nn.Module):
    """``Linear(in, hidden)``, then PyG's GINEConv layers, ReLU + hash dropout between them."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float, seed: int) -> None:
        super().__init__()
        from torch_geometric.nn import GINEConv

        widths = [hidden] * layers + [out_dim]
        self.convs = nn.ModuleList(GINEConv(_mlp(widths[i], widths[i + 1]), edge_dim=EDGE_DIM) for i in range(layers))
        self.encoder = nn.Linear(in_dim, hidden)
        self.dropout, self.seed = dropout, seed
        self.register_buffer("dropout_step", torch.zeros((), dtype=torch.long))

    def forward(self, block, x, attr):
        ids = block.src_original_ids[:block.num_dst]
        h = self.encoder(x)
        for i, conv in enumerate(self.convs):
            h = conv(h, block.edge_index, attr)
            if i < len(self.convs) - 1:
                h = hash_dropout(F.relu(h), self.dropout, seed=self.seed, step=self.dropout_step, layer=i,
                                 row_ids=ids, training=True)
        return h


class OnBlock(nn.Module):
    """A model called as a layer, ``(block, x)``: ours on the whole block, PyG's with its edge index."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, block, x, attr=None):
        return self.model(FullGraph(block), x) if attr is None else self.model(block, x, attr)


def test_gine_equals_pyg_with_an_encoder():
    g = edge_graph(1)
    block = whole_block(g)
    torch.manual_seed(0)
    ours = build_model("gine", in_dim=6, hidden_dim=8, out_dim=3, num_layers=3, dropout=0.5, seed=4,
                       edge_dim=EDGE_DIM)
    assert tuple(ours.encoder.weight.shape) == (8, 6) and ours.convs[0].nn[0].in_features == 8
    _against_pyg(OnBlock(ours), OnBlock(PyGGINE(6, 8, 3, 3, 0.5, 4)), block, g,
                 lambda m, x, ei, attr: m(block, x, attr))
    x = torch.randn(g.num_nodes, 6)
    with torch.no_grad():   # dropout was on: the same step in eval mode differs
        ours.dropout_step.zero_()
        train = ours.train()(FullGraph(block), x)
        assert not torch.allclose(ours.eval()(FullGraph(block), x), train)
