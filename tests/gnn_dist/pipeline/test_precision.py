"""bf16 training (``precision="bf16"``) on gloo ranks: it trains to fp32's losses within bfloat16
rounding, P = 2 ranks equal one device to that rounding, the halo rows and gradients travel in
half the bytes, and the weights, gradients and optimizer state stay float32."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from mp_utils import run_ranks
from pipeline_utils import small_graph, write_parts

EPOCHS = 6
MODELS = {"gcn": {}, "gat": {"heads": 2}, "sage": {}}
RUNS = {"fp32": {}, "bf16": {"precision": "bf16"}, "bf16-int8": {"precision": "bf16", "halo_dtype": "int8"},
        "bf16-stale": {"precision": "bf16", "pipeline": "stale"},
        "bf16-recompute": {"precision": "bf16", "recompute": "all"}}


def _train(rank: int, world_size: int, path: str) -> dict[str, Any]:
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(path)
    out: dict[str, Any] = {}
    for name, kwargs in MODELS.items():
        torch.manual_seed(0)
        model = build_model(name, in_dim=part.feature_dim, hidden_dim=16, out_dim=part.num_classes, num_layers=3,
                            dropout=0.0, seed=3, **kwargs)
        for run, options in RUNS.items():
            if world_size == 1 and run != "bf16":
                continue
            trainer = gnn_dist.Trainer(copy.deepcopy(model), part, lr=0.02, log_every=0, eval_every=0, **options)
            hist = trainer.fit(EPOCHS)
            state = trainer.optimizer.state_dict()["state"]
            dtypes = {p.dtype for p in trainer.model.parameters()} | {p.grad.dtype for p in trainer.model.parameters()}
            dtypes |= {v.dtype for s in state.values() for v in s.values() if v.dim()}
            out[(name, run)] = {"loss": [h["train_loss"] for h in hist], "bytes": hist[-1]["halo_bytes"],
                                "acc": trainer.evaluate()["train_acc"], "dtypes": dtypes}
            if run == "bf16-recompute":
                same = gnn_dist.Trainer(copy.deepcopy(model), part, lr=0.02, log_every=0, eval_every=0,
                                        precision="bf16", recompute="none")
                out[(name, "bf16-plain-again")] = [h["train_loss"] for h in same.fit(EPOCHS)]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    graph = small_graph(num_nodes=200, num_edges=1200)
    tmp = tmp_path_factory.mktemp("bf16")
    two = run_ranks(_train, 2, write_parts(graph, 2, tmp / "p2"), timeout=300)
    one = run_ranks(_train, 1, write_parts(graph, 1, tmp / "p1"), timeout=300)
    return two, one[0]


@pytest.mark.parametrize("model", list(MODELS))
def test_bf16_trains_like_fp32_to_its_rounding(runs, model):
    two, _ = runs
    for rank_out in two:
        fp32 = rank_out[(model, "fp32")]
        for run in ("bf16", "bf16-int8", "bf16-stale"):
            got = rank_out[(model, run)]
            assert got["loss"] != fp32["loss"]            # it did compute in bfloat16
            assert got["loss"] == pytest.approx(fp32["loss"], rel=0.03 if run != "bf16-stale" else 0.1), run
            assert abs(got["acc"] - fp32["acc"]) <= 0.1, run
            assert got["dtypes"] == {torch.float32}, run     # weights, gradients, Adam's moments


@pytest.mark.parametrize("model", list(MODELS))
def test_two_ranks_equal_one_device_to_bf16_rounding(runs, model):
    two, one = runs
    assert two[0][(model, "bf16")]["loss"] == pytest.approx(one[(model, "bf16")]["loss"], rel=0.02)


@pytest.mark.parametrize("model", list(MODELS))
def test_bf16_halo_rows_travel_in_half_the_bytes_and_recompute_stays_exact(runs, model):
    two, _ = runs
    for rank_out in two:
        assert rank_out[(model, "bf16")]["bytes"] * 2 == rank_out[(model, "fp32")]["bytes"] > 0
        assert rank_out[(model, "bf16-int8")]["bytes"] < rank_out[(model, "bf16")]["bytes"]
        assert rank_out[(model, "bf16-recompute")]["loss"] == rank_out[(model, "bf16-plain-again")]


def test_an_unknown_precision_names_the_choices():
    from gnn_dist.config import ConfigError, TrainerConfig

    with pytest.raises(ConfigError, match=r"precision: 'fp16' is not one of fp32, bf16"):
        TrainerConfig.from_fields(precision="fp16")
