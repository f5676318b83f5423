"""``gnn_dist.predict``'s command line: its parser, ``--config FILE.toml`` and the checks of its
flags (``gnn-dist predict`` passes them on to every rank and to the pre-launch ``--validate``).

A ``--config`` file holds the flags' values at its top level, under the flags' names with
underscores (``model_file``, not ``model-file``; ``verify = false`` is ``--no-verify``), and an
``import = [...]`` list of the user's components, as ``gnn_dist.train``'s does::

    data = "parts/"            # required, here or as --data
    model_file = "model.pt"    # required, here or as --model-file
    out = "preds.npz"          # required, here or as --out
    embeddings = true
    layer = 1

Flags override the file. A key that is no flag, or a value of the wrong type or out of the
flag's choices, is one line naming the file, the key, the value and the fix (exit code 2).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["PROG", "UsageError", "build_parser", "parse_args"]

PROG = "gnn_dist.predict"

_PAIRS_WITH_EMBEDDINGS = ("--embeddings applies without --pairs: --pairs writes pair scores; run predict without "
                          "--pairs for a link model's node embeddings")
_REQUIRED = ("data", "model_file", "out")
"""The flags a prediction needs, given on the command line or in ``--config``."""
_NOT_IN_FILE = ("config", "validate", "help")
"""Flags a ``--config`` file does not set (``import`` is its own list)."""


class UsageError(ValueError):
    """A bad command line: the message is the one line to print (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # type: ignore[override]
        from partitioners.cli_args import nearest_flags

        if message.startswith("unrecognized arguments: "):
            message += nearest_flags(self, message.removeprefix("unrecognized arguments: ").split())
        raise UsageError(f"{self.prog}: error: {message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    """The ``gnn_dist.predict`` parser."""
    p = _Parser(prog=PROG, description="Exact full-graph inference with a model file (gnn_dist.train --save-model).")
    p.add_argument("--config", metavar="FILE.toml",
                   help="read the flags from a TOML file (keys: the flags' names with underscores, e.g. data, "
                        "model_file, out; import = [...]); flags override it")
    p.add_argument("--data", metavar="DIR", help="partition folder (any number of parts); required, or data in --config")
    p.add_argument("--model-file", metavar="FILE",
                   help="the model file gnn_dist.train --save-model wrote; required, or model_file in --config")
    p.add_argument("--out", metavar="FILE.npz",
                   help="where rank 0 writes node_ids, probabilities (not for regression), predicted (and embeddings); "
                        "a link model: node_ids and embeddings, or with --pairs src, dst, scores and probabilities; "
                        "its folder must exist; required, or out in --config")
    p.add_argument("--embeddings", action="store_true",
                   help="also write the output of a layer (default: the last hidden layer; a link model: its "
                        "output) as embeddings")
    p.add_argument("--layer", type=int, metavar="K", default=None,
                   help="with --embeddings: the layer whose output is written, 0-based (the last is the output layer)")
    p.add_argument("--pairs", metavar="PAIRS", default=None,
                   help="a link model: score these pairs of original node ids, a text file of two columns (.gz: "
                        "gzipped) or an integer .npy of shape [E, 2] or [2, E]")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="skip the sha256 check of the part files when loading")
    p.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                   help="process-group backend (default: nccl on GPU, gloo on CPU; gloo computes on CPU)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                   help="collective timeout in seconds: a dead or stuck peer ends the job after it (default: 300)")
    p.add_argument("--import", dest="imports", action="append", metavar="FILE.py|MODULE",
                   help="import your own components first (the model file's registered model; repeatable)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging, and a traceback with every error")
    p.add_argument("--validate", action="store_true",
                   help="check the model file against the folder's metadata and --out in this process, then exit "
                        "(0, or 2 with the error)")
    return p


def _file_value(action: argparse.Action, value: Any, where: str) -> Any:
    """``value`` of a ``--config`` key checked against its flag ``action``: a bool for a switch, a
    number for a numeric flag, a string otherwise (one of the choices, where it has them)."""
    flag = action.option_strings[-1] if action.dest != "verify" else "--no-verify"
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if not isinstance(value, bool):
            raise UsageError(f"{where} = {value!r}: expected true or false (the flag {flag})")
        return value
    if action.type in (int, float):
        if isinstance(value, bool) or not isinstance(value, int if action.type is int else (int, float)):
            raise UsageError(f"{where} = {value!r}: expected {'an integer' if action.type is int else 'a number'} "
                             f"(the flag {flag} {action.metavar})")
        return action.type(value)
    if not isinstance(value, str) or not value:
        raise UsageError(f"{where} = {value!r}: expected a string (the flag {flag} {action.metavar or ''})".rstrip())
    if action.choices is not None and value not in action.choices:
        raise UsageError(f"{where} = {value!r}: expected one of {', '.join(map(repr, action.choices))} (the flag {flag})")
    return value


def _config_defaults(parser: argparse.ArgumentParser, doc: dict[str, Any], path: str) -> dict[str, Any]:
    """The defaults a ``--config`` document sets: its keys checked against the parser's flags."""
    actions = {a.dest: a for a in parser._actions if a.option_strings and a.dest not in _NOT_IN_FILE + ("imports",)}
    out = {}
    for key, value in doc.items():
        if key not in actions:
            raise UsageError(f"{PROG}: error: {path}: {key} is not a prediction flag; the keys are "
                             f"{', '.join(sorted(actions))} and import")
        out[key] = _file_value(actions[key], value, f"{PROG}: error: {path}: {key}")
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The namespace of ``argv`` (default ``sys.argv[1:]``): the user's components imported
    first, ``--config`` under the flags, ``--data`` naming a family resolved to its member.

    Raises:
        UsageError: a bad flag, config file or value; its message is the one line to print.
    """
    from .config_cli import UsageError as ConfigUsage, family_member, load_user_code

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    try:
        doc = load_user_code(argv, prog=PROG)
    except ConfigUsage as exc:
        raise UsageError(str(exc) if str(exc).startswith(PROG) else f"{PROG}: error: {exc}") from None
    from partitioners.cli_args import parse_unknown_first

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config")
    config = pre.parse_known_args(argv)[0].config
    parser.set_defaults(**_config_defaults(parser, doc, config) if config else {})
    args = parse_unknown_first(parser, argv)
    missing = [name for name in _REQUIRED if getattr(args, name) is None]
    if missing:
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in missing)
        raise UsageError(f"{PROG}: error: {flags} required (give the flag, or {' / '.join(missing)} in --config)")
    try:
        args.data = family_member(args.data, prog=PROG)
    except ConfigUsage as exc:
        raise UsageError(str(exc)) from None
    _check_combination(args)
    return args


def _check_combination(args: argparse.Namespace) -> None:
    """The flags that depend on each other, and ``--timeout``'s range."""
    from .config.fields import MAX_TIMEOUT_S

    if args.layer is not None and not args.embeddings:
        raise UsageError(f"{PROG}: error: --layer {args.layer} applies with --embeddings only")
    if args.pairs is not None and args.embeddings:
        raise UsageError(f"{PROG}: error: {_PAIRS_WITH_EMBEDDINGS}")
    if not 0 < args.timeout <= MAX_TIMEOUT_S:   # also nan and inf
        raise UsageError(f"{PROG}: error: --timeout {args.timeout}: expected a positive number of seconds, at "
                         f"most {MAX_TIMEOUT_S:.0f} (a week)")
