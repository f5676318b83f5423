"""How many ranks ``gnn-dist train``/``predict`` start on a partition folder or a partition family
(``partitioners/format/family.py``), checked before any rank starts. Torch-free.

- A **partition folder**: one rank per part (and pipeline stage); ``--nproc`` must agree.
- A **family**: ``--nproc N`` runs its member of ``N / stages`` parts; without ``--nproc``, the
  largest member of at most (CPUs / stages) parts runs (the smallest member when none is that
  small), and one line says which. On a GPU machine, name ``--nproc``: this process is torch-free
  and does not count devices. A count with no member is one line naming the members and the fix.
- **Elastic** (``--nnodes MIN:MAX``): every world size the job may take, ``n x --nproc`` for
  ``n`` in MIN..MAX, needs its member (a single folder fits one world size only).
- With ``--repartition-on-resize`` a world size without its partition is no refusal: the ranks
  cut it (``gnn_dist/resize_cut.py``).
"""

from __future__ import annotations

import logging
import os

from partitioners.cli_args import UsageError

__all__ = ["elastic_world_sizes", "machine_cpus", "one_node_nproc"]

log = logging.getLogger(__name__)


def machine_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _stages_text(stages: int) -> str:
    return f" x {stages} stages" if stages > 1 else ""


def one_node_nproc(data: str, nproc: int | None, stages: int, flag: str = "--nproc", *,
                   repartition: bool = False) -> int:
    """The ranks of a one-machine job on ``data`` (see the module docstring); :class:`UsageError`
    (or the family's :class:`~partitioners.format.family.MissingMemberError`) when they do not fit,
    unless ``repartition`` (``--repartition-on-resize``: the ranks cut what is missing)."""
    from partitioners.format import load_partition_meta
    from partitioners.format.family import is_family, read_family

    if is_family(data):
        family = read_family(data)
        if nproc is None:
            fits = [p for p in family.parts if p * stages <= machine_cpus()]
            pick = fits[-1] if fits else family.parts[0]
            log.info(f"{data}: a partition family (P={family.parts_text()}); running its P={pick} member on "
                     f"{pick * stages} ranks (the largest that fits this machine's {machine_cpus()} CPUs; "
                     f"{flag} N picks another)")
            return pick * stages
        _check_divides(nproc, stages, flag)
        if not _cut_by_ranks(repartition, nproc // stages not in family.members, data, nproc // stages):
            family.member(nproc // stages, flag if stages == 1 else f"{flag} {nproc} / {stages} stages =")
        return nproc
    num_parts = load_partition_meta(data).num_parts
    nproc = nproc or num_parts * stages
    if nproc % stages == 0 and _cut_by_ranks(repartition, nproc != num_parts * stages, data, nproc // stages):
        return nproc
    if nproc != num_parts * stages:
        raise UsageError(f"{flag} {nproc} differs from the {num_parts} parts of {data}{_stages_text(stages)}: "
                         f"gnn_dist.train runs one rank per part (and stage); drop {flag} or re-partition "
                         f"with --parts {nproc // stages if nproc % stages == 0 else nproc}")
    return nproc


def _cut_by_ranks(repartition: bool, missing: bool, data: str, parts: int) -> bool:
    """Whether a missing partition of ``parts`` parts is left to the ranks to cut
    (``--repartition-on-resize``; one line says so)."""
    if repartition and missing:
        log.info(f"{data}: no partition of {parts} parts; the ranks cut one (--repartition-on-resize)")
    return repartition and missing


def _check_divides(nproc: int, stages: int, flag: str) -> None:
    if nproc % stages:
        raise UsageError(f"{flag} {nproc} is not a multiple of the {stages} pipeline stages; give S x G ranks")


def elastic_world_sizes(data: str, nnodes: tuple[int, int], nproc: int, stages: int, *,
                        repartition: bool = False) -> list[int]:
    """Every world size of ``--nnodes MIN:MAX`` with ``nproc`` ranks per node, each checked to
    have its partition (a family's member, or the folder's one size), unless ``repartition``
    (``--repartition-on-resize``: the ranks of a world size without one cut it)."""
    from partitioners.format import load_partition_meta
    from partitioners.format.family import is_family, read_family

    _check_divides(nproc, stages, "--nproc")
    sizes = [n * nproc for n in range(nnodes[0], nnodes[1] + 1)]
    if repartition:   # the folder or family.json readable, at least
        read_family(data) if is_family(data) else load_partition_meta(data)
        return sizes
    if is_family(data):
        family = read_family(data)
        for size in sizes:
            family.member(size // stages, f"--nnodes {nnodes[0]}:{nnodes[1]} x --nproc {nproc}: world size")
        return sizes
    num_parts = load_partition_meta(data).num_parts
    if sizes != [num_parts * stages]:
        wanted = ",".join(str(s // stages) for s in sizes)
        raise UsageError(f"--nnodes {nnodes[0]}:{nnodes[1]} x --nproc {nproc} runs on {' or '.join(map(str, sizes))} "
                         f"ranks, but {data} is one cut of {num_parts} parts{_stages_text(stages)}: give a "
                         f"partition family, gnn-dist partition --parts {wanted} ... --out DIR, and --data DIR")
    return sizes
