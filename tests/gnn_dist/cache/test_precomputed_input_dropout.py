"""Input dropout with a precomputed first layer (``precompute_first_layer="on"``): the cached
aggregate and the destinations' own input rows are dropped, each on its own mask keyed by the
destination's original id (what PipeGCN's and BNS-GCN's ``--use-pp`` do to ``[x_v, mean x_u]``);
2 ranks train what one rank trains, to 1e-5."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from partitioners.format.writer import write_partition
from mp_utils import run_ranks
from train_helpers import make_graph

EPOCHS = 3
RUNS = (("sage", "sync"), ("sage", "overlap"), ("gcn", "sync"))
"""(model, pipeline): ``overlap`` runs the layer on row subsets (boundary rows first)."""


def write(graph, num_parts: int, out) -> str:
    assignment = np.random.default_rng(num_parts).integers(0, num_parts, graph.num_nodes).astype(np.int32)
    write_partition(graph, assignment, num_parts, out, method="test", method_params={}, seed=0)
    return str(out)


@pytest.fixture(scope="module")
def graph():
    return make_graph(num_nodes=80, seed=5)


@pytest.fixture(scope="module")
def part1(graph, tmp_path_factory):
    import gnn_dist

    return gnn_dist.load_partition(write(graph, 1, tmp_path_factory.mktemp("pdrop1") / "parts"))


def build(part, name: str, input_dropout: float):
    from gnn_dist.models import build_model

    torch.manual_seed(0)
    return build_model(name, in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=2,
                       dropout=0.5, seed=3, input_dropout=input_dropout)


def train_all(rank: int, world_size: int, path: str) -> dict:
    """Every run of :data:`RUNS`, precomputed first layer with input dropout 0.5."""
    import gnn_dist

    torch.set_num_threads(1)
    part = gnn_dist.load_partition(path)
    out = {}
    for name, pipeline in RUNS:
        model = build(part, name, 0.5)
        trainer = gnn_dist.Trainer(model, part, lr=0.05, log_every=0, pipeline=pipeline, precompute_first_layer="on")
        hist = trainer.fit(EPOCHS)
        out[(name, pipeline)] = {"loss": [h["train_loss"] for h in hist], "acc": [h["test_acc"] for h in hist],
                                 "params": {k: v.detach().clone() for k, v in model.state_dict().items()}}
    return out


def test_two_ranks_train_what_one_rank_trains(graph, part1, tmp_path):
    ref = train_all(0, 1, str(part1.path))
    results = run_ranks(train_all, 2, write(graph, 2, tmp_path / "parts"), timeout=240)
    for got in results:
        for key, want in ref.items():
            np.testing.assert_allclose(got[key]["loss"], want["loss"], rtol=1e-5, atol=1e-6, err_msg=str(key))
            assert got[key]["acc"] == pytest.approx(want["acc"], abs=1e-9), key
            for k, v in want["params"].items():
                torch.testing.assert_close(got[key]["params"][k], v, rtol=1e-5, atol=1e-5,
                                           msg=lambda m, k=k: f"{key} {k}: {m}")


def test_it_drops_the_aggregate_and_the_own_rows_on_separate_masks(part1):
    """SAGE's precomputed layer under input dropout is ``W_2 drop_a(mean x) + b + W_1 drop_r(x)``
    with ``drop_a`` keyed by :data:`INPUT_LAYER` and ``drop_r`` by :data:`INPUT_ROOT_LAYER`; a row
    subset (the overlap schedule's) gets the same rows; the plain (auto/off) layer drops the raw
    rows before the mean instead."""
    from gnn_dist.cache import InputFeatures
    from gnn_dist.nn import INPUT_LAYER, INPUT_ROOT_LAYER, DropoutKey, RowDropout, SAGEConv

    f = part1.feature_dim
    torch.manual_seed(0)
    conv = SAGEConv(f, 6)
    inputs = InputFeatures(part1, precompute_first_layer="on")
    drop = RowDropout(0.5, DropoutKey(3, torch.tensor(7), INPUT_LAYER))
    got = inputs.layer(conv, part1, input_dropout=drop)

    block, x = part1.block, inputs.source_rows()
    mean = torch.zeros(block.num_dst, f).index_add_(0, block.dst_index, x[block.indices])
    mean = mean / block.in_count.clamp(min=1).unsqueeze(1)
    x_inner = x[:block.num_dst]
    root_drop = RowDropout(0.5, DropoutKey(3, torch.tensor(7), INPUT_ROOT_LAYER))
    want = conv.lin_l(drop(block, mean)) + conv.lin_r(root_drop(block, x_inner))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert not torch.equal(drop(block, x_inner) != 0, root_drop(block, x_inner) != 0), "independent masks"
    assert not torch.allclose(got, inputs.layer(conv, part1)), "the dropout changes the layer"

    rows = torch.tensor([5, 0, 17, 3])
    torch.testing.assert_close(inputs.layer(conv, part1, input_dropout=drop, rows=rows), got[rows])
    plain = InputFeatures(part1, precompute_first_layer="off").layer(conv, part1, input_dropout=drop)
    torch.testing.assert_close(plain, conv(block, drop(block, x)))
    assert not torch.allclose(plain, got), "the plain layer drops the raw rows, before the mean"
