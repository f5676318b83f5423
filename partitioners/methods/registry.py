"""The registry of partition methods: each name (``method=``, ``--method``) and how to call it.

A method is a function ``assign(graph, num_parts, *, seed, balance, ...) -> int [N]`` that maps
every node to a part in ``[0, num_parts)``. :func:`~partitioners.methods.assign_parts` checks the
arguments first (``1 < num_parts <= N``: ``P == 1`` never reaches a method; ``seed`` a
non-negative int; ``balance`` a tuple of known criteria, train only with a train mask) and the
returned assignment afterwards, so a method only partitions. Keyword arguments it receives:

  ``seed``       int, always: the same seed must give the same assignment
  ``balance``    tuple of criteria from ``nodes``, ``edges``, ``train``, always (refuse with a
                 ``ValueError`` the ones the method cannot balance)
  ``imbalance``  float, when registered with it in ``options``: allowed excess over the mean part
  ``progress``   bool, when registered with it in ``options``: show a progress bar
  ``part_weights`` tuple of ``P`` fractions summing to 1 (part ``p``'s share of every balance
                 criterion), or None for equal parts, when registered with it in ``options``
                 (:mod:`.targets`); a method registered without it is refused part weights

A built-in method is one module of this package plus one :func:`register_method` line in
``partitioners/methods/__init__.py``; user code registers its own the same way (see
``docs/extending.md``). The CLI's ``--method`` choices are the names registered when its parser
is built. This module is torch-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np

if TYPE_CHECKING:
    from ..memory import GraphSize

__all__ = ["PartitionMethod", "MethodMemory", "OPTIONS", "register_method", "get_method",
           "method_names"]

MethodMemory = Callable[["GraphSize", int], int]
"""``memory(size, num_parts) -> bytes``: a method's working memory on top of the graph itself,
from the graph's sizes (:class:`partitioners.memory.GraphSize`)."""

OPTIONS = ("imbalance", "progress", "part_weights")
"""Keyword arguments a method may be registered to receive, besides ``seed`` and ``balance``."""

DEFAULT_OPTIONS = ("imbalance", "progress")
"""What a method is registered to receive unless told otherwise (``part_weights`` is opt-in:
a method written before it existed does not take it)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionMethod:
    """One registered method."""

    name: str
    """The name passed as ``method=`` (``--method``), recorded in ``partition.json``."""
    assign: Callable[..., np.ndarray]
    """``assign(graph, num_parts, *, seed, balance, **options) -> int [N]``."""
    options: tuple[str, ...]
    """Which of :data:`OPTIONS` it receives."""
    description: str
    """One line for listings and ``--help``."""
    memory: MethodMemory | None
    """Its working memory estimate, or None for the generic one of :mod:`partitioners.memory`."""


_REGISTRY: dict[str, PartitionMethod] = {}


def register_method(name: str, assign: Callable[..., np.ndarray] | None = None, *,
                    options: Iterable[str] = DEFAULT_OPTIONS, description: str = "",
                    memory: MethodMemory | None = None, replace: bool = False) -> Callable:
    """Register ``assign`` as the partition method ``name``; also usable as a decorator.

    Args:
        name: the method's name: letters, digits and ``_.-``, starting with a letter or digit.
        assign: the function (module docstring); omitted, a decorator is returned.
        options: which of ``imbalance``, ``progress`` and ``part_weights`` it takes (default:
            ``imbalance`` and ``progress``).
        description: one line describing it (default: the first line of its docstring).
        memory: ``memory(size, num_parts) -> bytes`` it needs besides the graph, from the
            graph's sizes (:class:`~partitioners.memory.GraphSize`), for the memory guard of
            ``gnn-dist partition --max-memory`` (default: None, a generic estimate).
        replace: allow replacing a method already registered under ``name`` (default: False).

    Returns:
        ``assign`` itself (or the decorator, which returns the function it decorates).

    Raises:
        ValueError: a malformed ``name``, a name already taken (without ``replace``), or an
            unknown option.
        TypeError: ``assign`` or ``memory`` is not callable.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"method name {name!r} is invalid: use letters, digits and _.- "
                         f"(starting with a letter or digit), e.g. 'bfs-chunks'")
    opts = tuple(options)
    unknown = [o for o in opts if o not in OPTIONS]
    if unknown:
        raise ValueError(f"register_method({name!r}): unknown option(s) {unknown}; a method may "
                         f"take {', '.join(OPTIONS)} (seed and balance it always gets)")
    if name in _REGISTRY and not replace:
        raise ValueError(f"partition method {name!r} is already registered "
                         f"({_REGISTRY[name].assign.__module__}); pick another name or pass "
                         f"replace=True")
    if memory is not None and not callable(memory):
        raise TypeError(f"register_method({name!r}): memory must be callable, got {memory!r}")

    def add(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        if not callable(fn):
            raise TypeError(f"register_method({name!r}): the method must be callable, got {fn!r}")
        doc = (fn.__doc__ or "").strip().splitlines()
        _REGISTRY[name] = PartitionMethod(name=name, assign=fn, options=opts,
                                          description=description or (doc[0] if doc else ""),
                                          memory=memory)
        return fn

    return add if assign is None else add(assign)


def get_method(name: str) -> PartitionMethod:
    """The method registered as ``name``; ValueError listing the registered names otherwise."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown partition method {name!r}; valid methods are "
                         f"{', '.join(_REGISTRY)}") from None


def method_names() -> tuple[str, ...]:
    """The registered names, in registration order (built-ins first)."""
    return tuple(_REGISTRY)
