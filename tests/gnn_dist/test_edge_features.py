"""Edge features at runtime: ``Block.edge_attr`` through loads, sub-blocks and splits; GINEConv and
GATConv(edge_dim) against PyG (outputs and every gradient); the models (``--model gine``, GAT with
the partition's edge features) and a PyG layer that takes ``edge_attr`` on the block, trained on
P = 2 and 3 ranks equal to one rank with dropout on (sync and overlap); ``--edge-dim``; the planner."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from partitioners import Graph
from mp_utils import run_ranks
from test_weighted_gcn import write
from train_helpers import saved_tensor_bytes

from gnn_dist.nn import Block, BlockError, GATConv, GINEConv, propagate_groups
from gnn_dist.pipeline.block_split import SplitBlock

EPOCHS = 4
EDGE_DIM = 3


def edge_graph(seed: int = 0) -> Graph:
    """A symmetrised graph with self-loops, a repeated edge, a node without in-edges and one with only
    its self-loop, and 3 edge features."""
    rng = np.random.default_rng(seed)
    n, active = 90, 84
    src = np.concatenate([rng.integers(0, active, 420), [3, 9, 5, 5, 86]])
    dst = np.concatenate([rng.integers(0, active, 420), [3, 9, 7, 7, 86]])   # loops 3, 9, 86 (86: nothing else)
    attr = rng.standard_normal((src.size, EDGE_DIM)).astype(np.float32)
    y = rng.integers(0, 3, n)
    train = np.zeros(n, bool)
    train[rng.choice(n, 40, replace=False)] = True
    return Graph.from_edges(src, dst, n, features=rng.standard_normal((n, 6)).astype(np.float32), labels=y,
                            train_mask=train, val_mask=~train, test_mask=np.zeros(n, bool), num_classes=3,
                            edge_attr=attr, symmetrize=True)


def whole_block(g: Graph, dst_nodes=None) -> Block:
    return Block.from_graph(torch.from_numpy(g.indptr), torch.from_numpy(g.indices.astype(np.int64)), dst_nodes,
                            edge_attr=torch.from_numpy(np.asarray(g.edge_attr)))


@pytest.fixture(scope="module")
def graph() -> Graph:
    return edge_graph()


# ------------------------------------------------------------------ Block
def test_blocks_carry_their_edges_features(graph):
    block = whole_block(graph)
    assert block.edge_dim == EDGE_DIM and torch.equal(block.edge_attr, torch.from_numpy(graph.edge_attr))
    rows = torch.tensor([40, 3, 7, 86, 88])
    sub, src = block.sub_block(rows)
    for i, v in enumerate(rows.tolist()):   # each destination's rows, in its CSR order
        a, b = int(sub.indptr[i]), int(sub.indptr[i + 1])
        assert torch.equal(sub.edge_attr[a:b], block.edge_attr[int(block.indptr[v]):int(block.indptr[v + 1])])
    part = whole_block(graph, torch.arange(0, 90, 2))
    split = SplitBlock(part)
    assert torch.equal(split.inner.edge_attr, part.edge_attr[split.inner_edges])
    assert torch.equal(split.halo.edge_attr, part.edge_attr[split.halo_edges])
    assert torch.equal(part.to("cpu").edge_attr, part.edge_attr) and "edge_dim=3" in repr(part)
    with pytest.raises(BlockError, match=r"edge_attr has shape \[5, 3\] but the block has \d+ edges"):
        Block.from_graph(torch.from_numpy(graph.indptr), torch.from_numpy(graph.indices.astype(np.int64)),
                         edge_attr=torch.zeros(5, 3))


# ------------------------------------------------------------------ layers against PyG
def _against_pyg(ours: nn.Module, ref: nn.Module, block: Block, g: Graph, run_ref) -> None:
    ref.load_state_dict(ours.state_dict(), strict=True)
    torch.manual_seed(1)
    x = torch.randn(g.num_nodes, 6)
    attr = torch.from_numpy(np.asarray(g.edge_attr))
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    out1, out2 = ours(block, x1), run_ref(ref, x2, block.edge_index, attr)
    torch.testing.assert_close(out1, out2, rtol=1e-5, atol=1e-5)
    grad = torch.randn_like(out1)
    (out1 * grad).sum().backward()
    (out2 * grad).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-5, atol=1e-5)
    theirs = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, theirs[name].grad, rtol=1e-5, atol=1e-5, msg=name)


def _mlp(w_in: int, w_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(w_in, w_out), nn.ReLU(), nn.Linear(w_out, w_out))


@pytest.mark.parametrize("edge_dim", [EDGE_DIM, None])
def test_gine_conv_equals_pyg(graph, edge_dim):
    from torch_geometric.nn import GINEConv as PyGGINEConv

    g = graph
    if edge_dim is None:  # no map: the edge features are as wide as the rows
        rng = np.random.default_rng(2)
        g = Graph(indptr=graph.indptr, indices=graph.indices, x=graph.x, symmetric=True,
                  edge_attr=rng.standard_normal((graph.num_edges, 6)).astype(np.float32))
    torch.manual_seed(0)
    ours = GINEConv(_mlp(6, 5), train_eps=True, eps=0.3, edge_dim=edge_dim)
    ref = PyGGINEConv(_mlp(6, 5), train_eps=True, eps=0.3, edge_dim=edge_dim)
    _against_pyg(ours, ref, whole_block(g), g, lambda m, x, ei, a: m(x, ei, a))


@pytest.mark.parametrize("heads, concat", [(2, True), (3, False)])
def test_gat_conv_with_edge_features_equals_pyg(graph, heads, concat):
    from torch_geometric.nn import GATConv as PyGGATConv

    torch.manual_seed(0)
    ours = GATConv(6, 4, heads=heads, concat=concat, edge_dim=EDGE_DIM)
    # PyG's defaults: add_self_loops=True with fill_value="mean" (what GATConv does with self-loops)
    ref = PyGGATConv(6, 4, heads=heads, concat=concat, edge_dim=EDGE_DIM, add_self_loops=True, fill_value="mean")
    _against_pyg(ours, ref, whole_block(graph), graph, lambda m, x, ei, a: m(x, ei, a))


def _layers() -> list[nn.Module]:
    torch.manual_seed(0)
    return [GINEConv(_mlp(6, 5), edge_dim=EDGE_DIM), GATConv(6, 4, heads=2, edge_dim=EDGE_DIM)]


@pytest.mark.parametrize("layer", _layers(), ids=["gine", "gat"])
def test_split_and_sub_blocks_equal_the_whole_block(graph, layer):
    """What the overlap schedule runs (inner sources, then halo sources) and what a chunk of
    destinations runs (a sub-block) equal the whole block's rows."""
    block = whole_block(graph, torch.arange(1, 90, 2))   # half the nodes: halo rows
    x = torch.randn(block.num_src, 6)
    whole = layer(block, x)
    split = SplitBlock(block)
    groups = propagate_groups(layer, block, (split.inner, x[:split.num_first]),
                              (split.halo, lambda: x[split.num_first:]))
    torch.testing.assert_close(groups, whole, rtol=1e-5, atol=1e-6)
    rows = torch.tensor([0, 5, 44, 12, 30])
    sub, src = block.sub_block(rows)
    torch.testing.assert_close(layer(sub, x[src]), whole[rows], rtol=1e-5, atol=1e-6)


def test_layers_without_the_edge_features_they_need_are_named(graph):
    plain = Block.from_graph(torch.from_numpy(graph.indptr), torch.from_numpy(graph.indices.astype(np.int64)))
    x = torch.randn(graph.num_nodes, 6)
    gine, gat = _layers()
    with pytest.raises(ValueError, match=r"GINEConv.*the block has no edge_attr"):
        gine(plain, x)
    with pytest.raises(ValueError, match=r"edge_dim=3 needs the block's edge_attr \[E, 3\], found none"):
        gat(plain, x)
    with pytest.raises(ValueError, match=r"GINEConv.*cannot aggregate its raw input rows"):
        gine.begin(whole_block(graph), x, raw=True)


# ------------------------------------------------------------------ models, P ranks against one
class PyGEdgeNet(nn.Module):
    """PyG's GINEConv then GATConv(edge_dim) on the part's block, ``block.edge_attr`` passed in."""

    def __init__(self, in_dim: int, out_dim: int, edge_dim: int, seed: int = 7) -> None:
        super().__init__()
        from torch_geometric.nn import GATConv as PyGGATConv, GINEConv as PyGGINEConv

        self.in_dim, self.out_dim, self.hidden_dim, self.num_layers = in_dim, out_dim, 8, 2
        self.convs = nn.ModuleList([PyGGINEConv(_mlp(in_dim, 8), edge_dim=edge_dim),
                                    PyGGATConv(8, out_dim, heads=2, concat=False, edge_dim=edge_dim)])
        self.seed = seed
        self.register_buffer("step", torch.zeros((), dtype=torch.long))

    def forward(self, part, x):
        from gnn_dist.nn import hash_dropout

        block = part.block
        ids = block.src_original_ids[:block.num_dst]
        h = x
        for i, conv in enumerate(self.convs):
            h_all = part.exchange(h)
            h = conv((h_all, h_all[:block.num_dst]), block.edge_index, block.edge_attr,
                     size=(block.num_src, block.num_dst))
            if i == 0:
                h = hash_dropout(F.relu(h), 0.5, seed=self.seed, step=self.step, layer=i, row_ids=ids,
                                 training=self.training)
        if self.training:
            with torch.no_grad():
                self.step += 1
        return h


def train(rank: int, world_size: int, path: str) -> dict:
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(path)
    assert part.edge_feature_dim == EDGE_DIM and part.block.edge_dim == EDGE_DIM
    out = {}
    specs = {"gine": {}, "gat": {"heads": 2, "attn_dropout": 0.3}}
    for name, kwargs in specs.items():
        for pipeline in ("sync", "overlap"):
            torch.manual_seed(0)
            model = build_model(name, in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=2,
                                dropout=0.5, seed=7, edge_dim=EDGE_DIM, **kwargs)
            trainer = gnn_dist.Trainer(model, part, lr=0.05, log_every=0, pipeline=pipeline, static_halo=False)
            out[f"{name} {pipeline}"] = [h["train_loss"] for h in trainer.fit(EPOCHS)]
    torch.manual_seed(0)
    trainer = gnn_dist.Trainer(PyGEdgeNet(part.feature_dim, part.num_classes, EDGE_DIM), part, lr=0.05, log_every=0)
    out["pyg"] = [h["train_loss"] for h in trainer.fit(EPOCHS)]
    return out


@pytest.mark.slow   # started first (tests/conftest.py)
def test_p_ranks_equal_one_rank_with_edge_features(graph, tmp_path):
    one = train(0, 1, write(graph, 1, tmp_path / "p1"))
    rng = np.random.default_rng(9)
    other = Graph(indptr=graph.indptr, indices=graph.indices, x=graph.x, y=graph.y, train_mask=graph.train_mask,
                  val_mask=graph.val_mask, test_mask=graph.test_mask, num_classes=3, symmetric=True,
                  edge_attr=rng.standard_normal(graph.edge_attr.shape).astype(np.float32))
    changed = train(0, 1, write(other, 1, tmp_path / "o1"))
    assert all(changed[k] != one[k] for k in one), "the edge features change training"
    for p in (2, 3):
        for res in run_ranks(train, p, write(graph, p, tmp_path / f"p{p}"), timeout=300):
            for key in one:
                np.testing.assert_allclose(res[key], one[key], rtol=1e-5, atol=1e-6, err_msg=f"P={p} {key}")


# ------------------------------------------------------------------ --edge-dim and the planner
def test_edge_dim_is_resolved_against_the_partition():
    from gnn_dist.config import ConfigError, ModelConfig
    from gnn_dist.models import resolve_edge_dim

    assert resolve_edge_dim(ModelConfig(model="gine"), 4).edge_dim == 4
    assert resolve_edge_dim(ModelConfig(model="gat"), 4).edge_dim == 4
    assert resolve_edge_dim(ModelConfig(model="gat"), 0).edge_dim is None       # none to read: plain GAT
    assert resolve_edge_dim(ModelConfig(model="gat", edge_dim=0), 4).edge_dim == 0   # told to ignore them
    assert resolve_edge_dim(ModelConfig(model="gcn"), 4).edge_dim is None
    with pytest.raises(ValueError, match=r"--model gine reads edge features but X has none .*sbm-edges"):
        resolve_edge_dim(ModelConfig(model="gine"), 0, "X")
    with pytest.raises(ValueError, match=r"--edge-dim 3 but the partition has edge_feature_dim 4"):
        resolve_edge_dim(ModelConfig(model="gat", edge_dim=3), 4)
    with pytest.raises(ConfigError, match=r"edge_dim.*applies to models gat, gine, not 'gcn'"):
        ModelConfig(model="gcn", edge_dim=3)
    with pytest.raises(ConfigError, match=r"edge_dim.*model 'gine' reads edge features"):
        ModelConfig(model="gine", edge_dim=0)


def _saved(rank: int, world_size: int, path: str) -> int:
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(path)
    torch.manual_seed(0)
    model = build_model("gine", in_dim=part.feature_dim, hidden_dim=64, out_dim=part.num_classes, num_layers=3,
                        dropout=0.5, edge_dim=part.edge_feature_dim)
    trainer = gnn_dist.Trainer(model, part, lr=0.01, log_every=0, eval_every=0)
    return saved_tensor_bytes(trainer)


def test_the_planner_counts_what_gine_saves(tmp_path):
    from partitioners.catalog import load_dataset
    from partitioners.format import load_partition_meta

    from gnn_dist.memory_plan import Workload, sizes_from_meta
    from gnn_dist.memory_plan.model import layer_saved

    path = write(load_dataset("sbm-edges"), 2, tmp_path / "p2")
    sizes = sizes_from_meta(load_partition_meta(path))
    for rank, measured in enumerate(run_ranks(_saved, 2, path, timeout=240)):
        predicted = sum(layer_saved(Workload(model="gine", hidden=64, layers=3), sizes[rank], resident_input=False))
        assert abs(predicted / measured - 1) < 0.06, (rank, predicted, measured)
