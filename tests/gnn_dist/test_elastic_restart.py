"""Elastic restart: a rank killed mid-run is restarted by torchrun (``gnn-dist train
--max-restarts 1``), every rank resumes from the newest complete checkpoint by itself
(``--resume auto``, also right for the first start), and the run ends with the per-epoch losses
of an uninterrupted run, bit for bit. The uninterrupted run is ``gnn_dist.train.main`` with the
same flags but no checkpoints on two harness ranks (``tests/mp_utils.py``: a torchrun job costs
three interpreters)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from mp_utils import run_ranks
from partitioners.format.writer import write_partition
from train_helpers import GNN_DIST, REPO, free_port, launch_env, make_graph

pytestmark = pytest.mark.slow   # started first (tests/conftest.py)

EPOCHS = 10


def _cli() -> list[str]:
    return GNN_DIST


def _train_flags(data: str, ckpt: Path | None, metrics: Path) -> list[str]:
    """The run's flags; ``ckpt=None``: no checkpoints (the uninterrupted run: writing them changes
    nothing it computes, and each took about half a second)."""
    return ["--data", data, "--model", "gcn", "--hidden", "16", "--layers", "3", "--epochs", str(EPOCHS),
            "--lr", "0.05", "--dropout", "0.5", "--seed", "4", "--pipeline", "stale",
            *(["--checkpoint-dir", str(ckpt), "--checkpoint-every", "1", "--resume", "auto"] if ckpt else []),
            "--metrics", str(metrics), "--log-every", "0", "--timeout", "60"]


def _argv(data: str, ckpt: Path, metrics: Path) -> list[str]:
    return [*_cli(), "train", "--max-restarts", "1", *_train_flags(data, ckpt, metrics)]


def _train_uninterrupted(rank: int, world_size: int, flags: list[str], port: int) -> int:
    from gnn_dist.train import main

    launch_env(rank, world_size, port)
    return main(flags)


def _epochs(metrics: Path) -> list[dict]:
    if not metrics.exists():
        return []
    recs = []
    for line in metrics.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "epoch" in rec:
            recs.append(rec)
    return recs


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return env


def _rank_process(root: psutil.Process, rank: int) -> psutil.Process | None:
    for proc in root.children(recursive=True):
        try:
            if proc.environ().get("RANK") == str(rank) and "gnn_dist.train" in " ".join(proc.cmdline()):
                return proc
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None


def _run(argv: list[str], metrics: Path, kill_after_epochs: int | None, timeout: float = 240) -> tuple[int, str, bool]:
    """Run ``argv``; with ``kill_after_epochs``, SIGKILL rank 1 once that many epochs are logged.
    Returns (exit code, output, whether a rank was killed). The whole tree is killed on timeout."""
    proc = subprocess.Popen(argv, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    killed = False
    try:
        deadline = time.monotonic() + timeout
        root = psutil.Process(proc.pid)
        while kill_after_epochs is not None and not killed and proc.poll() is None and time.monotonic() < deadline:
            if len(_epochs(metrics)) >= kill_after_epochs:
                victim = _rank_process(root, 1)
                if victim is not None:
                    victim.send_signal(signal.SIGKILL)
                    killed = True
            time.sleep(0.05)
        out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{' '.join(argv)} did not finish in {timeout} s:\n{out[-4000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out, killed


def test_a_killed_rank_is_restarted_and_the_run_reproduces_the_uninterrupted_one(tmp_path):
    graph = make_graph(120, seed=5)
    data = tmp_path / "parts"
    write_partition(graph, np.random.default_rng(3).integers(0, 2, graph.num_nodes).astype(np.int32), 2, data,
                    method="test", method_params={}, seed=0)
    straight_m, killed_m = tmp_path / "straight.jsonl", tmp_path / "killed.jsonl"
    flags = _train_flags(str(data), None, straight_m)
    assert run_ranks(_train_uninterrupted, 2, flags, free_port(), init_group=False, timeout=180) == [0, 0]
    code, out, killed = _run(_argv(str(data), tmp_path / "ck-killed", killed_m), killed_m, kill_after_epochs=4)
    assert killed, "rank 1 was killed mid-run"
    assert code == 0, out[-4000:]
    straight, resumed = _epochs(straight_m), _epochs(killed_m)
    assert [r["epoch"] for r in resumed] == list(range(EPOCHS)), "each epoch once, in order"
    assert [r["train_loss"] for r in resumed] == [r["train_loss"] for r in straight]
    assert "resumed from" in out and "checkpoint-0000" in out, out[-4000:]
