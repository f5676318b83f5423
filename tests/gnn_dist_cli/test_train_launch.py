"""``gnn-dist train`` end to end on a 2-part sbm-tiny folder: signals, sockets, failure report.

Each test runs ``python -m gnn_dist_cli train`` (the ``gnn-dist`` console script's code) in a
child process with many epochs, waits until rank 0 has written a metrics line, and then:

- SIGTERM / SIGINT to ``gnn-dist``: every process of the tree (``gnn-dist``, the torchrun
  agent, both ranks) is gone within the bound and the exit code is 143 / 130;
- SIGKILL to the agent (``gnn-dist``'s child): both ranks log that their launcher is gone and
  exit, ``gnn-dist`` exits 137 (128 + SIGKILL), nothing is left; SIGKILL to ``gnn-dist`` itself:
  the agent notices and stops the ranks;
- while it trains, every listening TCP socket of every process of the tree is on 127.0.0.1/::1
  (psutil's ``Process.net_connections``, i.e. /proc/net/tcp{,6} matched against each process's
  socket inodes), and the agent's two stores and each rank's gloo listener are among them;
- a folder whose part files were corrupted after partitioning fails inside the ranks: one
  ``rank R failed:`` line per rank, no ``ChildFailedError`` or ``Traceback`` line, exit code 1;
  with ``-v`` torchrun's own report is shown.

The sockets test comes first and leaves its job running for the next test that stops one (on
the same pytest worker), which saves that test a start of its own. Every spawned process is
tracked by pid and SIGKILLed in a ``finally`` if still running.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gnn_dist_cli import command as cli
from gnn_dist_cli.launch import REAP_GRACE_S, SHUTDOWN_GRACE_S
from train_helpers import default_signals

pytestmark = [pytest.mark.filterwarnings("ignore:Unable to enable fault handler:UserWarning"),
              pytest.mark.slow]   # torchrun jobs; started first (tests/conftest.py)
REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 150
"""Until rank 0's first metrics line (two torch imports on a loaded 2-core machine)."""
STOP_BOUND_S = SHUTDOWN_GRACE_S + 5
"""After SIGTERM/SIGINT every process of the tree is gone within the grace period and slack."""
ORPHAN_BOUND_S = 10
"""A rank exits within this of losing its agent (the requirement; the watch takes about 1 s)."""
GNN_DIST = [sys.executable, "-m", "gnn_dist_cli"]
TRAIN_FLAGS = ["--epochs", "1000000", "--hidden", "8", "--eval-every", "0", "--log-every", "0",
               "--timeout", "60"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("launch")
    good = root / "p2"
    assert cli.main(["partition", "--dataset", "sbm-tiny", "--parts", "2", "--out", str(good),
                     "--no-progress"]) == 0
    corrupt = shutil.copytree(good, root / "corrupt")
    for part in ("part-00000", "part-00001"):  # same size, other sha256: only the ranks notice
        labels = corrupt / part / "labels.npy"
        raw = bytearray(labels.read_bytes())
        raw[-1] ^= 0x01
        labels.write_bytes(bytes(raw))
    return {"good": str(good), "corrupt": str(corrupt)}


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME",
                 "NCCL_SOCKET_IFNAME", "GNN_DIST_AGENT_PID"):
        env.pop(name, None)
    return env


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(procs: list[psutil.Process], bound: float, since: float) -> None:
    while True:
        left = [p for p in procs if _alive(p)]
        if not left:
            return
        assert time.monotonic() - since < bound, \
            f"still running {bound} s later: {[(p.pid, ' '.join(p.cmdline())[:80]) for p in left]}"
        time.sleep(0.1)


class Job:
    """A running ``gnn-dist train`` and the processes of its tree."""

    def __init__(self, proc: subprocess.Popen, log: Path) -> None:
        self.proc = proc
        self.log = log
        self.tree: list[psutil.Process] = []
        self.agent: psutil.Process | None = None
        self.ranks: list[psutil.Process] = []

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def record_tree(self) -> None:
        """``gnn-dist``, the agent (its child) and the ranks (the agent's children)."""
        root = psutil.Process(self.proc.pid)
        seen = {p.pid: p for p in self.tree}
        for p in [root, *root.children(recursive=True)]:
            seen.setdefault(p.pid, p)
        self.tree = list(seen.values())

    def find_agent_and_ranks(self) -> None:
        """Name the agent (``gnn-dist``'s child) and the ranks (the agent's ``gnn_dist.train`` children)."""
        (self.agent,) = [p for p in self.tree if p.pid != self.proc.pid and p.ppid() == self.proc.pid]
        self.ranks = [p for p in self.tree if p.ppid() == self.agent.pid and "gnn_dist.train" in p.cmdline()]

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)


@contextlib.contextmanager
def training(tmp_path: Path, data: str, *gnn_dist_flags: str, wait_for_metrics: bool = True) -> Iterator[Job]:
    metrics, log = tmp_path / "metrics.jsonl", tmp_path / "gnn-dist.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([*GNN_DIST, *gnn_dist_flags, "train", "--data", data, *TRAIN_FLAGS,
                                 "--metrics", str(metrics)], cwd=REPO, env=_env(), stdout=out,
                                stderr=subprocess.STDOUT, preexec_fn=default_signals)
    job = Job(proc, log)
    try:
        if wait_for_metrics:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not (metrics.exists() and metrics.read_text().count("\n") >= 1):
                if proc.poll() is not None:
                    pytest.fail(f"gnn-dist train exited {proc.returncode} before training:\n{job.output()[-4000:]}")
                if time.monotonic() > deadline:
                    pytest.fail(f"no metrics line within {START_TIMEOUT_S} s:\n{job.output()[-4000:]}")
                time.sleep(0.2)
            job.record_tree()
            job.find_agent_and_ranks()
            assert len(job.ranks) == 2, job.tree
        yield job
    finally:
        with contextlib.suppress(Exception):
            job.record_tree()
        for p in job.tree:
            with contextlib.suppress(psutil.Error):
                if _alive(p):
                    p.kill()
        if proc.poll() is None:
            proc.kill()
        proc.wait()


class SharedJob:
    """One running job on the good folder, started by the first test that only looks at a job and
    handed to the first test that stops one, which then needs no start of its own (a start is
    three torch imports: most of such a test's time). Tests in another order, or on another
    pytest worker, start their own as before."""

    def __init__(self, root: Path, data: str, stack: contextlib.ExitStack) -> None:
        self.root, self.data, self.stack = root, data, stack
        self.job: Job | None = None
        self.started = 0

    def look(self) -> Job:
        """The shared job, running (started now, in a folder of its own, if there is none)."""
        if self.job is None or self.job.proc.poll() is not None:
            self.started += 1
            (folder := self.root / f"job{self.started}").mkdir()
            self.job = self.stack.enter_context(training(folder, self.data))
        return self.job

    @contextlib.contextmanager
    def stopping(self, tmp_path: Path) -> Iterator[Job]:
        """The shared job if it still runs (it is the caller's to stop), else a job of its own."""
        job, self.job = self.job, None
        if job is not None and job.proc.poll() is None:
            yield job
            return
        with training(tmp_path, self.data) as job:
            yield job


@pytest.fixture(scope="module")
def shared(folders, tmp_path_factory) -> Iterator[SharedJob]:
    with contextlib.ExitStack() as stack:   # its cleanup kills whatever a started job left running
        yield SharedJob(tmp_path_factory.mktemp("shared"), folders["good"], stack)


def _loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%")[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback


@pytest.mark.timeout(300)
def test_every_listening_socket_is_on_loopback(shared):
    job = shared.look()   # left running: the next test that stops a job stops this one
    listening: dict[int, list[str]] = {}
    for p in job.tree:
        conns = p.net_connections(kind="tcp")
        listening[p.pid] = [f"{c.laddr.ip}:{c.laddr.port}" for c in conns if c.status == psutil.CONN_LISTEN]
    everything = [(pid, a) for pid, addrs in listening.items() for a in addrs]
    wide = [(pid, a) for pid, a in everything if not _loopback(a.rsplit(":", 1)[0])]
    assert wide == [], f"listening beyond loopback: {wide} (all: {listening})"
    assert len(listening[job.agent.pid]) == 2, listening  # the rendezvous store and the ranks' store
    for rank in job.ranks:
        assert len(listening[rank.pid]) >= 1, listening  # gloo's listener
    assert listening[job.proc.pid] == []  # gnn-dist itself listens on nothing
    for rank in job.ranks:  # how: the ranks' store address, gloo's interface, their agent's pid
        env = rank.environ()
        assert (env["MASTER_ADDR"], env["GLOO_SOCKET_IFNAME"]) == ("127.0.0.1", "lo")
        assert env["GNN_DIST_AGENT_PID"] == str(job.agent.pid)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_to_gnn_dist_stops_the_whole_tree(shared, tmp_path, sig, code):
    with shared.stopping(tmp_path) as job:
        sent = time.monotonic()
        job.proc.send_signal(sig)
        assert job.wait(STOP_BOUND_S + 5) == code, job.output()[-4000:]
        _wait_gone(job.tree, STOP_BOUND_S, sent)
        out = job.output()
        assert f"got {sig.name}: stopping torchrun (pid {job.agent.pid})" in out
        assert "Traceback" not in out, out[-4000:]


@pytest.mark.timeout(300)
def test_ranks_exit_when_the_agent_is_killed(shared, tmp_path):
    with shared.stopping(tmp_path) as job:
        agent, ranks = job.agent, job.ranks
        agent.kill()
        killed = time.monotonic()
        _wait_gone(ranks, ORPHAN_BOUND_S, killed)
        assert job.wait(REAP_GRACE_S + 10) == 128 + signal.SIGKILL, job.output()[-4000:]
        _wait_gone(job.tree, REAP_GRACE_S + 10, killed)
        out = job.output()
        for rank in (0, 1):
            assert f"rank {rank}: the launcher (pid {agent.pid}) is gone; exiting" in out, out[-4000:]


@pytest.mark.timeout(300)
def test_the_agent_stops_the_ranks_when_gnn_dist_is_killed(shared, tmp_path):
    with shared.stopping(tmp_path) as job:
        job.proc.kill()
        killed = time.monotonic()
        job.wait(10)
        _wait_gone(job.tree, STOP_BOUND_S, killed)  # (their log went to the dead gnn-dist's pipe)


@pytest.mark.timeout(300)
def test_rank_failures_are_one_line_per_rank(folders, tmp_path):
    with training(tmp_path, folders["corrupt"], wait_for_metrics=False) as job:
        assert job.wait(START_TIMEOUT_S) == 1
        out = job.output()
    failed = re.findall(r"^\[gnn-dist\] error: rank (\d+) failed: (.*)$", out, flags=re.M)
    assert sorted(rank for rank, _ in failed) == ["0", "1"], out
    assert "ChildFailedError" not in out and "Traceback" not in out, out
    # What went wrong is said, in the summary (from the error files) or in the ranks' own log
    # lines, which pass through.
    assert "sha256 mismatch" in out and re.search(r"^\[rank0\] ", out, flags=re.M), out


@pytest.mark.timeout(300)
def test_verbose_shows_torchruns_report(folders, tmp_path):
    with training(tmp_path, folders["corrupt"], "-v", wait_for_metrics=False) as job:
        assert job.wait(START_TIMEOUT_S) == 1
        out = job.output()
    assert "ChildFailedError" in out and "Traceback" in out and "rank 0 failed:" not in out, out
