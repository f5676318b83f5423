"""Error paths of the training runtime: each is a clear message, on every rank, and no rank hangs.

- one 2-rank launch runs every user-error case through the real entry point (``main``) in turn
  (world size != parts, a missing part file, a corrupt part file, a NaN loss, a model of the
  wrong input width); each case must fail on **both** ranks, after which the group still works
  (so no rank was left waiting in a collective);
- a peer that dies mid-training (``os._exit``) makes the survivor exit non-zero within the
  collective timeout (``--timeout``), not hang;
- one real torchrun launch with the wrong number of processes exits non-zero and says both
  numbers, also as the root cause of torchrun's failure summary (torchrun directly: ``gnn-dist
  train`` refuses a wrong ``--nproc`` before launching).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from partitioners import Graph
from partitioners.format.writer import write_partition
from train_helpers import (STALL_TIMEOUT_S, ErrorLines, free_port, launch_env, make_graph, run_tree,
                           stalled_job_message, train_until_rank_one_stalls)
from mp_utils import launch_ranks, run_ranks

pytestmark = pytest.mark.filterwarnings("ignore:Unable to enable fault handler:UserWarning")
REPO = Path(__file__).resolve().parents[2]
PEER_TIMEOUT_S = 15
"""The ``--timeout`` of the dead-peer test: the survivor must be gone well within it."""


def write(graph: Graph, num_parts: int, out: Path) -> str:
    assignment = np.random.default_rng(num_parts).integers(0, num_parts, graph.num_nodes)
    write_partition(graph, assignment, num_parts, out, method="test", method_params={}, seed=0)
    return str(out)


def argv(data: str, *extra: str) -> list[str]:
    return ["--data", data, "--model", "gcn", "--hidden", "8", "--epochs", "3", "--lr", "0.05",
            "--dropout", "0.5", "--seed", "1", "--log-every", "0", *extra]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("errors")
    g = make_graph()
    out = {"p2": write(g, 2, root / "p2"), "p3": write(g, 3, root / "p3")}
    missing = shutil.copytree(out["p2"], root / "missing")
    os.unlink(missing / "part-00001" / "features.npy")
    corrupt = shutil.copytree(out["p2"], root / "corrupt")
    labels = corrupt / "part-00000" / "labels.npy"
    raw = bytearray(labels.read_bytes())
    raw[-1] ^= 0x01  # same size, other sha256
    labels.write_bytes(bytes(raw))
    out.update(missing=str(missing), corrupt=str(corrupt), root=str(root))
    return out


# ---------------------------------------------------------------- user errors on 2 ranks
_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_object", "all_to_all_single", "broadcast",
                "broadcast_object_list", "barrier", "send", "recv", "reduce_scatter")


def _no_collectives(monkeypatch_like: list) -> None:
    """Make every torch.distributed collective raise (restored by the caller)."""
    import torch.distributed as dist

    def refuse(*args, **kwargs):
        raise AssertionError("a collective ran before the world-size check")

    for name in _COLLECTIVES:
        monkeypatch_like.append((name, getattr(dist, name)))
        setattr(dist, name, refuse)


def error_cases(rank: int, world_size: int, folders: dict[str, str]) -> dict[str, tuple[Any, Any]]:
    """Run each failing job in turn on this rank: case -> (exit code, the error lines it logged),
    or (exception type, message) for the library call."""
    import torch.distributed as dist

    import gnn_dist
    from gnn_dist.models import build_model
    from gnn_dist.train import main

    out: dict[str, tuple[Any, Any]] = {}

    def job(case: str, args: list[str]) -> None:
        with ErrorLines("gnn_dist.train") as errors:
            out[case] = (main(args), errors.lines)

    saved: list = []
    _no_collectives(saved)
    try:
        job("world_size", argv(folders["p3"]))
    finally:
        for name, fn in saved:
            setattr(dist, name, fn)
    job("missing_part", argv(folders["missing"]))
    job("corrupt_part", argv(folders["corrupt"]))
    job("nan_loss", argv(folders["p2"], "--lr", "1e30", "--epochs", "5"))
    try:
        part = gnn_dist.load_partition(folders["p2"])
        model = build_model("gcn", in_dim=part.feature_dim + 2, hidden_dim=8, out_dim=part.num_classes,
                            num_layers=2)
        gnn_dist.Trainer(model, part)
        out["in_dim"] = ("none", "")
    except Exception as exc:  # noqa: BLE001 - the test asserts on the type
        out["in_dim"] = (type(exc).__name__, str(exc))
    # The group still works: no rank is stuck in a collective left over from a failed case.
    t = torch.ones(1)
    dist.all_reduce(t)
    out["alive"] = ("sum", str(int(t.item())))
    return out


@pytest.fixture(scope="module")
def error_results(folders) -> list[dict[str, tuple[Any, Any]]]:
    return run_ranks(error_cases, 2, folders, timeout=120, grace=30, pg_timeout=60)


def _one_line_on_rank_zero(error_results, case: str) -> str:
    """Both ranks exit 2; rank 0 logged one line, rank 1 none; returns rank 0's line."""
    (code0, lines0), (code1, lines1) = error_results[0][case], error_results[1][case]
    assert code0 == code1 == 2, (case, code0, code1)
    assert len(lines0) == 1 and lines1 == [], (case, lines0, lines1)
    return lines0[0]


def test_every_rank_survives_each_error(error_results):
    for rank, res in enumerate(error_results):
        assert res["alive"] == ("sum", "2"), f"rank {rank}"
        for case in ("world_size", "missing_part", "corrupt_part", "nan_loss"):
            assert res[case][0] == 2, f"rank {rank}: {case} did not fail as a user error"
        assert res["in_dim"][0] != "none"


def test_world_size_other_than_num_parts(error_results):
    line = _one_line_on_rank_zero(error_results, "world_size")  # the check ran before any collective
    assert "num_parts=3" in line and "world_size=2" in line and "--nproc-per-node 3" in line


def test_missing_part_file_is_named_on_every_rank(error_results, folders):
    name = str(Path(folders["missing"]) / "part-00001" / "features.npy")
    line = _one_line_on_rank_zero(error_results, "missing_part")  # rank 0's own part is fine: it names rank 1's
    assert "failed on rank 1" in line and name in line and "missing file" in line


def test_corrupt_part_file_is_named_on_every_rank(error_results, folders):
    name = str(Path(folders["corrupt"]) / "part-00000" / "labels.npy")
    line = _one_line_on_rank_zero(error_results, "corrupt_part")
    assert name in line and "sha256 mismatch" in line


def test_nan_loss_raises_on_all_ranks_with_the_epoch(error_results):
    line = _one_line_on_rank_zero(error_results, "nan_loss")
    assert "epoch 1: the training loss is" in line and "lr=1e+30" in line


def test_model_input_width_other_than_features(error_results):
    for res in error_results:
        kind, message = res["in_dim"]
        assert kind == "ValueError"
        assert "in_dim=7" in message and "feature width 5" in message


def test_world_size_one_on_a_two_part_folder(folders, caplog):
    from gnn_dist.train import main

    with caplog.at_level("ERROR", logger="gnn_dist.train"):
        assert main(argv(folders["p2"])) == 2
    assert "num_parts=2 but the job runs world_size=1" in caplog.text


def test_resume_without_checkpoint_dir_is_a_usage_error(folders, capsys):
    from gnn_dist.train import main

    assert main(argv(folders["p2"], "--resume")) == 2
    assert capsys.readouterr().err.strip() == ("gnn_dist.train: error: --resume: auto needs a checkpoint folder "
                                               "(checkpoint_dir, --checkpoint-dir)")
    assert main(argv(folders["p2"], "--keep-checkpoints", "2")) == 2
    assert "--keep-checkpoints: needs a checkpoint folder" in capsys.readouterr().err


# ---------------------------------------------------------------- a peer dies
def train_until_peer_dies(rank: int, world_size: int, data: str, metrics: str, port: int) -> None:
    """Rank 1 exits abruptly once rank 0 has logged two epochs; rank 0 must then fail by itself."""
    import threading

    from gnn_dist.train import main

    launch_env(rank, world_size, port)
    if rank == 1:
        def die() -> None:
            while True:
                if os.path.exists(metrics) and len(Path(metrics).read_text().splitlines()) >= 2:
                    os._exit(17)
                time.sleep(0.02)

        threading.Thread(target=die, daemon=True).start()
    code = main(argv(data, "--epochs", "1000000", "--metrics", metrics, "--timeout", str(PEER_TIMEOUT_S)))
    raise RuntimeError(f"main returned {code}")  # the survivor's peer died: it must not return 0


def test_dead_peer_ends_the_job_within_the_timeout(folders, tmp_path):
    metrics = str(tmp_path / "metrics.jsonl")
    outcomes = launch_ranks(train_until_peer_dies, 2, folders["p2"], metrics, free_port(),
                            init_group=False, timeout=90, grace=60)
    dead, survivor = outcomes[1], outcomes[0]
    assert dead.exitcode == 17, dead.describe()
    assert survivor.killed_by_harness is None, survivor.describe()
    assert survivor.exitcode not in (0, None) and "main returned 1" in str(survivor.error), survivor.describe()
    assert survivor.exit_time_s - dead.exit_time_s < PEER_TIMEOUT_S + 10, survivor.describe()
    assert len(Path(metrics).read_text().splitlines()) >= 2  # it died mid-training, not at start


# ---------------------------------------------------------------- through torchrun
def test_torchrun_with_the_wrong_process_count_fails(folders):
    res = run_tree([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                    "-m", "gnn_dist.train", *argv(folders["p3"]), "--timeout", "30"], timeout=120)
    assert res.returncode != 0, res.stdout[-4000:]
    assert "num_parts=3" in res.stdout and "world_size=2" in res.stdout, res.stdout[-4000:]
    assert "ChildFailedError" in res.stdout  # torchrun saw the ranks fail (no hang, no kill)
    # torchrun's summary ends with its root cause: our line there, not "To enable traceback see"
    root_cause = res.stdout[res.stdout.index("Root Cause"):]
    assert "traceback : error:" in root_cause and "num_parts=3" in root_cause, root_cause


# ---------------------------------------------------------------- a peer stalls
def train_until_peer_stalls(rank: int, world_size: int, data: str, metrics: str, port: int) -> None:
    train_until_rank_one_stalls(rank, world_size, port, metrics,
                                argv(data, "--epochs", "1000000", "--metrics", metrics, "--timeout",
                                     str(STALL_TIMEOUT_S)))


def test_a_stalled_peer_is_named_with_the_collective_and_the_layer(folders, tmp_path):
    metrics = str(tmp_path / "metrics.jsonl")
    outcomes = launch_ranks(train_until_peer_stalls, 2, folders["p2"], metrics, free_port(),
                            init_group=False, timeout=120, grace=5)
    message = stalled_job_message(outcomes)
    assert "with peer rank(s) 1" in message, message
    # the collective it waited in: a step's, or (with --metrics) the epoch's gather of every rank's peak memory
    assert any(name in message for name in ("halo exchange of layer", "all-reduce", "gather of peak memory")), message


# ---------------------------------------------------------------- ranks on different data
def _load_own_copy(rank: int, world_size: int, paths: list[str]) -> tuple[str, str]:
    import gnn_dist

    try:
        gnn_dist.load_partition(paths[rank])
    except ValueError as exc:
        return type(exc).__name__, str(exc)
    return "none", ""


def test_ranks_on_different_copies_refuse_to_start(folders, tmp_path):
    """Rank 1 reads a copy whose features were altered and re-checksummed (a valid folder on its
    own): the ranks compare the partition's fingerprint at load and refuse, naming each rank's
    folder, before any training step."""
    import hashlib
    import json

    copy = Path(shutil.copytree(folders["p2"], tmp_path / "altered"))
    features = copy / "part-00001" / "features.npy"
    arr = np.load(features)
    np.save(features, arr + 1.0)
    meta = json.loads((copy / "partition.json").read_text())
    entry = meta["parts"][1]["files"]["features.npy"]
    entry["sha256"] = hashlib.sha256(features.read_bytes()).hexdigest()
    entry["size"] = features.stat().st_size
    meta.pop("graph_fingerprint")   # as a folder written before graph fingerprints (inspect --verify recomputes it)
    (copy / "partition.json").write_text(json.dumps(meta))
    from partitioners.format import verify_partition   # the copy is a valid folder on its own

    assert verify_partition(str(copy), check_hashes=True) == []
    results = run_ranks(_load_own_copy, 2, [folders["p2"], str(copy)], timeout=120)
    for kind, message in results:
        assert kind == "ValueError", message
        assert "the ranks loaded different partitions" in message
        assert f"rank 0 ({folders['p2']})" in message and f"rank 1 ({copy})" in message
