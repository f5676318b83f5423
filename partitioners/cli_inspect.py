"""``gnn-dist inspect DIR``: describe and check a partition folder, or list and check the members
of a partition family (``partitioners/format/family.py``). Torch-free."""

from __future__ import annotations

import argparse
import logging

from .cli_args import EXIT_FAILED as _FAILED, EXIT_OK as _OK, emit_json
from .errors import PartitionFormatError

__all__ = ["cmd_inspect"]

log = logging.getLogger("partitioners.cli")


def cmd_inspect(args: argparse.Namespace) -> int:
    from .format import load_partition_meta, verify_partition
    from .format.family import is_family
    from .report import describe_lines

    if is_family(args.dir):
        return _inspect_family(args)
    try:
        meta = load_partition_meta(args.dir)
    except PartitionFormatError as exc:
        if args.json:
            emit_json({"path": args.dir, "ok": False, "verified": args.verify,
                       "problems": [str(exc)], "meta": None})
        log.error(str(exc))
        return _FAILED
    problems = verify_partition(args.dir, check_hashes=True) if args.verify else []
    if args.json:
        emit_json({"path": args.dir, "ok": not problems, "verified": args.verify,
                   "problems": problems, "meta": meta.raw})
    else:
        for line in describe_lines(meta, args.verbose):
            log.info(line)
    if args.verify and not problems:
        log.info(f"verify: OK (sha256 of every file, shapes, id ranges and cross-part consistency "
                 f"of {meta.num_parts} parts)")
    return _report_problems(problems)


def _inspect_family(args: argparse.Namespace) -> int:
    from .cli_family import describe_family, family_lines

    try:
        summary, problems = describe_family(args.dir, args.verify)
    except PartitionFormatError as exc:
        summary, problems = {"path": args.dir, "graph_fingerprint": None, "members": []}, [str(exc)]
        if not args.json:
            log.error(str(exc))
            return _FAILED
    if args.json:
        emit_json({**summary, "ok": not problems, "verified": args.verify, "problems": problems})
    else:
        for line in family_lines(summary):
            log.info(line)
    if args.verify and not problems:
        log.info(f"verify: OK (every member in full, and one graph fingerprint for all "
                 f"{len(summary['members'])} members)")
    return _report_problems(problems)


def _report_problems(problems: list[str]) -> int:
    for problem in problems:
        log.error(problem)
    if problems:
        log.error(f"verify: FAILED with {len(problems)} problem(s); the first: {problems[0]}")
        return _FAILED
    return _OK
