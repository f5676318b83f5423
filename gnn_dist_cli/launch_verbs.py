"""The ``gnn-dist`` verbs that launch ranks, ``train`` and ``predict``: their parsers and the
agent command (torchrun on this machine, every socket on 127.0.0.1). Torch-free: the agent is
a child process (``gnn_dist_cli/launch.py`` supervises it)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from partitioners.cli_args import UsageError, nonneg_int, positive_int

from .elastic import add_elastic_arguments, elastic_rendezvous, rendezvous_is_loopback

__all__ = ["LOOPBACK_ENV", "LOOPBACK_RDZV_BACKEND", "add_launch_verbs", "cmd_predict", "cmd_train", "train_command",
           "train_env"]

log = logging.getLogger(__name__)


def add_launch_verbs(sub: argparse._SubParsersAction, verbose: argparse.ArgumentParser) -> None:
    """Add the ``train`` and ``predict`` parsers to ``sub`` (``verbose``: the shared -v/-q parent)."""
    t = sub.add_parser("train", parents=[verbose], allow_abbrev=False, add_help=False,
                       help="train on a partition folder with torchrun on this machine",
                       description="Runs torchrun on this machine (`python -m "
                                   "gnn_dist.distributed.local_run`: torchrun --standalone with "
                                   "every socket on 127.0.0.1) with `--nproc-per-node P -m "
                                   "gnn_dist.train --data DIR ...`; every other argument is passed "
                                   "on to gnn_dist.train. DIR may be a partition family (its member of the "
                                   "world size runs); --nnodes MIN:MAX makes an elastic job. -v shows "
                                   "torchrun's full output.",
                       epilog="The training flags (gnn_dist.train's) follow.")
    t.add_argument("-h", "--help", action=_TrainHelp, help="show this help, with every training flag, and exit")
    t.add_argument("--data", metavar="DIR", help="partition folder or partition family (or data.data in --config)")
    t.add_argument("--nproc", "--nproc-per-node", type=positive_int, default=None, metavar="P",
                   help="processes (ranks) (default: the folder's num_parts; a family: its largest member that "
                        "fits this machine's CPUs); with --nnodes: the ranks of each node")
    t.add_argument("--max-restarts", type=nonneg_int, default=0, metavar="N",
                   help="restart the ranks up to N times when one fails (torchrun's elastic restart); with "
                        "--checkpoint-dir and --resume auto they continue from the newest checkpoint (default: 0)")
    add_elastic_arguments(t)

    pr = sub.add_parser("predict", parents=[verbose], allow_abbrev=False,
                        help="predict every node of a partition folder with a model file (a link model: its "
                             "embeddings, or the scores of --pairs), one rank per part",
                        description="Runs torchrun on this machine like `gnn-dist train`, with `--nproc-per-node "
                                    "P -m gnn_dist.predict --data DIR ...` (P: the folder's num_parts); every "
                                    "other argument is passed on to gnn_dist.predict: --model-file FILE "
                                    "--out FILE.npz [--embeddings [--layer K] | --pairs PAIRS] [--no-verify] "
                                    "[--backend B] [--timeout S] [--config FILE.toml: these flags' values, "
                                    "--data's too].",
                        epilog="Prediction flags: see docs/cli.md or `python -m gnn_dist.predict -h`.")
    pr.add_argument("--data", metavar="DIR",
                    help="partition folder (any number of parts), or partition family (or data in --config)")
    pr.add_argument("--nproc", type=positive_int, default=None, metavar="P",
                    help="ranks (default: the folder's num_parts; a family: its largest member that fits this "
                         "machine's CPUs, or --nproc P picks the P member)")


class _TrainHelp(argparse.Action):
    """``gnn-dist train -h``: the launcher's flags, then every flag of ``gnn_dist.train`` (grouped
    by section), which the launcher passes on (imports ``gnn_dist``, for the help only)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        parser.print_help()
        try:
            from gnn_dist.config_cli import build_parser as train_parser

            text = train_parser().format_help()
        except ImportError as exc:   # gnn_dist without torch: the launcher's help still shows
            print(f"\n(the training flags need gnn_dist: {exc})")
        else:
            print("\n" + text[text.index("\n\n") + 2:] if "\n\n" in text else text)
        parser.exit()


LOOPBACK_RDZV_BACKEND = "gnn-dist-loopback"
"""``gnn_dist.distributed.local_run.LOOPBACK_BACKEND`` (not imported: it would import torch)."""
NETWORK_RDZV_BACKEND = "gnn-dist-c10d"
"""``gnn_dist.distributed.local_run.NETWORK_BACKEND``: torchrun's c10d, every round's store published."""


def train_command(data: str, nproc: int, rest: Sequence[str], *, verbose: bool = False,
                  watch_pid: int | None = None, max_restarts: int = 0, entry: str = "gnn_dist.train",
                  rendezvous: Sequence[str] | None = None) -> list[str]:
    """The agent command ``gnn-dist train`` runs (``rest``: flags for ``gnn_dist.train``);
    ``gnn-dist predict``'s with ``entry="gnn_dist.predict"``.

    torchrun (``gnn_dist.distributed.local_run`` runs it in-process) on one node, as
    ``--standalone`` would, but with every store on 127.0.0.1: the loopback rendezvous backend,
    an ephemeral port, and ``--local-addr`` (the ranks' ``MASTER_ADDR``). ``watch_pid``: the
    agent stops the ranks when that process (``gnn-dist``) is gone. Unless ``verbose`` the agent
    reports a failure as one line per rank (``--summarize``). The agent first checks the
    configuration against the folder (``--validate``: ``gnn_dist.train --validate`` in the agent's
    process; a refusal is one line and exit code 2, before any rank starts). ``rendezvous``:
    an elastic job's rendezvous arguments instead (``gnn_dist_cli/elastic.py``), ``nproc``
    then the ranks of each node.
    """
    agent = [sys.executable, "-m", "gnn_dist.distributed.local_run", "--validate"]
    if watch_pid is not None:
        agent += ["--watch-pid", str(watch_pid)]
    if not verbose:
        agent.append("--summarize")
    if rendezvous is None:
        rendezvous = ["--nnodes=1", f"--rdzv-backend={LOOPBACK_RDZV_BACKEND}", "--rdzv-endpoint=127.0.0.1:0",
                      f"--rdzv-id=gnn-dist-{entry.rsplit('.', 1)[-1]}", "--local-addr=127.0.0.1"]
    return [*agent, "--", rendezvous[0], f"--nproc-per-node={nproc}", f"--max-restarts={max_restarts}",
            *rendezvous[1:], "-m", entry, "--data", data, *rest]


def cmd_train(args: argparse.Namespace, rest: Sequence[str]) -> int:
    with _readable_config(rest) as readable:
        return _train(args, readable)


def _train(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from .world import elastic_world_sizes, one_node_nproc

    _data_from_config(args, rest, "train", "data", "data")
    stages = _stages(rest)   # --parallel layer/hybrid: S stages x the folder's parts
    cuts = _repartitions(rest)   # --repartition-on-resize: a world size without a partition gets one cut
    rendezvous = elastic_rendezvous(args)
    if rendezvous is not None:
        elastic_world_sizes(args.data, args.nnodes, args.nproc, stages, repartition=cuts)
        return _run_agent(args, rest, args.nproc, "gnn_dist.train", max_restarts=args.max_restarts,
                          rendezvous=rendezvous)
    nproc = one_node_nproc(args.data, args.nproc, stages, repartition=cuts)
    return _run_agent(args, rest, nproc, "gnn_dist.train", max_restarts=args.max_restarts)


def _stages(rest: Sequence[str]) -> int:
    """The pipeline stages ``rest`` asks for (``--parallel layer|hybrid --stages S``, flags over
    a ``--config`` file's ``[trainer.parallel]`` table), else 1; a malformed value or file is left
    to gnn_dist.train's own parser, which reports it."""
    from_file = _config_table(_flag_value(rest, "--config"), "trainer", "parallel")
    mode = _flag_value(rest, "--parallel") or from_file.get("parallel")
    stages = _flag_value(rest, "--stages") or str(from_file.get("stages", ""))
    if mode not in ("layer", "hybrid") or not stages.isdigit() or int(stages) < 1:
        return 1
    return int(stages)


def _repartitions(rest: Sequence[str]) -> bool:
    """Whether ``rest`` asks for ``--repartition-on-resize`` (the flag, with or without its method,
    or ``repartition_on_resize`` in the ``--config`` file's ``[data]`` table)."""
    flag = "--repartition-on-resize"
    given = any(arg == flag or arg.startswith(flag + "=") for arg in rest)
    return given or _config_table(_flag_value(rest, "--config"), "data").get("repartition_on_resize") is not None


def _flag_value(rest: Sequence[str], flag: str) -> str | None:
    """The value of ``flag`` in ``rest`` (``--flag V`` or ``--flag=V``; the last one), or None."""
    found = None
    for i, arg in enumerate(rest):
        if arg == flag and i + 1 < len(rest):
            found = rest[i + 1]
        elif arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
    return found


def _config_table(path: str | None, *keys: str) -> dict[str, Any]:
    """The table at ``keys`` of a ``--config`` TOML file ({} without one, or when it cannot be
    read: gnn_dist.train then names the problem)."""
    if path is None:
        return {}
    import tomllib

    try:
        table: Any = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return {}
    for key in keys:
        table = table.get(key, {}) if isinstance(table, dict) else {}
    return table if isinstance(table, dict) else {}


def _data_from_config(args: argparse.Namespace, rest: Sequence[str], verb: str, *keys: str) -> None:
    """``args.data``: ``--data``, else the value at ``keys`` of the ``--config`` file in ``rest``
    (a usage error without either)."""
    if not args.data:
        *tables, key = keys
        args.data = _config_table(_flag_value(rest, "--config"), *tables).get(key)
    if not isinstance(args.data, str) or not args.data:
        raise UsageError(f"gnn-dist {verb}: --data is required (the partition folder; or {'.'.join(keys)} in --config)")


def cmd_predict(args: argparse.Namespace, rest: Sequence[str]) -> int:
    with _readable_config(rest) as readable:
        return _predict(args, readable)


def _predict(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from .world import one_node_nproc

    _data_from_config(args, rest, "predict", "data")
    return _run_agent(args, rest, one_node_nproc(args.data, args.nproc, 1), "gnn_dist.predict")


def _run_agent(args: argparse.Namespace, rest: Sequence[str], nproc: int, entry: str, *,
               max_restarts: int = 0, rendezvous: Sequence[str] | None = None) -> int:
    """Supervise the agent (:func:`train_command`) of rank entry point ``entry`` on ``nproc`` ranks."""
    from .launch import run_torchrun

    env = train_env(os.environ, nproc, loopback=rendezvous_is_loopback(rendezvous))
    cmd = train_command(args.data, nproc, rest, verbose=args.verbose, watch_pid=os.getpid(),
                        max_restarts=max_restarts, entry=entry, rendezvous=rendezvous)
    log.debug("running: " + " ".join(cmd))
    return run_torchrun(cmd, env, verbose=args.verbose)


_CONFIG_COPY = "config.toml"
MAX_CONFIG_BYTES = 1 << 20
"""gnn_dist.config_cli.MAX_CONFIG_BYTES (not imported: it would import gnn_dist)."""


@contextlib.contextmanager
def _readable_config(rest: Sequence[str]) -> Iterator[list[str]]:
    """``rest``, with a ``--config`` that is not a regular file (``--config <(...)``: a pipe that
    only this process can read, once) copied into a temporary folder for the launcher, the
    pre-launch check and every rank, removed when the job ends."""
    with tempfile.TemporaryDirectory(prefix="gnn-dist-config-") as scratch:
        yield _config_as_file(rest, Path(scratch))


def _config_as_file(rest: Sequence[str], scratch: Path) -> list[str]:
    """``rest`` with a non-regular ``--config`` read once, bounded, into ``scratch`` and named by
    that copy instead."""
    path = _flag_value(rest, "--config")
    if path is None or Path(path).is_file() or not Path(path).exists():
        return list(rest)   # a file every process can read; a missing one gnn_dist.train names
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"--config {path}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise UsageError(f"--config {path}: larger than {MAX_CONFIG_BYTES >> 20} MiB; a run's configuration is a "
                         f"few KiB of TOML")
    copy = scratch / _CONFIG_COPY
    copy.write_bytes(data)
    out, skip = [], False
    for arg in rest:
        if skip:
            out.append(str(copy))
            skip = False
        elif arg == "--config":
            out.append(arg)
            skip = True
        elif arg.startswith("--config="):
            out.append(f"--config={copy}")
        else:
            out.append(arg)
    return out


LOOPBACK_ENV = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}
"""Where the ranks' gloo and NCCL sockets listen on Linux unless the user says otherwise."""


def train_env(environ: Mapping[str, str], nproc: int, *, loopback: bool = True) -> dict[str, str]:
    """The environment of the torchrun child: ``environ`` plus defaults the user did not set.

    The thread variables of ``gnn_dist.rank_threads.thread_defaults`` (``OMP_NUM_THREADS`` and
    ``NUMBA_NUM_THREADS``: the CPUs this process may use (affinity, cgroup quota) / ``nproc``;
    ``OMP_WAIT_POLICY=PASSIVE``, ``KMP_BLOCKTIME=0``: idle pool threads sleep instead of spinning
    on a CPU another rank could use). ``THP_MEM_ALLOC_ENABLE=1``: torch's CPU
    allocator asks for 2 MiB pages for blocks of 2 MiB and more (fewer page faults), and with it
    each rank fixes glibc's malloc thresholds (``gnn_dist/distributed/allocator.py``).
    On Linux, :data:`LOOPBACK_ENV`: the ranks' gloo/NCCL listeners bind the loopback interface
    instead of the address the hostname resolves to (the agent's stores are on 127.0.0.1 too:
    :func:`train_command`); nothing of a one-machine job listens on the network. Not with
    ``loopback=False`` (an elastic job across machines).
    """
    from gnn_dist.environ import thread_settings   # torch-free
    from gnn_dist.rank_threads import thread_defaults

    env = dict(environ)
    env.update(thread_defaults(nproc, thread_settings(environ)))
    env.setdefault("THP_MEM_ALLOC_ENABLE", "1")   # gnn_dist.environ.RANK_DEFAULTS: a rank sets it too
    if loopback and sys.platform.startswith("linux"):
        for name, value in LOOPBACK_ENV.items():
            env.setdefault(name, value)
    return env
