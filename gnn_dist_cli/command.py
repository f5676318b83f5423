"""The ``gnn-dist`` command line: ``datasets``, ``partition``, ``convert``, ``inspect``, ``train``, ``predict`` and ``report``.

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
SIGTERM: ``gnn_dist_cli/launch.py``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from partitioners import __version__
from partitioners.cli_args import (BALANCE_CRITERIA, OneLineParser, UsageError, balance_list, emit_json, memory_size, nonneg_int,
                       part_counts, unknown_flags_first, with_progress_bars)
from partitioners.cli_convert import add_convert_verb, cmd_convert
from partitioners.cli_inspect import cmd_inspect
from .plan import add_plan_verb, cmd_plan
from .launch_verbs import (LOOPBACK_ENV, LOOPBACK_RDZV_BACKEND, add_launch_verbs, cmd_predict, cmd_train, train_command,
                        train_env)
from partitioners.errors import PartitionFormatError
from partitioners.log_format import CliFormatter

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INTERRUPTED", "build_parser", "main",
           # defined in cli_args / cli_train, importable from here as before:
           "BALANCE_CRITERIA", "LOOPBACK_ENV", "LOOPBACK_RDZV_BACKEND", "UsageError", "train_command", "train_env"]

log = logging.getLogger("partitioners.cli")  # not __name__: "__main__" under python -m

EXIT_OK = 0
"""Success (and ``inspect --verify`` found no problem)."""
EXIT_FAILED = 1
"""The work failed: invalid partition folder, verify problems, OS error, internal error."""
EXIT_USAGE = 2
"""Bad usage or input (argparse uses the same code for its own errors)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT)."""

_HANDLER_TAG = "_gnn_dist_cli_handler"
"""Attribute marking the handler :func:`_init_logger` added (so a second call replaces it)."""


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


_emit_json = emit_json


# ------------------------------------------------------------------------------------ parser
_PARTS_HELP = ("number of parts; several (2,4,8) write a partition family: the graph read once, one folder per P "
               "(DIR/p2, DIR/p4, ...) and DIR/family.json; train picks the member of its world size")


def build_parser() -> argparse.ArgumentParser:
    """The ``gnn-dist`` parser: verbs ``datasets``, ``partition``, ``convert``, ``inspect``, ``train``, ``predict``, ``plan``, ``report``."""
    from partitioners.cli_input import _split_fractions, add_input_arguments
    from partitioners.cli_typed import input_formats
    from partitioners.methods import METHODS
    from partitioners.normalize import NORMALIZATIONS

    parser = OneLineParser(prog="gnn-dist", description="Partition a graph for exact "
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
    src.add_argument("--input", metavar="PATH", help="a graph file, or a dataset folder (OGB, Planetoid, typed: docs/cli.md)")
    p.add_argument("--input-format", choices=input_formats(), default=None, metavar="FMT",
                   help=f"format of --input, one of {', '.join(input_formats())} (default: inferred from the path)")
    p.add_argument("--parts", type=part_counts, required=True, metavar="P[,P...]", help=_PARTS_HELP)
    p.add_argument("--method", choices=METHODS, default="metis",
                   help="partitioning method (default: metis)")
    p.add_argument("--import", dest="imports", action="append", metavar="FILE.py|MODULE",
                   help="import your own components first (a registered partition method or reader; a .py file "
                        "or a module name; repeatable)")
    _add_refine_arguments(p)
    p.add_argument("--balance", type=balance_list, default=("nodes",), metavar="LIST",
                   help="what to balance: comma-separated of nodes,edges,train (default: nodes)")
    p.add_argument("--symmetrize", action="store_true", help="add the reverse of every edge (--input only)")
    p.add_argument("--remove-self-loops", action="store_true", help="drop self-loop edges (--input only)")
    p.add_argument("--remove-duplicates", action="store_true", help="drop repeated edges (--input only)")
    p.add_argument("--seed", type=nonneg_int, default=0, help="random seed (default: 0)")
    p.add_argument("--edge-split", type=_split_fractions, default=None, metavar="TRAIN,VAL,TEST",
                   help="link prediction: split the unique edge pairs {u, v} (a typed graph's triples per relation: "
                        "--target-relation) by these fractions (e.g. 0.85,0.05,0.1), seeded with --seed; the val/test "
                        "pairs are removed from the graph (both directions) and every part stores its link_*.npy")
    p.add_argument("--normalize-features", choices=NORMALIZATIONS, default=None,
                   help="normalise the node features before they are written: row (each row divided by its "
                        "sum, as PyG's NormalizeFeatures: the Planetoid papers' features) or standard (each "
                        "column to zero mean and unit variance); recorded in partition.json")
    p.add_argument("--max-memory", type=memory_size, default=None, metavar="SIZE",
                   help="refuse to start when the estimated peak memory is larger, e.g. 8GB, "
                        "512MiB or bytes (default: the available memory)")
    p.add_argument("--out", required=True, metavar="DIR", help="the partition folder to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing partition folder at --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="print the quality report as JSON on stdout")
    add_input_arguments(p)
    add_convert_verb(sub, verbose)

    i = sub.add_parser("inspect", parents=[verbose], help="describe and check a partition folder (or family)")
    i.add_argument("dir", metavar="DIR", help="partition folder, or a partition family (lists its members)")
    i.add_argument("--verify", action="store_true",
                   help="check sha256 checksums, shapes, id ranges and cross-part consistency")
    i.add_argument("--json", action="store_true", help="print the metadata and problems as JSON on stdout")
    add_launch_verbs(sub, verbose)
    add_plan_verb(sub, verbose)

    rp = sub.add_parser("report", parents=[verbose],
                        help="an HTML or PNG report of a training run's metrics file (gnn_dist.train --metrics)")
    rp.add_argument("metrics", metavar="METRICS.jsonl", help="the metrics file gnn_dist.train --metrics wrote")
    rp.add_argument("--partition", metavar="DIR", default=None,
                    help="the run's partition folder: adds per-part sizes, quality and the edge count")
    rp.add_argument("--out", required=True, metavar="FILE",
                    help="report.html (self-contained, inline SVG) or report.png (needs matplotlib)")
    return parser


def _add_refine_arguments(p: argparse.ArgumentParser) -> None:
    """``partition``'s ``--refine``, ``--refine-objective``, ``--part-weights`` and ``--device-memory``."""
    from partitioners.cli_weights import add_weight_arguments
    from partitioners.methods import refiner_names

    p.add_argument("--refine", action="store_true",
                   help="then move boundary nodes to lower the communication volume, keeping balance")
    p.add_argument("--refine-objective", choices=refiner_names(), default="volume", metavar="OBJ",
                   help="what --refine lowers: volume (the total halo rows, default) or max-volume (the "
                        "busiest part's halo send/receive volume per layer, which sets a synchronous exchange's time)")
    add_weight_arguments(p)


# --------------------------------------------------------------------------------- partition
def _check_request(args: argparse.Namespace) -> None:
    """Checks that need no graph: refuse a bad request before a long read."""
    from partitioners.cli_family import check_family_out, split_parts
    from partitioners.cli_input import check_input_request, input_format
    from partitioners.cli_weights import resolve_part_weights
    from partitioners.format import check_out_dir

    resolve_part_weights(args, args.parts)   # --parts as given: a family refuses them
    split_parts(args)
    if args.dataset is not None:
        from partitioners.catalog import dataset_info

        if args.input_format is not None:
            raise UsageError(f"--input-format {args.input_format} applies to --input only, not to "
                             f"--dataset {args.dataset}")
        info = dataset_info(args.dataset)  # ValueError listing the names
        _check_parts(args.parts, info.num_nodes, f"dataset {info.name}")
        _check_memory(args, info.sizes(), log_estimate=False)  # before generating it
    elif not Path(args.input).exists():
        raise FileNotFoundError(f"--input {args.input}: no such file or directory")
    check_input_request(args)
    _check_refine_flags(args)
    (check_out_dir if args.family is None else check_family_out)(args.out, args.overwrite)
    if args.input is not None and input_format(args) == "npy-dir":  # sized from its headers
        from partitioners.outofcore.npy_dir import open_npy_dir

        if args.edge_split is not None:
            raise UsageError("--edge-split needs the graph in memory and does not apply to --input-format "
                             "npy-dir (read out of core): give the edges as another --input format")
        args.npy_dir = open_npy_dir(args.input)
        size = args.npy_dir.sizes(args.npy_dir.num_nodes(), symmetric=args.symmetrize)
        _check_parts(args.parts, size.num_nodes, args.input)
        _check_memory(args, size)  # before the on-disk build


def _check_refine_flags(args: argparse.Namespace) -> None:
    """``--refine-objective`` needs ``--refine``."""
    if args.refine_objective != "volume" and not args.refine:
        raise UsageError(f"--refine-objective {args.refine_objective} applies to --refine; add --refine")


def _check_parts(num_parts: int, num_nodes: int, what: str) -> None:
    if num_parts > num_nodes:
        raise UsageError(f"--parts {num_parts} is more than the {num_nodes} nodes of {what}; "
                         f"use at most {num_nodes} parts")


def _check_memory(args: argparse.Namespace, graph: Any, *, log_estimate: bool = True) -> None:
    """Refuse (MemoryLimitError, exit 2) a run whose estimated peak exceeds ``--max-memory``."""
    from partitioners.memory import guard_memory

    guard_memory(graph, args.method, args.parts, refine=args.refine, limit=args.max_memory,
                 what=args.dataset or args.input, log_estimate=log_estimate)


def _load_graph(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """``(graph, extra partition.json keys)``: the dataset, or ``--input`` with its flags; then
    ``--edge-split``, then ``--normalize-features``."""
    from partitioners.hetero.graph import HeteroGraph

    graph, extra = _read_graph(args)
    if args.edge_split is not None and isinstance(graph, HeteroGraph):   # typed: per relation
        from partitioners.cli_typed import typed_edge_split

        graph = typed_edge_split(graph, args)
    elif args.edge_split is not None:
        from partitioners.io.edge_split import with_edge_split

        graph, extra["edge_split"] = with_edge_split(graph, args.edge_split, args.seed)
    if args.normalize_features is not None:
        from partitioners.cli_input import normalize_node_features

        extra["normalize_features"] = normalize_node_features(args, graph)
    return graph, extra


def _read_graph(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    if args.dataset is not None:
        from partitioners.catalog import load_dataset

        if args.symmetrize or args.remove_self_loops or args.remove_duplicates:
            log.warning("--symmetrize/--remove-* apply to --input only; built-in datasets are "
                        "already symmetric and clean")
        from partitioners.cli_typed import typed_dataset

        return typed_dataset(load_dataset(args.dataset, seed=args.seed), args), {}
    from partitioners.cli_input import read_input

    return read_input(args)


def _read_stage(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """:func:`_load_graph` under a one-step ``read`` bar (the readers report no finer progress;
    the out-of-core reader shows its own bars)."""
    from tqdm.auto import tqdm

    if getattr(args, "npy_dir", None) is not None:
        return _load_graph(args)
    with tqdm(total=1, desc="read", disable=args.no_progress, file=sys.stderr,
              bar_format="{l_bar}{bar}| {elapsed}") as bar:
        loaded = _load_graph(args)
        bar.update(1)
    return loaded


def cmd_partition(args: argparse.Namespace) -> int:
    return with_progress_bars(_partition, args)


def _partition(args: argparse.Namespace) -> int:
    from partitioners.cli_input import untrainable_warning

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
    _check_memory(args, graph, log_estimate=getattr(args, "npy_dir", None) is None)
    if args.family is not None:
        from partitioners.cli_family import write_family

        reports = write_family(args, lambda out: _cut(args, graph, out, read_s, extra_meta))
        if args.json:
            _emit_json({"family": args.out, "source": args.dataset or args.input, "split": extra_meta.get("split"),
                        "members": {str(p): r for p, r in reports.items()}})
        return EXIT_OK
    report = _cut(args, graph, args.out, read_s, extra_meta)
    if args.json:
        report["source"] = args.dataset or args.input
        report["split"] = extra_meta.get("split")
        _emit_json(report)
    return EXIT_OK


def _cut(args: argparse.Namespace, graph: Any, out: Any, read_s: float, extra_meta: dict[str, Any]) -> dict[str, Any]:
    """Cut ``graph`` into ``args.parts`` parts, write the folder ``out``, log its report; the report."""
    from partitioners.api import partition_graph
    from partitioners.report import report_lines

    report = partition_graph(graph, args.parts, args.method, out, seed=args.seed,
                             refine=args.refine, balance=args.balance, overwrite=args.overwrite,
                             progress=not args.no_progress, read_time_s=read_s, extra_meta=extra_meta,
                             part_weights=args.part_weights, refine_objective=args.refine_objective)
    for line in report_lines(report):
        log.info(line)
    if report.get("empty_parts"):
        log.warning(f"{report['empty_parts']} of {args.parts} parts are empty: their ranks will "
                    f"hold no nodes and do no work; consider fewer parts or another method")
    log.info(f"wrote {out}")
    return report


# ---------------------------------------------------------------------------------- datasets
def cmd_datasets(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from partitioners.catalog import list_datasets
    from partitioners.report import labels_text

    infos = list_datasets()
    if args.json:
        _emit_json([asdict(d) for d in infos])
        return EXIT_OK
    width = max(len(d.name) for d in infos)
    labels = [labels_text(d.num_classes, d.label_kind) for d in infos]
    lw = max(len("labels"), *map(len, labels))
    log.info(f"{'name':<{width}}  {'nodes':>10}  {'~edges':>12}  {'dim':>4}  {'labels':>{lw}}  description")
    for d, text in zip(infos, labels):
        log.info(f"{d.name:<{width}}  {d.num_nodes:>10,}  {d.num_edges:>12,}  {d.feature_dim:>4}  "
                 f"{text:>{lw}}  {d.description}")
    return EXIT_OK


# ------------------------------------------------------------------------------------ report
def cmd_report(args: argparse.Namespace) -> int:
    from .run_report import write_report

    report = write_report(args.metrics, args.out, partition=args.partition)
    for note in report.notes:
        log.warning(note)
    log.info(f"wrote {args.out}")
    return EXIT_OK


# -------------------------------------------------------------------------------------- main
def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None,
           ) -> tuple[argparse.Namespace | None, list[str], int]:
    """``(args, rest, 0)``, or ``(None, [], code)`` when argparse exited (error or ``--help``)."""
    try:
        if not set(argv or ()) & _PASS_THROUGH:   # train/predict/plan: the rest is the ranks' own flags
            unknown_flags_first(parser, list(argv or ()))
        args, rest = parser.parse_known_args(argv)
        if rest and args.command not in _TAKES_REST:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else EXIT_USAGE
        return None, [], code
    return args, rest, EXIT_OK


COMMANDS: dict[str, Callable[..., int]] = {
    "datasets": cmd_datasets, "partition": cmd_partition, "convert": cmd_convert, "inspect": cmd_inspect,
    "train": cmd_train, "predict": cmd_predict, "report": cmd_report, "plan": cmd_plan,
}
"""Verb -> its function; those in :data:`_PASSES_ON` also get the flags for the ranks, ``plan``
the training flags it reads."""
_PASSES_ON = ("train", "predict")
_TAKES_REST = ("train", "predict", "plan")
_PASS_THROUGH = set(_TAKES_REST)


def _rank_log_flags(args: argparse.Namespace) -> list[str]:
    """``-v``/``-q`` of ``gnn-dist`` passed on to the ranks' entry point (``gnn_dist.train``
    knows both; ``gnn_dist.predict`` knows ``-v``)."""
    if args.verbose:
        return ["--verbose"]
    if args.quiet and args.command == "train":
        return ["--quiet"]
    return []


def _import_for_partition(argv: list[str]) -> int:
    """``partition --import FILE.py``: the user's registered methods and readers, imported before
    the parser reads the registries (``train``/``predict`` pass ``--import`` on to the ranks,
    which import it themselves; this process stays torch-free). 0, or the exit code of a refusal."""
    verbs = [a for a in argv if not a.startswith("-")]
    if not verbs or verbs[0] != "partition":
        return 0
    from partitioners.user_code import UserCodeError, import_user_code

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--import", dest="imports", action="append", default=[])
    try:
        import_user_code(pre.parse_known_args(argv)[0].imports)
    except UserCodeError as exc:
        _init_logger(False, False)
        log.error(f"gnn-dist partition: error: {exc}")
        return EXIT_USAGE
    return 0


def _stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``gnn-dist`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    code = _import_for_partition(argv)
    if code:
        return code
    parser = build_parser()
    args, rest, code = _parse(parser, argv)
    if args is None:
        return code
    if args.verbose and args.quiet:
        log.error("gnn-dist: error: -v/--verbose and -q/--quiet exclude each other")
        return EXIT_USAGE
    _init_logger(args.verbose, args.quiet)
    if getattr(args, "no_progress", True) is False and not _stderr_is_terminal():
        args.no_progress = True   # progress bars on a terminal only: a log file gets no carriage-return frames
    try:
        if args.command in _PASSES_ON:
            return COMMANDS[args.command](args, [*_rank_log_flags(args), *rest])
        if args.command in _TAKES_REST:
            return COMMANDS[args.command](args, rest)
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
