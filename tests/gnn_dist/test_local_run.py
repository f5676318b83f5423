"""The single-machine torchrun agent (``gnn_dist.distributed.local_run``), in-process.

- :func:`loopback_store` listens on the loopback address only (127.0.0.1, or ::1), works as a
  store, and refuses any other host; the rendezvous refuses more than one node.
- :func:`summarize_failures` makes one line per failed rank from torchrun's ``ProcessFailure``s:
  the recorded ``Type: message``, else the signal, else the exit code; first failure first.
- The agent's own flags must be followed by ``--``; the CLI names the same backend.

The end-to-end behaviour (sockets of a real 2-rank job, signals, failure report) is in
``test_train_launch.py``.
"""

from __future__ import annotations

import json
import socket

import psutil
import pytest
from torch.distributed import TCPStore
from torch.distributed.elastic.multiprocessing.errors import ProcessFailure
from torch.distributed.elastic.rendezvous import RendezvousParameters

from gnn_dist.distributed import local_run
from gnn_dist.distributed.local_run import LOOPBACK_BACKEND, loopback_store, summarize_failures


def _listening(port: int) -> list[str]:
    return [c.laddr.ip for c in psutil.Process().net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == port]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_loopback_store_listens_on_loopback_only(host):
    store = loopback_store(host, 0)
    try:
        assert _listening(store.port) == ["127.0.0.1"]
        client = TCPStore("127.0.0.1", store.port, is_master=False)
        client.set("k", "v")
        assert store.get("k") == b"v"
    finally:
        del store


def test_loopback_store_on_ipv6_loopback():
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        store = loopback_store("::1", 0)
    except OSError as exc:  # ::1 not configured on this machine
        pytest.skip(f"::1 unavailable: {exc}")
    assert _listening(store.port) == ["::1"]


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.1", "node0"])
def test_loopback_store_refuses_other_hosts(host):
    with pytest.raises(ValueError, match=rf"^--local-addr '{host}' is not a loopback address: .* use 127.0.0.1 "
                                         r"\(or ::1\), or --rdzv-backend gnn-dist-c10d for a multi-node job"):
        loopback_store(host, 0, what="--local-addr")


def test_the_loopback_rendezvous_of_several_agents_shares_one_store_on_a_fixed_port():
    """``--nnodes 1:2`` on this machine (``gnn-dist train --nnodes``): the first agent serves the
    store on the endpoint's loopback port, a second one connects to it; port 0 is refused (the
    agents could not find each other)."""
    from train_helpers import free_port

    params = RendezvousParameters(backend=LOOPBACK_BACKEND, endpoint="127.0.0.1:0", run_id="t",
                                  min_nodes=1, max_nodes=2)
    with pytest.raises(ValueError, match="--nnodes 1:2: the agents of an elastic job meet at one port"):
        local_run._create_loopback_handler(params)
    port = free_port()
    params = RendezvousParameters(backend=LOOPBACK_BACKEND, endpoint=f"127.0.0.1:{port}", run_id="t",
                                  min_nodes=1, max_nodes=2)
    first, second = local_run._create_loopback_handler(params), local_run._create_loopback_handler(params)
    first._store.set("k", b"from the first agent")
    assert second._store.get("k") == b"from the first agent"


def _failure(tmp_path, rank: int, exitcode: int, message: str | None, timestamp: int = 100) -> ProcessFailure:
    path = tmp_path / f"error-{rank}.json"
    if message is not None:  # the form @record writes
        path.write_text(json.dumps({"message": {"message": message,
                                                "extraInfo": {"py_callstack": "Traceback ...",
                                                              "timestamp": str(timestamp)}}}))
    return ProcessFailure(local_rank=rank, pid=1000 + rank, exitcode=exitcode, error_file=str(path))


def test_summary_is_one_line_per_failed_rank_first_failure_first(tmp_path):
    failures = {
        0: _failure(tmp_path, 0, -15, "PartitionFormatError: part-00000/labels.npy: sha256 mismatch\n(corrupt)",
                    timestamp=200),
        1: _failure(tmp_path, 1, 1, "ValueError: bad value", timestamp=100),
        2: _failure(tmp_path, 2, -9, None),
        3: _failure(tmp_path, 3, 3, None),
    }
    failures[2].timestamp = failures[3].timestamp = 300
    assert summarize_failures(failures) == [
        "rank 1 failed: ValueError: bad value",
        "rank 0 failed: PartitionFormatError: part-00000/labels.npy: sha256 mismatch (corrupt)",
        "rank 2 failed: killed by SIGKILL (pid 1002)",
        "rank 3 failed: exit code 3, no error file (pid 1003); the ranks' log lines above say why",
    ]


def test_agent_flags_need_the_separator_and_match_the_cli():
    from gnn_dist_cli import command as cli

    with pytest.raises(SystemExit, match="the '--' before torchrun's arguments is missing"):
        local_run._parse(["--summarize", "--nproc-per-node=2"])
    args, rest = local_run._parse(["--watch-pid", "12", "--summarize", "--", "--nnodes=1", "-m", "x", "--", "y"])
    assert args.watch_pid == 12 and args.summarize and rest == ["--nnodes=1", "-m", "x", "--", "y"]
    assert cli.LOOPBACK_RDZV_BACKEND == LOOPBACK_BACKEND
