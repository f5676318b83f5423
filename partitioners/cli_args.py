"""Argument types and the usage error of the ``gnn-dist`` command line (torch-free)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["BALANCE_CRITERIA", "UsageError", "balance_list", "int_at_least", "memory_size", "nonneg_int",
           "positive_int"]

BALANCE_CRITERIA = ("nodes", "edges", "train")


class UsageError(ValueError):
    """A request the CLI refuses before doing the work (exit code 2)."""


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


def memory_size(value: str) -> int:
    from .memory import parse_size

    try:
        return parse_size(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def with_progress_bars(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``run(args)`` with log lines printed above the tqdm bars (none with ``--no-progress``)."""
    if args.no_progress:
        return run(args)
    import logging

    from tqdm.contrib.logging import logging_redirect_tqdm

    with logging_redirect_tqdm(loggers=[logging.getLogger("partitioners")]):
        return run(args)
