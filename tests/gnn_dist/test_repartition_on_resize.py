"""``--repartition-on-resize``: a job that checkpointed on a 2-part folder restarts on 3 ranks with
``--resume auto``; with no 3-part partition, rank 0 cuts one (ldg) from the folder into
``CHECKPOINT_DIR/partitions/p3`` while the others wait, the job resumes on it, and its final
weights equal the uninterrupted P=2 run's to 1e-5 (sync schedule); the metrics file's resize
record and the run report say where the partition came from. One process: a cut made by an earlier
restart is reused after a verify, one that is not the source's cut is refused naming it, a rank
whose wait runs out names the folder, and the flag without ``--checkpoint-dir`` or on a typed
folder with edge weights is one usage line (a typed run's re-cut: ``test_rgcn_runs.py``)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import torch

from mp_utils import run_ranks
from train_helpers import free_port, launch_env, make_graph

EPOCHS, STOP = 4, 2


def _flags(data: Path, ckpt: Path, epochs: int, *extra: str) -> list[str]:
    return ["--data", str(data), "--model", "gcn", "--hidden", "8", "--layers", "2", "--epochs", str(epochs),
            "--lr", "0.05", "--dropout", "0.5", "--seed", "4", "--pipeline", "sync", "--checkpoint-dir", str(ckpt),
            "--checkpoint-every", "1", "--resume", "auto", "--log-every", "0", "--eval-every", "0",
            "--timeout", "60", *extra]


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _train(rank: int, world_size: int, *jobs: tuple[list[str], int]) -> list[tuple[int, list[str]]]:
    """Each job ``(flags, port)`` in turn: ``gnn_dist.train.main``'s exit code and the lines it logged."""
    from gnn_dist.train import main

    out = []
    for flags, port in jobs:
        launch_env(rank, world_size, port)
        lines = _Lines()
        logging.getLogger("gnn_dist").addHandler(lines)
        out.append((main(flags), lines.lines))
        logging.getLogger("gnn_dist").removeHandler(lines)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    from partitioners import partition_graph

    root = tmp_path_factory.mktemp("resize-cut")
    partition_graph(make_graph(120, seed=5), 2, "metis", root / "p2", seed=2)
    straight = _flags(root / "p2", root / "straight", EPOCHS, "--save-model", str(root / "straight.pt"))
    first = _flags(root / "p2", root / "ckpt", STOP, "--metrics", str(root / "metrics.jsonl"))
    p2 = run_ranks(_train, 2, (straight, free_port()), (first, free_port()), init_group=False, timeout=120)
    resized = _flags(root / "p2", root / "ckpt", EPOCHS, "--repartition-on-resize", "--save-model",
                     str(root / "resized.pt"), "--metrics", str(root / "metrics.jsonl"))
    p3 = run_ranks(_train, 3, (resized, free_port()), init_group=False, timeout=120)
    assert [code for rank in p2 + p3 for code, _ in rank] == [0] * 7, (p2, p3)
    return {"root": root, "lines": p3[0][0][1]}


def test_the_restart_cuts_resumes_and_trains_what_p2_trains(runs):
    from partitioners.format import load_partition_meta, verify_partition

    root = runs["root"]
    cut = root / "ckpt" / "partitions" / "p3"
    meta = load_partition_meta(cut)
    assert meta.num_parts == 3 and meta.method == "ldg" and verify_partition(cut) == []
    assert meta.graph_fingerprint == load_partition_meta(root / "p2").graph_fingerprint
    assert meta.raw["repartitioned_from"]["folder"] == str(root / "p2")
    mine = torch.load(root / "resized.pt", weights_only=True)["state_dict"]
    theirs = torch.load(root / "straight.pt", weights_only=True)["state_dict"]
    assert mine.keys() == theirs.keys()
    for name in mine:
        torch.testing.assert_close(mine[name], theirs[name], rtol=1e-5, atol=1e-5, msg=name)
    lines = runs["lines"]
    said = [m for m in lines if m.startswith("--repartition-on-resize: ")]
    assert len(said) == 2, said   # what it will need, then the time it took
    assert f"cutting {root / 'p2'} into 3 parts with ldg into {cut}: memory ~" in said[0]
    assert said[1].startswith(f"--repartition-on-resize: cut {cut} (3 parts, ldg) in ")
    assert any(m.startswith(f"resumed a P=2 run's checkpoint on P=3 ({cut})") for m in lines), lines


def test_the_metrics_and_the_report_say_where_the_partition_came_from(runs):
    from gnn_dist_cli.run_report.metrics_file import read_metrics
    from gnn_dist_cli.run_report.run_view import RunView
    from gnn_dist_cli.run_report.summary import summary_rows

    root = runs["root"]
    records = [json.loads(line) for line in (root / "metrics.jsonl").read_text().splitlines()]
    note = f"{root / 'ckpt' / 'partitions' / 'p3'}, cut with ldg from {root / 'p2'} (2 parts)"
    assert [r for r in records if r.get("event") == "resize"] == [
        {"event": "resize", "epoch": STOP, "from_world_size": 2, "to_world_size": 3, "repartitioned": note}]
    assert [r["epoch"] for r in records if "epoch" in r and "event" not in r] == list(range(EPOCHS))
    metrics = read_metrics(root / "metrics.jsonl")
    assert metrics.resizes == ({"epoch": STOP, "from_world_size": 2, "to_world_size": 3, "repartitioned": note},)
    row = next(r for r in summary_rows(RunView(metrics=metrics, meta=None)) if r.key == "resizes")
    assert row.text == f"from epoch {STOP}: 2 -> 3 ranks (repartitioned: {note})"


# ---------------------------------------------------------------- one process
def _cut_of(runs, tmp_path: Path):
    from gnn_dist.resize_cut import plan_partition

    ckpt = tmp_path / "ckpt"
    shutil.copytree(runs["root"] / "ckpt" / "partitions", ckpt / "partitions")
    folder, cut = plan_partition(str(runs["root"] / "p2"), 3, "ldg", str(ckpt))
    assert folder == str(ckpt / "partitions" / "p3") and cut is not None
    return cut


def test_a_cut_of_an_earlier_restart_is_reused_after_a_verify(runs, tmp_path, caplog):
    cut = _cut_of(runs, tmp_path)
    before = (cut.target / "partition.json").stat().st_mtime_ns
    with caplog.at_level(logging.INFO, logger="gnn_dist"):
        assert cut.make(0, 5) == str(cut.target)
    assert (cut.target / "partition.json").stat().st_mtime_ns == before
    assert f"--repartition-on-resize: reusing {cut.target} (3 parts, cut earlier with ldg from " in caplog.text
    part = next(cut.target.glob("part-00001/features.npy"))
    part.write_bytes(part.read_bytes()[:-4] + b"\0\0\0\0")   # one value changed
    with pytest.raises(ValueError, match=rf"{cut.target} is not a 3-part cut of .*remove it and restart"):
        cut.make(0, 5)


def test_a_rank_waiting_in_vain_names_the_folder(runs, tmp_path):
    cut = _cut_of(runs, tmp_path)
    shutil.rmtree(cut.target)
    with pytest.raises(TimeoutError, match=rf"{cut.target} did not appear within --timeout 0.3s"):
        cut.make(1, 0.3)


@pytest.mark.parametrize("typed", [False, True])
def test_refusals_are_one_usage_line(runs, tmp_path, monkeypatch, typed):
    from gnn_dist.config_cli import UsageError, parse_run_config

    monkeypatch.setenv("WORLD_SIZE", "3")
    data = runs["root"] / "p2"
    if typed:   # a typed folder re-cuts (test_rgcn_runs.py), but not with edge weights
        import numpy as np

        from partitioners import partition_graph
        from partitioners.hetero import HeteroGraph

        rel = ("a", "to", "b")
        weighted = HeteroGraph({"a": 4, "b": 3}, {rel: ([0, 1, 2, 3], [0, 1, 2, 0])},
                               edge_weights={rel: np.full(4, 0.5, np.float32)})
        data = tmp_path / "typed"
        partition_graph(weighted, 2, "random", data)
        argv, says = ["--checkpoint-dir", str(tmp_path / "c")], "a typed partition folder with edge weights cannot be re-cut"
    else:
        argv, says = [], "--repartition-on-resize: ldg writes the cut into CHECKPOINT_DIR/partitions/pP: add --checkpoint-dir"
    with pytest.raises(UsageError) as err:
        parse_run_config(["--data", str(data), "--repartition-on-resize", *argv])
    assert "\n" not in str(err.value) and says in str(err.value), err.value


def test_the_launcher_leaves_a_missing_partition_to_the_ranks(tmp_path, caplog):
    from gnn_dist_cli.launch_verbs import _repartitions
    from gnn_dist_cli.world import elastic_world_sizes, one_node_nproc
    from partitioners import partition_graph
    from partitioners.cli_args import UsageError

    data = str(tmp_path / "p2")
    partition_graph(make_graph(30), 2, "random", data)
    with pytest.raises(UsageError, match="--nproc 3 differs from the 2 parts"):
        one_node_nproc(data, 3, 1)
    with pytest.raises(UsageError, match="is one cut of 2 parts"):
        elastic_world_sizes(data, (1, 2), 2, 1)
    with caplog.at_level(logging.INFO, logger="gnn_dist_cli"):
        assert one_node_nproc(data, 3, 1, repartition=True) == 3
    assert f"{data}: no partition of 3 parts; the ranks cut one (--repartition-on-resize)" in caplog.text
    assert elastic_world_sizes(data, (1, 2), 2, 1, repartition=True) == [2, 4]
    config = tmp_path / "run.toml"
    config.write_text('[data]\nrepartition_on_resize = "fennel"\n')
    assert [_repartitions(rest) for rest in (["--repartition-on-resize"], ["--repartition-on-resize=random"],
                                              ["--config", str(config)], ["--epochs", "2"])] == [True, True, True, False]
