r"""The communication cost model of the parallel schedules: for a graph cut into parts and a deep
model, the bytes every rank sends per training epoch under graph parallelism (``--parallel
graph``, the ``sync`` exchange), layer parallelism (``--parallel layer --stages S``) and hybrid
parallelism (``--parallel hybrid --stages S`` over ``G`` parts), and an epoch time on a link of a
given bandwidth. What ``gnn-dist plan --schedules`` prints; torch-free (see
docs/layer_parallel.md, "When layer parallelism pays").

Legend: ``N`` nodes, ``E`` stored edges (every part's in-edges, summed), ``P`` ranks, ``L`` graph
layers of hidden width ``F``, ``C`` the jumping-knowledge carry's width (0; ``F`` for ``max``,
the classes for ``cat``), ``b`` bytes of an element (4, fp32), ``W`` the model's trainable
parameters, ``W_s`` those every stage trains (GCNII's ``lin_in``: ``F_in F + F``; the ``cat``
readout's weight), ``H(G) = sum_g H_g`` the halo rows of a ``G``-part partition summed over its
parts (``H(1) = 0``), ``K`` chunks, ``h_l`` the bytes one halo row moves at layer ``l`` in an
epoch, forward plus backward (below).

Bytes per epoch, summed over the ranks (what the trainers record as ``halo_bytes +
allreduce_bytes``; every all-reduce is counted as the gradient bytes each rank puts in):

.. math::

    B_\text{graph}(P) &= H(P) \sum_l h_l + [P > 1]\, P b W \\
    B_\text{layer}(S) &= 2 b (F + C) N (S - 1) + [S > 1]\, S b W_s \\
    B_\text{hybrid}(S, G) &= 2 b (F + C) N (S - 1) + H(G) \sum_l h'_l
        + [G > 1]\, G b (W - W_s) + P b W_s, \qquad P = S G

Graph: every layer sends each part's send rows forward and the gradients of its halo rows back
(``sum_p R_p = sum_p H_p``: every halo row is some part's send row), then every rank all-reduces
all the weights. Per layer (:func:`halo_row_bytes`, on :func:`.saved.layer_shapes`' ``w_in``):

.. math::

    h_l = w_l (b_\text{rows} + b_\text{grads}), \qquad
    h_0 = \begin{cases} 0 & \text{static halo} \\ F_\text{in} b_\text{features} & \text{otherwise}\end{cases}
    \ \text{(a store-fed first layer)}

``w_l`` the layer's input width (``F``; GAT's heads x per-head width, ``F`` too; under ``sync`` a
GCN or GraphSAGE layer that narrows sends its output width, the mapped rows), ``b_rows`` and
``b_grads`` the wire bytes of ``--halo-dtype``, else of ``--precision`` (:func:`wire_row_bytes`:
a quantised row adds its header), ``b_features`` float32's or ``--halo-dtype``'s. The first layer of
GCN, GraphSAGE, GAT and GIN reads the features, which need no gradient: it sends ``F_in``-wide
rows forward only, and with the static halo cache (the default) nothing per epoch (they crossed
once, at the start; not counted). GCNII, ResGCN, ResGraphSAGE and GINE (:func:`.layers.tensor_input`)
feed their first conv a hidden-wide map of the features with a gradient: ``h_l = 2 b F`` every
layer, ``sum_l h_l = 2 b F L``.
Layer: each of the ``S - 1`` stage boundaries carries all ``N`` rows forward and their gradient
back, whatever the graph's cut; a stage's own weights have nobody to sum with, the shared ones
are summed over every rank. Hybrid: the boundaries, plus each stage's ``L / S`` layers exchanging
the halo rows of the ``G``-part partition (``h'_l``: the first stage's first layer reads the
features, with no static halo cache in the layer-parallel trainer, and the stages send rows as
computed, ``--halo-dtype`` aside), plus each stage's weights over its ``G`` ranks. Hence

.. math::

    \frac{B_\text{layer}}{B_\text{graph}} \approx \frac{(S - 1) N}{L_h\, H(P)}, \qquad
    L_h = \frac{\sum_l h_l}{2 b F}

(ignoring the all-reduce; ``L_h = L`` for GCNII, ``L - 1`` for a store-fed model with the static
halo): layer parallelism pays in bytes when ``H(P) / N > (S - 1) / L_h``: deep models, parts
with many halo rows.

Time per epoch on a link of ``beta`` bytes/s per rank (each rank's link works in parallel; the
mean rank's bytes), with compute proportional to edges, width and depth at ``r`` edge-feature
products per second per rank (forward plus a backward of twice its cost):

.. math::

    T_\text{compute} = \frac{3 E F L}{P r}, \qquad
    T = T_\text{compute} \Bigl(1 + \frac{S - 1}{K}\Bigr) + \frac{B}{P \beta}

The pipeline of ``S`` stages over ``K`` chunks runs ``K + S - 1`` chunk-steps for ``K`` of work:
it idles ``(S - 1) / (K + S - 1)`` of the time (fill and drain; the graph schedule has
``S = 1``). Transfers are not overlapped with compute (an upper bound: the chunks of layer
parallelism and ``--pipeline overlap|stale`` hide part of them). ``K > 1`` reads the previous
epoch's rows for later chunks, which changes what is trained; ``K = 1`` is exact but has no
overlap between stages (its bubble is ``(S - 1) / S``).

The halo rows of a part count the schedule does not have a folder for are scaled from a known
one by the halo model's exponent (:mod:`.sizes`: ``H / I = a (P - 1)^b``):
``H(G) = H(P) ((G - 1) / (P - 1))^b``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..models.saved import LayerShape
from .sizes import HALO_MODELS

__all__ = ["ScheduleGraph", "ScheduleModel", "ScheduleCost", "ScheduleTable", "EDGE_RATE", "schedule_costs",
           "recommend_schedule", "shared_parameters", "halo_row_bytes", "wire_row_bytes", "workload_row_bytes"]

EDGE_RATE = 2.2e8
"""Default ``r``: edge-feature products per second per rank, measured on this project's CPU ranks
(sbm-small, GCNII 16 x 64, P = 4 ranks on 2 shared cores, graph sync: 0.596 s per epoch,
``benchmarks/results/layer_parallel_cpu2_2026-12-02_sbm-small_80epochs.md``). A GPU is orders of
magnitude faster: set ``--edge-rate``."""


@dataclass(frozen=True, slots=True)
class ScheduleGraph:
    """The graph as the cost model sees it: nodes, stored edges, and the summed halo rows of the
    part counts known (``{parts: H(parts)}``, at least one)."""

    nodes: int
    edges: int
    halo: Mapping[int, int]
    halo_model: str = "rmat"

    def __post_init__(self) -> None:
        if not self.halo:
            raise ValueError("ScheduleGraph.halo: give the halo rows of at least one part count")
        if self.halo_model not in HALO_MODELS:
            raise ValueError(f"ScheduleGraph.halo_model={self.halo_model!r}: one of {sorted(HALO_MODELS)}")

    def halo_rows(self, parts: int) -> float:
        """``H(parts)``: the known figure, 0 for one part, else scaled from the nearest known."""
        if parts <= 1:
            return 0.0
        if parts in self.halo:
            return float(self.halo[parts])
        known = [p for p in self.halo if p > 1]
        if not known:
            raise ValueError(f"no halo figure of a partition into more than one part to scale to {parts} parts")
        ref = min(known, key=lambda p: abs(p - parts))
        b = HALO_MODELS[self.halo_model][1]
        return min(self.halo[ref] * ((parts - 1) / (ref - 1)) ** b, float(self.nodes * (parts - 1)))

    def measured(self, parts: int) -> bool:
        return parts <= 1 or parts in self.halo


@dataclass(frozen=True, slots=True)
class ScheduleModel:
    """The model's figures: ``L``, ``F``, ``W``, ``W_s``, ``C``, ``b``, and the bytes one halo row
    moves per layer and epoch, forward plus backward, ``h_l`` (module docstring; empty: ``2 b F``
    every layer, the GCNII rule), under graph sync (``row_bytes``) and within the stages of the
    layer and hybrid schedules (``staged_row_bytes``; empty: ``row_bytes``)."""

    layers: int
    hidden: int
    params: int
    shared_params: int = 0
    carry: int = 0
    bytes_per_element: int = 4
    row_bytes: tuple[float, ...] = ()
    staged_row_bytes: tuple[float, ...] = ()

    def halo_row_bytes(self, staged: bool) -> float:
        """``sum_l h_l``: the bytes one halo row moves in an epoch over all layers."""
        rows = (self.staged_row_bytes or self.row_bytes) if staged else self.row_bytes
        return float(sum(rows)) if rows else 2.0 * self.bytes_per_element * self.hidden * self.layers


@dataclass(frozen=True, slots=True)
class ScheduleCost:
    """One candidate schedule's predicted bytes and time per epoch."""

    name: str
    mode: str
    stages: int
    groups: int
    halo_bytes: float
    stage_bytes: float
    allreduce_bytes: float
    compute_s: float
    bubble: float
    """The pipeline's idle share ``(S - 1) / (K + S - 1)``."""
    link_s: float | None
    flags: list[str] = field(default_factory=list)
    estimated_halo: bool = False
    """The halo rows of ``groups`` parts were scaled by the halo model (no folder of that count)."""

    @property
    def bytes(self) -> float:
        return self.halo_bytes + self.stage_bytes + self.allreduce_bytes

    @property
    def time_s(self) -> float | None:
        """Predicted epoch time (None without a link)."""
        return None if self.link_s is None else self.compute_s / (1 - self.bubble) + self.link_s

    def to_json(self, ref: "ScheduleCost") -> dict:
        out = {"name": self.name, "mode": self.mode, "stages": self.stages, "groups": self.groups,
               "flags": self.flags, "bytes": int(round(self.bytes)), "bytes_ratio": self.bytes / ref.bytes,
               "halo_bytes": int(round(self.halo_bytes)), "stage_bytes": int(round(self.stage_bytes)),
               "allreduce_bytes": int(round(self.allreduce_bytes)), "bubble": self.bubble,
               "estimated_halo": self.estimated_halo}
        if self.time_s is not None and ref.time_s:
            out.update(time_s=self.time_s, time_ratio=self.time_s / ref.time_s)
        return out


def shared_parameters(model: str, *, feature_dim: int, hidden: int, classes: int, layers: int, jk: str = "last") -> int:
    """``W_s`` of a built-in model (what its layer-parallel adapter sums over every rank,
    ``gnn_dist/layer_parallel/staged.py``): GCNII's ``lin_in``, the ``cat`` readout's weight,
    the residual models' closing norm with ``max`` (two ``F`` vectors)."""
    if model == "gcnii":
        return feature_dim * hidden + hidden
    if jk == "cat" and model not in ("resgcn", "ressage"):
        return hidden * layers * classes
    if jk == "max" and model in ("resgcn", "ressage"):
        return 2 * hidden
    return 0


Wire = float | Callable[[int], float]
"""Bytes a value on the wire, or ``width -> bytes`` of one row (:func:`wire_row_bytes`)."""


def _per_row(wire: Wire) -> Callable[[int], float]:
    return wire if callable(wire) else (lambda w: w * wire)


def halo_row_bytes(shapes: Sequence[LayerShape], *, store_fed: bool, static_halo: bool, wire: Wire,
                   grad_wire: Wire | None = None, feature_wire: Wire = 4.0, mapped: bool = False) -> tuple[float, ...]:
    """``h_l`` of each layer (:func:`.saved.layer_shapes`): its input's ``w_in``-wide rows forward in
    ``wire`` and their gradients back in ``grad_wire`` (default ``wire``); a store-fed first layer
    (``store_fed``: its input is the features, which need no gradient) sends its ``F_in``-wide rows
    forward only, in ``feature_wire``, and nothing per epoch with the ``static_halo`` cache
    (fetched once, at the start). ``mapped``: a layer that narrows (``w_out < w_in``) sends its
    ``w_out``-wide mapped rows and their gradients instead (``sync``, the models'
    ``exchanges_mapped_rows``)."""
    fwd, feat = _per_row(wire), _per_row(feature_wire)
    back = fwd if grad_wire is None else _per_row(grad_wire)

    def row(s: LayerShape) -> float:
        if store_fed and s.index == 0:
            return 0.0 if static_halo else feat(s.w_in)
        w = min(s.w_in, s.w_out) if mapped else s.w_in
        return fwd(w) + back(w)
    return tuple(row(s) for s in shapes)


def wire_row_bytes(name: str) -> Callable[[int], float]:
    """``width -> bytes`` of one row in the wire format ``name`` (a ``--halo-dtype`` or
    ``--precision``, the codecs' registry): a float dtype's values (:func:`.model._wire_bytes`), a
    quantised width's packed bits and per-row header (:func:`~gnn_dist.distributed.quantize.row_bytes`)."""
    from ..distributed.codec import QUANTIZED_BITS
    from ..distributed.quantize import row_bytes
    from .model import _wire_bytes

    if name in QUANTIZED_BITS:
        return lambda w: float(row_bytes(w, QUANTIZED_BITS[name]))
    return _per_row(_wire_bytes(name))


def workload_row_bytes(workload: Any, sizes: Any, *, staged: bool = False) -> tuple[float, ...]:
    """:func:`halo_row_bytes` of a :class:`~.model.Workload` on a part of ``sizes``: graph sync
    with the run's static halo and ``--halo-dtype`` (else ``--precision``) wire; ``staged``: the
    layer-parallel trainer's stages, which have no static halo and send rows as computed. Layer 0's
    features travel as float32 (or in ``--halo-dtype``): autocast starts at the first map."""
    from ..models.spec import model_spec
    from .model import _layers, _store_fed

    wire = workload.precision if staged else (workload.halo_dtype or workload.precision)
    features = "fp32" if staged else (workload.halo_dtype or "fp32")
    mapped = not staged and workload.pipeline == "sync" and model_spec(workload.model).exchanges_mapped_rows
    return halo_row_bytes(_layers(workload, sizes), store_fed=_store_fed(workload),
                          static_halo=workload.static_halo and not staged, wire=wire_row_bytes(wire),
                          feature_wire=wire_row_bytes(features), mapped=mapped)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def schedule_costs(graph: ScheduleGraph, model: ScheduleModel, ranks: int, *, chunks: int = 4,
                   link_gbps: float | None = None, edge_rate: float = EDGE_RATE) -> list[ScheduleCost]:
    """Every candidate schedule on ``ranks`` ranks, graph sync first: ``layer S=ranks`` when
    ``ranks`` divides the layers, ``hybrid S x G`` for ``S G = ranks``, ``S, G > 1``, ``S``
    dividing the layers (module docstring)."""
    if ranks < 1 or chunks < 1 or model.layers < 1:
        raise ValueError(f"ranks={ranks}, chunks={chunks}, layers={model.layers}: each must be >= 1")
    if link_gbps is not None and not link_gbps > 0:
        raise ValueError(f"--link-gbps {link_gbps}: a bandwidth in Gbit/s > 0")
    if not edge_rate > 0:
        raise ValueError(f"--edge-rate {edge_rate}: edge-feature products per second per rank, > 0")
    b, F, L, N = model.bytes_per_element, model.hidden, model.layers, graph.nodes
    compute = 3.0 * graph.edges * F * L / (ranks * edge_rate)
    beta = None if link_gbps is None else link_gbps * 1e9 / 8

    def cost(name: str, mode: str, S: int, G: int, flags: list[str]) -> ScheduleCost:
        halo = model.halo_row_bytes(S > 1) * graph.halo_rows(G)
        stage = 2.0 * b * (F + model.carry) * N * (S - 1)
        if S == 1:
            reduce = ranks * b * model.params if ranks > 1 else 0
        else:
            reduce = (G * b * (model.params - model.shared_params) if G > 1 else 0) + ranks * b * model.shared_params
        bubble = (S - 1) / (chunks + S - 1) if S > 1 else 0.0
        link = None if beta is None else (halo + stage + reduce) / ranks / beta
        return ScheduleCost(name, mode, S, G, halo, stage, float(reduce), compute, bubble, link,
                            flags + (["--chunks", str(chunks)] if S > 1 else []), not graph.measured(G))

    out = [cost(f"graph sync P={ranks}", "graph", 1, ranks, [])]
    for S in _divisors(ranks)[1:]:
        if L % S:
            continue
        G = ranks // S
        if G == 1:
            out.append(cost(f"layer S={S}", "layer", S, 1, ["--parallel", "layer", "--stages", str(S)]))
        else:
            out.append(cost(f"hybrid S={S} G={G}", "hybrid", S, G, ["--parallel", "hybrid", "--stages", str(S)]))
    return out


def recommend_schedule(costs: list[ScheduleCost]) -> ScheduleCost:
    """The fewest predicted epoch time on the link when one is given, else the fewest bytes
    (ties: the earlier, graph sync first)."""
    return min(costs, key=lambda c: c.time_s if c.time_s is not None else c.bytes)


@dataclass(frozen=True, slots=True)
class ScheduleTable:
    """The candidates of one rank count, their recommendation, as a table and as JSON."""

    costs: list[ScheduleCost]
    chunks: int
    link_gbps: float | None = None

    @property
    def recommended(self) -> ScheduleCost:
        return recommend_schedule(self.costs)

    def to_json(self) -> dict:
        ref = self.costs[0]
        return {"chunks": self.chunks, "link_gbps": self.link_gbps, "by": "time" if self.link_gbps else "bytes",
                "candidates": [c.to_json(ref) for c in self.costs], "recommended": self.recommended.name,
                "exact": self.chunks == 1 or self.recommended.mode == "graph"}

    def render(self) -> list[str]:
        """The table's lines (``gnn-dist plan --schedules``)."""
        ref, best = self.costs[0], self.recommended
        timed = self.link_gbps is not None
        head = ["schedule", "bytes/epoch", "x sync", "bubble"] + (["epoch s", "x sync"] if timed else []) + ["flags"]
        rows = [head]
        for c in self.costs:
            row = [c.name + (" *" if c is best else ""), f"{c.bytes / 2**20:,.2f} MiB" + ("~" if c.estimated_halo else ""),
                   f"{c.bytes / ref.bytes:.2f}x", f"{c.bubble:.2f}"]
            if timed:
                row += [f"{c.time_s:.3g}", f"{c.time_s / ref.time_s:.2f}x"]
            rows.append(row + [" ".join(c.flags) or "-"])
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        link = f"a {self.link_gbps:g} Gbit/s link" if timed else "no link given (ranked by bytes)"
        out = [f"schedules on {ref.groups} ranks, {self.chunks} chunk(s), {link}:"]
        out += ["  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
        if any(c.estimated_halo for c in self.costs):
            out.append("  ~ the halo rows of that part count are scaled by the halo model (give its folder: --halo-data)")
        note = ("" if best.mode == "graph" or self.chunks == 1 else
                f"; with --chunks {self.chunks} later chunks read the previous epoch's rows, which changes "
                f"accuracy (--chunks 1 is exact)")
        out.append(f"recommended: {best.name}{note}")
        return out
