"""Argument types, the parser, the usage error and the exit codes of the ``gnn-dist`` command line
(torch-free)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["BALANCE_CRITERIA", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "UsageError", "balance_list", "emit_json", "int_at_least", "memory_list", "memory_size", "nonneg_int",
           "part_counts", "parts_list", "positive_int", "weight_list", "OneLineParser", "nearest_flags", "parse_unknown_first"]

BALANCE_CRITERIA = ("nodes", "edges", "train")


class UsageError(ValueError):
    """A request the CLI refuses before doing the work (exit code 2)."""


EXIT_OK = 0
"""Success (and ``inspect --verify`` found no problem)."""
EXIT_FAILED = 1
"""The work failed: invalid partition folder, verify problems, OS error, internal error."""
EXIT_USAGE = 2
"""Bad usage or input (argparse uses the same code for its own errors)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT)."""


def balance_list(value: str) -> tuple[str, ...]:
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


def weight_list(value: str) -> tuple[float, ...]:
    """``--part-weights 2,1,1``: positive finite numbers, comma-separated, as given (their count
    is checked against ``--parts`` once both are known; normalising is the library's)."""
    import math

    items = [v.strip() for v in value.split(",")]
    out = []
    for item in items:
        try:
            w = float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r} in {value!r} is not a number; give one positive weight per part, "
                f"comma-separated (e.g. 2,1,1)") from None
        if not math.isfinite(w) or w <= 0:
            raise argparse.ArgumentTypeError(
                f"{item!r} in {value!r} is not a positive number; every part needs a weight > 0 "
                f"(e.g. 2,1,1)")
        out.append(w)
    return tuple(out)


def int_at_least(minimum: int, what: str) -> Callable[[str], int]:
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


positive_int = int_at_least(1, "a positive integer")
nonneg_int = int_at_least(0, "a non-negative integer")


def parts_list(text: str) -> list[int]:
    """``--parts 8`` or ``--parts 2,4,8``: positive part counts, as given."""
    try:
        out = [int(v) for v in text.split(",")]
    except ValueError:
        out = []
    if not out or any(p < 1 for p in out):
        raise argparse.ArgumentTypeError(f"{text!r} is not a part count or a comma-separated list of them "
                                         f"(e.g. 8 or 8,16,32,64)")
    return out


def part_counts(text: str) -> list[int]:
    """``partition --parts``: one count (refused as any positive integer flag is) or a list."""
    return [positive_int(text)] if "," not in text else parts_list(text)


def memory_size(value: str) -> int:
    from .memory import parse_size

    try:
        return parse_size(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def memory_list(value: str) -> tuple[int, ...]:
    """``--device-memory 40G,20G,20G``: one memory size per part, as bytes (the count is checked
    against ``--parts`` once both are known)."""
    from .memory import parse_size_list

    try:
        return parse_size_list(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def emit_json(obj: object) -> None:
    """The one way the CLI writes to stdout: ``obj`` as indented JSON."""
    import json
    import sys

    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
    sys.stdout.flush()


def with_progress_bars(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``run(args)`` with log lines printed above the tqdm bars (none with ``--no-progress``)."""
    if args.no_progress:
        return run(args)
    import logging

    from tqdm.contrib.logging import logging_redirect_tqdm

    with logging_redirect_tqdm(loggers=[logging.getLogger("partitioners")]):
        return run(args)


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr, ``PROG: error: MESSAGE (see
    PROG --help)``, exit code 2 (not argparse's usage block); an unknown flag names the nearest
    real one. Abbreviated flags are refused (``--part`` is not ``--parts``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:  # type: ignore[override]
        if message.startswith("unrecognized arguments: "):
            message += nearest_flags(self, message.removeprefix("unrecognized arguments: ").split())
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def nearest_flags(parser: argparse.ArgumentParser, given: list[str]) -> str:
    """``" (did you mean: --hid -> --hidden?)"`` for the unknown flags among ``given`` that are
    close to one of ``parser``'s (a prefix of one, or a near spelling); "" when none is."""
    import difflib

    flags = [s for action in parser._actions for s in action.option_strings if s.startswith("--")]
    hints = []
    for arg in given:
        name = arg.split("=", 1)[0]
        if name.startswith("--"):
            close = [f for f in flags if f.startswith(name)] or difflib.get_close_matches(name, flags, n=1, cutoff=0.6)
            if close:
                hints.append(f"{name} -> {close[0]}")
    return f" (did you mean: {', '.join(hints)}?)" if hints else ""


def unknown_flags_first(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Report (``parser.error``) an unknown flag of ``argv`` before a missing required argument
    would be (``--model-fle F`` is a typo of ``--model-file``, not a missing ``--model-file``;
    ``--part 2`` one of ``--parts``), through the verbs' parsers too; nothing when every flag is known
    (or ``argv`` asks for the help or the version, which print as they parse)."""
    if {"-h", "--help", "--version"} & set(argv):
        return
    parsers = [parser] + [p for a in parser._actions if isinstance(a, argparse._SubParsersAction)
                          for p in a.choices.values()]
    actions = [a for p in parsers for a in p._actions if a.required]
    groups = [g for p in parsers for g in p._mutually_exclusive_groups if g.required]
    for item in (*actions, *groups):
        item.required = False
    import contextlib
    import io

    try:
        with contextlib.redirect_stderr(io.StringIO()):   # another error: the real parse reports it, once
            _, unknown = parser.parse_known_args(argv)
    except SystemExit:
        unknown = []
    finally:
        for item in (*actions, *groups):
            item.required = True
    if unknown:
        verb = next((p for p in parsers[1:] if p.prog.split()[-1] in argv), parser)
        verb.error(f"unrecognized arguments: {' '.join(unknown)}")


def parse_unknown_first(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args(argv)`` after :func:`unknown_flags_first`."""
    unknown_flags_first(parser, argv)
    return parser.parse_args(argv)

