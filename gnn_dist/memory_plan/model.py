"""The memory planner's model of one training rank: each component's predicted peak, in bytes,
as a formula of the part's sizes (:class:`~.sizes.PartSizes`) and the run's settings
(:class:`Workload`).

Legend: ``I`` inner rows, ``H`` halo rows, ``S = I + H``, ``E`` local edges, ``R`` send rows,
``F`` input width, ``C`` classes, ``b`` bytes of an activation (4 fp32, 2 bf16), ``N_p``
trainable parameters (the model's output width ``C`` is the embedding width, ``--hidden``, for
link prediction; its decoder's parameters count too). Calibrated on this project's CPU ranks (peak RSS from a warm baseline,
``gnn_dist.measured_peak``; sbm-medium, one and two parts): see ``docs/performance.md``
("Memory planner") and ``benchmarks/memory_plan.py``.

On CUDA the components are split between the device (what ``max_memory_allocated`` counts, plus
the CUDA context) and the host (host and mmap feature tiers, offloaded activations, the
interpreter); on CPU they are all the process's resident memory.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..models.saved import LayerShape, Terms, activation_terms
from ..models.spec import model_spec
from ..pipeline import SCHEDULES
from .layers import jk_terms, layer_shapes, tensor_input
from .sizes import PartSizes
from .stages import stage_bytes, stage_layers, stage_parameters
from .task import task_bytes
from .parameters import count_parameters, count_typed_parameters, task_of
from .typed import embedding_values, gathered_rows_bytes

__all__ = ["Workload", "Component", "RankPlan", "plan_rank", "RUNTIME_BYTES", "STEP_RUNTIME_BYTES",
           "CUDA_CONTEXT_BYTES", "COMPONENTS"]

MiB = 1 << 20
RUNTIME_BYTES = 550 * MiB
"""One CPU rank of ``gnn-dist train`` before any graph array: the interpreter, torch, numba's
kernels, gloo, torch's 2 MiB pages (``THP_MEM_ALLOC_ENABLE=1``): the resident set when training
starts less the planner's block and features, 541-558 MiB on sbm-small and sbm-medium at P = 1,
2, 4 (``benchmarks/memory_plan.py``)."""
STEP_RUNTIME_BYTES = 40 * MiB
"""What the first training step adds on a CPU rank besides the tensors: the autograd engine, the
optimizer's first step, small blocks the heap keeps (36-65 MiB above the tensors on sbm-small)."""
CUDA_CONTEXT_BYTES = 600 * MiB
"""The CUDA context and cuBLAS/cuSPARSE workspaces on the device (not in ``max_memory_allocated``)."""

COMPONENTS = ("runtime", "block", "features", "halo", "stage", "activations", "optimizer", "workspace", "task",
              "save")
"""The components in the order the tables show them (``task``: :mod:`.task`, 0 for node tasks;
``save``: rank 0's gathered learnable rows at a save, 0 but for typed runs;
``stage``: a layer/hybrid-parallel stage's boundary, leaves and history, :mod:`.stages`, 0 for
graph parallelism)."""

_OPTIMIZER_STATE = {"adam": 8, "adamw": 8, "sgd": 0}
"""Optimizer -> bytes of state per parameter (Adam's two moments; SGD without momentum none)."""


@dataclass(frozen=True, slots=True)
class Workload:
    """The settings of a run that change its memory (what the planner reads of a ``RunConfig``)."""

    model: str = "gcn"
    hidden: int = 64
    layers: int = 2
    heads: int | None = None
    out_heads: int | None = None
    jk: str = "last"
    dropout: float = 0.5
    activation: str = "relu"
    """``--activation`` (ReLU and the dropout keep 1 byte an element together)."""
    optimizer: str = "adam"
    select: str = "last"
    pipeline: str = "sync"
    stale_smoothing: float | None = None
    """``--stale-smoothing`` (a schedule's moving average doubles the buffers it keeps)."""
    recompute: str = "none"
    precision: str = "fp32"
    offload: bool = False
    feature_storage: str = "device"
    feature_cache_budget: str | int | float | None = None
    static_halo: bool = True
    halo_dtype: str | None = None
    device: str = "cpu"
    """``cpu`` or ``cuda``: where the ranks train."""
    task: str = "auto"
    """``--task`` (``auto`` resolved when the partition is known): ``link`` adds the ``task``
    component (:mod:`.task`) and makes the output width ``hidden``; the node tasks add nothing."""
    decoder: str = "dot"
    """Link prediction's ``--decoder``."""
    eval_negatives: int = 100
    """Link prediction's ``--eval-negatives``."""
    parallel: str = "graph"
    """``--parallel``: ``graph``, or ``layer``/``hybrid`` (a rank holds one of ``stages``
    stages of consecutive layers: :mod:`.stages`)."""
    stages: int = 1
    """``--stages`` (layer/hybrid)."""
    chunks: int = 1
    """``--chunks`` (layer/hybrid; above 1 the stage keeps a second copy of its history)."""
    embedding_dim: int | None = None
    """``--embedding-dim`` (a typed partition's learnable rows: :mod:`.typed`)."""
    num_bases: int | None = None
    """``--num-bases`` (R-GCN's basis decomposition)."""
    checkpoint: bool = False
    """``--checkpoint-dir`` is set (checkpoints are written)."""
    save_model: bool = False
    """``--save-model`` is set (a model file is written)."""

    @classmethod
    def from_config(cls, config: Any, device: str = "cpu", meta: Any = None) -> "Workload":
        """The workload of a :class:`~gnn_dist.config.RunConfig`; ``meta`` (the partition's
        ``PartitionMeta``, optional) resolves ``--task auto``."""
        m, t = config.model, config.trainer
        p = t.parallel
        return cls(parallel=p.parallel, stages=p.stages, chunks=p.chunks, model=m.model, hidden=m.hidden, layers=m.layers, heads=m.heads, out_heads=m.out_heads,
                   jk=getattr(m, "jk", "last"),
                   dropout=m.dropout, activation=getattr(m, "activation", "relu"), optimizer=t.optim.optimizer,
                   select=t.selection.select,
                   pipeline=t.schedule.pipeline, stale_smoothing=getattr(t.schedule, "stale_smoothing", None),
                   recompute=t.memory.recompute,
                   precision=getattr(t.memory, "precision", "fp32"),
                   offload=getattr(t.memory, "offload_activations", False),
                   feature_storage=t.features.feature_storage, feature_cache_budget=t.features.feature_cache_budget,
                   static_halo=t.features.static_halo, halo_dtype=t.schedule.halo_dtype, device=device,
                   task=_task_name(t.task, meta), decoder=t.task.decoder, eval_negatives=t.task.eval_negatives,
                   embedding_dim=getattr(m, "embedding_dim", None), num_bases=getattr(m, "num_bases", None),
                   checkpoint=t.checkpoint.checkpoint_dir is not None,
                   save_model=getattr(config, "save_model", None) is not None)

    def replace(self, **changes: Any) -> "Workload":
        return dataclasses.replace(self, **changes)

    def flags(self) -> list[str]:
        """The ``gnn-dist train`` flags of the memory settings that differ from the defaults."""
        out = []
        if self.feature_storage != "device":
            out += ["--feature-storage", self.feature_storage]
        if self.feature_cache_budget is not None:
            out += ["--feature-cache-budget", str(self.feature_cache_budget)]
        if self.recompute != "none":
            out += ["--recompute", self.recompute]
        if self.precision != "fp32":
            out += ["--precision", self.precision]
        if self.offload:
            out += ["--offload-activations"]
        return out


def _task_name(options: Any, meta: Any) -> str:
    """``--task``, with ``auto`` resolved by the partition's labels and edge split when ``meta`` is
    given (a partition the task cannot train on keeps ``auto``: training refuses it)."""
    if options.task != "auto" or meta is None:
        return options.task
    try:
        return options.resolve(getattr(meta, "label_kind", None),
                               edge_split=getattr(meta, "edge_split", None) is not None).name
    except ValueError:
        return options.task


@dataclass(frozen=True, slots=True)
class Component:
    """One component's predicted peak on the device and in host memory (bytes)."""

    device: int
    host: int = 0


@dataclass(frozen=True, slots=True)
class RankPlan:
    """The prediction for one rank: its components and their totals (``stage``: the stage of a
    layer/hybrid-parallel rank, 0 otherwise)."""

    part_id: int
    components: dict[str, Component] = field(default_factory=dict)
    device: str = "cpu"
    stage: int = 0

    @property
    def total(self) -> int:
        """The device's predicted peak (on CPU the process's whole resident memory)."""
        return sum(c.device for c in self.components.values())

    @property
    def host(self) -> int:
        """Host memory besides the device's (0 on CPU, where it is all one memory)."""
        return sum(c.host for c in self.components.values())

    @property
    def allocated(self) -> int:
        """What the measured peak counts: CPU the resident set (everything), CUDA the tensors
        (``max_memory_allocated``: the total less the CUDA context)."""
        return self.total - (self.components["runtime"].device if self.device == "cuda" else 0)

    def bytes(self) -> dict[str, int]:
        """Component -> device bytes."""
        return {k: c.device for k, c in self.components.items()}


def _activation_bytes(w: Workload) -> int:
    return 2 if w.precision == "bf16" else 4


def _out_dim(w: Workload, s: PartSizes) -> int:
    """The model's output width, as the task says (:meth:`~gnn_dist.tasks.Task.out_dim`): the
    embedding width ``hidden`` for link prediction, else the classes ``C`` (also for an
    unresolved ``auto``)."""
    task = task_of(w.task, w.decoder)
    return s.num_classes if task is None else task.out_dim(s.num_classes, w.hidden)


def _layers(w: Workload, s: PartSizes) -> list[LayerShape]:
    if s.typed is not None:   # the first layer reads the widest of the features and the learnable rows
        shapes = layer_shapes(w.model, feature_dim=max(s.feature_dim, w.embedding_dim or 0), hidden=w.hidden,
                              classes=_out_dim(w, s), layers=w.layers, heads=w.heads or 1, out_heads=None,
                              dropout=w.dropout, jk=w.jk, activation=w.activation)
        per_row = s.typed.relation_rows / max(s.inner, 1)
        sources = s.typed.relation_source_rows(s.halo) / max(s.inner, 1)
        return [dataclasses.replace(sh, relations=per_row, relation_sources=sources) for sh in shapes]
    return layer_shapes(w.model, feature_dim=s.feature_dim, hidden=w.hidden, classes=_out_dim(w, s),
                        layers=w.layers, heads=w.heads, out_heads=w.out_heads, dropout=w.dropout, jk=w.jk,
                        activation=w.activation)


def _store_fed(w: Workload) -> bool:
    """The first layer reads the feature store (a LayerInput): every built-in model but those
    that take a tensor (:func:`~.layers.tensor_input`: GCNII, ResGCN, ResGraphSAGE, GINE)."""
    return not tensor_input(w.model)


def _bytes(t: Terms, s: PartSizes, b: int) -> int:
    return ((t.inner * s.inner + t.source * s.rows) * b + t.mask * s.inner + t.source_mask * s.rows
            + t.edge * s.edges * 4
            + (t.edge_cast * s.edges * 2 if b == 2 else 0))


def _feature_tier(w: Workload, s: PartSizes) -> tuple[int, int]:
    """``(device tier bytes, all feature bytes)`` of the feature store (GCNII: its ``x``)."""
    from ..cache.budget import parse_budget

    rows = s.rows if (w.static_halo and _store_fed(w)) else s.inner
    total = rows * s.feature_dim * 4
    if w.feature_storage == "device" or not _store_fed(w):
        return total, total
    return min(parse_budget(w.feature_cache_budget, total), total), total


def _chunked(w: Workload, s: PartSizes) -> bool:
    """The first layer runs in chunks (the cache does not hold every row), each recomputed in
    backward: it keeps only its output's terms."""
    device, total = _feature_tier(w, s)
    return _store_fed(w) and device < total


def layer_saved(w: Workload, s: PartSizes, resident_input: bool = True) -> list[int]:
    """Bytes each layer keeps for backward (then the outside terms last), as the recompute mode
    says; ``resident_input``: a store-fed first layer's input rows are the store's own (not new
    memory); a chunked first layer keeps its activation's terms only."""
    spec = model_spec(w.model)
    b = _activation_bytes(w)
    out = []
    for shape in _layers(w, s):
        fed = shape.index == 0 and _store_fed(w)
        if fed and _chunked(w, s):
            t = activation_terms(shape) if w.recompute == "none" else Terms()
        elif w.recompute == "none":
            t = spec.saved_formula()(shape)
            if fed and resident_input:
                t = dataclasses.replace(t, source=max(0, t.source - shape.w_in))
        elif fed:
            t = Terms()
        else:
            t = Terms(source=shape.w_in) if w.recompute == "layers" else Terms(inner=shape.w_in)
        out.append(_bytes(t, s, b))
    outside = spec.outside
    t = Terms() if outside is None else outside(s.feature_dim, w.hidden, w.recompute != "none")
    t = t + jk_terms(w.model, hidden=w.hidden, layers=w.layers, jk=w.jk, dropout=w.dropout)
    out.append(_bytes(t, s, b))
    return out


def num_parameters(w: Workload, s: PartSizes) -> int:
    """Trainable parameters of the model (and of link prediction's decoder), counted on the meta
    device (no memory); the same for every part and setting of one model, so counted once per
    model shape."""
    return _parameter_counts(w, s)[0]


def _parameter_counts(w: Workload, s: PartSizes) -> tuple[int, tuple[int, ...]]:
    """``(the model's trainable parameters, each convolution's)``; a typed model's include this
    rank's learnable rows (:mod:`.typed`)."""
    if s.typed is not None:
        width = max(s.feature_dim, w.embedding_dim or 0)
        per_conv = count_typed_parameters(w.model, s.typed.relations, s.typed.num_types, width, w.hidden,
                                          _out_dim(w, s), w.layers, w.heads, w.num_bases, w.jk)
        return sum(per_conv) + embedding_values(s.typed, w.embedding_dim), per_conv
    return count_parameters(w.model, s.feature_dim, w.hidden, _out_dim(w, s), w.layers, w.heads, w.out_heads, w.jk,
                            w.task, w.decoder)


def _wire_bytes(name: str) -> float:
    """Bytes per value on the wire of a ``--halo-dtype`` (or ``--precision``) name, from the wire
    codecs' registry (quantised rows add a per-row scale, neglected)."""
    from ..distributed.codec import CAST_DTYPES, QUANTIZED_BITS

    if name in CAST_DTYPES:
        return float(CAST_DTYPES[name].itemsize)
    return QUANTIZED_BITS[name] / 8


def _runtime(w: Workload, s: PartSizes) -> Component:
    """CPU: the interpreter with torch, numba and gloo (:data:`RUNTIME_BYTES`); CUDA: the context."""
    if w.device == "cuda":
        return Component(CUDA_CONTEXT_BYTES, RUNTIME_BYTES)
    return Component(RUNTIME_BYTES)


def _block(w: Workload, s: PartSizes) -> Component:
    """The CSR ``8 (I + 1) + 8 E``, its transpose and edge destinations cached for backward
    ``24 E + 8 S``, degrees and ids ``48 S``, labels, masks and the send list ``11 I + 8 R``, the
    GCN normalisation ``4 S`` (int64, as the block holds them); on CPU the numba kernels' copy of
    both CSRs ``16 E`` (int32 columns, in each row's source order, and edge ids) and their source
    blocks' row splits (at most ``2 E`` for the widest rows)."""
    kernels = 18 * s.edges if w.device == "cpu" else 0
    return Component(8 * (s.inner + 1) + 32 * s.edges + 60 * s.rows + 11 * s.inner + 8 * s.send + kernels)


def _features(w: Workload, s: PartSizes) -> Component:
    """The feature store ``S F 4`` (static halo rows; ``I F 4`` without them, GCNII's ``x``): all on
    the device, or a device tier of the budget plus (``host``) a host copy; on CPU the pages of
    ``features.npy`` the store was filled from stay mapped and resident (``I F 4``)."""
    device, total = _feature_tier(w, s)
    mapped = s.inner * s.feature_dim * 4
    host = 0
    if w.feature_storage != "device" and _store_fed(w):
        host = total if w.feature_storage == "host" else s.halo * s.feature_dim * 4
    if w.device == "cpu":
        return Component(device + host + mapped)
    return Component(device, host + mapped)


def _halo(w: Workload, s: PartSizes) -> Component:
    """One exchange in flight: the send rows ``R w`` and the received rows ``H w`` of the widest
    exchanged layer, in the wire dtype (forward rows or backward gradients); a schedule that
    declares ``held_rows`` (the stale one: buffers kept between steps, every layer's exchanges
    in flight) its rows of every exchanged layer instead."""
    if s.num_parts <= 1:
        return Component(0)
    shapes = _layers(w, s)
    widths = [sh.w_in for sh in shapes if sh.index > 0 or not w.static_halo or not _store_fed(w)]
    if not widths:
        return Component(0)
    wire = _wire_bytes(w.halo_dtype or w.precision)
    held = getattr(SCHEDULES.get(w.pipeline), "held_rows", None)
    if held is None:
        return Component(int((s.send + s.halo) * max(widths) * wire))
    kept, flight = held(inner=s.inner, halo=s.halo, send=s.send, smoothing=w.stale_smoothing)
    return Component(int(sum(kept * width * _activation_bytes(w) + flight * width * wire for width in widths)))


def _activations(w: Workload, s: PartSizes, stage: int = 0) -> Component:
    """What autograd keeps for backward (:mod:`.saved`); with offload (CUDA) the device holds the
    two largest layers' and the host the rest. A stage keeps its layers' and the outside terms."""
    saved = layer_saved(w, s)
    layers = list(stage_layers(w, stage))
    kept = [saved[i] for i in layers] + saved[-1:]
    total = sum(kept)
    if w.device == "cpu":
        total += _heap_retained(w, s, layers, saved)
    if w.offload and w.device == "cuda":
        on_device = sum(sorted(kept[:-1], reverse=True)[:2]) + kept[-1]
        return Component(on_device, total - on_device)
    return Component(total)


def _heap_retained(w: Workload, s: PartSizes, layers: list[int], saved: list[int]) -> int:
    """CPU: the saved tensors of the layers whose activations are smaller than the ranks' mmap
    threshold (:data:`~gnn_dist.distributed.allocator.DEFAULT_MMAP_THRESHOLD`) once more. glibc
    serves such blocks from its heap and keeps what is freed, so the resident set's high-water
    mark holds a freed copy of them beside the live ones (measured, sbm-small, hidden 64, one
    rank: RSS above the live tensors by 0.5-1.1x the saved bytes at 4-64 layers of GCN, GCNII and
    ResGCN; with a 1-2 MiB mmap threshold the gap is gone, and so is 60% of the epoch's speed).
    Blocks above the threshold are mmapped and returned to the OS when freed."""
    from ..distributed.allocator import DEFAULT_MMAP_THRESHOLD

    b = _activation_bytes(w)
    shapes = {sh.index: sh for sh in _layers(w, s)}
    small = [i for i in layers
             if max(s.rows * shapes[i].w_in, s.inner * shapes[i].w_out) * b < DEFAULT_MMAP_THRESHOLD]
    outside = s.inner * w.hidden * b < DEFAULT_MMAP_THRESHOLD
    return sum(saved[i] for i in small) + (saved[-1] if outside else 0)


def _optimizer(w: Workload, s: PartSizes, stage: int = 0) -> Component:
    """Weights, gradients and the optimizer's state: ``(8 + state) N_p`` (Adam 8 B of moments per
    parameter), ``+ 4 N_p`` for ``select best-val`` (the best epoch's weights), ``+ 2 N_p`` for bf16
    (autocast's copies of the weights). A stage: the weights ``4 N_p``, the rest for the
    parameters it trains only (:func:`~.stages.stage_parameters`)."""
    total, per_conv = _parameter_counts(w, s)
    trained = stage_parameters(w, stage, total, per_conv)
    per = 4 + _OPTIMIZER_STATE.get(w.optimizer, 8) + (4 if w.select == "best-val" else 0) \
        + (2 if w.precision == "bf16" else 0)
    return Component(4 * total + per * trained)


def _workspace(w: Workload, s: PartSizes, stage: int = 0) -> Component:
    """The busiest layer's backward: its input and output gradients ``(S w_in + I w_out) b`` times
    the model's ``workspace_factor`` (:class:`~gnn_dist.models.ModelSpec`; fitted on sbm-medium,
    3 layers x 128, one part), plus its ``workspace_edge`` float32 values per edge and head (GAT:
    the softmax backward's two ``[E, heads]`` temporaries), the logits and their gradient ``2 I C 4``, with recomputation that
    layer's saved tensors, computed again, and on CPU :data:`STEP_RUNTIME_BYTES`. bf16 on CPU:
    the SpMM of bfloat16 rows accumulates in float32, so those temporaries are float32, plus
    autocast's bfloat16 copy of the layer's input ``2 S w_in`` (measured: a bf16 step on CPU
    needs 0.9x the fp32 step's transients, not 0.5x). A stage: its layers' (the logits on the
    last stage only)."""
    b = _activation_bytes(w)
    layers = stage_layers(w, stage)
    shapes = [sh for sh in _layers(w, s) if sh.index in layers]
    last = layers.stop == w.layers
    cpu_bf16 = w.device == "cpu" and b == 2
    grads = max((s.rows * sh.w_in + s.inner * sh.w_out) * (4 if cpu_bf16 else b)
                + (2 * s.rows * sh.w_in if cpu_bf16 else 0) for sh in shapes)
    spec = model_spec(w.model)
    out = int(spec.workspace_factor * grads) + (2 * s.inner * _out_dim(w, s) * 4 if last else 0)
    out += spec.workspace_edge * s.edges * max(sh.heads for sh in shapes) * 4
    if w.device == "cpu":
        out += STEP_RUNTIME_BYTES
    if w.recompute != "none":
        kept = layer_saved(w.replace(recompute="none"), s)
        out += max(kept[i] for i in layers)
    return Component(out)


def _task(w: Workload, s: PartSizes, stage: int = 0) -> Component:
    """What the task holds and needs besides the model (:func:`~.task.task_bytes`: link
    prediction's pairs and the larger of its step's and evaluation's transients; 0 for node
    tasks). Its transients come at other moments than the model's backward (the evaluation after
    the step's tensors are freed): they count only beyond the model's activations and workspace
    (less :data:`STEP_RUNTIME_BYTES`, which stays)."""
    workspace = _workspace(w, s, stage).device - (STEP_RUNTIME_BYTES if w.device == "cpu" else 0)
    return Component(task_bytes(w, s, _activations(w, s, stage).device, workspace))


def _save(w: Workload, s: PartSizes, stage: int = 0) -> Component:
    """Rank 0 at a checkpoint or a model file of a typed run: every rank's learnable rows gathered
    by id (:func:`~.typed.gathered_rows_bytes`; a checkpoint's tables: the weights, the optimizer's
    per-row state, the best epoch's weights with ``select best-val``; a model file's: the
    weights). A save comes after the step, whose tensors are freed: it counts only beyond the
    model's activations and workspace (less :data:`STEP_RUNTIME_BYTES`, which stays). On CUDA the
    rows are gathered on the device, then copied to the host one table at a time."""
    if s.part_id != 0 or stage != 0 or not (w.checkpoint or w.save_model) or s.typed is None or not w.embedding_dim:
        return Component(0)
    best = 1 if w.checkpoint and w.select == "best-val" else 0
    state = _OPTIMIZER_STATE.get(w.optimizer, 8) // 4 if w.checkpoint else 0
    extra = gathered_rows_bytes(s.typed, w.embedding_dim, 1 + best + state, 1 + best + (1 if w.checkpoint else 0))
    step = _activations(w, s, stage).device + _workspace(w, s, stage).device
    if w.device == "cuda":   # one table's received rows on the device, the tables on the host
        return Component(max(0, s.typed.all_embedding_rows() * (4 * w.embedding_dim + 8) - step), extra)
    return Component(max(0, extra - step + STEP_RUNTIME_BYTES))


def _stage(w: Workload, s: PartSizes, stage: int = 0) -> Component:
    """A layer/hybrid-parallel stage's boundary buffers, its layer inputs' gradients, history and
    chunk plans (:func:`~.stages.stage_bytes`, at the width of the layers' inputs); 0 for graph
    parallelism."""
    widths = [sh.w_in for sh in _layers(w, s) if sh.index in stage_layers(w, stage) and sh.index > 0]
    return Component(stage_bytes(w, s, stage, max(widths, default=w.hidden)))


_FORMULAS = {"runtime": _runtime, "block": _block, "features": _features, "halo": _halo, "stage": _stage,
             "activations": _activations, "optimizer": _optimizer, "workspace": _workspace, "task": _task,
             "save": _save}
"""Component -> its formula (docstrings: where each figure comes from)."""
_STAGED = ("stage", "activations", "optimizer", "workspace", "task", "save")
"""The formulas that depend on a layer/hybrid-parallel rank's stage."""


def plan_rank(sizes: PartSizes, workload: Workload, stage: int = 0) -> RankPlan:
    """The predicted peak of the rank training part ``sizes`` as ``workload`` says (``stage``: its
    stage of a layer/hybrid-parallel run, :mod:`.stages`)."""
    return RankPlan(sizes.part_id, {name: _FORMULAS[name](workload, sizes, stage) if name in _STAGED
                                    else _FORMULAS[name](workload, sizes) for name in COMPONENTS},
                    device=workload.device, stage=stage)
