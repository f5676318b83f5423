"""Elastic resize, both ways, on a partition family (P=2 and P=4) with a checkpoint every epoch:
``gnn-dist train --nnodes 1:2 --nproc 2`` agents on this machine (each a "node" of 2 ranks, one
loopback rendezvous; the first node serves the rendezvous store, as the host of a real job's
endpoint does, and must stay).

- **A node lost**: two nodes start together; once a checkpoint exists the second node's torchrun
  agent and its ranks are SIGKILLed (a machine lost). The first node's ranks fail, are restarted
  (``--max-restarts``), meet again without the lost node, read the P=2 member and resume.
- **A node added**: one node starts alone; once a checkpoint exists a second node joins. The
  first node's agent sees it waiting in the rendezvous, stops its ranks (a membership change,
  not a failure), and both nodes' ranks start at world size 4, read the P=4 member and resume.

Either way with no hand step, the final weights (``--save-model``) equal an uninterrupted P=2
run's to 1e-5 (the result does not depend on P), the metrics file records the resize, and no
process of either job outlives it.

Marked ``elastic`` (slow: up to 10 interpreters on one machine); the whole suite
(``scripts/test.sh``) runs it, ``-m elastic`` runs it alone and ``-m "not elastic"`` leaves it out; it
is never skipped by itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
import torch

from mp_utils import run_ranks
from train_helpers import REPO, free_port, launch_env, make_graph

pytestmark = pytest.mark.elastic

EPOCHS = 12   # the resize comes at the first checkpoint (a kill there, or the ranks stopped there)
TIMEOUT_S = 240.0


def _family(root: Path) -> Path:
    from partitioners import partition_graph
    from partitioners.format import load_partition_meta
    from partitioners.format.family import write_family_json

    graph = make_graph(120, seed=5)
    for p in (2, 4):
        partition_graph(graph, p, "random", root / f"p{p}", seed=p)
    write_family_json(root, {p: load_partition_meta(root / f"p{p}").graph_fingerprint for p in (2, 4)})
    return root


def _flags(data: str, ckpt: Path | None, model: Path, metrics: Path | None = None) -> list[str]:
    """The run's flags; ``ckpt=None``: no checkpoints (the uninterrupted run: a checkpoint every
    epoch took 17 s of its 21 s on a loaded 2-core machine, and changes nothing it computes)."""
    return ["--data", data, "--model", "gcn", "--hidden", "16", "--layers", "2", "--epochs", str(EPOCHS),
            "--lr", "0.05", "--dropout", "0.5", "--seed", "4", "--pipeline", "sync",
            *(["--checkpoint-dir", str(ckpt), "--checkpoint-every", "1", "--resume", "auto"] if ckpt else []),
            "--save-model", str(model), "--log-every", "0", "--eval-every", "0", "--timeout", "30",
            *(["--metrics", str(metrics)] if metrics else [])]


def _straight(rank: int, world_size: int, flags: list[str], port: int) -> int:
    from gnn_dist.train import main

    launch_env(rank, world_size, port)
    return main(flags)


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return env


def _agent(launcher: psutil.Process) -> psutil.Process | None:
    """The torchrun agent (``gnn_dist.distributed.local_run``) below ``launcher``."""
    for proc in launcher.children():
        try:
            if "gnn_dist.distributed.local_run" in " ".join(proc.cmdline()):
                return proc
        except psutil.Error:
            continue
    return None


def _ranks(launcher: psutil.Process) -> list[psutil.Process]:
    try:
        return [p for p in launcher.children(recursive=True)
                if "gnn_dist.train" in (line := " ".join(p.cmdline())) and "local_run" not in line]
    except psutil.Error:
        return []


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _records(metrics: Path) -> list[dict]:
    out = []
    for line in metrics.read_text().splitlines() if metrics.exists() else []:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def _start(argv: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as f:
        return subprocess.Popen(argv, cwd=REPO, env=_env(), stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _wait_listening(port: int, proc: subprocess.Popen, deadline: float) -> None:
    """Until the first agent's rendezvous store accepts connections on 127.0.0.1:``port``."""
    import socket

    while time.monotonic() < deadline and proc.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    pytest.fail(f"the first agent never served the rendezvous on port {port} (code {proc.poll()})")


def _first_checkpoint(ckpt: Path, deadline: float) -> None:
    """Until the job's first checkpoint is complete (``latest`` names it)."""
    while time.monotonic() < deadline:
        if (ckpt / "latest").exists():
            return
        time.sleep(0.02)
    pytest.fail("no checkpoint was written in time")


def _told_to_stop(proc: psutil.Process) -> bool:
    """Whether the stopped rank ``proc`` has a termination signal pending (its agent's stop, which
    it handles once continued) or is gone: ``/proc/PID/status``' pending masks (Linux)."""
    try:
        text = Path(f"/proc/{proc.pid}/status").read_text()
    except OSError:
        return True
    bits = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGKILL - 1))
    pending = [int(line.split()[1], 16) for line in text.splitlines() if line.startswith(("ShdPnd:", "SigPnd:"))]
    return any(mask & bits for mask in pending) or "\nState:\tZ" in text


def _signal(procs: list[psutil.Process], sig: int) -> None:
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            pass


def _kill_node_at_first_checkpoint(node: psutil.Process, ckpt: Path, deadline: float) -> list[psutil.Process]:
    """SIGKILL ``node``'s agent and its ranks at once (a machine lost) once the job's first
    checkpoint exists; those processes, the agent first."""
    _first_checkpoint(ckpt, deadline)
    while (agent := _agent(node)) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    victims = [agent, *_ranks(node)] if agent is not None else _ranks(node)
    _signal(victims, signal.SIGKILL)
    return victims


def _nodes_waiting(port: int, run_id: str) -> int:
    """How many agents wait in the rendezvous ``run_id`` at 127.0.0.1:``port`` for the next round
    (torchrun's own count, the one its agents poll)."""
    from torch.distributed import TCPStore
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler

    store = TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10))
    params = RendezvousParameters("c10d", f"127.0.0.1:{port}", run_id, 1, 2)
    return create_handler(store, C10dRendezvousBackend(store, run_id), params).num_nodes_waiting()


def _cli(port: int, run_id: str, family: str, tmp_path: Path, last_call_s: int) -> list[str]:
    return [sys.executable, "-m", "gnn_dist_cli", "train", "--nnodes", "1:2", "--nproc", "2",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id, "--max-restarts", "3",
            "--rdzv-conf", f"last_call_timeout={last_call_s},join_timeout=120",
            *_flags(family, tmp_path / "ck-elastic", tmp_path / "elastic.pt", tmp_path / "elastic.jsonl")]


def _finish(first: subprocess.Popen, second: subprocess.Popen, nodes: list[psutil.Process], log0: Path,
            deadline: float, seen: dict[int, psutil.Process]) -> None:
    """Until node 0 exits (0, within the deadline) and node 1 after it; every descendant seen on
    the way is added to ``seen`` (to check for orphans); both killed if still running."""
    try:
        while first.poll() is None and time.monotonic() < deadline:
            for node in nodes:
                try:
                    seen.update((p.pid, p) for p in node.children(recursive=True))
                except psutil.Error:
                    pass
            time.sleep(0.2)
        text = log0.read_text(errors="replace")
        assert first.poll() == 0, f"node 0 did not finish in {TIMEOUT_S} s (code {first.poll()}):\n{text[-5000:]}"
        second.wait(timeout=30)
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _check_result(tmp_path: Path, straight_model: Path, sizes: tuple[int, int], seen: dict[int, psutil.Process]) -> None:
    """The metrics file's resize from ``sizes[0]`` ranks to ``sizes[1]``, each epoch once, the
    uninterrupted run's final weights, and no process of the job left running."""
    records = _records(tmp_path / "elastic.jsonl")
    log0 = (tmp_path / "node0.log").read_text(errors="replace")
    resizes = [r for r in records if r.get("event") == "resize"]
    assert any((r["from_world_size"], r["to_world_size"]) == sizes for r in resizes), (resizes, log0[-4000:])
    epochs = [r["epoch"] for r in records if "epoch" in r and "event" not in r]
    assert epochs == list(range(EPOCHS)), "each epoch once, in order"
    mine = torch.load(tmp_path / "elastic.pt", weights_only=True)["state_dict"]
    theirs = torch.load(straight_model, weights_only=True)["state_dict"]
    assert mine.keys() == theirs.keys()
    for name in mine:
        torch.testing.assert_close(mine[name], theirs[name], rtol=1e-5, atol=1e-5, msg=name)
    alive = [p.pid for p in seen.values() if _running(p)]
    assert not alive, f"processes left running: {alive}"


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> tuple[str, Path]:
    """The family and the final weights of an uninterrupted P=2 run, written without checkpoints
    (both tests compare with it)."""
    root = tmp_path_factory.mktemp("elastic")
    family = str(_family(root / "fam"))
    model = root / "straight.pt"
    flags = _flags(str(Path(family, "p2")), None, model)
    assert run_ranks(_straight, 2, flags, free_port(), init_group=False, timeout=180) == [0, 0]
    return family, model


def test_a_lost_node_resizes_the_job_and_the_result_is_the_uninterrupted_one(tmp_path, straight):
    family, straight_model = straight
    port = free_port()
    cli = _cli(port, "resize-test", family, tmp_path, last_call_s=10)
    t0 = time.monotonic()
    deadline = t0 + TIMEOUT_S
    first = _start(cli, tmp_path / "node0.log")
    _wait_listening(port, first, deadline)   # node 0 serves the rendezvous store: node 1 is the one lost
    second = _start(cli, tmp_path / "node1.log")
    nodes = [psutil.Process(first.pid), psutil.Process(second.pid)]
    victims = _kill_node_at_first_checkpoint(nodes[1], tmp_path / "ck-elastic", deadline)
    seen = {p.pid: p for p in victims}
    killed_at = time.monotonic() - t0
    _finish(first, second, nodes, tmp_path / "node0.log", deadline, seen)
    print(f"elastic resize: node 1's agent (pid {victims[0].pid}) and {len(victims) - 1} ranks killed at "
          f"{killed_at:.1f} s, job done at {time.monotonic() - t0:.1f} s")
    _check_result(tmp_path, straight_model, (4, 2), seen)


def test_a_node_joining_resizes_the_job_up_and_the_result_is_the_uninterrupted_one(tmp_path, straight):
    """Node 0's ranks are stopped (SIGSTOP) from its first checkpoint until node 1 waits in the
    rendezvous and node 0's agent has told them to stop, so the job cannot end before the
    membership change, however slow this machine is."""
    family, straight_model = straight
    port = free_port()
    cli = _cli(port, "scale-up-test", family, tmp_path, last_call_s=1)
    t0 = time.monotonic()
    deadline = t0 + TIMEOUT_S
    first = _start(cli, tmp_path / "node0.log")
    nodes = [psutil.Process(first.pid)]
    second = None
    try:
        _first_checkpoint(tmp_path / "ck-elastic", deadline)
        paused = _ranks(nodes[0])
        _signal(paused, signal.SIGSTOP)
        seen = {p.pid: p for p in paused}
        second = _start(cli, tmp_path / "node1.log")
        nodes.append(psutil.Process(second.pid))
        while _nodes_waiting(port, "scale-up-test") == 0 and time.monotonic() < deadline and second.poll() is None:
            time.sleep(0.1)
        joined_at = time.monotonic() - t0
        if second.poll() is not None:
            pytest.fail(f"node 1 ended before it joined (code {second.poll()}):\n"
                        f"{(tmp_path / 'node1.log').read_text(errors='replace')[-3000:]}")
        # Continued only once node 0's agent has told them to stop (a membership change): continued
        # earlier, they may finish the run before the agent's next look at the rendezvous.
        while not all(_told_to_stop(p) for p in paused) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not all(_told_to_stop(p) for p in paused):
            pytest.fail("node 0's agent never stopped its ranks for the node waiting to join")
        _signal(paused, signal.SIGCONT)
    except BaseException:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        raise
    _finish(first, second, nodes, tmp_path / "node0.log", deadline, seen)
    print(f"elastic scale-up: node 1 waited in the rendezvous at {joined_at:.1f} s, job done at "
          f"{time.monotonic() - t0:.1f} s")
    _check_result(tmp_path, straight_model, (2, 4), seen)
