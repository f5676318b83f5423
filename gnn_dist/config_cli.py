"""The ``gnn_dist.train`` command line, generated from :mod:`gnn_dist.config`, and ``--config``.

Every field of :class:`~gnn_dist.config.RunConfig` that declares a flag becomes one option: its
help is the field's docstring, its default the field's, its choices the field's (registries are
read when the parser is built, so a registered schedule or model is a choice at once). A value
is only converted here (an integer flag gets an integer); whether it is valid is decided once,
by the config's ``__post_init__``, whichever way it came.

Precedence: the dataclasses' defaults, then ``--config FILE.toml`` (read with the standard
library's ``tomllib``: tables mirror the config's sections, e.g. ``[trainer.schedule]
pipeline = "overlap"``; an unknown key is an error naming it), then the flags given.

A bad value is one line (``gnn_dist.train: error: --lr -1: ...`` or ``run.toml: trainer.optim.lr:
...``) and exit code 2, raised as :class:`UsageError` by :func:`parse_run_config`.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from partitioners.cli_args import nearest_flags

from . import environ
from .config import ConfigError, RunConfig

__all__ = ["UsageError", "build_parser", "family_member", "parse_run_config", "load_user_code", "flag_names", "field_docs"]

PROG = "gnn_dist.train"


class UsageError(ValueError):
    """A bad command line or config file: ``str(error)`` is the one line to print (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (no usage block), raised, not printed."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        if message.startswith("argument --model: invalid choice"):
            message += "; your own registered model? load your own model's file with --import FILE.py"
        elif message.startswith("unrecognized arguments: "):
            message += nearest_flags(self, message.removeprefix("unrecognized arguments: ").split())
        raise UsageError(f"{self.prog}: error: {message} (see --help)")


@functools.cache
def _module_classes(path: str) -> dict[str, ast.ClassDef]:
    """The top-level classes of the module file ``path`` by name (one parse per file; finding each
    class's source with ``inspect.getsource`` scanned the file again per class: ~0.3 s of every
    process that builds the parser)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}``: the string literal under each field of a dataclass's source."""
    path = inspect.getsourcefile(cls)
    node = _module_classes(path).get(cls.__qualname__) if path else None
    if node is None:   # a nested or generated class: its own source
        node = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    body = node.body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for stmt, nxt in zip(body, body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            docs[stmt.target.id] = " ".join(nxt.value.value.split())
    return docs


def _leaves(cls: type, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], dataclasses.Field, type]]:
    """``(path, field, owner class)`` of every leaf field under ``cls``, in declaration order."""
    out = []
    for f in dataclasses.fields(cls):
        kind = _section_type(cls, f)
        if kind is not None:
            out += _leaves(kind, prefix + (f.name,))
        else:
            out.append((prefix + (f.name,), f, cls))
    return out


def _section_type(cls: type, f: dataclasses.Field) -> type | None:
    """The dataclass a section field holds (its default factory's), or None for a leaf."""
    factory = f.default_factory
    if factory is not dataclasses.MISSING and dataclasses.is_dataclass(factory):
        return factory  # type: ignore[return-value]
    return None


def _convert(annotation: str, name: str) -> Any:
    """An argparse ``type`` for a field annotated ``annotation`` (conversion only)."""
    if annotation.startswith("int"):
        kind, expected = int, "an integer"
    elif annotation.startswith("float"):
        kind, expected = float, "a number"
    elif annotation.startswith("str | int | float"):
        return _number_or_text
    else:
        return str

    def parse(value: str) -> Any:
        try:
            return kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value!r}") from None
    parse.__name__ = name
    return parse


def _number_or_text(value: str) -> int | float | str:
    """``"123"`` -> 123, ``"0.25"`` -> 0.25, ``"4GB"`` -> ``"4GB"`` (a size string)."""
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


HELP_GROUPS: dict[tuple[str, ...], str] = {
    ("data",): "data", ("model",): "model", ("trainer", "task"): "task", ("trainer", "optim"): "optimisation",
    ("epochs",): "optimisation", ("trainer", "selection"): "optimisation",
    ("trainer", "schedule"): "schedule (when halo rows travel)", ("trainer", "features"): "input features",
    ("trainer", "memory"): "memory", ("distributed",): "processes and kernels",
    ("trainer", "parallel"): "layer parallelism", ("trainer", "checkpoint"): "checkpoints",
    ("trainer", "report"): "output", ("save_model",): "output",
}
"""The ``--help`` group of each config section (its fields' flags, in declaration order)."""


def _help_group(parser: argparse.ArgumentParser, groups: dict[str, Any], path: tuple[str, ...]) -> Any:
    title = HELP_GROUPS.get(path[:2]) or HELP_GROUPS.get(path[:1]) or "other"
    if title not in groups:
        groups[title] = parser.add_argument_group(title)
    return groups[title]


def build_parser() -> argparse.ArgumentParser:
    """The parser: one option per config field with a flag, grouped by section in ``--help``, plus
    ``--config``, ``--import``, ``-v``, ``-q`` and ``--validate``. Unset options are absent from
    the namespace (``SUPPRESS``)."""
    p = _Parser(prog=PROG, description="Exact distributed full-graph GNN training.",
                argument_default=argparse.SUPPRESS, allow_abbrev=False)
    p.add_argument("--config", metavar="FILE.toml", help="read the configuration from a TOML file; flags override it")
    p.add_argument("--import", dest="imports", action="append", metavar="FILE.py|MODULE",
                   help="import your own components first (registered models, layers, schedules, tasks; a .py file "
                        "or a module name; repeatable; also import = [...] in --config)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging, and a traceback with every error")
    p.add_argument("-q", "--quiet", action="store_true", help="warnings, errors and the final line only")
    p.add_argument("--validate", action="store_true",
                   help="check the configuration against the partition's metadata, then exit (0, or 2 with the error)")
    groups: dict[str, Any] = {}
    for title in dict.fromkeys(HELP_GROUPS.values()):   # the groups in this order
        groups[title] = p.add_argument_group(title)
    for path, f, owner in _leaves(RunConfig):
        meta = f.metadata
        if not meta.get("flag"):
            continue
        doc = field_docs(owner).get(f.name, "")
        default = f.default if f.default is not dataclasses.MISSING else None
        kwargs: dict[str, Any] = {"dest": ".".join(path), "help": f"{doc} (default: {default})".replace("%", "%%")}
        choices = meta.get("choices")
        if callable(choices):
            choices = choices()
        action = meta.get("action")
        if action in ("store_true", "store_false"):
            kwargs["action"] = action
            kwargs["help"] = doc.replace("%", "%%")
        else:
            if action == "optional":
                kwargs.update(nargs="?", const=meta["const"])
            metavar = meta.get("metavar") or (None if choices else meta["flag"].lstrip("-").replace("-", "_").upper())
            kwargs.update(type=_convert(str(f.type), f.name), metavar=metavar, choices=choices)
        _help_group(p, groups, path).add_argument(meta["flag"], **kwargs)
    return p


def flag_names() -> list[str]:
    """Every option string of the parser, sorted (what the flag-freeze test pins)."""
    return sorted(s for action in build_parser()._actions for s in action.option_strings if s.startswith("--"))


def _flag_of(path: tuple[str, ...]) -> str | None:
    for leaf, f, _ in _leaves(RunConfig):
        if leaf == path:
            return f.metadata.get("flag")
    return None


MAX_CONFIG_BYTES = 1 << 20
"""The largest ``--config`` file read (1 MiB)."""


def _load_toml(path: str) -> dict[str, Any]:
    """The parsed TOML document of a ``--config`` file."""
    import tomllib

    try:
        with open(path, "rb") as f:   # a regular file or a pipe (--config <(...)); bounded either way
            data = f.read(MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:
            raise UsageError(f"--config {path}: larger than {MAX_CONFIG_BYTES >> 20} MiB; a run's configuration is "
                             f"a few KiB of TOML")
        return tomllib.loads(data.decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"--config {path}: cannot read it ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise UsageError(f"{path}: not valid TOML (nested too deep; a run's configuration nests 3 tables)") from None


def _toml_imports(doc: dict[str, Any], path: str) -> list[str]:
    """The ``import = ["my_models.py", ...]`` list of a config document (removed from it)."""
    value = doc.pop("import", [])
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{path}: import: expected a list of Python files or module names, got {value!r}")
    return value   # paths relative to the working directory, as data.data's


def _read_toml(path: str, doc: dict[str, Any]) -> dict[tuple[str, ...], Any]:
    """``{field path: value}`` of a TOML config document, checked against the config's fields."""
    known = {leaf for leaf, _, _ in _leaves(RunConfig)}
    sections = {leaf[:i] for leaf in known for i in range(1, len(leaf))}
    out: dict[tuple[str, ...], Any] = {}

    def walk(table: dict[str, Any], prefix: tuple[str, ...]) -> None:
        for key, value in table.items():
            path_ = prefix + (key,)
            if isinstance(value, dict) and path_ in sections:
                walk(value, path_)
            elif path_ in known:
                out[path_] = value
            else:
                options = sorted(".".join(p) for p in known if p[:len(prefix)] == prefix)
                raise UsageError(f"{path}: {'.'.join(path_)} is not a configuration field; the fields here are "
                                 f"{', '.join(options[:12])}{' ...' if len(options) > 12 else ''}")
    walk(doc, ())
    return out


def _build(values: dict[tuple[str, ...], Any], cls: type = RunConfig, prefix: tuple[str, ...] = ()) -> Any:
    kwargs = {}
    for f in dataclasses.fields(cls):
        kind = _section_type(cls, f)
        if kind is not None:
            kwargs[f.name] = _build(values, kind, prefix + (f.name,))
        elif prefix + (f.name,) in values:
            kwargs[f.name] = values[prefix + (f.name,)]
    return cls(**kwargs)


def load_user_code(argv: Sequence[str], prog: str = PROG, *, config: bool = True) -> dict[str, Any]:
    """Import the ``--import`` targets of ``argv`` and (``config``) the ``import`` list of its
    ``--config`` file (:mod:`gnn_dist.user_code`); returns that file's document without the list
    ({} without one). The rest of ``argv`` is left to the full parser."""
    from partitioners.user_code import UserCodeError, import_user_code

    pre = _Parser(prog=prog, add_help=False, allow_abbrev=False)
    pre.add_argument("--import", dest="imports", action="append", default=[])
    if config:
        pre.add_argument("--config")
    known, _ = pre.parse_known_args(argv)
    known.config = getattr(known, "config", None)
    doc = _load_toml(known.config) if known.config else {}
    try:
        import_user_code(_toml_imports(doc, known.config) if known.config else [])
        import_user_code(known.imports)
    except UserCodeError as exc:
        raise UsageError(f"{prog}: error: {exc}") from None
    return doc


def family_member(data: str, stages: int = 1, prog: str = PROG) -> str:
    """``data``, or, when it is a partition family (``partitioners/format/family.py``), its member
    for this job's world size (``WORLD_SIZE`` / ``stages``: the graph parts); a world size with no
    member is a :class:`UsageError` naming the members and the fix."""
    from partitioners.format.family import resolve_member

    world = environ.launch_world_size()
    what = "world size" if stages == 1 else f"{world} ranks / {stages} stages ="
    try:
        return resolve_member(data, max(1, world // stages), what)
    except ValueError as exc:   # a missing member, an unreadable family.json
        raise UsageError(f"{prog}: error: --data {exc}") from None


def parse_run_config(argv: Sequence[str] | None = None) -> tuple[RunConfig, argparse.Namespace]:
    """``(config, namespace)`` from ``argv`` (default ``sys.argv[1:]``): defaults, then
    ``--config``, then the flags. The namespace holds ``verbose``, ``quiet`` and ``validate``.

    Raises:
        UsageError: a bad flag, config file or value; its message is the one line to print.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    doc = load_user_code(argv)   # the user's components first: they are choices of the parser
    args = build_parser().parse_args(argv)
    dests = {".".join(path) for path, f, _ in _leaves(RunConfig) if f.metadata.get("flag")}
    given = {tuple(k.split(".")): v for k, v in vars(args).items() if k in dests}
    from_file = _read_toml(args.config, doc) if getattr(args, "config", None) else {}
    try:
        config = _build({**from_file, **given})
    except ConfigError as exc:
        paths = [p for p in {**from_file, **given} if p[-1] == exc.field]
        path = next((p for p in paths if p in given), paths[0] if paths else None)
        if path is not None and path not in given:
            raise UsageError(f"{args.config}: {'.'.join(path)}: {exc.reason}") from None
        where = _flag_of(path) if path is not None else None
        raise UsageError(f"{PROG}: error: {where or exc.field}: {exc.reason}") from None
    if not config.data.data:
        raise UsageError(f"{PROG}: error: --data is required (the partition folder; or data.data in --config)")
    parallel = config.trainer.parallel
    stages = parallel.stages if parallel.parallel != "graph" else 1
    validate = getattr(args, "validate", False)
    cut = None
    if config.data.repartition_on_resize is None:
        config.data.data = family_member(config.data.data, stages)
    else:
        config.data.data, cut = _resize_partition(config, stages, validate)
    if getattr(args, "verbose", False) and getattr(args, "quiet", False):
        raise UsageError(f"{PROG}: error: -v/--verbose and -q/--quiet exclude each other")
    namespace = argparse.Namespace(verbose=getattr(args, "verbose", False), quiet=getattr(args, "quiet", False),
                                   validate=validate, config_file=getattr(args, "config", None), resize_cut=cut)
    return config, namespace


def _resize_partition(config: RunConfig, stages: int, validate: bool) -> tuple[str, Any]:
    """``--repartition-on-resize``: the folder of this world size's parts and the cut that makes it
    (None: it exists; :func:`gnn_dist.resize_cut.plan_partition`). ``--validate`` checks the
    configuration against the cut's source when the cut is not made yet (the same graph)."""
    from .resize_cut import plan_partition

    parts = max(1, environ.launch_world_size() // stages)
    try:
        folder, cut = plan_partition(config.data.data, parts, config.data.repartition_on_resize,
                                     config.trainer.checkpoint.checkpoint_dir)
    except ValueError as exc:   # an unreadable family or folder, one that cannot be re-cut
        raise UsageError(f"{PROG}: error: --data {exc}") from None
    if validate and cut is not None and not Path(folder, "partition.json").is_file():
        return str(cut.source), None
    return folder, cut
