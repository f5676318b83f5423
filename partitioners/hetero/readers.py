"""The typed input formats: a registry of readers that make a :class:`HeteroGraph`.

=================  ==========================================================================
``ogb-hetero``     an OGB heterogeneous node-property dataset folder (ogbn-mag's ``raw/`` and
                   ``split/``): :func:`partitioners.hetero.ogb.read_ogb_hetero`
``triples``        a knowledge graph's ``head<TAB>relation<TAB>tail`` lines:
                   :func:`partitioners.hetero.triples.read_triples`
``typed-npy-dir``  ``nodes.json`` with ``TYPE/`` and ``SRC__REL__DST/`` folders of ``.npy`` files:
                   :func:`partitioners.hetero.npy_dir.read_typed_npy_dir`
=================  ==========================================================================

:func:`read_hetero` reads one (the format given, or the one :func:`detect_typed_format` finds),
then adds the reverse relations (``add_reverse``) and sets the target type (``target_type``).
:func:`partitioners.io.infer_format` asks :func:`detect_typed_format` too, so ``gnn-dist
partition --input`` tells typed inputs from homogeneous ones. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import GraphError
from .graph import HeteroGraph

__all__ = ["TypedFormat", "TYPED_FORMATS", "detect_typed_format", "read_hetero", "register_typed_format",
           "typed_format", "typed_format_names"]


@dataclass(frozen=True)
class TypedFormat:
    """One typed input format."""

    name: str
    read: Callable[[Path], HeteroGraph]
    """``read(path)``: the graph as the input holds it (its own target type, no reverses added)."""
    detect: Callable[[Path], bool]
    """True when ``path`` is of this format (cheap: names and the first bytes only)."""
    what: str
    """What such an input is, for messages."""


_REGISTRY: dict[str, TypedFormat] = {}


def register_typed_format(name: str, read: Callable[[Path], HeteroGraph], detect: Callable[[Path], bool],
                          what: str) -> None:
    """Add a typed input format (``gnn-dist partition --input-format NAME`` reads it)."""
    if name in _REGISTRY:
        raise ValueError(f"typed input format {name!r} is already registered")
    _REGISTRY[name] = TypedFormat(name, read, detect, what)


def typed_format(name: str) -> TypedFormat:
    if name not in _REGISTRY:
        raise ValueError(f"unknown typed input format {name!r}; the typed formats are {list(_REGISTRY)}")
    return _REGISTRY[name]


def typed_format_names() -> tuple[str, ...]:
    """The registered typed formats, built-ins first."""
    return tuple(_REGISTRY)


def detect_typed_format(path: str | Path) -> str | None:
    """The typed format of ``path``, or None when it is none of them."""
    p = Path(path)
    return next((f.name for f in _REGISTRY.values() if f.detect(p)), None)


def read_hetero(path: str | Path, fmt: str | None = None, *, add_reverse: bool = False,
                target_type: str | None = None) -> HeteroGraph:
    """Read the typed input ``path`` (``fmt``, or detected), then ``add_reverse`` (each relation's
    ``rev_NAME``) and ``target_type`` (a labelled type; default: the input's own)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    if fmt is None:
        fmt = detect_typed_format(p)
        if fmt is None:
            raise ValueError(f"{p}: not a typed input ({'; '.join(f'{f.name}: {f.what}' for f in _REGISTRY.values())})")
    graph = typed_format(fmt).read(p)
    if add_reverse:
        graph = graph.add_reverse()
    if target_type is not None:
        try:
            graph = graph.with_target(target_type)
        except GraphError as exc:
            raise GraphError(f"target type {target_type!r} of {p}: {exc}") from None
    return graph


def _read_ogb(path: Path) -> HeteroGraph:
    from .ogb import read_ogb_hetero

    return read_ogb_hetero(path)


def _is_ogb(path: Path) -> bool:
    return path.is_dir() and any((path / "raw" / f).is_file() for f in ("num-node-dict.csv.gz", "num-node-dict.csv"))


def _read_triples(path: Path) -> HeteroGraph:
    from .triples import read_triples

    return read_triples(path)


def _is_triples(path: Path) -> bool:
    from .triples import is_triples_file

    return is_triples_file(path)


def _read_npy_dir(path: Path) -> HeteroGraph:
    from .npy_dir import read_typed_npy_dir

    return read_typed_npy_dir(path)


def _is_npy_dir(path: Path) -> bool:
    from .npy_dir import is_typed_npy_dir

    return is_typed_npy_dir(path)


register_typed_format("ogb-hetero", _read_ogb, _is_ogb,
                      "a folder with raw/num-node-dict.csv.gz, raw/relations/SRC___REL___DST/ (ogbn-mag's layout)")
register_typed_format("triples", _read_triples, _is_triples,
                      "a .triples file (or .tsv of three fields) of head<TAB>relation<TAB>tail lines")
register_typed_format("typed-npy-dir", _read_npy_dir, _is_npy_dir,
                      "a folder with nodes.json, TYPE/*.npy and SRC__REL__DST/{src,dst}.npy")

TYPED_FORMATS: tuple[str, ...] = tuple(_REGISTRY)
"""The built-in typed formats (the registry's names when this module was imported)."""
