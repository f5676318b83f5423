"""How much memory partitioning a graph takes, estimated before it starts, and the guard that
refuses a run that would not fit (``gnn-dist partition --max-memory``).

The stages run one after the other and free their work arrays, so the peak is

    baseline + graph + assignment + max(method, refine, quality, write)

``baseline`` is the interpreter with numpy, scipy, pymetis, tqdm and numba's kernels loaded (:data:`BASELINE_BYTES`);
``graph`` the arrays of the in-memory :class:`~partitioners.graph.Graph` (:meth:`GraphSize.graph_bytes`);
``assignment`` int32 ``[N]``; ``build``, for a graph read out of core
(``--input-format npy-dir``), that of the on-disk CSR build; ``method`` the working memory of the partition method (each
registered method brings its own estimate, see :mod:`partitioners.methods.registry`; a method
registered without one gets :func:`generic_method_memory`); ``refine`` that of
:func:`~partitioners.methods.refine.refine_volume` when asked for; ``quality`` that of
:func:`~partitioners.quality.partition_quality`; ``write`` that of the partition-folder writer.
Each term is counted from what the code allocates and is documented next to that code. For an
out-of-core graph the graph term is 0: its arrays are memory maps, whose pages are the page
cache's, not the process's anonymous memory, and the estimate is of the latter. Reading
the input (parsing, generating a catalog dataset) is not counted: its peak is the reader's, and
happens before this estimate is made for ``--input``.

Measured: the peak RSS (VmHWM) of a fresh process that loads sbm-medium's arrays and partitions
them into 4 parts is 379 MiB with metis, 176-181 MiB with random, ldg and fennel; the estimates
are 618 and 246 MiB (1.63x and 1.36-1.39x). On R-MAT and random graphs (METIS's worst case) the
metis estimate came within 1.06-1.2x. ``tests/partitioners/test_memory.py`` keeps the estimate
above the real peak and within 2.5x of it. This module is torch-free.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BASELINE_BYTES", "GraphSize", "MemoryEstimate", "MemoryLimitError",
           "available_memory", "check_memory", "estimate_partition_memory", "format_bytes",
           "generic_method_memory", "guard_memory", "parse_size", "parse_size_list"]

log = logging.getLogger(__name__)

MiB = 1 << 20

BASELINE_BYTES = 176 * MiB
"""The process before any graph array: Python, numpy, scipy, pymetis, tqdm, numba and the
partitioner's compiled kernels (measured: peak RSS 165 MiB, of which 70 MiB anonymous and the
rest the pages of the shared libraries, LLVM's the largest)."""

WRITE_BUFFER_BYTES = 16 * MiB
"""``numpy.lib.format.write_array`` copies an array in 16 MiB blocks into the hashing writer."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GraphSize:
    """What the estimate needs to know about a graph: its sizes, not its arrays."""

    num_nodes: int
    """``N``."""
    num_edges: int
    """``E``, stored (directed) edges."""
    symmetric: bool = False
    """Every edge has its reverse (METIS's symmetrised adjacency then has ``E`` entries, not ``2E``)."""
    feature_bytes: int = 0
    """Bytes of one node's feature row (``F * itemsize``)."""
    label_bytes: int = 0
    """Bytes of one node's label (8 for class ids, ``C`` for a multi-label row)."""
    num_masks: int = 0
    """Bool masks (train/val/test) the graph holds."""
    weighted: bool = False
    """The graph has ``edge_weight`` (float32 ``[E]``)."""
    edge_attr_bytes: int = 0
    """Bytes of one edge's feature row (``4 D`` for ``edge_attr`` float32 ``[E, D]``; 0 without)."""
    index_bytes: int = 4
    """Bytes of one entry of ``indices`` (4 while ``N < 2**31 - 1``, else 8)."""
    on_disk: bool = False
    """The graph is read out of core (:mod:`partitioners.outofcore`): its arrays are memory maps,
    file-backed pages that the kernel writes out under pressure, not the process's memory."""

    typed_criteria: int = 0
    """A typed graph's balance criteria (a node type each, and its training nodes): its typed
    rebalance (:func:`partitioners.hetero.partition.rebalance_typed`) holds their int64 ``[C, N]``
    weights and, when a part is out of bounds, the union's in-adjacency as ``--refine`` does.
    0 for a graph of one type."""
    num_relations: int = 0
    """A typed graph's relations ``R``: the writer gathers each part's ``in_degree_rel`` (int64
    ``[n_p, R]``), edge types and per-type node data whole (:func:`~partitioners.format.writer_memory.write_memory`).
    0 for a graph of one type."""

    @classmethod
    def of(cls, graph: Any) -> "GraphSize":
        """The sizes of a :class:`~partitioners.graph.Graph`."""
        masks = sum(getattr(graph, m) is not None for m in ("train_mask", "val_mask", "test_mask"))
        y = graph.y
        return cls(num_nodes=graph.num_nodes, num_edges=graph.num_edges,
                   symmetric=bool(graph.symmetric),
                   feature_bytes=0 if graph.x is None else graph.x.shape[1] * graph.x.itemsize,
                   label_bytes=0 if y is None else (y.shape[1] if y.ndim == 2 else 1) * y.itemsize,
                   num_masks=int(masks), weighted=graph.edge_weight is not None,
                   edge_attr_bytes=4 * int(getattr(graph, "edge_feature_dim", 0)),
                   index_bytes=graph.indices.itemsize,
                   on_disk=getattr(graph, "scratch_dir", None) is not None,
                   typed_criteria=len(graph.num_nodes_dict) + 1 if hasattr(graph, "num_nodes_dict") else 0,
                   num_relations=len(graph.edges) if hasattr(graph, "num_nodes_dict") else 0)

    def graph_bytes(self) -> int:
        """The Graph's arrays: ``indptr`` int64 ``[N+1]``, ``indices``, weights, node data; 0 for
        a graph read out of core (its arrays are memory maps)."""
        if self.on_disk:
            return 0
        n, e = self.num_nodes, self.num_edges
        per_node = self.feature_bytes + self.label_bytes + self.num_masks
        return 8 * (n + 1) + e * (self.index_bytes + (4 if self.weighted else 0) + self.edge_attr_bytes) + n * per_node

    @property
    def adjacency_entries(self) -> int:
        """``M``, an upper bound of the entries of the symmetrised adjacency: ``E`` or ``2E``."""
        return self.num_edges if self.symmetric else 2 * self.num_edges


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryEstimate:
    """The estimated peak of one partitioning run, in bytes, with its terms."""

    method: str
    num_parts: int
    total: int
    """Peak bytes: ``baseline + graph + assignment + max(stages)``."""
    parts: dict[str, int] = field(default_factory=dict)
    """Each term: ``baseline``, ``graph``, ``assignment``, then the stages (``method`` under its
    name, ``refine``, ``quality``, ``write``)."""

    def describe(self) -> str:
        """``~699 MiB (graph 66 MiB + largest stage metis 455 MiB + interpreter 176 MiB)``."""
        stages = {k: v for k, v in self.parts.items() if k not in ("baseline", "graph", "assignment")}
        top = max(stages, key=lambda k: stages[k])
        return (f"~{format_bytes(self.total)} (graph {format_bytes(self.parts['graph'])} + largest "
                f"stage {top} {format_bytes(stages[top])} + interpreter "
                f"{format_bytes(self.parts['baseline'])})")


class MemoryLimitError(ValueError):
    """Partitioning would need more memory than allowed (``--max-memory``); exit code 2."""


def generic_method_memory(size: GraphSize, num_parts: int) -> int:
    """The estimate for a method registered without its own: an int64 per node and per edge."""
    return 8 * (size.num_nodes + size.num_edges)


def estimate_partition_memory(graph: Any, method: str, num_parts: int, *,
                              refine: bool = False) -> MemoryEstimate:
    """The estimated peak memory of partitioning ``graph`` (a Graph or a :class:`GraphSize`)
    into ``num_parts`` parts with ``method`` (module docstring), then writing the folder.

    Raises:
        ValueError: ``method`` is not registered.
    """
    from .format.writer import write_memory
    from .methods import get_method
    from .methods.refine import refine_memory
    from .quality import quality_memory

    size = graph if isinstance(graph, GraphSize) else GraphSize.of(graph)
    spec = get_method(method)
    own = spec.memory or generic_method_memory
    stages = {method: int(own(size, num_parts)) if num_parts > 1 else 0,
              "quality": quality_memory(size, num_parts), "write": write_memory(size, num_parts)}
    if refine and num_parts > 1:
        stages["refine"] = refine_memory(size, num_parts)
    if size.typed_criteria and num_parts > 1:
        stages["typed balance"] = refine_memory(size, num_parts) + 8 * size.typed_criteria * size.num_nodes
    if size.on_disk:
        from .outofcore.csr_build import build_memory

        stages["build"] = build_memory(size)
    parts = {"baseline": BASELINE_BYTES, "graph": size.graph_bytes(),
             "assignment": 4 * size.num_nodes, **stages}
    total = BASELINE_BYTES + parts["graph"] + parts["assignment"] + max(stages.values())
    return MemoryEstimate(method=method, num_parts=num_parts, total=total, parts=parts)


def available_memory() -> int:
    """Bytes of memory this machine can give a new process now (psutil's ``available``)."""
    import psutil

    return int(psutil.virtual_memory().available)


def check_memory(estimate: MemoryEstimate, limit: int | None, *, what: str = "the graph",
                 alternative: MemoryEstimate | None = None) -> int:
    """Raise :class:`MemoryLimitError` when ``estimate`` exceeds ``limit`` bytes (None: the
    available memory); return the limit used.

    ``alternative`` is the estimate of a streaming method, named in the fix when it fits.
    """
    source = "--max-memory"
    if limit is None:
        limit, source = available_memory(), "the available memory (the --max-memory default)"
    if estimate.total <= limit:
        return limit
    fix = "pass a larger --max-memory if the machine has it"
    if alternative is not None and alternative.method != estimate.method:
        fits = " (fits)" if alternative.total <= limit else ""
        fix += (f", or use a streaming method: --method {alternative.method} needs "
                f"~{format_bytes(alternative.total)}{fits}")
    raise MemoryLimitError(
        f"partitioning {what} into {estimate.num_parts} parts with {estimate.method} needs "
        f"{estimate.describe()}, more than {source} ({format_bytes(limit)}); {fix}")


STREAMING_METHOD = "fennel"
"""The method a refusal suggests instead: one pass over the graph, no copy of it."""


def guard_memory(graph: Any, method: str, num_parts: int, *, refine: bool, limit: int | None,
                 what: str, log_estimate: bool = True) -> tuple[MemoryEstimate, int]:
    """Estimate the run (:func:`estimate_partition_memory`) and refuse it with
    :class:`MemoryLimitError` when it exceeds ``limit`` (None: the available memory), naming
    the streaming alternative's estimate in the fix; else log the estimate at INFO (when
    ``log_estimate``). Returns ``(estimate, limit used)``."""
    estimate = estimate_partition_memory(graph, method, num_parts, refine=refine)
    alternative = None
    if method != STREAMING_METHOD:
        alternative = estimate_partition_memory(graph, STREAMING_METHOD, num_parts, refine=refine)
    used = check_memory(estimate, limit, what=what, alternative=alternative)
    if log_estimate:
        source = "--max-memory" if limit is not None else "available memory"
        log.info("memory estimate: %s; limit %s (%s)", estimate.describe(), format_bytes(used),
                 source)
    return estimate, used


_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3,
          "gb": 1000**3, "t": 1000**4, "tb": 1000**4, "kib": 1 << 10, "mib": 1 << 20,
          "gib": 1 << 30, "tib": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*")


def parse_size(text: str) -> int:
    """Bytes in ``text``: a number with an optional unit, ``B``, ``KB``/``MB``/``GB``/``TB``
    (powers of 1000, also ``K``/``M``/``G``/``T``) or ``KiB``/``MiB``/``GiB``/``TiB`` (powers of
    1024), case-insensitive: ``8GB``, ``512MiB``, ``1.5G``, ``1000000``. ValueError otherwise."""
    m = _SIZE.fullmatch(text) if isinstance(text, str) else None
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a memory size; write a number of bytes or a number "
                         f"with a unit, e.g. 8GB, 512MiB, 1.5G")
    value = int(float(m.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"{text!r} is not a positive memory size; e.g. 8GB, 512MiB")
    return value


def parse_size_list(text: str) -> tuple[int, ...]:
    """Bytes of each comma-separated size in ``text`` (``40G,20G,20G``: one per rank; a single
    size is a list of one). ValueError naming the item that is not a size."""
    items = text.split(",") if isinstance(text, str) else [text]
    try:
        return tuple(parse_size(item) for item in items)
    except ValueError as exc:
        raise ValueError(str(exc) if len(items) == 1 else f"{exc} (in {text!r}: one size per rank, "
                         f"comma-separated, e.g. 40G,20G,20G)") from None


def format_bytes(num: int) -> str:
    """``num`` bytes in binary units: ``512 MiB``, ``1.2 GiB``."""
    value = float(num)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            break
        value /= 1024
    if unit == "B":
        return f"{int(value)} B"
    return f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"
