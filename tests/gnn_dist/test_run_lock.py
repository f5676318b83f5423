"""A run's lock on its checkpoint folder (``gnn_dist.run_lock``, issue 33): two runs given the same
``--checkpoint-dir`` must not both run and overwrite each other's checkpoints.

The unit tests hold the lock in a child process (``python -c``, importing ``gnn_dist.run_lock``
only: no torch), so the flock is a real other process's: refused while it lives, stale once it
was SIGKILLed (the kernel dropped the flock, the file stayed). The end-to-end test runs two
jobs at once on the harness (``tests/mp_utils.py``): a first run (one process) that waits after
its second checkpoint, and a two-rank job on the same folder that starts while it waits; the
second job and the pre-launch check are refused (one line, exit code 2), the first finishes (its
checkpoints intact) and a third run resumes them (the lock is free again).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from train_helpers import REPO, ErrorLines, make_graph

HOLD = r"""
import os, sys, time
from gnn_dist import run_lock
lock = run_lock.acquire(sys.argv[1], run_id=sys.argv[2], what="--checkpoint-dir")
if sys.argv[3:] == ["fork"]:   # a forked child that outlives this process must not keep the lock
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the fork hooks have run when it gets here
        os.write(w, b"x")
        time.sleep(120)
        os._exit(0)
    os.read(r, 1)
    print(pid, flush=True)
print("ready", flush=True)
if sys.stdin.readline().strip() == "release":
    lock.release()
    print("released", flush=True)
    sys.stdin.readline()
"""


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)
    return env


@contextlib.contextmanager
def holder(directory: Path, run_id: str, *extra: str) -> Iterator[tuple[subprocess.Popen, list[str]]]:
    """A child process holding ``directory``'s lock as ``run_id``; yields it and the lines it
    printed before "ready". Killed (SIGKILL) and reaped at the end if still alive."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(directory), run_id, *extra], cwd=REPO, env=_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stdout:
            if line.strip() == "ready":
                break
            lines.append(line.strip())
        else:
            pytest.fail(f"the lock holder exited ({proc.wait()}): {proc.stderr.read()}")
        yield proc, lines
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def test_acquire_records_the_owner_and_release_deletes_it(tmp_path):
    from gnn_dist import run_lock

    folder = tmp_path / "ckpt" / "nested"   # created
    lock = run_lock.acquire(folder, run_id="job-1")
    try:
        owner = json.loads((folder / ".lock").read_text())
        assert owner["pid"] == os.getpid() and owner["run_id"] == "job-1" and owner["host"] and owner["started"]
        assert lock.held and run_lock.read_owner(folder) == lock.owner
        assert fcntl.fcntl(lock._fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC   # no program the run starts inherits it
        assert run_lock.acquire(folder, run_id="job-1") is lock   # re-entry in this process, counted
        with pytest.raises(run_lock.RunLockError, match="in use by another run"):
            run_lock.acquire(folder, run_id="job-2")   # another run id, even in this process
        lock.release()
        assert lock.held and (folder / ".lock").exists()
    finally:
        lock.release()
    assert not lock.held and not (folder / ".lock").exists()
    lock.release()   # idempotent
    run_lock.acquire(folder, run_id="job-2").release()


def test_a_live_lock_is_refused_naming_its_owner(tmp_path):
    from gnn_dist import run_lock

    with holder(tmp_path, "job-a") as (proc, _):
        before = (tmp_path / ".lock").read_text()
        started = json.loads(before)["started"]
        for call in (lambda: run_lock.acquire(tmp_path, run_id="job-b", what="--checkpoint-dir", retry_s=0.1),
                     lambda: run_lock.check_free(tmp_path, what="--checkpoint-dir")):
            with pytest.raises(run_lock.RunLockError) as info:
                call()
            message = str(info.value)
            assert isinstance(info.value, ValueError) and "\n" not in message
            assert message.startswith(f"--checkpoint-dir {tmp_path} is in use by another run (pid {proc.pid} on host ")
            assert f"run id job-a, started {started}" in message
            assert message.endswith("wait for that run to finish, or choose another --checkpoint-dir")
        assert (tmp_path / ".lock").read_text() == before   # untouched
        proc.stdin.write("release\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "released"
        assert not (tmp_path / ".lock").exists()
        run_lock.check_free(tmp_path)
        run_lock.acquire(tmp_path, run_id="job-b").release()


def test_a_node_joining_an_elastic_job_passes_the_check_of_the_folder_that_job_holds(tmp_path):
    """A node started while its elastic job runs checks the job's own folder: no refusal; a
    holder of another job (or of a job whose id merely starts alike) is refused as before."""
    from gnn_dist import run_lock

    with holder(tmp_path, "job-a/agent-7") as (proc, _):
        run_lock.check_free(tmp_path, what="--checkpoint-dir", job="job-a")
        for other in (None, "job-b", "job"):
            with pytest.raises(run_lock.RunLockError, match="is in use by another run"):
                run_lock.check_free(tmp_path, what="--checkpoint-dir", job=other)


def test_a_stale_lock_is_taken_over_with_one_line(tmp_path, caplog):
    from gnn_dist import run_lock

    with holder(tmp_path, "job-a") as (proc, _):
        kill(proc)   # the kernel dropped its flock; the file stays
    assert json.loads((tmp_path / ".lock").read_text())["pid"] == proc.pid
    run_lock.check_free(tmp_path)   # the pre-launch check passes a stale lock
    with caplog.at_level(logging.DEBUG, logger="gnn_dist.run_lock"):
        lock = run_lock.acquire(tmp_path, run_id="job-b", what="--checkpoint-dir")
    try:
        assert [r.levelname for r in caplog.records] == ["WARNING"]
        line = caplog.records[0].getMessage()
        assert line.startswith(f"--checkpoint-dir {tmp_path}: taking over the stale lock")
        assert f"pid {proc.pid} on host" in line and "run id job-a" in line
        assert json.loads((tmp_path / ".lock").read_text())["run_id"] == "job-b"
    finally:
        lock.release()


def test_a_restart_of_the_same_run_re_takes_its_lock(tmp_path, caplog):
    from gnn_dist import run_lock

    with holder(tmp_path, "gnn-dist-train/agent-7") as (proc, _):
        kill(proc)
    with caplog.at_level(logging.INFO, logger="gnn_dist.run_lock"):
        lock = run_lock.acquire(tmp_path, run_id="gnn-dist-train/agent-7")
    try:
        assert [r.levelname for r in caplog.records] == ["INFO"], caplog.records
        assert "re-taking the lock of this run" in caplog.records[0].getMessage()
        assert f"pid {proc.pid}" in caplog.records[0].getMessage()
    finally:
        lock.release()


def test_a_forked_child_does_not_keep_the_lock(tmp_path):
    from gnn_dist import run_lock

    with holder(tmp_path, "job-a", "fork") as (proc, lines):
        child = int(lines[0])
        try:
            kill(proc)   # its forked child lives on, without the lock
            os.kill(child, 0)
            run_lock.acquire(tmp_path, run_id="job-b", retry_s=0).release()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


def test_the_run_id_of_a_torchrun_job(monkeypatch, tmp_path):
    from gnn_dist import run_lock

    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    mine = run_lock.default_run_id()
    assert mine.startswith(f"pid-{os.getpid()}-") and run_lock.default_run_id() == mine
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "gnn-dist-train")   # every gnn-dist train job's: the agents differ
    assert run_lock.default_run_id() == f"gnn-dist-train/agent-{os.getppid()}"
    run_lock.check_free(tmp_path / "missing")
    assert not (tmp_path / "missing").exists()


# ---------------------------------------------------------------- end to end
def _flags(data: str, ckpt: Path, epochs: int, *extra: str) -> list[str]:
    return ["--data", data, "--model", "gcn", "--hidden", "8", "--layers", "2", "--epochs", str(epochs),
            "--lr", "0.05", "--seed", "3", "--checkpoint-dir", str(ckpt), "--checkpoint-every", "1",
            "--log-every", "0", "--timeout", "60", "--kernels", "torch", *extra]


def _wait_for(path: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear in {timeout} s")
        time.sleep(0.02)


def two_jobs(rank: int, world_size: int, sync: str, first: list[str], second: list[str], port: int) -> tuple:
    """Harness rank 0: the first run (one process), which waits after its second checkpoint until
    ``sync/resume`` exists (``sync/paused`` holds its pid meanwhile). Ranks 1 and 2: ranks 0 and 1 of
    the second job (port ``port``), which starts once ``sync/go`` exists and touches
    ``sync/done-R`` when it ends. Each returns its exit code and the error lines it logged."""
    import gnn_dist.checkpoints.files as ckpt
    from gnn_dist.train import main
    from train_helpers import launch_env

    folder = Path(sync)
    if rank == 0:
        save = ckpt.save_checkpoint

        def save_then_wait(directory: str, epoch: int, *args: object, **kwargs: object) -> Path:
            out = save(directory, epoch, *args, **kwargs)
            if epoch == 2:
                (folder / "paused").write_text(str(os.getpid()))
                _wait_for(folder / "resume")
            return out

        ckpt.save_checkpoint = save_then_wait
        argv = first
    else:
        launch_env(rank - 1, 2, port)
        _wait_for(folder / "go")
        argv = second
    try:
        with ErrorLines("gnn_dist.train") as errors:
            code = main(argv)
    finally:
        (folder / f"done-{rank}").touch()
    return code, errors.lines


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}


def test_a_second_run_on_the_same_folder_is_refused_before_it_trains(tmp_path, capsys):
    from mp_utils import launch_ranks
    from partitioners.format.writer import write_partition
    from train_helpers import free_port

    graph = make_graph()
    one, two = str(tmp_path / "p1"), str(tmp_path / "p2")
    write_partition(graph, np.zeros(graph.num_nodes, dtype=np.int64), 1, one, method="test", method_params={}, seed=0)
    write_partition(graph, np.arange(graph.num_nodes) % 2, 2, two, method="test", method_params={}, seed=0)
    ckpt, sync = tmp_path / "ckpt", tmp_path / "sync"
    sync.mkdir()
    outcomes: list = []   # both jobs start at once (their start-ups overlap); the second runs once the first waits
    thread = threading.Thread(target=lambda: outcomes.extend(launch_ranks(
        two_jobs, 3, str(sync), _flags(one, ckpt, 4), _flags(two, ckpt, 4), free_port(), init_group=False,
        timeout=150)))
    thread.start()
    try:
        while not (sync / "paused").exists():
            assert thread.is_alive(), "\n".join(o.describe() for o in outcomes)
            time.sleep(0.02)
        first_pid = int((sync / "paused").read_text())
        before = _snapshot(ckpt)
        assert json.loads((ckpt / ".lock").read_text())["pid"] == first_pid
        (sync / "go").touch()
        _wait_for(sync / "done-1")
        _wait_for(sync / "done-2")
        # gnn-dist train's pre-launch check refuses it too, before any rank starts (exit 2, one line).
        from gnn_dist.train import main

        capsys.readouterr()
        assert main(["--validate", *_flags(two, ckpt, 4)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"gnn_dist.train: error: --checkpoint-dir {ckpt} is in use"), err
        assert _snapshot(ckpt) == before   # nothing of the first run's was touched
    finally:
        for name in ("go", "resume"):
            (sync / name).touch()
        thread.join(timeout=150)
    assert len(outcomes) == 3 and all(o.ok for o in outcomes), "\n".join(o.describe() for o in outcomes)
    (code, lines), (code0, lines0), (code1, lines1) = (o.result for o in outcomes)
    assert (code, lines) == (0, []), outcomes[0].describe()   # the first run finished
    # The second job's rank 0 is refused with one line naming the owner; its rank 1 fails too, silently.
    assert code0 == code1 == 2 and lines1 == [], (code0, lines0, code1, lines1)
    assert len(lines0) == 1, lines0
    owner = f"is in use by another run (pid {first_pid} on host "
    assert lines0[0].startswith(f"error: --checkpoint-dir {ckpt} {owner}")
    assert "run id pid-" in lines0[0] and "started " in lines0[0]
    assert lines0[0].endswith("wait for that run to finish, or choose another --checkpoint-dir")
    from gnn_dist.checkpoints import latest_checkpoint, load_checkpoint

    assert not (ckpt / ".lock").exists()   # released at its end
    assert latest_checkpoint(ckpt) == ckpt / "checkpoint-000004.pt"
    assert [load_checkpoint(ckpt / f"checkpoint-{e:06d}.pt")["epoch"] for e in range(1, 5)] == [1, 2, 3, 4]
    # A third run takes the free lock: it resumes the first's checkpoint and goes on.
    assert main(_flags(one, ckpt, 5, "--resume", "latest")) == 0
    assert latest_checkpoint(ckpt) == ckpt / "checkpoint-000005.pt"
    assert len(load_checkpoint(ckpt / "checkpoint-000005.pt")["history"]) == 5
    assert not (ckpt / ".lock").exists()
