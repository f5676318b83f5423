"""``benchmarks/run_queue_wait.py`` (issue 35's benchmark) without its training runs: the sampler
of a process's threads, the process-tree walk that finds the ranks, and the table."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import run_queue_wait as rq  # noqa: E402

LINUX_PROC = pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"), reason="no /proc schedstat (not Linux)")


@LINUX_PROC
def test_a_sample_counts_the_threads_and_their_time():
    sample = rq.RankSample()
    sample.add(os.getpid())
    sample.add(os.getpid())
    got = sample.figures()
    assert got["threads_max"] == len(os.listdir("/proc/self/task")) and got["runnable_max"] >= 1   # this one runs
    assert got["cpu_s"] > 0 and got["wait_s"] >= 0
    assert rq.RankSample().figures()["threads_max"] == 0   # a rank never seen


@LINUX_PROC
def test_descendants_reach_grandchildren():
    child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run([sys.executable, '-c', "
                                                    "'import time; time.sleep(30)'])"])
    try:
        for _ in range(200):
            found = rq._descendants(os.getpid())
            if len(found) >= 2:
                break
            subprocess.run(["sleep", "0.05"])
        assert child.pid in found and len(found) >= 2, found
    finally:
        for pid in rq._descendants(child.pid):
            os.kill(pid, 9)
        child.kill()
        child.wait()


def test_the_table_has_a_row_per_configuration():
    rank = {"cpu_s": 10.0, "wait_s": 20.0, "threads_max": 5, "runnable_mean": 1.1, "runnable_max": 3}
    results = {"after, 1 thread(s)": {"code": "after", "threads": 1, "ranks": [rank, rank], "epoch_ms": 50.0,
                                      "trainer_wait_cpu_s": 3.0},
               "before, 1 thread(s)": {"code": "before", "threads": 1, "ranks": [rank], "epoch_ms": 70.0,
                                       "trainer_wait_cpu_s": None}}
    env = {"date": "d", "cpu_model": "cpu", "cpu_count": 2, "load_average_1_5_15": [0, 0, 0]}
    text = rq.markdown(results, env, argparse.Namespace(dataset="sbm-small", epochs=3, load=2))
    assert "| after | 1 | 1 | 10.0 | 20.0 | 2.00 | 5 | 1.10, 3 | 50.0 | 3.00 |" in text
    assert "| before | 1 | 1 | 10.0 | 20.0 | 2.00 | 5 | 1.10, 3 | 70.0 | — |" in text
