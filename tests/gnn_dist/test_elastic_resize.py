"""Elastic resize: two ``gnn-dist train --nnodes 1:2 --nproc 2`` agents on this machine (two
"nodes" of 2 ranks, one loopback rendezvous) train on a partition family (P=2 and P=4) with a
checkpoint every epoch; once a checkpoint exists, the second node's torchrun agent and its ranks
are SIGKILLed (a machine lost; the first node serves the rendezvous store, as the host of a real
job's endpoint does, and must stay). The first node's ranks fail, are restarted (``--max-restarts``), meet again without the lost
node, read the P=2 member and resume from the newest checkpoint, with no hand step. The final
weights (``--save-model``) equal an uninterrupted P=2 run's to 1e-5 (the result does not depend
on P), the metrics file records the resize, and no process of either job outlives it.

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
from pathlib import Path

import psutil
import pytest
import torch

from mp_utils import run_ranks
from train_helpers import REPO, free_port, launch_env, make_graph

pytestmark = pytest.mark.elastic

EPOCHS = 30
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


def _flags(data: str, ckpt: Path, model: Path, metrics: Path | None = None) -> list[str]:
    return ["--data", data, "--model", "gcn", "--hidden", "16", "--layers", "2", "--epochs", str(EPOCHS),
            "--lr", "0.05", "--dropout", "0.5", "--seed", "4", "--pipeline", "sync",
            "--checkpoint-dir", str(ckpt), "--checkpoint-every", "1", "--resume", "auto",
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


def _kill_node_at_first_checkpoint(node: psutil.Process, ckpt: Path, deadline: float) -> list[psutil.Process]:
    """SIGKILL ``node``'s agent and its ranks at once (a machine lost) once the job's first
    checkpoint exists; those processes, the agent first."""
    while time.monotonic() < deadline:
        agent = _agent(node)
        if agent is not None and (ckpt / "checkpoint-000001.pt").exists():
            victims = [agent, *_ranks(node)]
            for proc in victims:
                try:
                    proc.send_signal(signal.SIGKILL)
                except psutil.Error:
                    pass
            return victims
        time.sleep(0.02)
    pytest.fail("no checkpoint was written in time")


def test_a_lost_node_resizes_the_job_and_the_result_is_the_uninterrupted_one(tmp_path):
    family = str(_family(tmp_path / "fam"))
    straight_model = tmp_path / "straight.pt"
    flags = _flags(str(Path(family, "p2")), tmp_path / "ck-straight", straight_model)
    assert run_ranks(_straight, 2, flags, free_port(), init_group=False, timeout=180) == [0, 0]

    port, model, metrics = free_port(), tmp_path / "elastic.pt", tmp_path / "elastic.jsonl"
    cli = [sys.executable, "-m", "gnn_dist_cli", "train", "--nnodes", "1:2", "--nproc", "2",
           "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "resize-test", "--max-restarts", "3",
           "--rdzv-conf", "last_call_timeout=10,join_timeout=120",
           *_flags(family, tmp_path / "ck-elastic", model, metrics)]
    t0 = time.monotonic()
    deadline = t0 + TIMEOUT_S
    first = _start(cli, tmp_path / "node0.log")
    _wait_listening(port, first, deadline)   # node 0 serves the rendezvous store: node 1 is the one lost
    second = _start(cli, tmp_path / "node1.log")
    seen: dict[int, psutil.Process] = {}
    try:
        nodes = [psutil.Process(first.pid), psutil.Process(second.pid)]
        victims = _kill_node_at_first_checkpoint(nodes[1], tmp_path / "ck-elastic", deadline)
        seen.update((p.pid, p) for p in victims)
        killed_at = time.monotonic() - t0
        while first.poll() is None and time.monotonic() < deadline:
            for node in nodes:
                try:
                    seen.update((p.pid, p) for p in node.children(recursive=True))
                except psutil.Error:
                    pass
            time.sleep(0.2)
        log0 = (tmp_path / "node0.log").read_text(errors="replace")
        assert first.poll() == 0, f"node 0 did not finish in {TIMEOUT_S} s (code {first.poll()}):\n{log0[-5000:]}"
        second.wait(timeout=30)
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    total = time.monotonic() - t0
    print(f"elastic resize: node 1's agent (pid {victims[0].pid}) and {len(victims) - 1} ranks killed at "
          f"{killed_at:.1f} s, job done at {total:.1f} s")

    resizes = [r for r in _records(metrics) if r.get("event") == "resize"]
    assert any(r["from_world_size"] == 4 and r["to_world_size"] == 2 for r in resizes), (resizes, log0[-4000:])
    epochs = [r["epoch"] for r in _records(metrics) if "epoch" in r and "event" not in r]
    assert epochs == list(range(EPOCHS)), "each epoch once, in order"
    mine = torch.load(model, weights_only=True)["state_dict"]
    theirs = torch.load(straight_model, weights_only=True)["state_dict"]
    assert mine.keys() == theirs.keys()
    for name in mine:
        torch.testing.assert_close(mine[name], theirs[name], rtol=1e-5, atol=1e-5, msg=name)
    alive = [p.pid for p in seen.values() if _running(p)]
    assert not alive, f"processes left running: {alive}"
