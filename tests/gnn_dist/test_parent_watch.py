"""The orphan guard of a rank (``gnn_dist.distributed.parent_watch``).

- A process whose parent is SIGKILLed (it is re-parented) logs ``rank R: the launcher (pid N)
  is gone; exiting`` and is gone within a couple of seconds, though its main thread sleeps.
- A rank started after its agent died (the agent's pid in ``GNN_DIST_AGENT_PID``, dead) exits at
  once with ``EXIT_ORPHANED``; the watch is started once per process.
- An error path asks the watch first (``exit_if_gone``): a rank whose collective broke because
  an orphaned peer exited ends the orphan's way, with its one line, not the collective's traceback.
- No watch without ``RANK``/``WORLD_SIZE``: ``gnn_dist.train.main`` run in-process starts none.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from gnn_dist.distributed import parent_watch
from gnn_dist.distributed.parent_watch import (AGENT_PID_ENV, EXIT_ORPHANED, FLUSH_TIMEOUT_S, POLL_INTERVAL_S,
                                               ParentWatch, expected_parent, watch_launcher)

REPO = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = POLL_INTERVAL_S + FLUSH_TIMEOUT_S + 3.0
"""A poll, the bounded flush, and slack for a loaded 2-core machine."""

RANK_SCRIPT = textwrap.dedent("""
    import os, sys, time
    from gnn_dist.distributed.parent_watch import watch_launcher
    watch = watch_launcher()
    assert watch is not None and watch_launcher() is watch  # once per process
    open(sys.argv[1], "w").write("watching")
    time.sleep(600)
""")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    for name in ("RANK", "WORLD_SIZE", AGENT_PID_ENV):
        env.pop(name, None)
    env.update(extra)
    return env


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _wait_for(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout} s"
        time.sleep(0.05)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.timeout(120)
def test_a_rank_whose_parent_is_killed_logs_and_exits(tmp_path):
    ready, log = tmp_path / "ready", tmp_path / "rank.log"
    parent_code = textwrap.dedent(f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", {RANK_SCRIPT!r}, {str(ready)!r}],
                                 stderr=open({str(log)!r}, "w"))
        print(child.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_code], env=_env(RANK="3", WORLD_SIZE="4"),
                              stdout=subprocess.PIPE, text=True)
    child_pid = None
    try:
        child_pid = int(parent.stdout.readline())
        _wait_for(ready, 60)
        parent.kill()
        parent.wait()
        killed_at = time.monotonic()
        while not _gone(child_pid):
            assert time.monotonic() - killed_at < GONE_WITHIN_S, "the orphaned rank still runs"
            time.sleep(0.05)
        text = log.read_text()
        assert f"rank 3: the launcher (pid {parent.pid}) is gone; exiting" in text, text
    finally:
        parent.kill()
        parent.wait()
        if child_pid is not None and not _gone(child_pid):
            os.kill(child_pid, 9)


@pytest.mark.timeout(120)
def test_a_rank_started_after_its_agent_died_exits_at_once(tmp_path):
    dead = _dead_pid()
    ready = tmp_path / "ready"
    proc = subprocess.run([sys.executable, "-c", RANK_SCRIPT, str(ready)], capture_output=True, text=True,
                          env=_env(RANK="1", WORLD_SIZE="2", **{AGENT_PID_ENV: str(dead)}), timeout=90)
    assert proc.returncode == EXIT_ORPHANED, proc.stderr
    assert f"rank 1: the launcher (pid {dead}) is gone; exiting" in proc.stderr


def test_expected_parent():
    ppid = os.getppid()
    assert expected_parent({}) == ppid
    assert expected_parent({AGENT_PID_ENV: str(ppid)}) == ppid
    assert expected_parent({AGENT_PID_ENV: "not-a-pid"}) == ppid
    assert expected_parent({AGENT_PID_ENV: str(os.getpid())}) == ppid  # alive, not our parent: stale
    dead = _dead_pid()
    assert expected_parent({AGENT_PID_ENV: str(dead)}) == dead  # our agent died before we looked


def test_watch_calls_back_once_when_the_parent_is_not_the_expected_one():
    seen, called = [], threading.Event()
    watch = ParentWatch(lambda pid: (seen.append(pid), called.set()), parent_pid=os.getppid(), interval=0.01)
    watch.start()
    time.sleep(0.1)
    assert not called.is_set()  # our parent is alive
    watch.stop()
    ParentWatch(lambda pid: (seen.append(pid), called.set()), parent_pid=-5, interval=0.01).start()
    assert called.wait(5) and seen == [-5]
    with pytest.raises(ValueError, match="interval must be a positive number of seconds, got 0"):
        ParentWatch(lambda pid: None, interval=0)


def test_exit_if_gone_acts_only_when_the_parent_is_gone():
    seen = []
    alive = ParentWatch(seen.append, parent_pid=os.getppid())
    alive.exit_if_gone()
    assert seen == []
    gone = ParentWatch(seen.append, parent_pid=-7)  # not started: the error path runs it in-thread
    gone.exit_if_gone()
    assert seen == [-7]


def test_no_watch_without_a_launcher(tmp_path, monkeypatch):
    from partitioners.format.writer import write_partition
    from train_helpers import make_graph

    from gnn_dist.train import main

    assert watch_launcher({}) is None and watch_launcher({"LOCAL_RANK": "0"}) is None
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    g = make_graph()
    write_partition(g, np.zeros(g.num_nodes, dtype=np.int64), 1, tmp_path / "p1", method="test",
                    method_params={}, seed=0)
    assert main(["--data", str(tmp_path / "p1"), "--hidden", "8", "--epochs", "1", "--log-every", "0"]) == 0
    assert parent_watch._launcher_watch is None
    assert not [t for t in threading.enumerate() if t.name == "gnn-dist-parent-watch"]
