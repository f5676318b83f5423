"""Deep residual models (ResGCN, ResGraphSAGE: DeepGCN's res+ blocks) and jumping knowledge: one
device equals PyG's layers (DeepGCNLayer, LayerNorm, JumpingKnowledge, BasicGNN(jk=...)) with
the same weights, outputs and every gradient; P = 2 and 3 ranks train what one rank trains under
sync, overlap and recomputation, dropout on; 32 residual layers train where 32 GCN layers do not;
the memory planner models what jumping knowledge saves."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch_geometric.nn as pyg

from partitioners import Graph

from gnn_dist.config import ConfigError, ModelConfig
from gnn_dist.models import MODELS, FullGraph, ResGCN, ResGraphSAGE, build_model
from gnn_dist.nn import Block, DeepGCNLayer, DropoutKey, GCNConv, GINConv
from mp_utils import run_ranks
from train_helpers import saved_tensor_bytes
from test_weighted_gcn import weighted_graph, write

TOL = {"atol": 1e-5, "rtol": 1e-5}
EPOCHS = 4
PYG_CONV = {"resgcn": pyg.GCNConv, "ressage": pyg.SAGEConv}


def csr_graph(seed: int, n: int = 60, e: int = 300) -> Block:
    """A directed graph with self-loops, a duplicate edge and isolated nodes, as a whole-graph block."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n - 5, (e,), generator=g)
    dst = torch.randint(0, n - 5, (e,), generator=g)
    src[:6] = dst[:6]
    src, dst = torch.cat([src, src[10:11]]), torch.cat([dst, dst[10:11]])
    order = torch.argsort(dst, stable=True)
    indptr = torch.zeros(n + 1, dtype=torch.long)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    return Block.from_graph(indptr, src[order])


class PygDeeperGCN(torch.nn.Module):
    """PyG's ``DeeperGCN`` (examples/ogbn_proteins_deepgcn.py) with a GCN or SAGE conv, a row
    LayerNorm and, for ``jk``, PyG's JumpingKnowledge over the closed block outputs."""

    def __init__(self, conv, in_dim: int, hidden: int, out_dim: int, layers: int, jk: str, norm: bool) -> None:
        super().__init__()
        self.node_encoder = torch.nn.Linear(in_dim, hidden)
        self.layers = torch.nn.ModuleList(
            pyg.DeepGCNLayer(conv(hidden, hidden), pyg.LayerNorm(hidden, mode="node") if norm else None,
                             torch.nn.ReLU(), block="res+", dropout=0.0) for _ in range(layers))
        self.jk = None if jk == "last" else pyg.JumpingKnowledge(jk, hidden, layers)
        self.lin = torch.nn.Linear(hidden * layers if jk == "cat" else hidden, out_dim)

    def close(self, h: torch.Tensor) -> torch.Tensor:
        first = self.layers[0]
        return first.act(h if first.norm is None else first.norm(h))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        x = self.layers[0].conv(self.node_encoder(x), edge_index)
        xs = [x]
        for layer in self.layers[1:]:
            x = layer(x, edge_index)
            xs.append(x)
        return self.lin(self.close(x) if self.jk is None else self.jk([self.close(h) for h in xs]))


def assert_same_as(ours: torch.nn.Module, ref: torch.nn.Module, block: Block, x: torch.Tensor) -> None:
    """``ref`` with ``ours``'s weights: equal outputs, input gradients and every weight gradient."""
    ref.load_state_dict({k: v for k, v in ours.state_dict().items() if k != "dropout_step"}, strict=True)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    out1, out2 = ours(FullGraph(block), x1), ref(x2, block.edge_index)
    torch.testing.assert_close(out1, out2, **TOL)
    grad = torch.randn(out1.shape, generator=torch.Generator().manual_seed(1))
    out1.backward(grad)
    out2.backward(grad)
    torch.testing.assert_close(x1.grad, x2.grad, **TOL)
    theirs = dict(ref.named_parameters())
    assert {n for n, _ in ours.named_parameters()} == set(theirs)
    for name, p in ours.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
        torch.testing.assert_close(p.grad, theirs[name].grad, msg=name, **TOL)


# ------------------------------------------------------------------------- one device vs PyG
@pytest.mark.parametrize("name", ["resgcn", "ressage"])
@pytest.mark.parametrize("jk", ["last", "cat", "max"])
def test_one_device_equals_pygs_deepgcn_layers(name, jk):
    block = csr_graph(0)
    torch.manual_seed(0)
    model = build_model(name, in_dim=6, hidden_dim=16, out_dim=3, num_layers=4, dropout=0.0, jk=jk)
    assert_same_as(model, PygDeeperGCN(PYG_CONV[name], 6, 16, 3, 4, jk, norm=True), block, torch.randn(60, 6))


def test_without_norm_equals_pyg():
    torch.manual_seed(1)
    model = ResGCN(6, 8, 3, 3, dropout=0.0, norm="none")
    assert model.layers[0].norm is None
    assert_same_as(model, PygDeeperGCN(pyg.GCNConv, 6, 8, 3, 3, "last", norm=False), csr_graph(1),
                   torch.randn(60, 6))


@pytest.mark.parametrize("name,pyg_model", [("gcn", pyg.models.GCN), ("sage", pyg.models.GraphSAGE)])
@pytest.mark.parametrize("jk", ["cat", "max"])
def test_basic_gnn_jk_equals_pygs_basic_gnn(name, pyg_model, jk):
    torch.manual_seed(0)
    model = build_model(name, in_dim=6, hidden_dim=16, out_dim=3, num_layers=3, dropout=0.0, jk=jk)
    ref = pyg_model(6, 16, 3, out_channels=3, dropout=0.0, jk=jk)
    assert model.lin.in_features == (48 if jk == "cat" else 16) and all(c.out_channels == 16 for c in model.convs)

    class Call(torch.nn.Module):   # PyG's BasicGNN takes (x, edge_index) as DeeperGCN does
        def __init__(self) -> None:
            super().__init__()
            self.convs, self.lin = ref.convs, ref.lin

        def forward(self, x, edge_index):
            return ref(x, edge_index)
    assert_same_as(model, Call(), csr_graph(2), torch.randn(60, 6))


def test_jk_last_is_the_model_it_was():
    """``jk="last"`` builds the same parameters as before jumping knowledge existed (no ``lin``)."""
    torch.manual_seed(0)
    model = build_model("gcn", in_dim=6, hidden_dim=16, out_dim=3, num_layers=3)
    assert model.lin is None and model.convs[-1].out_channels == 3
    names = [f"convs.{i}.{p}" for i in range(3) for p in ("bias", "lin.weight")]
    assert [n for n, _ in model.named_parameters()] == names


# ------------------------------------------------------------------------- P ranks vs one
CONFIGS = {
    "resgcn": {"model": "resgcn"},
    "ressage-input-dropout": {"model": "ressage", "input_dropout": 0.2},
    "resgcn-cat": {"model": "resgcn", "jk": "cat"},
    "ressage-max": {"model": "ressage", "jk": "max"},
    "gcn-cat": {"model": "gcn", "jk": "cat"},
    "sage-max": {"model": "sage", "jk": "max"},
}
RUNS = [("sync", "none"), ("overlap", "none"), ("sync", "all")]


def train(rank: int, world_size: int, path: str, layers: int = 4) -> dict:
    import gnn_dist

    part = gnn_dist.load_partition(path)
    out = {}
    for cname, cfg in CONFIGS.items():
        for pipeline, recompute in RUNS:
            torch.manual_seed(0)
            model = build_model(ModelConfig(hidden=16, layers=layers, dropout=0.3, seed=2, **cfg),
                                in_dim=part.feature_dim, out_dim=part.num_classes)
            trainer = gnn_dist.Trainer(model, part, lr=0.02, log_every=0, pipeline=pipeline, recompute=recompute)
            key = f"{cname} {pipeline} {recompute}"
            out[key] = [h["train_loss"] for h in trainer.fit(EPOCHS)]
            out[f"{key} weights"] = {k: v.clone() for k, v in model.state_dict().items()}
            out[f"{key} eval"] = trainer.evaluate()
    return out


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    return train(0, 1, write(weighted_graph(1), 1, tmp_path_factory.mktemp("p1")))


@pytest.mark.parametrize("world_size", [2, 3])
def test_p_ranks_equal_one_rank_with_dropout(one_rank, tmp_path, world_size):
    for cname in CONFIGS:
        losses = one_rank[f"{cname} sync none"]
        assert all(np.isfinite(losses)) and losses[-1] < losses[0], cname
    results = run_ranks(train, world_size, write(weighted_graph(1), world_size, tmp_path / "p"), timeout=400)
    for res in results:
        for cname in CONFIGS:
            for pipeline, recompute in RUNS:
                key = f"{cname} {pipeline} {recompute}"
                np.testing.assert_allclose(res[key], one_rank[key], rtol=1e-5, atol=1e-6, err_msg=key)
                for k, v in one_rank[f"{key} weights"].items():
                    torch.testing.assert_close(res[f"{key} weights"][k], v, msg=f"{key} {k}", **TOL)
                for k, v in one_rank[f"{key} eval"].items():
                    assert res[f"{key} eval"][k] == pytest.approx(v, rel=1e-5, abs=1e-6, nan_ok=True), (key, k)


def test_dropout_changes_what_the_residual_models_compute():
    """The dropout the multi-rank test keys is on: two steps draw different masks, and eval has none."""
    block = csr_graph(3)
    torch.manual_seed(0)
    model = build_model("resgcn", in_dim=6, hidden_dim=16, out_dim=3, num_layers=3, dropout=0.5)
    x = torch.randn(60, 6)
    a, b = model(FullGraph(block), x), model(FullGraph(block), x)
    assert not torch.allclose(a, b) and int(model.dropout_step) == 2
    model.eval()
    torch.testing.assert_close(model(FullGraph(block), x), model(FullGraph(block), x), rtol=0, atol=0)


# ------------------------------------------------------------------------- depth
def deep_losses(path: str, name: str, layers: int, epochs: int) -> list[float]:
    import gnn_dist

    part = gnn_dist.load_partition(path)
    torch.manual_seed(0)
    model = build_model(name, in_dim=part.feature_dim, hidden_dim=16, out_dim=part.num_classes,
                        num_layers=layers, dropout=0.1, seed=1)
    trainer = gnn_dist.Trainer(model, part, lr=0.01, log_every=0, eval_every=0)
    return [h["train_loss"] for h in trainer.fit(epochs)]


def community_graph(seed: int = 0, n: int = 150) -> Graph:
    """Three communities (80% of the edges inside one), features a noisy one-hot of the community."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    src = rng.integers(0, n, 1200)
    inside = rng.random(1200) < 0.8
    dst = np.where(inside, [rng.choice(np.flatnonzero(y == y[s])) for s in src], rng.integers(0, n, 1200))
    x = np.concatenate([np.eye(3)[y] + rng.standard_normal((n, 3)), rng.standard_normal((n, 3))], 1)
    train = np.zeros(n, bool)
    train[rng.choice(n, 60, replace=False)] = True
    return Graph.from_edges(src, dst, n, features=x.astype(np.float32), labels=y, train_mask=train,
                            val_mask=~train, test_mask=np.zeros(n, bool), num_classes=3)


@pytest.mark.usefixtures("one_thread")
def test_thirty_two_residual_layers_train_where_gcn_does_not(tmp_path):
    path = write(community_graph(), 1, tmp_path / "p1")
    gcn = deep_losses(path, "gcn", 32, 30)
    for name in ("resgcn", "ressage"):
        res = deep_losses(path, name, 32, 30)
        assert all(np.isfinite(res)) and res[-1] < 0.5 * res[0], (name, res)   # measured: 1.1 -> 0.13
        assert res[-1] < 0.5 * gcn[-1], (name, res[-1], gcn[-1])                # 32 GCN layers stay at ln 3


# ------------------------------------------------------------------------- the memory planner
JK_MEMORY = {"gcn cat": {}, "gat max": {"heads": 4}, "resgcn cat": {}, "ressage max": {}}


def saved_bytes(rank: int, world_size: int, path: str) -> dict[str, int]:
    """What autograd saves in one training step (bytes of distinct storages, parameters aside)."""
    import gnn_dist

    part = gnn_dist.load_partition(path)
    out = {}
    for key, kwargs in JK_MEMORY.items():
        name, jk = key.split()
        torch.manual_seed(0)
        model = build_model(name, in_dim=part.feature_dim, hidden_dim=64, out_dim=part.num_classes, num_layers=3,
                            dropout=0.5, jk=jk, **kwargs)
        trainer = gnn_dist.Trainer(model, part, lr=0.01, log_every=0, eval_every=0)
        out[key] = saved_tensor_bytes(trainer)
    return out


def test_the_planner_models_what_jumping_knowledge_saves(tmp_path):
    from partitioners.format import load_partition_meta
    from train_helpers import make_graph

    from gnn_dist.memory_plan import Workload, sizes_from_meta
    from gnn_dist.memory_plan.model import layer_saved

    graph = make_graph(2000, seed=2)
    path = write(graph, 2, tmp_path / "p2")
    sizes = sizes_from_meta(load_partition_meta(path))
    for rank, got in enumerate(run_ranks(saved_bytes, 2, path, timeout=300)):
        for key, value in got.items():
            name, jk = key.split()
            w = Workload(model=name, hidden=64, layers=3, heads=JK_MEMORY[key].get("heads"), jk=jk)
            last = Workload(model=name, hidden=64, layers=3, heads=JK_MEMORY[key].get("heads"))
            predicted = sum(layer_saved(w, sizes[rank], resident_input=False))
            assert predicted > sum(layer_saved(last, sizes[rank], resident_input=False)), key
            assert abs(predicted / value - 1) < 0.06, (key, rank, predicted, value)


# ------------------------------------------------------------------------- interface and errors
def test_registry_and_interface():
    assert MODELS["resgcn"] is ResGCN and MODELS["ressage"] is ResGraphSAGE
    model = build_model("ressage", in_dim=5, hidden_dim=8, out_dim=3, num_layers=3, jk="cat")
    assert not model.accepts_layer_input and len(model.layers) == 3 and model.lin.in_features == 24
    assert repr(model) == "ResGraphSAGE(5, 3, num_layers=3, jk=cat)"
    assert isinstance(model.layers[1], DeepGCNLayer) and isinstance(model.layers[1].norm, torch.nn.LayerNorm)


@pytest.mark.parametrize("kwargs,message", [
    ({"num_layers": 0}, "ResGCN: num_layers must be a positive int, got 0"),
    ({"dropout": 1.0}, r"ResGCN: dropout must be in \[0, 1\), got 1.0"),
    ({"norm": "batch"}, "ResGCN: norm must be one of layer, none, got 'batch'"),
    ({"jk": "lstm"}, "ResGCN: jk must be one of last, cat, max, got 'lstm'"),
])
def test_bad_arguments_name_the_model(kwargs, message):
    args = {"in_dim": 5, "hidden_dim": 8, "out_dim": 3, "num_layers": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        ResGCN(**args)


def test_deep_gcn_layer_errors():
    with pytest.raises(ValueError, match="maps 4 to 8 channels"):
        DeepGCNLayer(GCNConv(4, 8))
    with pytest.raises(ValueError, match="does not implement the layer protocol"):
        DeepGCNLayer(torch.nn.Linear(4, 4))
    assert DeepGCNLayer(GINConv(torch.nn.Linear(4, 4)))   # GIN implements it
    layer = DeepGCNLayer(GCNConv(4, 4), dropout=0.5)
    block = csr_graph(0)
    with pytest.raises(ValueError, match="needs the model's dropout_key"):
        layer(block, torch.randn(60, 4))
    assert layer(block, torch.randn(60, 4), dropout_key=DropoutKey(0, 0, 1)).shape == (60, 4)


def test_jk_config_is_checked_once_naming_the_model():
    assert ModelConfig(model="resgcn", jk="cat").jk == "cat" and ModelConfig().jk == "last"
    with pytest.raises(ConfigError, match=r"jk: 'cat' applies to models gat, gcn, gin, .*resgcn, ressage, .*sage, "
                                          r"not 'gcnii'"):
        ModelConfig(model="gcnii", jk="cat")
    with pytest.raises(ConfigError, match="jk: 'lstm' is not one of last, cat, max"):
        ModelConfig(jk="lstm")
    with pytest.raises(ValueError, match="jk='max' does not apply to the 'gcnii' model"):
        build_model("gcnii", in_dim=5, hidden_dim=8, out_dim=3, num_layers=2, jk="max")


def test_cli_builds_the_residual_model():
    from gnn_dist.config_cli import parse_run_config

    config = parse_run_config(["--data", "x", "--model", "ressage", "--layers", "16", "--jk", "max"])[0]
    model = build_model(config.model, in_dim=5, out_dim=3)
    assert isinstance(model, ResGraphSAGE) and model.num_layers == 16 and model.jk == "max"
