"""The memory plan as text: a table of the components per rank (the largest ranks when there
are many), the totals and the recommendation (``gnn-dist plan``'s output)."""

from __future__ import annotations

from partitioners.memory import format_bytes

from .model import COMPONENTS
from .plan import MemoryPlan
from .search import Recommendation
from .stages import stage_count

__all__ = ["render_plan", "MAX_ROWS"]

MAX_ROWS = 8
"""Ranks shown in full; beyond it the largest ``MAX_ROWS`` and a summary line."""


def render_plan(plan: MemoryPlan) -> list[str]:
    """The lines of the plan's table and recommendation."""
    w = plan.workload
    settings = " ".join(w.flags()) or "(defaults)"
    num_parts, stages = plan.sizes[0].num_parts, stage_count(w)
    ranks = f"{num_parts} rank(s)" if len(plan.sizes) == num_parts else f"{num_parts} ranks (the mean part)"
    if stages > 1:
        ranks = f"{stages} stages ({w.parallel}, {w.chunks} chunk(s)) x {ranks}"
    lines = [f"memory plan: {w.model}, {w.layers} layers x {w.hidden}, {ranks} on {w.device}; settings {settings}"]
    head = ["part", *(["stage"] if stages > 1 else []), "inner", "halo", "edges", *COMPONENTS, "total"]
    order = sorted(range(len(plan.ranks)), key=lambda i: -plan.ranks[i].total)
    shown = sorted(order[:MAX_ROWS])
    rows = [head]
    for i in shown:
        r, s = plan.ranks[i], plan.sizes[i % len(plan.sizes)]
        rows.append([str(r.part_id), *([str(r.stage)] if stages > 1 else []), f"{s.inner:,}", f"{s.halo:,}", f"{s.edges:,}",
                     *(format_bytes(r.components[c].device) for c in COMPONENTS), format_bytes(r.total)])
    widths = [max(len(row[j]) for row in rows) for j in range(len(head))]
    lines += ["  ".join(cell.rjust(widths[j]) for j, cell in enumerate(row)) for row in rows]
    if len(plan.ranks) > MAX_ROWS:
        lines.append(f"... {len(plan.ranks) - MAX_ROWS} smaller rank(s) not shown")
    largest = plan.largest
    save = sum(r.components["save"].device for r in plan.ranks)   # rank 0's alone
    whole = (sum(r.total for r in plan.ranks) - save) * (num_parts // len(plan.sizes)) + save   # a size spec: the mean part P times
    where = f"part {largest.part_id}" + (f" stage {largest.stage}" if stages > 1 else "")
    lines.append(f"largest rank: {where}, ~{format_bytes(largest.total)}; all {num_parts * stages} ranks "
                 f"~{format_bytes(whole)}")
    host = largest.host
    if host:
        lines.append(f"host memory of the largest rank besides the device: ~{format_bytes(host)}")
    rec = plan.recommendation
    if rec is not None:
        lines.append(_recommendation_line(rec, num_parts, stages > 1))
    return lines


def _recommendation_line(rec: Recommendation, num_parts: int, staged: bool) -> str:
    """Whether and how the run fits its devices (one size for all, or each rank's own)."""
    b = rec.largest
    if isinstance(rec.device_memory, int):
        devices, who = f"{format_bytes(rec.device_memory)} per device", "the largest rank"
    else:
        devices = f"each rank's own device ({', '.join(format_bytes(m) for m in rec.device_memory)})"
        who = (f"rank {b.stage * num_parts + b.part_id} (part {b.part_id}{f' stage {b.stage}' if staged else ''}, "
               f"device {format_bytes(rec.limit)})")
    if rec.fits:
        flags = " ".join(rec.flags) or "(no flags)"
        tightest = "largest rank" if isinstance(rec.device_memory, int) else f"tightest: {who}"
        return f"fits {devices} with: {flags}  [{rec.name}: {tightest} ~{format_bytes(b.total)}]"
    more = ("" if not isinstance(rec.device_memory, int) else f"; about {rec.parts_needed} parts would fit"
            if rec.parts_needed else "; more parts than 4096x these would be needed")
    return (f"nothing fits {devices}: the cheapest setting ({rec.name}: {' '.join(rec.flags)}) needs "
            f"~{format_bytes(b.total)} on {who}{more}")
