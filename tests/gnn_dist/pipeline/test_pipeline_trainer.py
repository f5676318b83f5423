"""Trainer-level plumbing of the pipeline options: config checks, metrics, wire dtypes, the
simulated link, and the stale schedule's first (synchronous) epoch. Small random graphs, P = 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mp_utils import run_ranks
from pipeline_utils import small_graph, train_model, write_parts

from gnn_dist.config import ScheduleConfig, TrainerConfig
from gnn_dist.distributed import LinkModel

EPOCHS = 5


def _dtypes(rank: int, world_size: int, path: str) -> dict:
    return {dt: train_model(path, "gcn", EPOCHS, halo_dtype=dt) for dt in (None, "fp32", "bf16", "fp16")}


def test_halo_dtypes_train_close_to_fp32(tmp_path):
    path = write_parts(small_graph(), 2, tmp_path / "parts")
    res = run_ranks(_dtypes, 2, path, timeout=120)[0]
    ref = [h["train_loss"] for h in res[None]["history"]]
    assert [h["train_loss"] for h in res["fp32"]["history"]] == ref, "fp32 on the wire is the fp32 run"
    for dt in ("bf16", "fp16"):
        got = [h["train_loss"] for h in res[dt]["history"]]
        np.testing.assert_allclose(got, ref, rtol=1e-2)
    assert got != ref, "the narrow wire dtype must change something (else the test checks nothing)"
    bytes32 = res["fp32"]["history"][1]["halo_bytes"]
    assert bytes32 > 0
    assert res["bf16"]["history"][1]["halo_bytes"] * 2 == bytes32, "bytes counted as sent"


LINK = "latency_ms=60,gbps=100"


def _link(rank: int, world_size: int, path: str) -> dict:
    # each layer "computes" >= 0.1 s, so an epoch (>= 0.2 s) outlasts every exchange (~60 ms)
    return {mode: train_model(path, "gcn", EPOCHS, pipeline=mode, simulate_link=LINK, eval_every=0, slow_s=0.1)
            for mode in ("sync", "stale")}


def test_simulated_link_is_exposed_in_sync_and_hidden_by_stale(tmp_path):
    path = write_parts(small_graph(), 2, tmp_path / "parts")
    for rank_res in run_ranks(_link, 2, path, timeout=120):
        sync, stale = rank_res["sync"]["history"], rank_res["stale"]["history"]
        # sync: 2 layers; layer 0's halo input rows were fetched once (static halo cache), so the
        # forward and backward of layer 1 remain: 2 exchanges of >= 60 ms
        # (exposed is the time blocked in the wait: a rank descheduled between starting an
        # exchange and waiting for it, on a loaded machine, waits less; hence the median and 0.8)
        assert np.median([h["exposed_comm_s"] for h in sync]) >= 2 * 0.06 * 0.8, sync
        for h in sync:
            assert h["comm_time_s"] >= 2 * 0.06
            assert h["staleness"] == 0
        assert stale[0]["exposed_comm_s"] >= 2 * 0.06 * 0.5, "stale's first epoch is synchronous"
        assert stale[0]["staleness"] == 0
        for h in stale[2:]:  # from epoch 2 on every wait is for an exchange started an epoch ago
            assert h["staleness"] == 1
            assert h["exposed_comm_s"] < 0.03, h
            assert h["comm_time_s"] >= 2 * 0.06 * 0.9, "the communication still happens"
        assert len(sync[1]["bytes_per_layer"]) == 2 and sync[1]["bytes_per_layer"][0] == 0 < sync[1]["bytes_per_layer"][1]
        assert sync[1]["bytes_per_layer"] == stale[2]["bytes_per_layer"]
        assert sum(sync[1]["bytes_per_layer"]) == sync[1]["halo_bytes"]


def _first_epochs(rank: int, world_size: int, path: str) -> dict:
    return {"sync": train_model(path, "sage", 3),
            "stale": train_model(path, "sage", 3, pipeline="stale"),
            "stale+ema": train_model(path, "sage", 3, pipeline="stale", stale_smoothing=0.5)}


def test_stale_first_epoch_is_sync_then_differs(tmp_path):
    path = write_parts(small_graph(), 2, tmp_path / "parts")
    res = run_ranks(_first_epochs, 2, path, timeout=120)[0]
    sync = [h["train_loss"] for h in res["sync"]["history"]]
    stale = [h["train_loss"] for h in res["stale"]["history"]]
    ema = [h["train_loss"] for h in res["stale+ema"]["history"]]
    assert stale[0] == sync[0] == ema[0], "epoch 0 is synchronous"
    assert stale[1] != sync[1], "from epoch 1 on the hidden halo rows are one update old"
    assert ema[1] == stale[1], "the first stale epoch sees the bias-corrected average of one value"
    assert ema[2] != stale[2], "then the average differs from the last value"
    assert [h["staleness"] for h in res["stale"]["history"]] == [0, 1, 1]


def test_metrics_file_and_fields(tmp_path):
    path = write_parts(small_graph(), 1, tmp_path / "parts")
    metrics = tmp_path / "m.jsonl"
    res = train_model(path, "gcn", 2, pipeline="stale", stale_smoothing=0.3, metrics_path=str(metrics))
    config, *lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert config["config"]["trainer"]["schedule"]["stale_smoothing"] == 0.3, "the Python API's config record"
    assert len(lines) == 2
    for rec in lines:
        for key in ("compute_time_s", "comm_time_s", "exposed_comm_s", "bytes_per_layer", "staleness"):
            assert key in rec
        assert rec["bytes_per_layer"] == [0, 0] and rec["comm_time_s"] == 0.0
    assert res["history"][1]["staleness"] == 1


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"pipeline": "async"}, r"pipeline: 'async' is not one of overlap, stale, sync"),
    ({"stale_smoothing": 0.5}, r"stale_smoothing: 0.5 applies to pipeline='stale' only, not pipeline='sync'"),
    ({"pipeline": "stale", "stale_smoothing": 1.0}, r"stale_smoothing: 1.0 is not valid: expected a factor in \[0, 1\)"),
    ({"boundary_sample_rate": 0.0}, r"boundary_sample_rate: 0.0 is not valid: expected a fraction in \(0, 1\]"),
    ({"boundary_sample_rate": 1.5}, r"boundary_sample_rate: 1.5 is not valid: expected a fraction in \(0, 1\]"),
    ({"halo_dtype": "int3"}, r"halo_dtype: 'int3' is not one of fp32, bf16, fp16, int8, int4, int2, int1"),
    ({"halo_bits": "adaptive:9"}, r"halo_bits: halo_bits budget 9.0 must be a number of bits per value in \[1, 8\]"),
    ({"halo_bits": "adaptive:3", "halo_dtype": "int8"}, r"halo_bits: adaptive:3 chooses the halo rows' widths; it cannot be combined with halo_dtype='int8'"),
    ({"simulate_link": 3}, r"simulate_link: 3 is not valid: expected 'latency_ms=L,gbps=B' or a LinkModel"),
    ({"simulate_link": "gbps=2"}, r"simulate_link: simulate_link: 'gbps=2' lacks latency_ms"),
    ({"lr": -1}, r"lr: -1 is not valid: expected a positive number"),
    ({"learning_rate": 1}, r"learning_rate: is not a training option; the options are boundary_sample_rate, "),
])
def test_config_errors(kwargs, match):
    from gnn_dist.config import ConfigError

    with pytest.raises(ConfigError, match=match):
        TrainerConfig.from_fields(**kwargs)


def test_config_parses_the_link():
    assert TrainerConfig.from_fields(simulate_link="latency_ms=1,gbps=2").schedule.simulate_link == LinkModel(1.0, 2.0)
    assert ScheduleConfig(simulate_link={"latency_ms": 1, "gbps": 2}).simulate_link == LinkModel(1.0, 2.0)


def test_cli_flags(tmp_path, capsys):
    from gnn_dist.train import main

    path = write_parts(small_graph(), 1, tmp_path / "parts")
    metrics = tmp_path / "m.jsonl"
    assert main(["--data", path, "--epochs", "2", "--hidden", "8", "--pipeline", "stale", "--stale-smoothing",
                 "0.2", "--boundary-sample-rate", "0.5", "--halo-dtype", "bf16", "--simulate-link",
                 "latency_ms=1,gbps=10", "--metrics", str(metrics), "--log-every", "1"]) == 0
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert len(lines) == 3 and lines[0]["config"]["trainer"]["schedule"]["halo_dtype"] == "bf16"
    assert [rec["epoch"] for rec in lines[1:]] == [0, 1]
    capsys.readouterr()
    for argv, match in ((["--boundary-sample-rate", "0"], "--boundary-sample-rate: 0.0 is not valid: expected a "
                                                          "fraction in (0, 1]"),
                        (["--stale-smoothing", "1", "--pipeline", "stale"], "--stale-smoothing: 1.0 is not valid: "
                                                                            "expected a factor in [0, 1)"),
                        (["--simulate-link", "latency_ms=1"], "lacks gbps"),
                        (["--halo-dtype", "int3"], "invalid choice: 'int3'"),
                        (["--halo-bits", "adaptive:x"], "--halo-bits: halo_bits='adaptive:x' is not 'adaptive:B'"),
                        (["--stale-smoothing", "0.5"], "--stale-smoothing: 0.5 applies to pipeline='stale' only")):
        assert main(["--data", path, *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and match in err[0], err


def _eval_after_wire_dtypes(rank: int, world_size: int, path: str) -> dict:
    import copy

    import torch

    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(path)
    torch.manual_seed(0)
    model = build_model("gcn", in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=3,
                        dropout=0.0, seed=1)
    out = {}
    for name, options in (("bf16", {"halo_dtype": "bf16", "simulate_link": "latency_ms=30,gbps=100"}),
                          ("exact", {})):
        trainer = gnn_dist.Trainer(copy.deepcopy(model), part, lr=0.05, log_every=0, eval_every=0, **options)
        train_bytes = trainer.fit(2)[-1]["halo_bytes"]
        trainer.model.load_state_dict(model.state_dict())   # the same weights for both evaluations
        link = trainer.pipeline.transport.link
        queued = None if link is None else link._free_at
        with part.exchanger.recording() as comm:
            acc = trainer.evaluate()
        out[name] = {"acc": acc, "eval_bytes": comm.bytes_sent, "train_bytes": train_bytes,
                     "link_untouched": link is None or link._free_at == queued > 0}
    return out


def test_evaluation_is_exact_whatever_the_training_wire_dtype(tmp_path):
    """The wire dtype and the simulated link belong to the training schedule: evaluation after
    bf16 training sends fp32 rows without delay and scores exactly what the exact run scores."""
    path = write_parts(small_graph(), 2, tmp_path / "parts")
    for res in run_ranks(_eval_after_wire_dtypes, 2, path, timeout=180):
        bf16, exact = res["bf16"], res["exact"]
        assert bf16["train_bytes"] * 2 == exact["train_bytes"], "training sent bf16 rows"
        assert bf16["eval_bytes"] == exact["eval_bytes"] > 0, "evaluation sent fp32 rows"
        assert bf16["acc"] == exact["acc"]
        assert bf16["link_untouched"], "evaluation queues nothing on the training schedule's simulated link"
