"""The per-step probe of ``benchmarks/peers.py``: the same instrument inside every rank of every
framework it compares (gnn-dist loads it with ``--import``, PipeGCN and BNS-GCN from the first
line of their ``main.py``, a patch the harness applies to its temporary copy of their code).

After every optimizer step (torch's global step hook, so no framework's code is touched for it)
the rank appends one JSON line to ``$PEERS_PROBE_DIR/rank-PID.jsonl``: the wall clock, the
process's CPU seconds (all threads, ``os.times``), its threads' run-queue wait
(:mod:`gnn_dist.run_queue`, ``/proc/self/task/*/schedstat``), its peak RSS so far (``VmHWM``)
and the bytes it has sent point to point (``torch.distributed.isend``/``send``, counted here:
the peers' halo rows travel that way; gnn-dist's own halo figure comes from its metrics).
Differences between consecutive lines are one epoch's figures. Without ``PEERS_PROBE_DIR``
importing this module does nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time

_DIR = os.environ.get("PEERS_PROBE_DIR")
_sent = [0]


def _peak_rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _wait_s() -> float:
    from gnn_dist import run_queue

    times = run_queue.snapshot() or {}
    return sum(w for _, w in times.values()) / 1e9


def _record(*_args: object) -> None:
    import torch.distributed as dist

    t = os.times()
    line = {"rank": dist.get_rank() if dist.is_initialized() else 0, "wall": time.time(), "cpu": t.user + t.system,
            "wait": _wait_s(), "rss": _peak_rss_bytes(), "sent": _sent[0]}
    with open(os.path.join(_DIR, f"rank-{os.getpid()}.jsonl"), "a") as f:
        f.write(json.dumps(line) + "\n")


def _counting(send):
    def counted(tensor, *args, **kwargs):
        _sent[0] += tensor.numel() * tensor.element_size()
        return send(tensor, *args, **kwargs)
    return counted


def install() -> None:
    """Hook the optimizer steps and count the point-to-point sends of this process."""
    import torch
    import torch.distributed as dist
    from torch.optim.optimizer import register_optimizer_step_post_hook

    if os.environ.get("PEERS_REPO") and os.environ["PEERS_REPO"] not in sys.path:
        sys.path.append(os.environ["PEERS_REPO"])   # gnn_dist.run_queue (stdlib only) in the peers' venv
    threads = os.environ.get("PEERS_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
    dist.isend = _counting(dist.isend)
    dist.send = _counting(dist.send)
    register_optimizer_step_post_hook(_record)


if _DIR:
    install()
