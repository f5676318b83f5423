"""How much memory a training rank needs, estimated from the partition's metadata before it
starts, and the guard that refuses a run that would not fit (``--max-memory``).

Per rank ``r`` with ``I`` inner rows, ``H`` halo rows, ``S = I + H``, ``E`` local edges, input
width ``F``, hidden width ``h``, ``L`` layers and ``P`` trainable parameters (float32 figures):

========== =====================================================================================
runtime    the interpreter with torch and the numba kernels loaded (:data:`RUNTIME_BYTES`)
block      the local CSR and its transpose, their edge ids and the rows' degrees and ids:
           ``40 E + 64 S`` (int64 arrays)
features   the feature store: ``S F 4`` with every row on the device, else the cache budget
           plus (``host``) the host copy ``S F 4``
activations per layer, forward and what autograd keeps for backward: ``(S + 3 I) w 4`` with
           ``w`` the layer's widest side; GAT adds ``3 E k 4`` for its ``k`` heads (scores,
           softmax, masks), GIN ``I w 4`` (its MLP's second map)
optimizer  weights, gradients and Adam's two moments: ``16 P``; ``20 P`` with ``select="best-val"``
           (the best epoch's copy of the weights)
========== =====================================================================================

The machine's ranks share its memory: ``gnn-dist train`` (``--validate``) adds up the estimates
of every part before torchrun starts; each rank checks its own share
(``max_memory / local ranks``) again at start. A refusal is one line with the estimate, the
limit and the fix (exit code 2). Measured (one process, sbm-medium, hidden 128, 2 layers, peak
RSS against the estimate): GCN 1.24 / 1.3 GiB, GAT (8 heads) 1.76 / 1.7, SAGE 1.36 / 1.3, GIN
1.53 / 1.5, so within 5% (``docs/performance.md``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from partitioners.memory import MemoryLimitError, available_memory, format_bytes, parse_size

__all__ = ["RUNTIME_BYTES", "RankEstimate", "estimate_rank_memory", "check_training_memory", "memory_limit"]

log = logging.getLogger(__name__)

MiB = 1 << 20
RUNTIME_BYTES = 350 * MiB
"""One rank before any graph array: Python, torch, numba's kernels, gloo (measured ~270-330 MiB)."""


@dataclass(frozen=True, slots=True)
class RankEstimate:
    """The estimated peak of one rank, in bytes, with its terms."""

    part_id: int
    parts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def describe(self) -> str:
        terms = ", ".join(f"{k} {format_bytes(v)}" for k, v in self.parts.items())
        return f"~{format_bytes(self.total)} ({terms})"


def estimate_rank_memory(meta: Any, part_id: int, config: Any) -> RankEstimate:
    """The estimate for part ``part_id`` of ``meta`` (a ``PartitionMeta``) trained as ``config``
    (a :class:`~gnn_dist.config.RunConfig`) says (module docstring)."""
    from .cache.budget import parse_budget

    pm = meta.parts[part_id]
    inner, halo, edges = int(pm.num_inner), int(pm.num_halo), int(pm.num_local_edges)
    rows, width = inner + halo, int(meta.feature_dim)
    features_all = rows * width * 4
    f = config.trainer.features
    if f.feature_storage == "device":
        features = features_all
    else:
        features = min(parse_budget(f.feature_cache_budget, features_all), features_all)
        features += features_all if f.feature_storage == "host" else 0
    m = config.model
    widths = [width] + [m.hidden] * (m.layers - 1) + [int(meta.num_classes)]
    activations, params = 0, 0
    for i in range(m.layers):
        w = max(widths[i], widths[i + 1])
        heads = 0 if m.model != "gat" else (m.out_heads or 1) if i == m.layers - 1 else (m.heads or 8)
        extra = inner * w * 4 if m.model == "gin" else 0   # the MLP's second linear map
        activations += (rows + 3 * inner) * w * 4 + extra + 3 * edges * heads * 4
        params += widths[i] * widths[i + 1] * (2 if m.model in ("sage", "gin") else 1) + widths[i + 1]
    return RankEstimate(part_id, {"runtime": RUNTIME_BYTES, "block": 40 * edges + 64 * rows, "features": features,
                                  "activations": activations,
                                  "optimizer": (20 if config.trainer.selection.select == "best-val" else 16) * params})


def memory_limit(config: Any) -> tuple[int, str]:
    """``(bytes, where it came from)``: ``--max-memory``, else the machine's available memory."""
    spec = config.distributed.max_memory
    if spec is None:
        return available_memory(), "the available memory (the --max-memory default)"
    return parse_size(spec), f"--max-memory {spec}"


def check_training_memory(meta: Any, config: Any, part_ids: list[int], *, local_ranks: int) -> int:
    """Refuse (:class:`~partitioners.memory.MemoryLimitError`, a ``ValueError``) when the ranks
    of ``part_ids``, on a machine that runs ``local_ranks`` ranks, need more than their share of
    the limit; else log the estimate. Returns the estimated bytes of ``part_ids``."""
    estimates = [estimate_rank_memory(meta, p, config) for p in part_ids]
    total = sum(e.total for e in estimates)
    limit, source = memory_limit(config)
    share = limit * len(part_ids) // max(local_ranks, 1)
    largest = max(estimates, key=lambda e: e.total)
    ranks = f"{len(part_ids)} rank(s) on this machine"
    if share < limit:
        source = f"their {len(part_ids)}/{local_ranks} share of {source}"
    if total > share:
        raise MemoryLimitError(
            f"training {config.data.data} needs ~{format_bytes(total)} for {ranks} (the largest, part "
            f"{largest.part_id}: {largest.describe()}), more than {source} ({format_bytes(share)}); pass a larger "
            f"--max-memory if the machine has it, keep the features off the device (--feature-storage mmap "
            f"--feature-cache-budget SIZE), or partition into more parts")
    log.info("memory estimate: ~%s for %s (the largest, part %d: %s); limit %s (%s)", format_bytes(total), ranks,
             largest.part_id, largest.describe(), format_bytes(share), source)
    return total
