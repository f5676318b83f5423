"""The training entry point: ``gnn_dist.train`` in-process, and once for real under torchrun.

In-process (world size 1, no process group): ``main([...])`` and ``python -m gnn_dist.train``
(through ``runpy``) train a 1-part folder, write one JSON object per epoch and lower the loss.
Under torchrun: ``gnn-dist train --nproc 2`` (the console script, which runs
``python -m torch.distributed.run --standalone``) trains a 2-part folder end to end.
"""

from __future__ import annotations

import json
import re
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from partitioners import Graph
from partitioners.format.writer import write_partition
from train_helpers import GNN_DIST, make_graph, run_tree

pytestmark = pytest.mark.filterwarnings("ignore:Unable to enable fault handler:UserWarning")
REPO = Path(__file__).resolve().parents[2]
METRIC_KEYS = {"epoch", "train_loss", "train_acc", "val_acc", "test_acc", "epoch_time_s", "comm_bytes"}




def write(graph: Graph, num_parts: int, out: Path) -> str:
    assignment = np.random.default_rng(num_parts).integers(0, num_parts, graph.num_nodes)
    write_partition(graph, assignment, num_parts, out, method="test", method_params={}, seed=0)
    return str(out)


def read_metrics(path: str | Path) -> list[dict]:
    """The epoch records of a metrics file (its first record is the run's config)."""
    recs = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert "config" in recs[0], "the first record is the resolved config"
    return recs[1:]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("entry")
    g = make_graph()
    return {"p1": write(g, 1, root / "p1"), "p2": write(g, 2, root / "p2")}


def test_main_trains_and_writes_metrics(folders, tmp_path):
    from gnn_dist.train import main

    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"epoch": 0, "stale": true}\n')  # a previous run's file is started afresh
    rc = main(["--data", folders["p1"], "--model", "sage", "--hidden", "16", "--layers", "2", "--epochs", "15",
               "--lr", "0.05", "--dropout", "0", "--seed", "3", "--eval-every", "5", "--metrics", str(metrics),
               "--log-every", "0"])
    assert rc == 0
    config = json.loads(metrics.read_text().splitlines()[0])["config"]
    assert config["model"]["model"] == "sage" and config["trainer"]["optim"]["lr"] == 0.05 and config["epochs"] == 15
    recs = read_metrics(metrics)
    assert [r["epoch"] for r in recs] == list(range(15))
    for r in recs:
        assert METRIC_KEYS <= set(r), sorted(METRIC_KEYS - set(r))
        assert r["comm_bytes"] == 0 and r["epoch_time_s"] > 0  # world size 1: nothing crosses a wire
        evaluated = (r["epoch"] + 1) % 5 == 0
        assert (r["val_acc"] is not None) == evaluated, r
    assert recs[-1]["train_loss"] < 0.8 * recs[0]["train_loss"]
    assert recs[-1]["train_acc"] > recs[4]["train_acc"]  # evaluated at epochs 4, 9, 14


def test_module_entry_point_runs_as_a_script(folders, tmp_path, monkeypatch):
    """``python -m gnn_dist.train ...`` (the module torchrun runs), in-process via runpy; its
    ``exit_process`` (``os._exit``: the end of this pytest worker) as ``sys.exit``."""
    import partitioners.process_exit as process_exit
    import gnn_dist.train  # noqa: F401  (as the earlier tests do: runpy's warning whatever the order)

    monkeypatch.setattr(process_exit, "exit_process", sys.exit)
    metrics = tmp_path / "metrics.jsonl"
    monkeypatch.setattr(sys, "argv", ["gnn_dist.train", "--data", folders["p1"], "--model", "gat", "--heads", "2",
                                      "--hidden", "8", "--epochs", "2", "--dropout", "0.5",
                                      "--metrics", str(metrics), "--log-every", "0"])
    with pytest.warns(RuntimeWarning, match="found in sys.modules"), pytest.raises(SystemExit) as exc:
        runpy.run_module("gnn_dist.train", run_name="__main__")
    assert exc.value.code == 0
    recs = read_metrics(metrics)
    assert [r["epoch"] for r in recs] == [0, 1] and all(np.isfinite(r["train_loss"]) for r in recs)


def test_feature_cache_flags_train_the_same_losses(folders, tmp_path):
    """The feature-cache flags change where rows live and how the first layer reads them, never
    the result; the metrics carry the cache's counters."""
    from gnn_dist.train import main

    base = ["--data", folders["p1"], "--model", "gcn", "--hidden", "8", "--epochs", "3", "--dropout", "0.5",
            "--log-every", "0", "--eval-every", "0"]
    runs = {"default": [], "mmap": ["--feature-storage", "mmap", "--feature-cache-budget", "25%",
                                    "--feature-cache-policy", "frequency", "--first-layer-chunk-rows", "10"],
            "precompute": ["--precompute-first-layer", "--feature-storage", "host", "--feature-cache-budget", "0"]}
    recs = {}
    for name, flags in runs.items():
        metrics = tmp_path / f"{name}.jsonl"
        assert main([*base, *flags, "--metrics", str(metrics)]) == 0
        recs[name] = read_metrics(metrics)
    for name in ("mmap", "precompute"):
        np.testing.assert_allclose([r["train_loss"] for r in recs[name]],
                                   [r["train_loss"] for r in recs["default"]], rtol=1e-5, err_msg=name)
    mmap = recs["mmap"]
    assert all(r["feature_misses"] > 0 and r["feature_hits"] > 0 and r["feature_h2d_bytes"] > 0 for r in mmap)
    assert all(r["feature_misses"] == 0 and r["feature_h2d_bytes"] == 0 for r in recs["default"])


@pytest.mark.parametrize("flags, message", [
    (["--feature-cache-budget", "4XB"], r"--feature-cache-budget: .*4XB"),
    (["--feature-storage", "disk"], r"--feature-storage: invalid choice: 'disk'"),
    (["--dropout", "1.5"], r"--dropout: 1.5 is not valid: expected a probability in \[0, 1\)"),
    (["--hidden", "0"], r"--hidden: 0 is not valid: expected an integer in \[1, 1048576\]"),
    (["--lr", "-1"], r"--lr: -1.0 is not valid: expected a positive number"),
    (["--lr", "x"], r"argument --lr: expected a number, got 'x'"),
    (["--model", "mlp"], r"--model: invalid choice: 'mlp'"),
    (["--kernels", "cuda"], r"--kernels: invalid choice: 'cuda'"),
])
def test_bad_flags_are_usage_errors(folders, capsys, flags, message):
    import re

    from gnn_dist.train import main

    assert main(["--data", folders["p1"], *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]), err


def test_resume_in_process_continues_the_metrics_file(folders, tmp_path):
    from gnn_dist.train import main

    metrics, ckpt = tmp_path / "m.jsonl", tmp_path / "ckpt"
    base = ["--data", folders["p1"], "--hidden", "8", "--metrics", str(metrics), "--checkpoint-dir", str(ckpt),
            "--checkpoint-every", "2", "--log-every", "0"]
    assert main([*base, "--epochs", "3"]) == 0  # checkpoints at 2 and 3
    with open(metrics, "a") as f:  # an epoch the crashed run logged after its last checkpoint
        f.write(json.dumps({"epoch": 3, "train_loss": -1.0}) + "\n")
    assert main([*base, "--epochs", "5", "--resume"]) == 0
    recs = read_metrics(metrics)
    assert [r["epoch"] for r in recs] == [0, 1, 2, 3, 4] and recs[3]["train_loss"] > 0
    assert main([*base, "--epochs", "5", "--resume"]) == 0  # already done: trains nothing
    assert [r["epoch"] for r in read_metrics(metrics)] == [0, 1, 2, 3, 4]
    # a checkpoint file by path, without --checkpoint-dir (this run then writes none)
    other = tmp_path / "other.jsonl"
    assert main(["--data", folders["p1"], "--hidden", "8", "--metrics", str(other), "--log-every", "0",
                 "--epochs", "4", "--resume", str(ckpt / "checkpoint-000002.pt")]) == 0
    assert [r["epoch"] for r in read_metrics(other)] == [2, 3]
    assert [r["train_loss"] for r in read_metrics(other)] == [r["train_loss"] for r in recs[2:4]]


def test_gnn_dist_train_under_torchrun(folders, tmp_path):
    metrics, ckpt = tmp_path / "metrics.jsonl", tmp_path / "ckpt"
    res = run_tree([*GNN_DIST, "train", "--data", folders["p2"], "--nproc", "2", "--model", "gcn", "--hidden", "8",
                    "--epochs", "4", "--lr", "0.05", "--dropout", "0.5", "--seed", "1", "--eval-every", "2",
                    "--metrics", str(metrics), "--checkpoint-dir", str(ckpt), "--log-every", "2",
                    "--timeout", "60"], timeout=150)
    assert res.returncode == 0, res.stdout[-4000:]
    recs = read_metrics(metrics)
    assert [r["epoch"] for r in recs] == [0, 1, 2, 3]
    assert all(METRIC_KEYS <= set(r) for r in recs)
    assert all(r["comm_bytes"] > 0 for r in recs)  # halo rows and gradients crossed between the ranks
    assert recs[1]["val_acc"] is not None and recs[0]["val_acc"] is None
    assert (ckpt / "checkpoint-000004.pt").is_file() and (ckpt / "latest").is_file()
    assert '"epochs": 4' in res.stdout  # rank 0's final line
    # both ranks' peaks, and beside them the memory planner's predictions (logged at start too)
    assert re.search(r"summary: 4 epochs, .*; peak memory per rank \(cpu rss\): [\d.]+ MiB, [\d.]+ MiB "
                     r"\(predicted [\d.]+ MiB, [\d.]+ MiB: [\d.]+x, [\d.]+x\)$", res.stdout, re.M), res.stdout[-2000:]
    assert "memory plan: predicted peak per rank" in res.stdout
    assert all(len(r["peak_memory_bytes"]) == 2 == len(r["predicted_peak_bytes"]) for r in recs)
    assert all(p >= b > 0 for r in recs for p, b in zip(r["peak_memory_bytes"], r["memory_baseline_bytes"]))


def test_kernels_flag_chooses_the_backend(folders, tmp_path, monkeypatch, caplog):
    import logging
    import os

    from gnn_dist.train import main

    monkeypatch.setenv("GNN_DIST_KERNELS", "auto")
    base = ["--data", folders["p1"], "--model", "gcn", "--hidden", "8", "--epochs", "2", "--log-every", "0"]
    import gnn_dist.kernels as kernels
    monkeypatch.setattr(kernels, "_logged", set())
    with caplog.at_level(logging.INFO, logger="gnn_dist.kernels"):
        assert main([*base, "--kernels", "torch"]) == 0
    assert "aggregation kernels: torch (kernels=torch; forced)" in caplog.text
    assert os.environ["GNN_DIST_KERNELS"] == "auto", "the run's choice is held by its blocks, not the environment"


@pytest.mark.parametrize("flags, message", [
    (["--model", "gat", "--hidden", "30", "--heads", "4"],
     "--hidden: 30 is the total width of a gat layer and must be a multiple of heads = 4"),
    (["--lr", "0"], "--lr: 0.0 is not valid: expected a positive number"),
    (["--pipeline", "nope"], "argument --pipeline: invalid choice: 'nope'"),
])
def test_gnn_dist_train_refuses_a_bad_option_before_torchrun(folders, flags, message):
    """One process checks the whole configuration against the folder first: one line, exit 2,
    no rank started (no torchrun output, no traceback)."""
    res = run_tree([*GNN_DIST, "train", "--data", folders["p2"], *flags], timeout=120)
    assert res.returncode == 2, res.stdout[-3000:]
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], lines


def test_quiet_keeps_warnings_errors_and_the_final_line(folders, capsys):
    from gnn_dist.train import main

    flags = ["--data", folders["p1"], "--hidden", "8", "--epochs", "2", "--log-every", "1"]
    assert main([*flags, "--quiet"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("[rank0] final: {"), lines
    assert main(flags) == 0
    loud = capsys.readouterr().err
    assert "epoch    1" in loud and "summary:" in loud and "final:" in loud   # what --quiet dropped
    assert main(["--validate", *flags, "--quiet"]) == 0 and capsys.readouterr().err == ""
    assert main([*flags, "-q", "-v"]) == 2
    assert "-v/--verbose and -q/--quiet exclude each other" in capsys.readouterr().err


def test_the_summary_names_each_ranks_peak_memory():
    from gnn_dist.metrics import summary_line
    from gnn_dist.measured_peak import current_memory_bytes, peak_memory_bytes, peak_memory_kind

    history = [{"epoch": 0, "epoch_time_s": 0.5, "val_acc": None},
               {"epoch": 1, "epoch_time_s": 1.5, "val_acc": 0.5, "test_acc": 0.25}]
    line = summary_line(history, 1000, [3 * 2**20, None], "cpu rss")
    assert line == ("2 epochs, mean epoch 1000.0 ms, 1e+03 edges/s, best val 0.5000 at epoch 1 (test 0.2500); "
                    "peak memory per rank (cpu rss): 3.00 MiB, ?")
    assert summary_line(history, 1000).endswith("(test 0.2500)")   # no peaks: no memory part
    assert summary_line(history, 1000, [4 * 2**20, 2**20], "cpu rss", [3 * 2**20, 2**20]).endswith(
        "peak memory per rank (cpu rss): 4.00 MiB, 1.00 MiB (predicted 3.00 MiB, 1.00 MiB: 0.75x, 1.00x)")
    assert peak_memory_bytes("cpu") >= current_memory_bytes("cpu") > 50 * 2**20
    assert peak_memory_kind("cpu") == "cpu rss"


def test_the_cpu_peak_restarts_from_the_current_memory():
    import sys

    import numpy as np

    from gnn_dist.measured_peak import current_memory_bytes, peak_memory_bytes, reset_peak

    if not sys.platform.startswith("linux"):
        assert not reset_peak("cpu")
        return
    size = 256 * 2**20
    assert reset_peak("cpu")
    base = current_memory_bytes("cpu")
    block = np.ones(size // 8)       # touched: resident
    del block                        # mapped on its own: unmapped again
    assert peak_memory_bytes("cpu") - base >= 0.9 * size   # the kernel counts resident pages in batches
    assert current_memory_bytes("cpu") - base < size // 2
    assert reset_peak("cpu")
    assert peak_memory_bytes("cpu") - base < size // 2
