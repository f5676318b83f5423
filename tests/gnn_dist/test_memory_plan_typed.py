"""The memory planner on typed graphs: R-GCN's saved-tensor terms against what autograd saves
(with learnable rows), its parameters (relation, root and learnable rows: only this rank's), and
``gnn-dist plan --typed-spec ogbn-mag``."""

from __future__ import annotations

import json

import pytest
import torch

from mp_utils import run_ranks
from train_helpers import saved_tensor_bytes


@pytest.fixture(scope="module")
def mag(tmp_path_factory):
    from partitioners.api import partition_graph
    from partitioners.catalog import load_dataset

    path = tmp_path_factory.mktemp("plan_typed") / "mag"
    partition_graph(load_dataset("mag-small"), 2, "metis", str(path), seed=0)   # 16,000 nodes: the terms, not the indices
    return str(path)


def _saved(rank: int, world_size: int, path: str) -> dict:
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(path)
    out = {}
    for layers, bases in ((2, None), (3, 2)):
        torch.manual_seed(0)
        model = build_model("rgcn", in_dim=part.feature_dim, hidden_dim=64, out_dim=part.num_classes,
                            num_layers=layers, dropout=0.5, typed=part.typed, embedding_dim=32, num_bases=bases)
        trainer = gnn_dist.Trainer(model, part, lr=0.01, log_every=0, eval_every=0)
        out[f"{layers} {bases}"] = {"saved": saved_tensor_bytes(trainer),
                                    "parameters": sum(p.numel() for p in model.parameters())}
    return out


def test_rgcn_terms_match_autograd_and_the_parameters(mag):
    from partitioners.format import load_partition_meta

    from gnn_dist.memory_plan import Workload, sizes_from_meta
    from gnn_dist.memory_plan.model import layer_saved, num_parameters

    sizes = sizes_from_meta(load_partition_meta(mag))
    for rank, got in enumerate(run_ranks(_saved, 2, mag, timeout=300)):
        for key, value in got.items():
            layers, bases = key.split()
            w = Workload(model="rgcn", hidden=64, layers=int(layers), embedding_dim=32,
                         num_bases=None if bases == "None" else int(bases))
            predicted = sum(layer_saved(w, sizes[rank], resident_input=False))
            assert abs(predicted / value["saved"] - 1) < 0.06, (key, rank, predicted, value)   # measured: within 3%
            assert num_parameters(w, sizes[rank]) == value["parameters"], (key, rank)


def test_plan_typed_spec_ogbn_mag(capsys):
    from partitioners.cli import main

    code = main(["plan", "--typed-spec", "ogbn-mag", "--parts", "1,4", "--model", "rgcn", "--embedding-dim", "128",
                 "--hidden", "64", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["source"].startswith("ogbn-mag")
    one, four = (p["ranks"][0] for p in out["plans"])
    assert one["inner"] == 1_939_743 and four["inner"] == -(-1_939_743 // 4)
    assert four["total"] < one["total"] / 2   # the rows, activations and optimizer state split over the ranks
    code = main(["plan", "--typed-spec", "ogbn-wiki", "--parts", "2"])
    assert code == 2 and "not a known typed graph; known: ogbn-mag" in capsys.readouterr().err
