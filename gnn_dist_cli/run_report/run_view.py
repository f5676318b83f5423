"""The run a report describes: its checked metrics file, the partition folder's metadata when
given, and the figures read off them (the config record's values, the graph's edge and part
counts, means of the epochs' values). Torch-free."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from partitioners.format import PartitionMeta

from .metrics_file import RunMetrics


def mean(values: Sequence[float | None]) -> float | None:
    """The mean of the values present (None when none is)."""
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else None


def lookup(config: dict[str, Any] | None, *path: str) -> tuple[bool, Any]:
    """``(found, value)`` of ``config[path[0]][path[1]]...``."""
    node: Any = config
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def config_int(config: dict[str, Any] | None, *paths: tuple[str, ...]) -> int | None:
    """The first of ``paths`` in ``config`` that holds a non-negative integer, or None."""
    for path in paths:
        found, value = lookup(config, *path)
        if found and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


@dataclass(frozen=True, slots=True)
class RunView:
    """A run's metrics file and, when given, its partition's metadata."""

    metrics: RunMetrics
    meta: PartitionMeta | None

    @property
    def epochs(self) -> list[int]:
        return [e["epoch"] for e in self.metrics.epochs]

    def num_edges(self) -> tuple[int | None, str]:
        if self.meta is not None:
            return self.meta.num_edges, f"partition {self.meta.path}"
        n = config_int(self.metrics.config, ("data", "num_edges"), ("num_edges",))
        return (n, "the config record") if n is not None else (None, "")

    def num_parts(self) -> int | None:
        if self.meta is not None:
            return self.meta.num_parts
        return config_int(self.metrics.config, ("data", "num_parts"), ("num_parts",), ("world_size",))
