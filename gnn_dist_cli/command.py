"""The ``gnn-dist`` command line: the parser of its verbs (``datasets``, ``partition``, ``convert``,
``inspect``, ``train``, ``predict``, ``plan``, ``report``), the verb table, logging and exit codes.

The partitioning verbs are :mod:`partitioners`' (``cli_partition``, ``cli_convert``,
``cli_inspect``); those that start ranks are :mod:`.launch_verbs`'. This module is torch-free:
``partition``/``inspect``/``datasets`` run on machines without torch,
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
from typing import Any, Callable, NoReturn, Sequence

from partitioners import __version__
from partitioners.cli_args import (BALANCE_CRITERIA, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE,
                                   OneLineParser, UsageError, emit_json, unknown_flags_first)
from partitioners.cli_convert import add_convert_verb, cmd_convert
from partitioners.cli_inspect import cmd_inspect
from partitioners.cli_partition import add_partition_verb, cmd_partition
from partitioners.errors import PartitionFormatError
from partitioners.log_format import CliFormatter
from partitioners.process_exit import exit_process

from .launch_verbs import (LOOPBACK_ENV, LOOPBACK_RDZV_BACKEND, add_launch_verbs, cmd_predict, cmd_train,
                           train_command, train_env)
from .plan import add_plan_verb, cmd_plan

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INTERRUPTED", "build_parser", "main",
           # defined in partitioners.cli_args / .launch_verbs, importable from here as before:
           "BALANCE_CRITERIA", "LOOPBACK_ENV", "LOOPBACK_RDZV_BACKEND", "UsageError", "train_command", "train_env"]

log = logging.getLogger("gnn_dist_cli.command")  # not __name__: "__main__" under python -m gnn_dist_cli.command

CLI_LOGGERS = ("partitioners", "gnn_dist_cli")
"""The loggers whose records the command prints: the partitioner library's (its verbs' included)
and this package's (the launcher, the planner's verb, the report)."""

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
    """One stderr handler on each of :data:`CLI_LOGGERS` (the command and the library below it):
    DEBUG with ``verbose``, WARNING with ``quiet``, else INFO.

    The root logger is left alone, so an embedding program (or pytest's caplog) keeps its own
    handlers; calling this again replaces the previous CLI handler instead of adding one.
    """
    for name in CLI_LOGGERS:
        pkg = logging.getLogger(name)
        for h in list(pkg.handlers):
            if getattr(h, _HANDLER_TAG, False):
                pkg.removeHandler(h)
        handler = _StderrHandler()
        handler.setFormatter(CliFormatter("%(message)s"))
        setattr(handler, _HANDLER_TAG, True)
        pkg.addHandler(handler)
        pkg.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)


# ------------------------------------------------------------------------------------ parser
def build_parser() -> argparse.ArgumentParser:
    """The ``gnn-dist`` parser: verbs ``datasets``, ``partition``, ``convert``, ``inspect``, ``train``, ``predict``, ``plan``, ``report``."""
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

    add_partition_verb(sub, verbose)
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


# ---------------------------------------------------------------------------------- datasets
def cmd_datasets(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from partitioners.catalog import list_datasets
    from partitioners.report import labels_text

    infos = list_datasets()
    if args.json:
        emit_json([asdict(d) for d in infos])
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


def console_main() -> NoReturn:
    """The ``gnn-dist`` command (the installed script and ``python -m gnn_dist_cli``): :func:`main`,
    ended without the interpreter's teardown (:func:`~partitioners.process_exit.exit_process`)."""
    exit_process(main())


if __name__ == "__main__":
    console_main()
