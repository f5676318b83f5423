"""``gnn-dist train --nnodes MIN:MAX``: an elastic job (torchrun's elastic agent), its flags and
its rendezvous arguments. Torch-free.

Run the same command on every node (or several times on one machine: each is a "node" of
``--nproc`` ranks). The agents meet at ``--rdzv-endpoint`` (default ``127.0.0.1:29400``) under
``--rdzv-id``; the job starts with every node that came within the rendezvous' last call (at
least MIN), and when a node is lost the others' ranks fail, are restarted (``--max-restarts``)
and meet again without it; a node that arrives later joins at the next restart. Each rank reads
the member of the family ``--data`` for its world size and, with ``--checkpoint-dir`` and
``--resume auto``, continues from the newest checkpoint (a resume on another cut of the same
graph is exact for the sync and overlap schedules).

- **Loopback endpoint** (the default; ``localhost``, ``127.x``, ``::1``): the agents' stores are
  the loopback rendezvous' (``gnn_dist/distributed/local_run.py``: the first agent serves the
  store, the others connect), the ranks' sockets are on loopback too: nothing listens beyond
  this machine.
- **Any other endpoint** (a multi-node job): torchrun's ``c10d`` rendezvous (the backend
  ``gnn-dist-c10d``: c10d with every round's store address published, so a node may also join a
  running job); its store listens on every interface of the endpoint's host, unauthenticated: a
  trusted network only.
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Sequence

from partitioners.cli_args import UsageError

__all__ = ["DEFAULT_ENDPOINT", "add_elastic_arguments", "elastic_rendezvous", "is_loopback_endpoint", "nnodes_range"]

DEFAULT_ENDPOINT = "127.0.0.1:29400"
"""Where the agents of ``--nnodes`` meet by default (torchrun's default c10d port, on loopback)."""
DEFAULT_RDZV_ID = "gnn-dist-train"


def nnodes_range(text: str) -> tuple[int, int]:
    """``--nnodes 2`` or ``--nnodes 1:4`` -> ``(MIN, MAX)``."""
    parts = text.split(":")
    try:
        low, high = (int(parts[0]), int(parts[-1])) if len(parts) <= 2 else (0, 0)
    except ValueError:
        low = high = 0
    if not 1 <= low <= high:
        raise argparse.ArgumentTypeError(f"{text!r} is not a node count N or a range MIN:MAX with 1 <= MIN <= MAX "
                                         f"(e.g. 2 or 1:4)")
    return low, high


def add_elastic_arguments(t: argparse.ArgumentParser) -> None:
    """``train``'s ``--nnodes``, ``--rdzv-endpoint``, ``--rdzv-id`` and ``--rdzv-conf``."""
    t.add_argument("--nnodes", type=nnodes_range, default=None, metavar="MIN:MAX",
                   help="an elastic job of MIN to MAX nodes of --nproc ranks each (torchrun's elastic agent): run "
                        "the same command on every node; with --data a partition family, --checkpoint-dir, "
                        "--resume auto and --max-restarts it goes on with the nodes left when one is lost "
                        "(docs/concepts.md) (default: this machine alone)")
    t.add_argument("--rdzv-endpoint", default=None, metavar="HOST:PORT",
                   help=f"with --nnodes: where the agents meet (default: {DEFAULT_ENDPOINT}, loopback only; "
                        f"another host: torchrun's c10d rendezvous, listening on the network)")
    t.add_argument("--rdzv-id", default=None, metavar="ID",
                   help=f"with --nnodes: the job's id, the same on every node (default: {DEFAULT_RDZV_ID})")
    t.add_argument("--rdzv-conf", default=None, metavar="K=V,...",
                   help="with --nnodes: torchrun's rendezvous settings, e.g. last_call_timeout=5 (seconds the "
                        "rendezvous waits for more nodes once MIN came; torchrun's default 30)")


def is_loopback_endpoint(endpoint: str) -> bool:
    """Whether ``HOST:PORT`` (or ``[::1]:PORT``) names this machine's loopback."""
    host = endpoint.rsplit(":", 1)[0].strip("[]") if ":" in endpoint else endpoint
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check(args: argparse.Namespace) -> str:
    """The endpoint, after the checks of the elastic flags (one line each, exit code 2)."""
    if args.nnodes is None:
        given = [f for f in ("rdzv_endpoint", "rdzv_id", "rdzv_conf") if getattr(args, f) is not None]
        if given:
            raise UsageError(f"--{given[0].replace('_', '-')} applies to an elastic job; add --nnodes MIN:MAX")
        return ""
    if args.nproc is None:
        raise UsageError(f"--nnodes {args.nnodes[0]}:{args.nnodes[1]} needs --nproc N, the ranks of each node")
    endpoint = args.rdzv_endpoint or DEFAULT_ENDPOINT
    port = endpoint.rsplit(":", 1)[-1] if ":" in endpoint else ""
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--rdzv-endpoint {endpoint}: expected HOST:PORT with a port 1-65535 (e.g. {DEFAULT_ENDPOINT}): "
                         f"every node's agent must find the same one")
    return endpoint


def elastic_rendezvous(args: argparse.Namespace) -> list[str] | None:
    """torchrun's rendezvous arguments of an elastic job (None: not one), the flags checked."""
    endpoint = _check(args)
    if not endpoint:
        return None
    from .launch_verbs import LOOPBACK_RDZV_BACKEND, NETWORK_RDZV_BACKEND

    low, high = args.nnodes
    out = [f"--nnodes={low}:{high}", f"--rdzv-endpoint={endpoint}", f"--rdzv-id={args.rdzv_id or DEFAULT_RDZV_ID}"]
    if is_loopback_endpoint(endpoint):
        out += [f"--rdzv-backend={LOOPBACK_RDZV_BACKEND}", "--local-addr=127.0.0.1"]
    else:
        out.append(f"--rdzv-backend={NETWORK_RDZV_BACKEND}")
    return out + ([f"--rdzv-conf={args.rdzv_conf}"] if args.rdzv_conf else [])


def rendezvous_is_loopback(rendezvous: Sequence[str] | None) -> bool:
    """Whether the ranks of ``rendezvous`` (None: a one-machine job) stay on loopback."""
    from .launch_verbs import LOOPBACK_RDZV_BACKEND

    return rendezvous is None or f"--rdzv-backend={LOOPBACK_RDZV_BACKEND}" in rendezvous
