"""``--tensorboard DIR``: rank 0 writes each epoch's figures as TensorBoard scalars, the same
values as the metrics file's records, on two ranks as on one; without the tensorboard package
the run is refused with one line naming the fix (at ``--validate``, before any rank starts)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from partitioners import Graph
from partitioners.format.writer import write_partition
from mp_utils import run_ranks
from train_helpers import free_port, launch_env, make_graph

pytest.importorskip("tensorboard", reason="the tensorboard extra (in the test extra) is not installed")


def _scalars(log_dir) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


def _train(rank: int, world_size: int, flags: list[str], port: int) -> int:
    from gnn_dist.train import main

    launch_env(rank, world_size, port)
    return main(flags)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("tb") / "p2"
    g = make_graph(80, seed=2)
    write_partition(g, np.random.default_rng(1).integers(0, 2, g.num_nodes).astype(np.int32), 2, out,
                    method="test", method_params={}, seed=0)
    return str(out)


def test_the_scalars_are_the_metrics_records(folder, tmp_path):
    metrics, log_dir = tmp_path / "m.jsonl", tmp_path / "tb"
    flags = ["--data", folder, "--hidden", "8", "--epochs", "4", "--eval-every", "2", "--log-every", "0",
             "--metrics", str(metrics), "--tensorboard", str(log_dir)]
    assert run_ranks(_train, 2, flags, free_port(), init_group=False, timeout=120) == [0, 0]
    records = [json.loads(line) for line in metrics.read_text().splitlines()[1:]]
    scalars = _scalars(log_dir)
    assert scalars["loss/train"] == pytest.approx({r["epoch"]: r["train_loss"] for r in records}, rel=1e-6)
    assert scalars["accuracy/val"] == pytest.approx({1: records[1]["val_acc"], 3: records[3]["val_acc"]})
    assert scalars["bytes/halo"] == {r["epoch"]: float(r["halo_bytes"]) for r in records}
    assert all(v > 0 for v in scalars["bytes/halo"].values())   # two ranks: halo rows crossed
    layers = len(records[0]["bytes_per_layer"])
    assert {f"bytes/layer_{k}" for k in range(layers)} <= set(scalars)
    assert len(list(log_dir.iterdir())) == 1   # one event file: rank 0's


def test_without_tensorboard_the_run_is_refused_in_one_line(folder, tmp_path, monkeypatch, capsys):
    from gnn_dist.train import main

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)   # `import` raises ImportError
    flags = ["--data", folder, "--epochs", "1", "--tensorboard", str(tmp_path / "tb")]
    assert main(["--validate", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'gnn-dist[tensorboard]'" in err[0], err
    assert not (tmp_path / "tb").exists()


def test_a_regression_run_writes_its_errors_not_accuracies(tmp_path):
    """The scalars follow the task's metrics: a regression has mse/mae/r2 on each mask (the
    metrics file's values, at the evaluated epochs) and no accuracy."""
    from gnn_dist.train import main

    g = make_graph(60, seed=3)
    targets = g.x[:, :2] * 1.5 + 0.25   # float targets: a regression partition
    reg = Graph.from_edges(*g.edges(), g.num_nodes, features=g.x, labels=targets, train_mask=g.train_mask,
                           val_mask=g.val_mask, test_mask=g.test_mask)
    assert reg.label_kind == "regression"
    data = tmp_path / "reg"
    write_partition(reg, np.zeros(reg.num_nodes, np.int32), 1, data, method="test", method_params={}, seed=0)
    metrics, log_dir = tmp_path / "m.jsonl", tmp_path / "tb"
    assert main(["--data", str(data), "--hidden", "8", "--epochs", "4", "--eval-every", "2", "--log-every", "0",
                 "--kernels", "torch", "--metrics", str(metrics), "--tensorboard", str(log_dir)]) == 0
    records = [json.loads(line) for line in metrics.read_text().splitlines()[1:]]
    scalars = _scalars(log_dir)
    for metric in ("mse", "mae", "r2"):
        for split in ("train", "val", "test"):
            key = f"{split}_{metric}"
            assert scalars[f"{metric}/{split}"] == pytest.approx({1: records[1][key], 3: records[3][key]}), key
    assert not any(tag.startswith("accuracy/") for tag in scalars), sorted(scalars)
    assert scalars["loss/train"] == pytest.approx({r["epoch"]: r["train_loss"] for r in records}, rel=1e-6)
