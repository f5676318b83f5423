"""A rank's threads stay within its CPU share (``gnn_dist.rank_threads``), and the run-queue
readers (``gnn_dist.run_queue``) behind the metrics' ``wait_cpu_s``.

The share: the affinity mask capped by the cgroup's CPU quota (v1 and v2 files in a fake tree),
divided among the ranks; the thread variables it defaults, the user's kept. Then a real 2-rank
job (the loopback torchrun agent ``gnn-dist train`` runs, one thread per rank) whose ranks report
from inside: torch's, its inter-op and numba's pools at 1 thread, OpenMP's idle threads passive,
one runnable thread (the one looking) once training is done, and a ``wait_cpu_s`` >= 0 in every
epoch record.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from gnn_dist import rank_threads, run_queue
from gnn_dist_cli.launch_verbs import train_command
from partitioners.format.writer import write_partition
from train_helpers import make_graph, run_tree

PROBE = Path(__file__).with_name("rank_threads_probe.py")
LINUX_PROC = pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"), reason="no /proc schedstat (not Linux)")


def fake_cgroup(tmp_path: Path, own: str, files: dict[str, str]) -> tuple[Path, Path]:
    """A cgroup folder tree under ``tmp_path`` with ``files`` (path -> text), and a
    ``/proc/self/cgroup`` whose lines are ``own``."""
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    proc = tmp_path / "proc-cgroup"
    proc.write_text(own)
    return root, proc


def test_the_cgroup_v2_quota_is_the_smallest_along_the_path(tmp_path):
    root, proc = fake_cgroup(tmp_path, "0::/job/rank\n", {"cpu.max": "max 100000\n", "job/cpu.max": "150000 100000\n",
                                                          "job/rank/cpu.max": "max 100000\n"})
    assert rank_threads.cgroup_cpu_limit(root, proc) == 1.5
    root, proc = fake_cgroup(tmp_path / "none", "0::/\n", {"cpu.max": "max 100000\n"})
    assert rank_threads.cgroup_cpu_limit(root, proc) is None


def test_the_cgroup_v1_quota_is_read_from_the_cpu_controller(tmp_path):
    files = {"cpu,cpuacct/cpu.cfs_quota_us": "200000\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
             "memory/cpu.cfs_quota_us": "100000\n", "memory/cpu.cfs_period_us": "100000\n"}
    root, proc = fake_cgroup(tmp_path, "5:memory:/\n4:cpu,cpuacct:/\n", files)
    assert rank_threads.cgroup_cpu_limit(root, proc) == 2.0   # the memory controller's folder is not read
    (root / "cpu,cpuacct/cpu.cfs_quota_us").write_text("-1\n")   # no quota
    assert rank_threads.cgroup_cpu_limit(root, proc) is None
    assert rank_threads.cgroup_cpu_limit(root, tmp_path / "absent") is None


def test_usable_cpus_is_the_affinity_capped_by_the_quota(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(rank_threads, "cgroup_cpu_limit", lambda: 1.5)
    assert rank_threads.usable_cpus() == 2   # a quota of 1.5 CPUs runs on 2 of them
    assert rank_threads.rank_share(2) == 1 and rank_threads.rank_share(4) == 1
    monkeypatch.setattr(rank_threads, "cgroup_cpu_limit", lambda: None)
    assert rank_threads.usable_cpus() == 8 and rank_threads.rank_share(3) == 2


def test_thread_defaults_size_both_pools_to_the_share_and_keep_the_users(monkeypatch):
    monkeypatch.setattr(rank_threads, "usable_cpus", lambda: 8)
    passive = {"OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": "0"}
    assert rank_threads.thread_defaults(2, {}) == {"OMP_NUM_THREADS": "4", "NUMBA_NUM_THREADS": "4", **passive}
    assert rank_threads.thread_defaults(16, {})["OMP_NUM_THREADS"] == "1"   # at least one thread
    # the user's torch threads are kept and numba's pool follows them; their wait policy is kept
    assert rank_threads.thread_defaults(2, {"OMP_NUM_THREADS": "3", "OMP_WAIT_POLICY": "ACTIVE"}) == {
        "NUMBA_NUM_THREADS": "3", "KMP_BLOCKTIME": "0"}
    assert rank_threads.thread_defaults(2, {"OMP_NUM_THREADS": "lots"})["NUMBA_NUM_THREADS"] == "4"


@LINUX_PROC
def test_thread_states_see_a_blocked_thread_sleep():
    me = next(t for t in run_queue.thread_states() if t.tid == threading.get_native_id())
    assert me.runnable   # the thread reading its own state is running
    done = threading.Event()
    blocked = threading.Thread(target=done.wait)
    blocked.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            state = next((t for t in run_queue.thread_states() if t.tid == blocked.native_id), None)
            if state is not None and not state.runnable:
                break
            time.sleep(0.01)
        assert state is not None and state.state == "S", state   # blocked on the event: asleep, not runnable
    finally:
        done.set()
        blocked.join()


@LINUX_PROC
def test_wait_since_counts_every_thread_and_is_never_negative():
    before = run_queue.snapshot()
    assert before and threading.get_native_id() in before
    worker = threading.Thread(target=sum, args=(range(10**6),))   # a thread that starts and ends in between
    worker.start()
    worker.join()
    waited = run_queue.wait_since(before)
    assert isinstance(waited, float) and waited >= 0
    assert run_queue.wait_since(None) is None   # no schedstat before: nothing to compare


def test_a_training_rank_keeps_one_thread_runnable_and_records_its_wait(tmp_path):
    graph = make_graph()
    assignment = np.random.default_rng(2).integers(0, 2, graph.num_nodes)
    folder = tmp_path / "p2"
    write_partition(graph, assignment, 2, folder, method="test", method_params={}, seed=0)
    metrics = tmp_path / "metrics.jsonl"
    cmd = train_command(str(folder), 2, ["--model", "gcn", "--hidden", "8", "--epochs", "3", "--metrics", str(metrics),
                                          "--log-every", "1", "--timeout", "60"])
    cmd.remove("--validate")   # the agent's check runs gnn_dist.train; the ranks here run the probe
    at = cmd.index("-m", cmd.index("--"))
    cmd[at:at + 2] = [str(PROBE)]   # the ranks train as gnn_dist.train, then look at their threads
    res = run_tree(cmd, timeout=150)   # one torch thread per rank (OMP_NUM_THREADS=1), nothing else set
    assert res.returncode == 0, res.stdout[-4000:]
    assert "threads per rank: torch 1 (inter-op 1), numba 1, OpenMP wait policy PASSIVE" in res.stdout, res.stdout[-4000:]
    for rank in (0, 1):
        seen = json.loads(Path(f"{metrics}.threads.{rank}.json").read_text())
        assert (seen["torch"], seen["interop"], seen["numba_pool"], seen["numba"]) == (1, 1, 1, 1), seen
        assert seen["wait_policy"] == "PASSIVE", seen
        if sys.platform.startswith("linux"):
            assert min(seen["runnable"]) == 1, seen   # only the thread that looks: no pool thread spins
    records = [json.loads(line) for line in metrics.read_text().splitlines()][1:]
    assert [r["epoch"] for r in records] == [0, 1, 2]
    if os.path.exists("/proc/self/schedstat"):
        assert all(isinstance(r["wait_cpu_s"], float) and r["wait_cpu_s"] >= 0 for r in records), records
    else:
        assert all(r["wait_cpu_s"] is None for r in records)
