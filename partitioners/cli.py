"""The ``gnn-dist`` command line: ``datasets``, ``partition``, ``inspect``, ``train``, ``predict`` and ``report``.

This module is torch-free: ``partition``/``inspect``/``datasets`` run on machines without torch,
and ``train`` and ``predict`` hand over to ``torchrun`` in a child process. Everything human-readable goes to
stderr through :mod:`logging` (and tqdm bars); only ``--json`` writes to stdout. The reference
is ``docs/cli.md``.

Exit codes: 0 success; 1 the work failed (a partition folder is invalid, missing or of another
version; ``inspect --verify`` found problems; an OS error while writing; an internal error);
2 bad usage or input (flags, unknown dataset, missing or malformed input file, ``--parts``
larger than the graph, an estimated peak memory above ``--max-memory``, an output folder that
may not be replaced); 130 interrupted;
``train`` returns torchrun's exit code, or 128 + the signal that stopped it (130 SIGINT, 143
SIGTERM: ``partitioners/launch.py``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from . import __version__
from .errors import PartitionFormatError
from .log_format import CliFormatter

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INTERRUPTED", "build_parser", "main"]

log = logging.getLogger("partitioners.cli")  # not __name__: "__main__" under python -m

EXIT_OK = 0
"""Success (and ``inspect --verify`` found no problem)."""
EXIT_FAILED = 1
"""The work failed: invalid partition folder, verify problems, OS error, internal error."""
EXIT_USAGE = 2
"""Bad usage or input (argparse uses the same code for its own errors)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT)."""

BALANCE_CRITERIA = ("nodes", "edges", "train")
_HANDLER_TAG = "_gnn_dist_cli_handler"
"""Attribute marking the handler :func:`_init_logger` added (so a second call replaces it)."""


class UsageError(ValueError):
    """A request the CLI refuses before doing the work (exit code 2)."""


class _StderrHandler(logging.StreamHandler):
    """A StreamHandler on whatever ``sys.stderr`` is at each record (it may be swapped in-process)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


def _init_logger(verbose: bool, quiet: bool = False) -> None:
    """One stderr handler on the ``partitioners`` logger (the CLI and the library below it):
    DEBUG with ``verbose``, WARNING with ``quiet``, else INFO.

    The root logger is left alone, so an embedding program (or pytest's caplog) keeps its own
    handlers; calling this again replaces the previous CLI handler instead of adding one.
    """
    pkg = logging.getLogger("partitioners")
    for h in list(pkg.handlers):
        if getattr(h, _HANDLER_TAG, False):
            pkg.removeHandler(h)
    handler = _StderrHandler()
    handler.setFormatter(CliFormatter("%(message)s"))
    setattr(handler, _HANDLER_TAG, True)
    pkg.addHandler(handler)
    pkg.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)


def _emit_json(obj: object) -> None:
    """The one way this CLI writes to stdout: ``obj`` as indented JSON."""
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
    sys.stdout.flush()


# ------------------------------------------------------------------------------ argument types
def _balance(value: str) -> tuple[str, ...]:
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    if not items:
        raise argparse.ArgumentTypeError(
            f"{value!r} names no criterion; give one or more of {', '.join(BALANCE_CRITERIA)}, "
            f"comma-separated (e.g. nodes,edges)")
    bad = [v for v in items if v not in BALANCE_CRITERIA]
    if bad:
        raise argparse.ArgumentTypeError(
            f"unknown criterion {bad[0]!r} in {value!r}; choose from {', '.join(BALANCE_CRITERIA)}, "
            f"comma-separated (e.g. nodes,edges)")
    return tuple(dict.fromkeys(items))


def _int_at_least(minimum: int, what: str) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value!r}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {n}")
        return n

    parse.__name__ = what  # argparse names the type in some messages
    return parse


_positive_int = _int_at_least(1, "a positive integer")
_nonneg_int = _int_at_least(0, "a non-negative integer")


def _memory_size(value: str) -> int:
    from .memory import parse_size

    try:
        return parse_size(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# ------------------------------------------------------------------------------------ parser
def build_parser() -> argparse.ArgumentParser:
    """The ``gnn-dist`` parser: verbs ``datasets``, ``partition``, ``inspect``, ``train``, ``predict``, ``report``."""
    from .cli_input import add_input_arguments
    from .io import FORMATS
    from .methods import METHODS

    parser = argparse.ArgumentParser(prog="gnn-dist", description="Partition a graph for exact "
                                     "distributed full-graph GNN training, check it, train on it.",
                                     epilog="Reference: docs/cli.md")
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                         help="debug logging (also accepted before the verb); train/predict: also the "
                              "ranks' debug logging and torchrun's full output")
    verbose.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                         help="warnings and errors only (also accepted before the verb); train: the ranks' too, "
                              "and their final line")
    parser.add_argument("-v", "--verbose", action="store_true", default=False, help="debug logging")
    parser.add_argument("-q", "--quiet", action="store_true", default=False, help="warnings and errors only")
    parser.add_argument("--version", action="version", version=f"gnn-dist {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="VERB")

    ds = sub.add_parser("datasets", parents=[verbose], help="list the built-in dataset catalog with sizes")
    ds.add_argument("--json", action="store_true", help="print the catalog as JSON on stdout")

    p = sub.add_parser("partition", parents=[verbose],
                       help="read or generate a graph, partition it, write a partition folder")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", metavar="NAME", help="a built-in dataset (see `gnn-dist datasets`)")
    src.add_argument("--input", metavar="PATH", help="a graph file, or an OGB or Planetoid dataset folder")
    p.add_argument("--input-format", choices=FORMATS, default=None, metavar="FMT",
                   help=f"format of --input, one of {', '.join(FORMATS)} (default: inferred from the path)")
    p.add_argument("--parts", type=_positive_int, required=True, metavar="P", help="number of parts")
    p.add_argument("--method", choices=METHODS, default="metis",
                   help="partitioning method (default: metis)")
    p.add_argument("--refine", action="store_true",
                   help="then move boundary nodes to lower the communication volume, keeping balance")
    p.add_argument("--balance", type=_balance, default=("nodes",), metavar="LIST",
                   help="what to balance: comma-separated of nodes,edges,train (default: nodes)")
    p.add_argument("--symmetrize", action="store_true", help="add the reverse of every edge (--input only)")
    p.add_argument("--remove-self-loops", action="store_true", help="drop self-loop edges (--input only)")
    p.add_argument("--remove-duplicates", action="store_true", help="drop repeated edges (--input only)")
    p.add_argument("--seed", type=_nonneg_int, default=0, help="random seed (default: 0)")
    p.add_argument("--max-memory", type=_memory_size, default=None, metavar="SIZE",
                   help="refuse to start when the estimated peak memory is larger, e.g. 8GB, "
                        "512MiB or bytes (default: the available memory)")
    p.add_argument("--out", required=True, metavar="DIR", help="the partition folder to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing partition folder at --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="print the quality report as JSON on stdout")
    add_input_arguments(p)

    i = sub.add_parser("inspect", parents=[verbose], help="describe and check a partition folder")
    i.add_argument("dir", metavar="DIR", help="partition folder")
    i.add_argument("--verify", action="store_true",
                   help="check sha256 checksums, shapes, id ranges and cross-part consistency")
    i.add_argument("--json", action="store_true", help="print the metadata and problems as JSON on stdout")

    t = sub.add_parser("train", parents=[verbose], allow_abbrev=False,
                       help="train on a partition folder with torchrun on this machine",
                       description="Runs torchrun on this machine (`python -m "
                                   "gnn_dist.distributed.local_run`: torchrun --standalone with "
                                   "every socket on 127.0.0.1) with `--nproc-per-node P -m "
                                   "gnn_dist.train --data DIR ...`; every other argument is passed "
                                   "on to gnn_dist.train. -v shows torchrun's full output.",
                       epilog="Training flags: see docs/cli.md or `python -m gnn_dist.train -h`.")
    t.add_argument("--data", required=True, metavar="DIR", help="partition folder")
    t.add_argument("--nproc", type=_positive_int, default=None, metavar="P",
                   help="processes (ranks) (default: the folder's num_parts)")
    t.add_argument("--max-restarts", type=_nonneg_int, default=0, metavar="N",
                   help="restart the ranks up to N times when one fails (torchrun's elastic restart); with "
                        "--checkpoint-dir and --resume auto they continue from the newest checkpoint (default: 0)")

    pr = sub.add_parser("predict", parents=[verbose], allow_abbrev=False,
                        help="predict every node of a partition folder with a model file, one rank per part",
                        description="Runs torchrun on this machine like `gnn-dist train`, with `--nproc-per-node "
                                    "P -m gnn_dist.predict --data DIR ...` (P: the folder's num_parts); every "
                                    "other argument is passed on to gnn_dist.predict: --model-file FILE "
                                    "--out FILE.npz [--embeddings [--layer K]] [--no-verify] [--backend B] "
                                    "[--timeout S].",
                        epilog="Prediction flags: see docs/cli.md or `python -m gnn_dist.predict -h`.")
    pr.add_argument("--data", required=True, metavar="DIR", help="partition folder (any number of parts)")

    rp = sub.add_parser("report", parents=[verbose],
                        help="an HTML or PNG report of a training run's metrics file (gnn_dist.train --metrics)")
    rp.add_argument("metrics", metavar="METRICS.jsonl", help="the metrics file gnn_dist.train --metrics wrote")
    rp.add_argument("--partition", metavar="DIR", default=None,
                    help="the run's partition folder: adds per-part sizes, quality and the edge count")
    rp.add_argument("--out", required=True, metavar="FILE",
                    help="report.html (self-contained, inline SVG) or report.png (needs matplotlib)")
    return parser


# --------------------------------------------------------------------------------- partition
def _check_request(args: argparse.Namespace) -> None:
    """Checks that need no graph: refuse a bad request before a long read."""
    from .cli_input import check_input_request
    from .format import check_out_dir

    if args.dataset is not None:
        from .catalog import dataset_info

        if args.input_format is not None:
            raise UsageError(f"--input-format {args.input_format} applies to --input only, not to "
                             f"--dataset {args.dataset}")
        info = dataset_info(args.dataset)  # ValueError listing the names
        _check_parts(args.parts, info.num_nodes, f"dataset {info.name}")
        _check_memory(args, info.sizes(), log_estimate=False)  # before generating it
    elif not Path(args.input).exists():
        raise FileNotFoundError(f"--input {args.input}: no such file or directory")
    check_input_request(args)
    check_out_dir(args.out, args.overwrite)


def _check_parts(num_parts: int, num_nodes: int, what: str) -> None:
    if num_parts > num_nodes:
        raise UsageError(f"--parts {num_parts} is more than the {num_nodes} nodes of {what}; "
                         f"use at most {num_nodes} parts")


def _check_memory(args: argparse.Namespace, graph: Any, *, log_estimate: bool = True) -> None:
    """Refuse (MemoryLimitError, exit 2) a run whose estimated peak exceeds ``--max-memory``."""
    from .memory import guard_memory

    guard_memory(graph, args.method, args.parts, refine=args.refine, limit=args.max_memory,
                 what=args.dataset or args.input, log_estimate=log_estimate)


def _load_graph(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """``(graph, extra partition.json keys)``: the dataset, or ``--input`` with its flags."""
    if args.dataset is not None:
        from .catalog import load_dataset

        if args.symmetrize or args.remove_self_loops or args.remove_duplicates:
            log.warning("--symmetrize/--remove-* apply to --input only; built-in datasets are "
                        "already symmetric and clean")
        return load_dataset(args.dataset, seed=args.seed), {}
    from .cli_input import read_input

    return read_input(args)


def _read_stage(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """:func:`_load_graph` under a one-step ``read`` bar (the readers report no finer progress)."""
    from tqdm.auto import tqdm

    with tqdm(total=1, desc="read", disable=args.no_progress, file=sys.stderr,
              bar_format="{l_bar}{bar}| {elapsed}") as bar:
        loaded = _load_graph(args)
        bar.update(1)
    return loaded


def cmd_partition(args: argparse.Namespace) -> int:
    if args.no_progress:
        return _partition(args)
    from tqdm.contrib.logging import logging_redirect_tqdm

    with logging_redirect_tqdm(loggers=[logging.getLogger("partitioners")]):  # log lines above bars
        return _partition(args)


def _partition(args: argparse.Namespace) -> int:
    from .api import partition_graph
    from .cli_input import untrainable_warning
    from .report import report_lines

    _check_request(args)
    t0 = time.perf_counter()
    log.info(f"reading {args.dataset or args.input} ...")
    graph, extra_meta = _read_stage(args)
    read_s = time.perf_counter() - t0
    log.info(f"read {graph!r} in {read_s:.2f}s")
    if graph.preprocessing:
        counts = ", ".join(f"{k} {v}" for k, v in graph.preprocessing.items())
        who = ("the generator's cleaning (every draw stored both ways, self-loops and repeats dropped)"
               if args.dataset else "--symmetrize/--remove-* and the reader")
        log.info(f"preprocessing, by {who}: {counts}")
    if (untrainable := untrainable_warning(graph)) is not None:
        log.warning(untrainable)
    _check_parts(args.parts, graph.num_nodes, args.dataset or args.input)
    _check_memory(args, graph)
    report = partition_graph(graph, args.parts, args.method, args.out, seed=args.seed,
                             refine=args.refine, balance=args.balance, overwrite=args.overwrite,
                             progress=not args.no_progress, read_time_s=read_s, extra_meta=extra_meta)
    for line in report_lines(report):
        log.info(line)
    if report.get("empty_parts"):
        log.warning(f"{report['empty_parts']} of {args.parts} parts are empty: their ranks will "
                    f"hold no nodes and do no work; consider fewer parts or another method")
    log.info(f"wrote {args.out}")
    if args.json:
        report["source"] = args.dataset or args.input
        report["method_params"] = {"balance": list(args.balance), "refine": bool(args.refine)}
        report["split"] = extra_meta.get("split")
        _emit_json(report)
    return EXIT_OK


# ----------------------------------------------------------------------------------- inspect
def cmd_inspect(args: argparse.Namespace) -> int:
    from .format import load_partition_meta, verify_partition
    from .report import describe_lines

    try:
        meta = load_partition_meta(args.dir)
    except PartitionFormatError as exc:
        if args.json:
            _emit_json({"path": args.dir, "ok": False, "verified": args.verify,
                        "problems": [str(exc)], "meta": None})
        log.error(str(exc))
        return EXIT_FAILED
    problems = verify_partition(args.dir, check_hashes=True) if args.verify else []
    if args.json:
        _emit_json({"path": args.dir, "ok": not problems, "verified": args.verify,
                    "problems": problems, "meta": meta.raw})
    else:
        for line in describe_lines(meta, args.verbose):
            log.info(line)
    if args.verify and not problems:
        log.info(f"verify: OK (sha256 of every file, shapes, id ranges and cross-part consistency "
                 f"of {meta.num_parts} parts)")
    for problem in problems:
        log.error(problem)
    if problems:
        log.error(f"verify: FAILED with {len(problems)} problem(s); the first: {problems[0]}")
        return EXIT_FAILED
    return EXIT_OK


# ---------------------------------------------------------------------------------- datasets
def cmd_datasets(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from .catalog import list_datasets

    infos = list_datasets()
    if args.json:
        _emit_json([asdict(d) for d in infos])
        return EXIT_OK
    width = max(len(d.name) for d in infos)
    log.info(f"{'name':<{width}}  {'nodes':>10}  {'~edges':>12}  {'dim':>4}  {'classes':>7}  description")
    for d in infos:
        log.info(f"{d.name:<{width}}  {d.num_nodes:>10,}  {d.num_edges:>12,}  {d.feature_dim:>4}  "
                 f"{d.num_classes:>7}  {d.description}")
    return EXIT_OK


# ------------------------------------------------------------------------------------ report
def cmd_report(args: argparse.Namespace) -> int:
    from .run_report import write_report

    report = write_report(args.metrics, args.out, partition=args.partition)
    for note in report.notes:
        log.warning(note)
    log.info(f"wrote {args.out}")
    return EXIT_OK


# ------------------------------------------------------------------------------------- train
LOOPBACK_RDZV_BACKEND = "gnn-dist-loopback"
"""``gnn_dist.distributed.local_run.LOOPBACK_BACKEND`` (not imported: it would import torch)."""


def train_command(data: str, nproc: int, rest: Sequence[str], *, verbose: bool = False,
                  watch_pid: int | None = None, max_restarts: int = 0, entry: str = "gnn_dist.train") -> list[str]:
    """The agent command ``gnn-dist train`` runs (``rest``: flags for ``gnn_dist.train``);
    ``gnn-dist predict``'s with ``entry="gnn_dist.predict"``.

    torchrun (``gnn_dist.distributed.local_run`` runs it in-process) on one node, as
    ``--standalone`` would, but with every store on 127.0.0.1: the loopback rendezvous backend,
    an ephemeral port, and ``--local-addr`` (the ranks' ``MASTER_ADDR``). ``watch_pid``: the
    agent stops the ranks when that process (``gnn-dist``) is gone. Unless ``verbose`` the agent
    reports a failure as one line per rank (``--summarize``). The agent first checks the
    configuration against the folder (``--validate``: ``gnn_dist.train --validate`` in the agent's
    process; a refusal is one line and exit code 2, before any rank starts).
    """
    agent = [sys.executable, "-m", "gnn_dist.distributed.local_run", "--validate"]
    if watch_pid is not None:
        agent += ["--watch-pid", str(watch_pid)]
    if not verbose:
        agent.append("--summarize")
    return [*agent, "--", "--nnodes=1", f"--nproc-per-node={nproc}", f"--max-restarts={max_restarts}",
            f"--rdzv-backend={LOOPBACK_RDZV_BACKEND}", "--rdzv-endpoint=127.0.0.1:0",
            f"--rdzv-id=gnn-dist-{entry.rsplit('.', 1)[-1]}", "--local-addr=127.0.0.1",
            "-m", entry, "--data", data, *rest]


def cmd_train(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from .format import load_partition_meta

    num_parts = load_partition_meta(args.data).num_parts
    nproc = args.nproc or num_parts
    if nproc != num_parts:
        raise UsageError(f"--nproc {nproc} differs from the {num_parts} parts of {args.data}: "
                         f"gnn_dist.train runs one rank per part; drop --nproc or re-partition "
                         f"with --parts {nproc}")
    return _run_agent(args, rest, nproc, "gnn_dist.train", max_restarts=args.max_restarts)


def cmd_predict(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from .format import load_partition_meta

    return _run_agent(args, rest, load_partition_meta(args.data).num_parts, "gnn_dist.predict")


def _run_agent(args: argparse.Namespace, rest: Sequence[str], nproc: int, entry: str, *,
               max_restarts: int = 0) -> int:
    """Supervise the agent (:func:`train_command`) of rank entry point ``entry`` on ``nproc`` ranks."""
    from .launch import run_torchrun

    env = train_env(os.environ, nproc)
    cmd = train_command(args.data, nproc, rest, verbose=args.verbose, watch_pid=os.getpid(),
                        max_restarts=max_restarts, entry=entry)
    log.debug("running: " + " ".join(cmd))
    return run_torchrun(cmd, env, verbose=args.verbose)


LOOPBACK_ENV = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}
"""Where the ranks' gloo and NCCL sockets listen on Linux unless the user says otherwise."""


def train_env(environ: Mapping[str, str], nproc: int) -> dict[str, str]:
    """The environment of the torchrun child: ``environ`` plus defaults the user did not set.

    ``OMP_NUM_THREADS``: this machine's CPUs / ``nproc``. ``THP_MEM_ALLOC_ENABLE=1``: torch's CPU
    allocator asks for 2 MiB pages for blocks of 2 MiB and more (fewer page faults), and with it
    each rank fixes glibc's malloc thresholds (``gnn_dist/distributed/allocator.py``).
    On Linux, :data:`LOOPBACK_ENV`: the ranks' gloo/NCCL listeners bind the loopback interface
    instead of the address the hostname resolves to (the agent's stores are on 127.0.0.1 too:
    :func:`train_command`); nothing of a one-machine job listens on the network.
    """
    env = dict(environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    env.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    if sys.platform.startswith("linux"):
        for name, value in LOOPBACK_ENV.items():
            env.setdefault(name, value)
    return env


# -------------------------------------------------------------------------------------- main
def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None,
           ) -> tuple[argparse.Namespace | None, list[str], int]:
    """``(args, rest, 0)``, or ``(None, [], code)`` when argparse exited (error or ``--help``)."""
    try:
        args, rest = parser.parse_known_args(argv)
        if rest and args.command not in ("train", "predict"):
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else EXIT_USAGE
        return None, [], code
    return args, rest, EXIT_OK


COMMANDS: dict[str, Callable[..., int]] = {
    "datasets": cmd_datasets, "partition": cmd_partition, "inspect": cmd_inspect, "train": cmd_train,
    "predict": cmd_predict, "report": cmd_report,
}
"""Verb -> its function; those in :data:`_PASSES_ON` also get the flags for the ranks."""
_PASSES_ON = ("train", "predict")


def _rank_log_flags(args: argparse.Namespace) -> list[str]:
    """``-v``/``-q`` of ``gnn-dist`` passed on to the ranks' entry point (``gnn_dist.train``
    knows both; ``gnn_dist.predict`` knows ``-v``)."""
    if args.verbose:
        return ["--verbose"]
    if args.quiet and args.command == "train":
        return ["--quiet"]
    return []


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``gnn-dist`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    args, rest, code = _parse(parser, argv)
    if args is None:
        return code
    if args.verbose and args.quiet:
        log.error("gnn-dist: error: -v/--verbose and -q/--quiet exclude each other")
        return EXIT_USAGE
    _init_logger(args.verbose, args.quiet)
    try:
        if args.command in _PASSES_ON:
            return COMMANDS[args.command](args, [*_rank_log_flags(args), *rest])
        return COMMANDS[args.command](args)
    except PartitionFormatError as exc:  # a bad partition folder (train --data)
        log.error(str(exc))
        return EXIT_FAILED
    except (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError) as exc:
        log.error(str(exc))  # GraphError, UsageError, bad values: the user's input
        return EXIT_USAGE
    except OSError as exc:  # disk full, permissions, ...
        note = (f"; {args.out} was not changed (partition.json is written last)"
                if args.command == "partition" else "")
        log.error(f"{exc}{note}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        log.error("interrupted")
        return EXIT_INTERRUPTED
    except Exception:
        log.exception("internal error (a bug in gnn-dist; please report it with this traceback)")
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
