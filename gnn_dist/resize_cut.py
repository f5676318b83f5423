"""``--repartition-on-resize [METHOD]``: a world size with no partition gets one, cut once into the
checkpoint folder (``docs/concepts.md``, elastic jobs). Torch-free.

When the job's graph parts (``WORLD_SIZE`` / stages) have no member in the family ``--data`` (or
``--data`` is a folder of another number of parts), :func:`plan_partition` names the folder
``CHECKPOINT_DIR/partitions/pP`` instead of refusing, with the :class:`ResizeCut` that makes it:
rank 0, holding the checkpoint folder's run lock (so exactly one process of one job cuts), reads the
family's largest member (or the folder) back by original ids and cuts it with a streaming method
(:mod:`partitioners.io.partition_input`: memory-mapped, a part at a time; a typed folder by
:mod:`partitioners.hetero.partition_input`, its relations, per-type node data and learnable
types' ids kept), after one line saying
what it will need (the partitioner's memory estimate, refused like ``gnn-dist partition
--max-memory`` when over the available memory) and one line with the time it took. The new folder
has the old one's graph fingerprint (checked; a typed source cut before fingerprint scheme 2 by
the new folder's scheme-1 digest), so the resume from the last checkpoint is exact (sync
and overlap schedules). The other ranks wait for the finished folder (it appears whole: written
beside it and renamed) for ``--timeout`` seconds at most, then fail with one line naming it. A
folder cut by an earlier restart is reused once ``inspect --verify``'s checks pass on it (its
checksums and its graph fingerprint recomputed from the parts) and its fingerprint is the source's.

The streaming methods only (:data:`RESIZE_METHODS`): METIS holds the whole graph's adjacency in
memory, which a resize of a large graph cannot bound.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PARTITIONS_DIR", "RESIZE_METHODS", "ResizeCut", "plan_partition"]

log = logging.getLogger(__name__)

PARTITIONS_DIR = "partitions"
"""The folder of the checkpoint folder that holds the cuts: ``partitions/p3``."""
RESIZE_METHODS = ("ldg", "fennel", "random")
"""The methods ``--repartition-on-resize`` may use: one pass over the graph, no copy of it."""
POLL_S = 0.2
"""How often a waiting rank looks for the finished folder."""


@dataclass(frozen=True)
class ResizeCut:
    """The cut a world size needs: ``source`` (a partition folder) into ``num_parts`` parts with
    ``method``, written to ``target``."""

    source: Path
    target: Path
    num_parts: int
    method: str

    def make(self, rank: int, timeout_s: float) -> str:
        """Rank 0 cuts (or reuses) the folder; the other ranks wait for it. Returns its path."""
        if rank == 0:
            self._cut_or_reuse()
        else:
            self._wait(timeout_s)
        return str(self.target)

    def _other_graph(self, cut: Any) -> str | None:
        """Why the cut (its :class:`~partitioners.format.PartitionMeta`) is not known to hold the
        source's graph, or None. Fingerprints of different schemes (a typed source cut before
        scheme 2) are compared by scheme 1 (the cut's ``scheme_1_graph_fingerprint``); a cut
        without it (written before it existed) must name the source's fingerprint in its
        ``repartitioned_from`` record, and one warning says the graph was not verified by its digest."""
        from partitioners.format import load_partition_meta

        source = load_partition_meta(self.source)
        want, got = source.graph_fingerprint, cut.graph_fingerprint
        if source.graph_fingerprint_scheme == cut.graph_fingerprint_scheme:
            return None if got == want else f"graph fingerprint {str(got)[:16]}..., not {str(want)[:16]}..."
        common = source.graph_print.compare(cut.graph_print)
        if common is not None:
            scheme, want, got = common
            return None if got == want else f"graph fingerprint by scheme {scheme} {got[:16]}..., not {want[:16]}..."
        recorded = (cut.raw.get("repartitioned_from") or {}).get("graph_fingerprint")
        if recorded != want:
            return f"cut from graph fingerprint {str(recorded)[:16]}..., not {str(want)[:16]}..."
        log.warning(f"--repartition-on-resize: {self.source}'s graph fingerprint is of scheme "
                    f"{source.graph_fingerprint_scheme} and {self.target}'s of scheme {cut.graph_fingerprint_scheme} "
                    f"(a typed folder cut before scheme 2) and the cut, made by an older gnn-dist, has no scheme-1 "
                    f"digest: it is not verified by its digest, and a checkpoint of the source resumes on it only "
                    f"with --resume-any-partition; remove {self.target} and restart to cut it again")
        return None

    def _cut_or_reuse(self) -> None:
        from partitioners.format import load_partition_meta, verify_partition
        from partitioners.format.layout import META_FILE

        if (self.target / META_FILE).is_file():
            problems = verify_partition(self.target)
            meta = load_partition_meta(self.target) if not problems else None
            other = None if meta is None else self._other_graph(meta)
            if meta is None or meta.num_parts != self.num_parts or other is not None:
                found = problems[0] if problems else f"{meta.num_parts} parts, {other or 'the same graph'}"
                raise ValueError(f"--repartition-on-resize: {self.target} is not a {self.num_parts}-part cut of "
                                 f"{self.source} ({found}); remove it and restart: it is cut again")
            log.info(f"--repartition-on-resize: reusing {self.target} ({self.num_parts} parts, cut earlier with "
                     f"{meta.method} from {meta.raw.get('repartitioned_from', {}).get('folder', '?')}; verified, "
                     f"graph fingerprint {str(meta.graph_fingerprint)[:16]}...)")
            return
        self._cut()

    def _cut(self) -> None:
        from partitioners.api import partition_graph
        from partitioners.format import load_partition_meta
        from partitioners.io.partition_input import input_size, read_partition_input, scratch_bytes
        from partitioners.memory import format_bytes, guard_memory

        size = input_size(self.source)
        estimate, limit = guard_memory(size, self.method, self.num_parts, refine=False, limit=None,
                                       what=str(self.source), log_estimate=False)
        scratch = scratch_bytes(size)
        log.info(f"--repartition-on-resize: no partition of {self.num_parts} parts; cutting {self.source} into "
                 f"{self.num_parts} parts with {self.method} into {self.target}: memory {estimate.describe()} "
                 f"(available {format_bytes(limit)}), scratch disk ~{format_bytes(scratch)} beside it")
        t0 = time.perf_counter()
        self.target.parent.mkdir(parents=True, exist_ok=True)
        graph, extra = read_partition_input(self.source, scratch_dir=self.target.parent)
        read_s = time.perf_counter() - t0
        partition_graph(graph, self.num_parts, self.method, self.target, read_time_s=read_s, extra_meta=extra)
        other = self._other_graph(load_partition_meta(self.target))
        if other is not None:   # never train on a cut of another graph
            raise ValueError(f"--repartition-on-resize: {self.target} holds {other} ({self.source}'s); report it, "
                             f"and re-partition by hand")
        log.info(f"--repartition-on-resize: cut {self.target} ({self.num_parts} parts, {self.method}) in "
                 f"{time.perf_counter() - t0:.1f}s (read {read_s:.1f}s)")

    def _wait(self, timeout_s: float) -> None:
        from partitioners.format.layout import META_FILE

        deadline = time.monotonic() + timeout_s
        while not (self.target / META_FILE).is_file():
            if time.monotonic() > deadline:
                raise TimeoutError(f"--repartition-on-resize: {self.target} did not appear within --timeout "
                                   f"{timeout_s:g}s (rank 0 cuts it from {self.source}); see rank 0's log, or "
                                   f"raise --timeout for a large graph")
            time.sleep(POLL_S)


def plan_partition(data: str, num_parts: int, method: str, checkpoint_dir: str) -> tuple[str, ResizeCut | None]:
    """``(folder, None)`` when ``data`` (a family or a folder) has a partition of ``num_parts``
    parts, else ``(CHECKPOINT_DIR/partitions/pP, the cut that makes it)``.

    Raises:
        ValueError: an unreadable family or folder (naming it).
    """
    from partitioners.format import load_partition_meta
    from partitioners.format.family import is_family, member_dir_name, read_family
    from partitioners.io.partition_input import input_size, source_folder

    if is_family(data):
        family = read_family(data)
        if num_parts in family.members:
            return str(family.member_path(num_parts)), None
    elif load_partition_meta(data).num_parts == num_parts:
        return data, None
    source = source_folder(data)
    input_size(source)   # a folder that cannot be re-cut is refused here (one line), before any rank starts
    target = Path(checkpoint_dir) / PARTITIONS_DIR / member_dir_name(num_parts)
    return str(target), ResizeCut(source, target, num_parts, method)
