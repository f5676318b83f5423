"""Shared helpers of the training tests: a small labelled random graph, running a command tree
(torchrun and its ranks) with a timeout that kills the whole tree, making a harness rank
(``tests/mp_utils.py``) look like a torchrun rank so that it can run ``gnn_dist.train.main``, and
a job whose rank 1 stalls mid-training (:func:`train_until_rank_one_stalls`)."""

from __future__ import annotations

import atexit
import functools
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from partitioners import Graph

REPO = Path(__file__).resolve().parents[1]
GNN_DIST = [sys.executable, "-m", "gnn_dist_cli"]
"""The ``gnn-dist`` command of the tree under test (an installed console script may be an older install's)."""


def make_graph(num_nodes: int = 60, seed: int = 0) -> Graph:
    """A random directed graph (self-loops and duplicates possible) with 5 features, 3 classes
    that follow the first three feature columns (so they are learnable) and random masks."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, num_nodes, 300), rng.integers(0, num_nodes, 300)
    x = rng.standard_normal((num_nodes, 5)).astype(np.float32)
    y = x[:, :3].argmax(1)
    train = rng.random(num_nodes) < 0.5
    val = ~train & (rng.random(num_nodes) < 0.5)
    return Graph.from_edges(src, dst, num_nodes, features=x, labels=y, train_mask=train, val_mask=val,
                            test_mask=~train & ~val, num_classes=3)


def default_signals() -> None:
    """In a child (``preexec_fn``): SIGINT/SIGTERM/SIGHUP at their defaults, even if this test runs where they
    are ignored (a background job of a non-interactive shell ignores SIGINT), so the child's
    Python installs its own handlers and the supervisor forwards them."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@functools.cache
def command_dir() -> str:
    """A folder holding a ``gnn-dist`` that runs :data:`GNN_DIST` (for shell scripts: first on
    their PATH, before an installed console script)."""
    folder = Path(tempfile.mkdtemp(prefix="gnn-dist-command-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    script = folder / "gnn-dist"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gnn_dist_cli "$@"\n')
    script.chmod(0o755)
    return str(folder)


def run_tree(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run ``cmd`` in its own session (the tree's ``gnn-dist``, then this interpreter's ``bin``,
    first on the PATH); on timeout kill its whole process tree (torchrun + ranks)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env["PATH"] = os.pathsep.join([command_dir(), str(Path(sys.executable).parent), env.get("PATH", "")])
    # the launch variables, and the thread variables a rank's import of gnn_dist.train may have set in
    # this worker (a user's shell has only OMP_NUM_THREADS, above: the ranks default the others)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                 "NUMBA_NUM_THREADS", "OMP_WAIT_POLICY", "KMP_BLOCKTIME"):
        env.pop(name, None)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout} s:\n{out[-4000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for a job's ``MASTER_PORT``)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_env(rank: int, world_size: int, port: int) -> None:
    """This process as rank ``rank`` of a job on ``127.0.0.1:port``, as torchrun would start it."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))


class LogLines(logging.Handler):
    """``with LogLines("gnn_dist", logging.INFO) as log:`` collects the records of ``level`` and
    above a logger emits inside the block: ``log.lines`` their messages, ``log.levels`` their
    level names (the logger's level is lowered to ``level`` for the block)."""

    def __init__(self, logger: str, level: int = logging.INFO) -> None:
        super().__init__(level)
        self.logger = logging.getLogger(logger)
        self.lines: list[str] = []
        self.levels: list[str] = []
        self._before = self.logger.level

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        self.levels.append(record.levelname)

    def __enter__(self) -> "LogLines":
        self.logger.addHandler(self)
        if self.logger.getEffectiveLevel() > self.level:
            self.logger.setLevel(self.level)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self._before)


class ErrorLines(LogLines):
    """``with ErrorLines("gnn_dist.train") as errors:`` collects the ERROR records a logger emits
    inside the block (``errors.lines``, their messages)."""

    def __init__(self, logger: str) -> None:
        super().__init__(logger, logging.ERROR)


def run_train_jobs(rank: int, world_size: int, jobs: list[list[str]]) -> list[tuple[int, list[str]] | None]:
    """In every rank of a :func:`mp_utils.run_ranks` job: ``gnn_dist.train.main(argv)`` for each
    job in turn; per job None when it succeeded, else (exit code, the error lines it logged)."""
    from gnn_dist.train import main

    out: list[tuple[int, list[str]] | None] = []
    for job in jobs:
        with ErrorLines("gnn_dist.train") as errors:
            code = main(job)
        out.append(None if code == 0 else (code, errors.lines))
    return out


def gcn_trainer(part: Any, ckpt_dir: str | None, *, init_seed: int = 0, **config: Any) -> Any:
    """A 3-layer GCN (hidden 8, dropout 0.5, seed 3) and its Trainer (lr 0.05, no logging or
    evaluation unless ``config`` says) checkpointing to ``ckpt_dir``: the resume tests' run."""
    import torch

    import gnn_dist
    from gnn_dist.models import build_model

    torch.manual_seed(init_seed)
    model = build_model("gcn", in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=3,
                        dropout=0.5, seed=3)
    return gnn_dist.Trainer(model, part, **{"lr": 0.05, "log_every": 0, "eval_every": 0, "checkpoint_dir": ckpt_dir,
                                            **config})


STALL_TIMEOUT_S = 8
"""The collective timeout (``--timeout``) of a job with a stalled rank."""


def train_until_rank_one_stalls(rank: int, world_size: int, port: int, metrics: str, args: list[str]) -> None:
    """Rank ``rank`` of a job on ``127.0.0.1:port`` running ``gnn_dist.train.main(args)`` (``args``
    name the metrics file ``metrics`` and ``--timeout`` :data:`STALL_TIMEOUT_S`); rank 1 stops
    itself (SIGSTOP) once two epochs are logged, so the others must fail by themselves, naming
    what they waited for. Never returns: raises ``main``'s exit code and error lines (so the
    harness records them)."""
    from gnn_dist.train import main

    launch_env(rank, world_size, port)
    if rank == 1:
        def stall() -> None:
            while True:
                if os.path.exists(metrics) and len(Path(metrics).read_text().splitlines()) >= 3:
                    os.kill(os.getpid(), signal.SIGSTOP)
                time.sleep(0.02)

        threading.Thread(target=stall, daemon=True).start()
    with ErrorLines("gnn_dist.train") as errors:
        code = main(args)
    raise RuntimeError(f"main returned {code}: {errors.lines}")


def stalled_job_message(outcomes: list[Any]) -> str:
    """Rank 0's error of a :func:`train_until_rank_one_stalls` job, after asserting that it ended
    by itself (not killed by the harness) with exit code 1 and the collectives' one line for a
    peer that is past the timeout."""
    survivor = outcomes[0]
    assert survivor.killed_by_harness is None, survivor.describe()
    message = str(survivor.error)
    assert "main returned 1" in message and "did not complete" in message, survivor.describe()
    assert "A peer has died, stalled or is past the collective timeout" in message, message
    return message


def saved_tensor_bytes(trainer: Any) -> int:
    """Bytes of the distinct storages autograd saves for backward in one ``trainer.train_step()``
    (parameters excluded): what the memory planner's saved-tensor terms predict."""
    import torch

    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if not isinstance(t, torch.nn.Parameter):
            s = t.untyped_storage()
            storages[s.data_ptr()] = s.nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        trainer.train_step()
    return sum(storages.values())
