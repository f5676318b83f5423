"""torchrun for one machine, with every listening socket on loopback: the agent ``gnn-dist train`` runs.

Usage (``gnn-dist train`` builds this command; see ``gnn_dist_cli/launch.py``)::

    python -m gnn_dist.distributed.local_run [--watch-pid PID] [--summarize] [--validate] -- TORCHRUN_ARGS...

``TORCHRUN_ARGS`` are ``torch.distributed.run``'s own, passed on unchanged; run in this process,
torchrun's agent behaves as ``python -m torch.distributed.run TORCHRUN_ARGS`` does, plus:

- **The rendezvous backend** ``--rdzv-backend`` :data:`LOOPBACK_BACKEND` (registered here with
  torchrun's handler registry). Why: ``torchrun --standalone`` starts two ``TCPStore`` servers in
  the agent (the c10d rendezvous store, and the store it shares with the ranks as
  ``MASTER_ADDR:MASTER_PORT``), and torch's C++ ``TCPStore`` server binds the wildcard address
  (``::``/``0.0.0.0``, libuv and legacy backends alike: ``TCPStoreLibUvBackend.cpp``
  ``makeWithPort``); no flag or variable changes that, and the store has no authentication. It
  does accept an already-listening socket (``master_listen_fd``), so this backend binds both
  stores' sockets to the endpoint's loopback address itself (``--rdzv-endpoint 127.0.0.1:0``:
  ``::1`` works too; any other host is refused) and hands them over. The ranks' own sockets are
  the launcher's job: ``GLOO_SOCKET_IFNAME=lo`` / ``NCCL_SOCKET_IFNAME=lo`` and
  ``--local-addr 127.0.0.1`` (which becomes the ranks' ``MASTER_ADDR``). With ``--nnodes
  MIN:MAX`` (``gnn-dist train --nnodes``: several agents on this machine, each a "node") the
  endpoint needs a fixed port: the first agent serves the store there, the others connect to it
  (so that agent must stay for the job to go on); the ranks' store is served by the agent of
  node rank 0, again on loopback.
- **The ranks know their agent.** :data:`~.parent_watch.AGENT_PID_ENV` is set to this pid for
  them, so a rank whose agent died before its watch started still notices
  (:mod:`.parent_watch`).
- ``--watch-pid PID``: when process ``PID`` (``gnn-dist train``) is gone, the agent stops as on
  SIGTERM (torchrun forwards it to the ranks), and exits after :data:`STOP_TIMEOUT_S` at most.
- ``--validate``: first ``gnn_dist.train --validate`` with the training flags (or
  ``gnn_dist.predict --validate`` with its flags), in this process, once per world size the job
  may take (``--nnodes MIN:MAX`` x ``--nproc-per-node``: a partition family's member is the
  world size's); a refused configuration exits with its code (2) and its one line before any
  rank starts.
- ``--summarize``: when ranks fail, print one line per failed rank, ``rank R failed: Type:
  message`` (from the error files ``@record`` wrote, else the exit code or signal), first
  failure first, instead of torchrun's ``ChildFailedError`` traceback and report, drop
  torchrun's per-worker "failed"/"closing signal" log lines the summary replaces, and exit 1
  (the code torchrun's uncaught ``ChildFailedError`` gives). On SIGINT/SIGTERM/SIGHUP torchrun
  stops the ranks as usual and this exits ``128 + signal`` without a traceback. Without
  ``--summarize`` (``gnn-dist -v train``) everything is torchrun's, unfiltered.

Multi-node jobs use the backend :data:`NETWORK_BACKEND` instead (``launch/multi_node.sh``, or
``gnn-dist train --nnodes`` with a non-loopback ``--rdzv-endpoint``): torchrun's ``c10d``
rendezvous, whose store must listen on the network, unauthenticated, so it must sit on a trusted
network; with every round's store address published as on loopback (torch publishes it in the
first round only, so a node joining a running job waited for ``MASTER_ADDR`` until it timed out).
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from partitioners.log_format import CliFormatter

from .. import environ

__all__ = ["LOOPBACK_BACKEND", "NETWORK_BACKEND", "STOP_TIMEOUT_S", "loopback_store", "main", "register_backend",
           "summarize_failures"]

logger = logging.getLogger(__name__)

LOOPBACK_BACKEND = "gnn-dist-loopback"
"""Name of the single-machine rendezvous backend whose stores listen on loopback only."""
NETWORK_BACKEND = "gnn-dist-c10d"
"""Name of the multi-node rendezvous backend: torchrun's ``c10d``, its stores on the network as
torch makes them, with every round's store address published (a node may join a running job)."""
STOP_TIMEOUT_S = 30.0
"""After ``--watch-pid``'s process is gone: longest wait for torchrun to stop before ``os._exit``."""

_LOOPBACK_NAMES = {"localhost": "127.0.0.1"}
_WORKER_LOG = "torch.distributed.elastic.multiprocessing.api"
_REPLACED_RECORDS = ("failed (exitcode", "Sending process")
"""Starts of the messages of torchrun's worker log that ``--summarize`` replaces."""
_NO_RECORD = "<NONE>"
"""torchrun's ``error_file_data`` message when a rank left no error file."""


def _loopback_ip(host: str, what: str) -> str:
    ip = _LOOPBACK_NAMES.get(host.lower(), host)
    try:
        if ipaddress.ip_address(ip).is_loopback:
            return ip
    except ValueError:
        pass
    raise ValueError(
        f"{what} {host!r} is not a loopback address: the {LOOPBACK_BACKEND} rendezvous serves "
        f"one machine; use 127.0.0.1 (or ::1), or --rdzv-backend {NETWORK_BACKEND} for a multi-node job")


def loopback_store(host: str, port: int, *, timeout: timedelta = timedelta(seconds=60),
                   what: str = "host") -> Any:
    """A ``TCPStore`` server listening on loopback ``host`` only (``port`` 0: a free port).

    The socket is bound and listening before torch sees it (``master_listen_fd``); the store
    owns it from then on. ``what`` names ``host`` in the error for a non-loopback one.
    """
    from torch.distributed import TCPStore

    ip = _loopback_ip(host, what)
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((ip, port))
        sock.listen(socket.SOMAXCONN)
        bound_port = sock.getsockname()[1]
    except BaseException:
        sock.close()
        raise
    fd = sock.detach()
    try:
        return TCPStore(ip, bound_port, is_master=True, multi_tenant=True, timeout=timeout,
                        master_listen_fd=fd)
    except BaseException:
        os.close(fd)
        raise


def _shared_loopback_store(host: str, port: int, timeout: timedelta, what: str) -> Any:
    """The rendezvous store of several agents on this machine (an elastic job's "nodes"): the
    first agent serves it on loopback ``host:port``, the others connect to it."""
    import errno

    from torch.distributed import TCPStore

    if port == 0:
        raise ValueError(f"{what}: the agents of an elastic job meet at one port; give --rdzv-endpoint "
                         f"127.0.0.1:PORT")
    try:
        return loopback_store(host, port, timeout=timeout, what="--rdzv-endpoint host")
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
    return TCPStore(_loopback_ip(host, "--rdzv-endpoint host"), port, is_master=False, timeout=timeout)


def _create_loopback_handler(params: Any) -> Any:
    """torchrun's c10d dynamic rendezvous, both of its stores on loopback."""
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

    host, port = parse_rendezvous_endpoint(params.endpoint, default_port=0)
    timeout = timedelta(seconds=params.get_as_int("read_timeout", 60))
    if params.max_nodes == 1:
        store = loopback_store(host, port, timeout=timeout, what="--rdzv-endpoint host")
    else:
        store = _shared_loopback_store(host, port, timeout, f"--nnodes {params.min_nodes}:{params.max_nodes}")
    if environ.launch_variables().get("TORCH_DISABLE_SHARE_RDZV_TCP_STORE") == "1":
        logger.warning("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: rank 0 will start its own store, "
                       "listening on every interface; unset it to keep every socket on loopback")

    handler = create_handler(store, _named_backend(LOOPBACK_BACKEND)(store, params.run_id), params)
    # The store the ranks share (MASTER_ADDR:MASTER_PORT): torch creates it in this hook.
    handler._create_tcp_store_server = lambda master_addr, master_port: loopback_store(
        master_addr, master_port, what="--local-addr (the ranks' MASTER_ADDR)")
    if params.max_nodes > 1:
        handler.next_rendezvous = _each_round_published(handler, handler.next_rendezvous)
    return handler


def _named_backend(name: str) -> Any:
    """torchrun's c10d rendezvous backend class reporting ``name`` (torchrun checks that a
    handler reports the backend it was asked for)."""
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend

    class NamedBackend(C10dRendezvousBackend):
        @property
        def name(self) -> str:
            return name

    return NamedBackend


def _create_network_handler(params: Any) -> Any:
    """torchrun's ``c10d`` rendezvous as torch builds it (its store listens on the endpoint's
    host, every interface: a multi-node job on a trusted network), plus every round's store
    address published, so that a node joining a running job finds the ranks' store."""
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import create_backend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler

    backend, store = create_backend(params)
    handler = create_handler(store, _named_backend(NETWORK_BACKEND)(store, params.run_id), params)
    if params.max_nodes > 1:
        handler.next_rendezvous = _each_round_published(handler, handler.next_rendezvous)
    return handler


def _each_round_published(handler: Any, next_rendezvous: Any) -> Any:
    """``next_rendezvous`` that tells every round where the ranks' store is, not just the first.

    torch's handler publishes the address of the store rank 0's agent serves in a round's keys
    only when that agent first builds it, and a node new to the job reads it from the round it
    joins: a node joining a running job (a scale-up) waited for ``MASTER_ADDR`` until it timed
    out, and so did the job. Here rank 0 publishes its store's address in every round and every
    other rank reads that round's (an agent that was rank 0 before may not be now). The round
    is also the ranks' :data:`~gnn_dist.environ.ROUND_VARIABLE`: a membership change restarts
    them with torchrun's restart count unchanged, in the same store."""
    from torch.distributed.elastic.rendezvous.api import RendezvousInfo, RendezvousStoreInfo

    def each_round() -> Any:
        info = next_rendezvous()
        environ.set_variable(environ.ROUND_VARIABLE, str(handler._state_holder.state.round))   # for the ranks
        if environ.launch_variables().get("TORCH_DISABLE_SHARE_RDZV_TCP_STORE") == "1":
            return info
        server = handler._shared_tcp_store_server if info.rank == 0 else None
        if info.rank == 0 and server is None:   # rank 0 now, and no store served yet
            server = handler._shared_tcp_store_server = handler._create_tcp_store_server(
                handler._this_node.addr, 0)
        fresh = RendezvousStoreInfo.build(info.rank, info.store, local_addr=handler._this_node.addr,
                                          server_port=server.port if server is not None else None)
        handler._bootstrap_store_info = fresh
        return RendezvousInfo(info.store, info.rank, info.world_size, fresh)

    return each_round


def register_backend() -> None:
    """Make ``--rdzv-backend`` :data:`LOOPBACK_BACKEND` and :data:`NETWORK_BACKEND` known to
    torchrun in this process."""
    from torch.distributed.elastic.rendezvous import rendezvous_handler_registry

    rendezvous_handler_registry.register(LOOPBACK_BACKEND, _create_loopback_handler)
    rendezvous_handler_registry.register(NETWORK_BACKEND, _create_network_handler)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def summarize_failures(failures: dict[int, Any]) -> list[str]:
    """``rank R failed: ...`` per failed rank (``failures``: a ``ChildFailedError``'s), first
    failure first (then by rank)."""
    lines = []
    for rank, failure in sorted(failures.items(), key=lambda kv: (kv[1].timestamp, kv[0])):
        recorded = failure.error_file_data.get("message")
        if isinstance(recorded, dict):  # the form @record writes: {"message": "Type: msg", ...}
            recorded = recorded.get("message")
        if isinstance(recorded, str) and recorded.strip() and recorded != _NO_RECORD:
            what = _one_line(recorded)
        elif failure.exitcode < 0:
            what = f"killed by {failure.signal_name()} (pid {failure.pid})"
        else:
            what = (f"exit code {failure.exitcode}, no error file (pid {failure.pid}); the ranks' "
                    f"log lines above say why")
        lines.append(f"rank {rank} failed: {what}")
    return lines


class _DropReplaced(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_REPLACED_RECORDS)


def _init_logger() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(CliFormatter("%(message)s"))
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _stop_agent(watched_pid: int) -> None:
    """``--watch-pid``'s process is gone: stop torchrun as SIGTERM does, bounded."""
    logger.warning("the launcher (pid %d) is gone; stopping the ranks", watched_pid)
    os.kill(os.getpid(), signal.SIGTERM)
    timer = threading.Timer(STOP_TIMEOUT_S, os._exit, args=(128 + signal.SIGTERM,))
    timer.daemon = True
    timer.start()


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    argv = list(argv)
    if "--" not in argv:
        raise SystemExit("usage: python -m gnn_dist.distributed.local_run [--watch-pid PID] "
                         "[--summarize] -- TORCHRUN_ARGS...: the '--' before torchrun's "
                         "arguments is missing")
    split = argv.index("--")
    p = argparse.ArgumentParser(prog="gnn_dist.distributed.local_run",
                                description="torchrun with its stores on loopback (see the module "
                                            "docstring)")
    p.add_argument("--watch-pid", type=int, default=None, metavar="PID",
                   help="stop the ranks when process PID is gone")
    p.add_argument("--summarize", action="store_true",
                   help="one line per failed rank instead of torchrun's failure report")
    p.add_argument("--validate", action="store_true",
                   help="first check the training configuration in this process (gnn_dist.train "
                        "--validate) and exit with its code, starting no rank, when it is refused")
    return p.parse_args(argv[:split]), argv[split + 1:]


_VALIDATED_ENTRIES = ("gnn_dist.train", "gnn_dist.predict")
"""The rank entry points whose ``main`` takes ``--validate`` (``gnn-dist train``, ``gnn-dist predict``)."""


def _validate(torchrun_args: Sequence[str]) -> int:
    """``--validate``: ``gnn_dist.train --validate`` (or ``gnn_dist.predict``'s) with the flags
    of ``torchrun_args`` (those after ``-m gnn_dist.train``), run here: the agent imports torch
    anyway, so this saves the launcher a second interpreter (2-3 s) and the ranks see exactly
    the checked flags."""
    import importlib

    args = list(torchrun_args)
    for i in range(len(args) - 1):
        if args[i] == "-m" and args[i + 1] in _VALIDATED_ENTRIES:
            sizes, job = _world_sizes(args[:i])
            for size in sizes:   # each one the job may take (a family's member is the size's)
                with environ.world_size_as(size, job):
                    code = importlib.import_module(args[i + 1]).main(["--validate", *args[i + 2:]])
                if code:
                    return code
            return 0
    raise SystemExit(f"gnn_dist.distributed.local_run: --validate needs '-m' with one of "
                     f"{', '.join(_VALIDATED_ENTRIES)} in the torchrun arguments")


def _world_sizes(torchrun_args: Sequence[str]) -> tuple[list[int], str | None]:
    """The world sizes of torchrun's ``--nnodes MIN:MAX`` x ``--nproc-per-node N`` (``[1]`` when
    N is not a number), and an elastic job's ``--rdzv-id`` (None unless MIN < MAX): a node that
    joins it finds the job's own ranks holding the checkpoint folder, which is no refusal."""
    from torch.distributed.run import parse_args, parse_min_max_nnodes

    parsed = parse_args([*torchrun_args, "-m", "gnn_dist.train"])
    low, high = parse_min_max_nnodes(parsed.nnodes)
    nproc = str(parsed.nproc_per_node)
    sizes = [n * int(nproc) for n in range(low, high + 1)] if nproc.isdigit() else [1]
    return sizes, (str(parsed.rdzv_id) if low < high else None)


def main(argv: Sequence[str] | None = None) -> int:
    """Run torchrun with ``argv`` (default: ``sys.argv[1:]``); return its exit code."""
    args, torchrun_args = _parse(sys.argv[1:] if argv is None else argv)
    if args.validate and (code := _validate(torchrun_args)) != 0:
        return code
    _init_logger()
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from .parent_watch import AGENT_PID_ENV, start_parent_watch

    register_backend()
    environ.set_variable(AGENT_PID_ENV, str(os.getpid()))  # inherited by the ranks
    if args.watch_pid is not None:
        start_parent_watch(_stop_agent, parent_pid=args.watch_pid)
    if args.summarize:
        logging.getLogger(_WORKER_LOG).addFilter(_DropReplaced())
    try:
        torchrun.run(torchrun.parse_args(torchrun_args))
    except ChildFailedError as exc:
        if not args.summarize or not exc.failures:
            raise
        for line in summarize_failures(exc.failures):
            logger.error(line)
        return 1
    except SignalException as exc:
        if not args.summarize:
            raise
        return 128 + int(exc.sigval)
    return 0


if __name__ == "__main__":
    from partitioners.process_exit import exit_process

    exit_process(main())   # without the 1-2 s of interpreter teardown (see the module)
