"""The configuration of a training run, defined once.

Nested dataclasses, one per component, each validated once in ``__post_init__`` (a
:class:`ConfigError` names the field, the value and the fix). Everything else is derived from
them: the ``gnn_dist.train`` command line (:mod:`.config_cli` generates a flag per field, with
the field's docstring as its help), ``--config run.toml`` (any field, by section), and the
Python API, whose ``Trainer(model, part, lr=..., pipeline=...)`` keyword arguments are the
fields of :class:`TrainerConfig`'s sections by name, with the same defaults. The resolved
config is logged on rank 0 at start, written as the first record of the metrics file and stored
in checkpoints (:meth:`RunConfig.to_dict`).

.. code-block:: text

    RunConfig
      data: DataConfig                  --data, --no-verify
      model: ModelConfig                --model, --hidden, --layers, --dropout, --input-dropout, --activation,
                                        --heads, --out-heads, --attn-dropout, --seed
      trainer: TrainerConfig
        optim: OptimizerConfig          --optimizer, --lr, --weight-decay
        schedule: ScheduleConfig        --pipeline, --stale-smoothing, --boundary-sample-rate, ...
        features: FeatureConfig         --feature-storage, --feature-cache-budget, ...
        checkpoint: CheckpointConfig    --checkpoint-dir, --checkpoint-every, --resume, ...
        report: ReportConfig            --eval-every, --log-every, --metrics
        selection: SelectionConfig      --select, --patience
        memory: MemoryConfig            --recompute, --precision, --offload-activations
        parallel: ParallelConfig        --parallel, --stages, --chunks, --history-smoothing
        task: TaskConfig                --task, --loss
      distributed: DistributedConfig    --backend, --timeout, --kernels
      epochs                            --epochs
      save_model                        --save-model
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from .distributed.link import LinkModel, LinkSpecError

__all__ = ["ConfigError", "OptimizerConfig", "ScheduleConfig", "FeatureConfig", "CheckpointConfig", "ReportConfig",
           "TrainerConfig", "ModelConfig", "DataConfig", "DistributedConfig", "RunConfig", "OPTIMIZERS",
           "RESUME_MODES", "flag", "SelectionConfig", "SELECT_MODES", "MemoryConfig", "ParallelConfig",
           "PARALLEL_MODES", "TaskConfig", "TASK_LOSSES"]

OPTIMIZERS = ("adam", "adamw", "sgd")
RESUME_MODES = ("auto", "latest")
SELECT_MODES = ("last", "best-val")
"""``select``: the weights a run ends with, the last epoch's or those of the epoch with the best
validation accuracy (:mod:`gnn_dist.selection`)."""
"""``resume``: ``auto`` (the newest checkpoint if there is one, else a fresh start: right for a
first start and for an elastic restart), ``latest`` (the newest checkpoint, which must exist),
or the path of a checkpoint file."""
PARALLEL_MODES = ("graph", "layer", "hybrid")
"""``parallel``: graph parallelism (a part per rank), layer parallelism (GNNPipe: a stage of
consecutive layers per rank, node chunks flowing stage to stage) or both (stages x parts):
:mod:`gnn_dist.layer_parallel`."""


class ConfigError(ValueError):
    """A configuration value is invalid; ``field`` is its name (e.g. ``"lr"``)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.reason = message


def flag(name: str, *, default: Any = None, choices: Any = None, metavar: str | None = None,
         action: str | None = None, const: str = "auto") -> Any:
    """A dataclass field with its command-line flag (``--name``), ``choices`` (a tuple or a
    function returning one, read when the parser is built), ``metavar`` and ``action``
    (``store_true``/``store_false`` for booleans; ``optional`` for a flag whose value may be
    left out, then meaning ``const``: ``--resume`` alone means ``auto``)."""
    return field(default=default, metadata={"flag": name, "choices": choices, "metavar": metavar, "action": action,
                                            "const": const})


def _schedules() -> tuple[str, ...]:
    from .pipeline import schedule_names
    return schedule_names()


def _models() -> tuple[str, ...]:
    from .models import MODELS
    return tuple(sorted(MODELS))


def _jk_modes() -> tuple[str, ...]:
    from .models.shared import JK_MODES
    return JK_MODES


def _activations() -> tuple[str, ...]:
    from .nn.activations import ACTIVATIONS
    return tuple(ACTIVATIONS)


def _policies() -> tuple[str, ...]:
    from .cache.policies import POLICIES
    return tuple(sorted(POLICIES))


def _storages() -> tuple[str, ...]:
    from .cache.store import STORAGES
    return STORAGES


def _wire_dtypes() -> tuple[str, ...]:
    from .distributed.codec import codec_names
    return codec_names()


def _recompute_modes() -> tuple[str, ...]:
    from .pipeline.recompute import RECOMPUTE_MODES
    return RECOMPUTE_MODES


def _precisions() -> tuple[str, ...]:
    from .precision import PRECISIONS
    return tuple(PRECISIONS)


def _kernels() -> tuple[str, ...]:
    from .kernels import BACKEND_NAMES
    return BACKEND_NAMES


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _require(ok: bool, name: str, value: Any, expected: str) -> None:
    if not ok:
        raise ConfigError(name, f"{value!r} is not valid: expected {expected}")


def _choice(name: str, value: Any, choices: tuple[str, ...], *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if value not in choices:
        raise ConfigError(name, f"{value!r} is not one of {', '.join(choices)}")


def _int_at_least(name: str, value: Any, minimum: int, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    _require(_is_int(value) and value >= minimum, name, value, f"an integer >= {minimum}")


@dataclass(kw_only=True, slots=True)
class OptimizerConfig:
    optimizer: str = flag("--optimizer", default="adam", choices=OPTIMIZERS)
    """The optimizer."""
    lr: float = flag("--lr", default=0.01)
    """Learning rate."""
    weight_decay: float = flag("--weight-decay", default=5e-4)
    """L2 penalty (decoupled for adamw)."""

    def __post_init__(self) -> None:
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _require(_is_number(self.lr) and self.lr > 0, "lr", self.lr, "a positive number")
        _require(_is_number(self.weight_decay) and self.weight_decay >= 0, "weight_decay", self.weight_decay,
                 "a number >= 0")


@dataclass(kw_only=True, slots=True)
class ScheduleConfig:
    pipeline: str = flag("--pipeline", default="sync", choices=_schedules)
    """Halo-exchange schedule of training steps: sync (exchange, then compute; exact), overlap (exact;
    boundary rows are computed first and travel while the other rows compute) or stale (PipeGCN:
    previous-epoch halo rows and gradients, communication hidden)."""
    stale_smoothing: float | None = flag("--stale-smoothing", metavar="GAMMA")
    """With pipeline stale: moving average of the stale halo features and gradients, factor GAMMA in
    [0, 1), bias-corrected (default: none)."""
    boundary_sample_rate: float = flag("--boundary-sample-rate", default=1.0, metavar="P")
    """Boundary sampling (BNS-GCN): send a random fraction P in (0, 1] of the boundary rows each epoch,
    rescaled by 1/P (1: all, exact)."""
    halo_dtype: str | None = flag("--halo-dtype", choices=_wire_dtypes)
    """Wire format of halo rows (and their gradients) during training: a float dtype, or int8/int4/int2/
    int1 (per-row scale, unbiased stochastic rounding); compute stays in the model's dtype and
    evaluation exchanges exactly (default: as computed)."""
    halo_grad_dtype: str | None = flag("--halo-grad-dtype", choices=_wire_dtypes)
    """Wire format of the halo gradients, independently of the rows' (default: the rows')."""
    halo_bits: str | None = flag("--halo-bits", metavar="adaptive:B")
    """Adaptive bit widths for the halo rows (and, without --halo-grad-dtype, their gradients): per
    layer and pair of ranks, minimising the rounding variance under an average of B bits per value."""
    halo_bits_every: int = flag("--halo-bits-every", default=10, metavar="K")
    """With --halo-bits: training steps between bit-width decisions."""
    simulate_link: LinkModel | None = flag("--simulate-link", metavar="latency_ms=L,gbps=B")
    """Delay each training exchange as a link of latency L ms and bandwidth B Gbit/s would."""
    overlap_chunks: int = flag("--overlap-chunks", default=4, metavar="N")
    """With pipeline overlap: chunks a hidden layer computes its boundary rows in, each starting its
    piece of the next exchange (0: no boundary-first schedule)."""

    def __post_init__(self) -> None:
        _choice("pipeline", self.pipeline, _schedules())
        if self.stale_smoothing is not None:
            _require(_is_number(self.stale_smoothing) and 0 <= self.stale_smoothing < 1, "stale_smoothing",
                     self.stale_smoothing, "a factor in [0, 1)")
            if self.pipeline != "stale":
                raise ConfigError("stale_smoothing", f"{self.stale_smoothing} applies to pipeline='stale' only, "
                                                     f"not pipeline={self.pipeline!r}")
        _require(_is_number(self.boundary_sample_rate) and 0 < self.boundary_sample_rate <= 1,
                 "boundary_sample_rate", self.boundary_sample_rate, "a fraction in (0, 1]")
        _choice("halo_dtype", self.halo_dtype, _wire_dtypes(), optional=True)
        _choice("halo_grad_dtype", self.halo_grad_dtype, _wire_dtypes(), optional=True)
        _int_at_least("halo_bits_every", self.halo_bits_every, 1)
        if self.halo_bits is not None:
            from .distributed.adaptive_bits import AdaptiveBitsSpec
            try:
                AdaptiveBitsSpec.parse(self.halo_bits, self.halo_bits_every)
            except ValueError as exc:
                raise ConfigError("halo_bits", str(exc)) from None
            if self.halo_dtype is not None:
                raise ConfigError("halo_bits", f"{self.halo_bits} chooses the halo rows' widths; it cannot be "
                                               f"combined with halo_dtype={self.halo_dtype!r} (drop one)")
        if isinstance(self.simulate_link, (str, dict)):
            try:
                self.simulate_link = (LinkModel.parse(self.simulate_link) if isinstance(self.simulate_link, str)
                                      else LinkModel(**self.simulate_link))
            except (LinkSpecError, TypeError) as exc:
                raise ConfigError("simulate_link", str(exc)) from None
        _require(self.simulate_link is None or isinstance(self.simulate_link, LinkModel), "simulate_link",
                 self.simulate_link, "'latency_ms=L,gbps=B' or a LinkModel")
        _require(_is_int(self.overlap_chunks) and 0 <= self.overlap_chunks <= 1024, "overlap_chunks",
                 self.overlap_chunks, "an integer in [0, 1024]")


@dataclass(kw_only=True, slots=True)
class FeatureConfig:
    feature_storage: str = flag("--feature-storage", default="device", choices=_storages)
    """Where input features live: all on the device, or in host memory / read from disk (mmap) with a
    device cache of the hottest rows."""
    feature_cache_budget: str | int | float | None = flag("--feature-cache-budget", metavar="SIZE")
    """Device cache size for feature_storage host/mmap: bytes, a size (4GB, 512MiB), a percentage of
    the features (25%) or a fraction (0.25) (default: all rows)."""
    feature_cache_policy: str = flag("--feature-cache-policy", default="degree", choices=_policies)
    """Which rows the device cache holds: degree (inner and halo rows by their reads per epoch), halo
    (rows sent to most peers first), frequency (counted in the first epoch), none."""
    static_halo: bool = flag("--no-static-halo", default=True, action="store_false")
    """Fetch the halo rows' input features once at start (the flag turns it off: exchange them every
    epoch)."""
    precompute_first_layer: str = flag("--precompute-first-layer", default="auto", choices=("auto", "on", "off"),
                                       action="optional", const="on")
    """Aggregate the input features of a gcn/sage/gin first layer once and train on that (exact): auto
    does when the features are all on the device, the halo rows static and no input dropout; on
    (the flag alone) insists; off never (true/false in a TOML file mean on/off)."""
    first_layer_chunk_rows: int | None = flag("--first-layer-chunk-rows", metavar="N")
    """Run the first layer over chunks of N destination rows, fetching each chunk's source rows
    through the feature cache; 0 never chunks (default: chunk when the cache does not hold every row)."""

    def __post_init__(self) -> None:
        from .cache.input import check_feature_options, precompute_mode

        self.precompute_first_layer = precompute_mode(self.precompute_first_layer)
        check_feature_options(storage=self.feature_storage, cache_policy=self.feature_cache_policy,
                              static_halo=self.static_halo, precompute_first_layer=self.precompute_first_layer,
                              first_layer_chunk_rows=self.first_layer_chunk_rows, cache_budget=self.feature_cache_budget)


@dataclass(kw_only=True, slots=True)
class CheckpointConfig:
    checkpoint_dir: str | None = flag("--checkpoint-dir")
    """Where rank 0 writes checkpoints (only rank 0 reads them back: no shared filesystem needed; with
    a stateful pipeline such as stale each rank also writes and reads its own rank file)."""
    checkpoint_every: int = flag("--checkpoint-every", default=10)
    """Checkpoint every K epochs and after the last."""
    checkpoint_keep: int | None = flag("--keep-checkpoints", metavar="N")
    """Keep only the newest N checkpoints (default: all)."""
    resume: str | None = flag("--resume", action="optional", metavar="auto|latest|PATH")
    """Continue from a checkpoint: auto (the newest in checkpoint_dir if any, else start at epoch 0;
    what --resume alone means, right for a first start and an elastic restart), latest (the newest,
    which must exist) or the path of a checkpoint file."""
    resume_any_partition: bool = flag("--resume-any-partition", default=False, action="store_true")
    """Resume a checkpoint written for another partition folder (refused by default)."""

    def __post_init__(self) -> None:
        _int_at_least("checkpoint_every", self.checkpoint_every, 1)
        _int_at_least("checkpoint_keep", self.checkpoint_keep, 1, optional=True)
        _require(self.checkpoint_dir is None or isinstance(self.checkpoint_dir, str), "checkpoint_dir",
                 self.checkpoint_dir, "a folder path")
        if self.checkpoint_keep is not None and self.checkpoint_dir is None:
            raise ConfigError("checkpoint_keep", "needs a checkpoint folder (checkpoint_dir, --checkpoint-dir)")
        _require(self.resume is None or (isinstance(self.resume, str) and self.resume != ""), "resume",
                 self.resume, "auto, latest or a checkpoint file")
        if self.resume in RESUME_MODES and self.checkpoint_dir is None:
            raise ConfigError("resume", f"{self.resume} needs a checkpoint folder (checkpoint_dir, --checkpoint-dir)")


@dataclass(kw_only=True, slots=True)
class ReportConfig:
    eval_every: int = flag("--eval-every", default=1)
    """Evaluate train/val/test accuracy every K epochs; 0 never."""
    log_every: int = flag("--log-every", default=10)
    """Rank 0 logs a progress line every K epochs; 0 never."""
    metrics_path: str | None = flag("--metrics", metavar="FILE.jsonl")
    """JSON-lines file rank 0 writes: the resolved config, then one object per epoch (started afresh
    unless resuming, which keeps the records of the epochs before the checkpoint)."""
    tensorboard: str | None = flag("--tensorboard", metavar="DIR")
    """Also write each epoch's figures (loss, accuracies, times, bytes per layer) as TensorBoard scalars
    into DIR, on rank 0 (needs the tensorboard package: pip install 'gnn-dist[tensorboard]')."""

    def __post_init__(self) -> None:
        _int_at_least("eval_every", self.eval_every, 0)
        _int_at_least("log_every", self.log_every, 0)


@dataclass(kw_only=True, slots=True)
class SelectionConfig:
    select: str = flag("--select", default="last", choices=SELECT_MODES)
    """The weights the run ends with: last (the last epoch's) or best-val (those of the evaluated epoch
    with the best validation accuracy, the first on a tie: kept in memory and in checkpoints, restored at
    the end; the final line names that epoch, and --save-model writes its weights)."""
    patience: int | None = flag("--patience", metavar="K")
    """Stop early when the validation accuracy has not improved for K evaluations in a row (default:
    never); a resumed run counts on from the checkpoint."""

    def __post_init__(self) -> None:
        _choice("select", self.select, SELECT_MODES)
        _int_at_least("patience", self.patience, 1, optional=True)


@dataclass(kw_only=True, slots=True)
class MemoryConfig:
    recompute: str = flag("--recompute", default="none", choices=_recompute_modes)
    """Recompute each layer in backward instead of keeping what autograd saves: layers (the conv and
    activation, from the layer's exchanged rows; sync or stale), all (the exchange too, from the
    inner rows alone; sync). Exact: the same losses, bit for bit."""
    precision: str = flag("--precision", default="fp32", choices=_precisions)
    """Compute dtype of training and evaluation: fp32, or bf16 (autocast; float32 weights, optimizer
    state, loss and all-reduce; activations and halo rows in bfloat16)."""

    offload_activations: bool = flag("--offload-activations", default=False, action="store_true")
    """On CUDA: what autograd saves for backward waits in pinned host memory (copied on a side
    stream, back ahead of its backward); exact. Refused on CPU."""

    def __post_init__(self) -> None:
        _choice("recompute", self.recompute, _recompute_modes())
        _require(isinstance(self.offload_activations, bool), "offload_activations", self.offload_activations,
                 "true or false")
        _choice("precision", self.precision, _precisions())


def _chunkings() -> tuple[str, ...]:
    from .layer_parallel.chunks import CHUNKINGS
    return tuple(CHUNKINGS)


@dataclass(kw_only=True, slots=True)
class ParallelConfig:
    parallel: str = flag("--parallel", default="graph", choices=PARALLEL_MODES)
    """How the ranks share the work: graph (a part of the graph per rank), layer (GNNPipe: S ranks each
    hold a stage of consecutive layers over the whole graph, a 1-part folder; node chunks flow stage to
    stage) or hybrid (P = S x G ranks: each stage graph-parallel over the G parts of the folder)."""
    stages: int = flag("--stages", default=1, metavar="S")
    """With parallel layer/hybrid: pipeline stages; S divides the ranks and the model's layers."""
    chunks: int = flag("--chunks", default=1, metavar="K")
    """With parallel layer/hybrid: node chunks that flow through the stages; rows of chunks not yet
    computed this epoch are the previous epoch's (1: exact)."""
    chunk_by: str = flag("--chunk-by", default="hash", choices=_chunkings)
    """With chunks > 1: a row's chunk from a hash of its original id (hash), or from a METIS partition
    of each part's rows (graph: fewer of a chunk's neighbours in later chunks, so fewer historical rows)."""
    history_smoothing: float | None = flag("--history-smoothing", metavar="GAMMA")
    """With parallel layer/hybrid and chunks > 1: moving average of the historical rows, factor GAMMA in
    [0, 1), bias-corrected (default: none, the previous epoch's rows)."""

    def __post_init__(self) -> None:
        _choice("parallel", self.parallel, PARALLEL_MODES)
        _int_at_least("stages", self.stages, 1)
        _int_at_least("chunks", self.chunks, 1)
        _choice("chunk_by", self.chunk_by, _chunkings())
        if self.history_smoothing is not None:
            _require(_is_number(self.history_smoothing) and 0 <= self.history_smoothing < 1, "history_smoothing",
                     self.history_smoothing, "a factor in [0, 1)")
        if self.parallel == "graph":
            for name, value, unset in (("stages", self.stages, 1), ("chunks", self.chunks, 1),
                                       ("chunk_by", self.chunk_by, "hash"),
                                       ("history_smoothing", self.history_smoothing, None)):
                if value != unset:
                    raise ConfigError(name, f"{value} applies to parallel layer or hybrid only, not parallel='graph' "
                                            f"(--parallel layer --stages S)")


def _tasks() -> tuple[str, ...]:
    from .tasks import task_names
    return ("auto", *task_names())


def _decoders() -> tuple[str, ...]:
    from .nn.link_decoder import DECODERS
    return tuple(DECODERS)


TASK_LOSSES = ("auto", "ce", "bce", "mse", "mae")
"""``loss``: the task's own (``auto``), or one by name (:data:`gnn_dist.tasks.LOSSES`)."""


@dataclass(kw_only=True, slots=True)
class TaskConfig:
    task: str = flag("--task", default="auto", choices=_tasks)
    """What the model learns: auto (the partition's label kind decides: class ids -> classification, a 0/1
    matrix -> multilabel, float targets -> regression) or a task by name, refused when the partition's
    labels are of another kind."""
    loss: str = flag("--loss", default="auto", choices=TASK_LOSSES)
    """The training loss: auto (the task's own: ce for classification, bce for multilabel and link, mse
    for regression), or ce, bce, mse, mae (mse and mae: regression)."""
    decoder: str = flag("--decoder", default="dot", choices=_decoders)
    """Link prediction: how a pair is scored from its endpoints' embeddings: dot (inner product) or mlp
    (two layers on their element-wise product)."""
    eval_negatives: int = flag("--eval-negatives", default=100, metavar="M")
    """Link prediction: the fixed negatives each evaluated edge is ranked against (MRR, Hits@K)."""
    hits_k: int = flag("--hits-k", default=10, metavar="K")
    """Link prediction: the K of the Hits@K metric."""

    def __post_init__(self) -> None:
        _choice("task", self.task, _tasks())
        _choice("loss", self.loss, TASK_LOSSES)
        _choice("decoder", self.decoder, _decoders())
        _int_at_least("eval_negatives", self.eval_negatives, 1)
        _int_at_least("hits_k", self.hits_k, 1)
        if self.task != "auto" and self.loss != "auto":
            from .tasks import TASKS

            kind = TASKS[self.task]
            if self.loss not in kind.losses:
                raise ConfigError("loss", f"{self.loss} is not a loss of task {self.task} (its losses: "
                                          f"{', '.join(kind.losses)}); use --loss auto or one of {', '.join(kind.losses)}")

    def resolve(self, label_kind: str | None, where: str = "the partition", *, edge_split: bool = False) -> Any:
        """The :class:`~gnn_dist.tasks.Task` for a partition whose labels are ``label_kind`` (and
        which has an ``edge_split`` or not; :func:`gnn_dist.tasks.resolve_task`); a mismatch is a
        :class:`ConfigError`."""
        from .tasks import resolve_task

        return resolve_task(self.task, self.loss, label_kind, edge_split=edge_split, options=self, where=where,
                            error=ConfigError)


SECTIONS: dict[str, type] = {"optim": OptimizerConfig, "schedule": ScheduleConfig, "features": FeatureConfig,
                             "checkpoint": CheckpointConfig, "report": ReportConfig, "selection": SelectionConfig,
                             "memory": MemoryConfig, "parallel": ParallelConfig,
                             "task": TaskConfig}
"""The sections of :class:`TrainerConfig` by name."""


@dataclass(kw_only=True, slots=True)
class TrainerConfig:
    """What :class:`~gnn_dist.trainer.Trainer` needs besides the model and the part."""

    optim: OptimizerConfig = field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    features: FeatureConfig = field(default_factory=FeatureConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)

    def __post_init__(self) -> None:
        from .pipeline.recompute import recompute_error
        why = recompute_error(self.memory.recompute, self.schedule.pipeline)
        if why is not None:
            raise ConfigError("recompute", why)
        from .layer_parallel.options import unsupported_option
        refused = unsupported_option(self)
        if refused is not None:
            raise ConfigError(*refused)
        if self.report.eval_every == 0:
            s = self.selection
            if s.select != "last":
                raise ConfigError("select", f"{s.select} needs evaluations, but eval_every = 0 never evaluates "
                                            f"(--eval-every K, K >= 1)")
            if s.patience is not None:
                raise ConfigError("patience", f"{s.patience} counts evaluations, but eval_every = 0 never "
                                              f"evaluates (--eval-every K, K >= 1)")

    @classmethod
    def from_fields(cls, **fields: Any) -> "TrainerConfig":
        """A config from flat field names (``lr=``, ``pipeline=``, ``feature_storage=`` ...), as
        :class:`~gnn_dist.trainer.Trainer` takes them; the others keep their defaults."""
        owner = {leaf.name: name for name, kind in SECTIONS.items() for leaf in dataclasses.fields(kind)}
        chosen: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
        for name, value in fields.items():
            if name not in owner:
                raise ConfigError(name, f"is not a training option; the options are {', '.join(sorted(owner))}")
            chosen[owner[name]][name] = value
        return cls(**{name: SECTIONS[name](**values) for name, values in chosen.items()})

    def fields(self) -> dict[str, Any]:
        """The flat ``{field: value}`` of every section (what :meth:`from_fields` takes)."""
        return {leaf.name: getattr(getattr(self, f.name), leaf.name)
                for f in dataclasses.fields(self) for leaf in dataclasses.fields(getattr(self, f.name))}


@dataclass(kw_only=True, slots=True)
class ModelConfig:
    model: str = flag("--model", default="gcn", choices=_models)
    """The built-in model."""
    hidden: int = flag("--hidden", default=64)
    """Hidden width; for gat the total width of a hidden layer, heads x per-head width, so a multiple of
    the heads (--hidden 64 --heads 8: 8 heads of 8)."""
    layers: int = flag("--layers", default=2)
    """Number of layers."""
    dropout: float = flag("--dropout", default=0.5)
    """Feature dropout after each hidden layer, a probability in [0, 1)."""
    input_dropout: float = flag("--input-dropout", default=0.0, metavar="P")
    """Dropout on the input features before the first layer, a probability in [0, 1); keyed by original
    node id like the other masks, so P ranks train what one does (not with --precompute-first-layer on;
    it turns auto's precomputation off)."""
    activation: str = flag("--activation", default="relu", choices=_activations)
    """The nonlinearity after each hidden layer (elu: the GAT paper's)."""
    jk: str = flag("--jk", default="last", choices=_jk_modes)
    """Jumping knowledge: the last layer's output (last), or every layer's concatenated (cat) or their
    element-wise maximum (max), then a linear map to the classes; models gcn, sage, gat, gin, resgcn,
    ressage."""
    heads: int | None = flag("--heads")
    """With model gat: attention heads of the hidden layers (default: 8)."""
    out_heads: int | None = flag("--out-heads", metavar="K")
    """With model gat: attention heads of the output layer, averaged (default: 1)."""
    attn_dropout: float = flag("--attn-dropout", default=0.0, metavar="P")
    """With model gat: dropout of the attention coefficients of every layer, a probability in [0, 1);
    keyed by both endpoints' original ids, so P ranks train what one does."""
    edge_dim: int | None = flag("--edge-dim", metavar="D")
    """Width of the edge features the model reads, models gine (which needs them) and gat (which reads
    them when the partition has them); must equal the partition's edge_feature_dim, or 0: gat ignores
    them (default: the partition's)."""
    seed: int = flag("--seed", default=0)
    """Seed of the initial weights, dropout masks and boundary samples."""

    def __post_init__(self) -> None:
        _choice("model", self.model, _models())
        _int_at_least("hidden", self.hidden, 1)
        _int_at_least("layers", self.layers, 1)
        _require(_is_number(self.dropout) and 0 <= self.dropout < 1, "dropout", self.dropout, "a probability in [0, 1)")
        _require(_is_number(self.input_dropout) and 0 <= self.input_dropout < 1, "input_dropout", self.input_dropout,
                 "a probability in [0, 1)")
        _choice("activation", self.activation, _activations())
        _choice("jk", self.jk, _jk_modes())
        from .models import MODEL_SPECS
        spec = MODEL_SPECS[self.model]
        if self.jk != "last":
            if self.jk not in spec.jk_modes:
                takes = sorted(name for name, s in MODEL_SPECS.items() if self.jk in s.jk_modes)
                raise ConfigError("jk", f"{self.jk!r} applies to models {', '.join(takes)}, not {self.model!r}; "
                                        f"leave it at 'last'")
            if self.out_heads is not None:
                raise ConfigError("out_heads", f"{self.out_heads} is the output layer's heads, which jk = "
                                               f"{self.jk!r} replaces by a linear map; leave it unset")
        _int_at_least("heads", self.heads, 1, optional=True)
        _int_at_least("out_heads", self.out_heads, 1, optional=True)
        _require(_is_number(self.attn_dropout) and 0 <= self.attn_dropout < 1, "attn_dropout", self.attn_dropout,
                 "a probability in [0, 1)")
        for name, value, unset in (("heads", self.heads, None), ("out_heads", self.out_heads, None),
                                   ("attn_dropout", self.attn_dropout, 0)):
            if value != unset and name not in spec.options:
                takes = sorted(n for n, s in MODEL_SPECS.items() if name in s.options)
                raise ConfigError(name, f"{value} applies to models {', '.join(takes) or 'none'}, not {self.model!r}")
        _check_edge_dim(spec, self.edge_dim)
        refused = spec.check(self) if spec.check is not None else None
        if refused is not None:
            raise ConfigError(*refused)
        _require(_is_int(self.seed), "seed", self.seed, "an integer")


def _check_edge_dim(spec: Any, edge_dim: int | None) -> None:
    """``edge_dim`` None, or >= 0 for a model that reads edge features (its spec's
    ``edge_features``: ``"required"`` refuses 0, ``"optional"`` takes it)."""
    _int_at_least("edge_dim", edge_dim, 0, optional=True)
    if edge_dim is None:
        return
    from .models import MODEL_SPECS

    reads = spec.edge_features
    if reads is None:
        takes = sorted(name for name, s in MODEL_SPECS.items() if s.edge_features)
        raise ConfigError("edge_dim", f"{edge_dim} applies to models {', '.join(takes)}, not {spec.name!r}")
    if reads == "required" and edge_dim == 0:
        raise ConfigError("edge_dim", f"0, but model {spec.name!r} reads edge features; leave it unset (the "
                                      f"partition's)")


@dataclass(kw_only=True, slots=True)
class DataConfig:
    data: str | None = flag("--data")
    """Partition folder (gnn-dist partition --out)."""
    verify: bool = flag("--no-verify", default=True, action="store_false")
    """Check the sha256 of the part files at load (the flag skips it)."""

    def __post_init__(self) -> None:
        _require(self.data is None or (isinstance(self.data, str) and self.data != ""), "data", self.data,
                 "a partition folder")
        _require(isinstance(self.verify, bool), "verify", self.verify, "true or false")


@dataclass(kw_only=True, slots=True)
class DistributedConfig:
    backend: str | None = flag("--backend", choices=("nccl", "gloo"))
    """Process-group backend (default: nccl on GPU, gloo on CPU)."""
    timeout: float = flag("--timeout", default=300.0)
    """Collective timeout in seconds: a dead or stuck peer ends the job after it."""
    kernels: str | None = flag("--kernels", choices=_kernels)
    """Aggregation kernels: auto (numba on CPU, cuSPARSE on CUDA), torch, numba, or triton (fused Triton
    kernels on CUDA) (default: $GNN_DIST_KERNELS, else auto)."""
    max_memory: str | None = flag("--max-memory", metavar="SIZE")
    """Refuse to start when the estimated peak memory of this machine's ranks exceeds SIZE (8GB, 512MiB;
    default: the memory available when the run starts)."""

    def __post_init__(self) -> None:
        _choice("backend", self.backend, ("nccl", "gloo"), optional=True)
        if self.max_memory is not None:
            from partitioners.memory import parse_size

            try:
                parse_size(self.max_memory)
            except ValueError as exc:
                raise ConfigError("max_memory", str(exc)) from None
        _require(_is_number(self.timeout) and self.timeout > 0, "timeout", self.timeout, "a positive number of seconds")
        _choice("kernels", self.kernels, _kernels(), optional=True)


@dataclass(kw_only=True, slots=True)
class RunConfig:
    """A whole ``gnn_dist.train`` run."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    epochs: int = flag("--epochs", default=100)
    """Total epochs; resuming continues up to this number."""
    save_model: str | None = flag("--save-model", metavar="FILE")
    """After training, rank 0 writes the model's weights and options to FILE, a model file for gnn-dist
    predict --model-file (docs/format.md); its folder must exist."""

    def __post_init__(self) -> None:
        _int_at_least("epochs", self.epochs, 0)
        if self.model.input_dropout and self.trainer.features.precompute_first_layer == "on":
            raise ConfigError("input_dropout", f"{self.model.input_dropout} cannot be combined with "
                                               f"precompute_first_layer (the first layer's aggregate of the raw "
                                               f"features is computed once, before any mask): drop one of them")
        _require(self.save_model is None or (isinstance(self.save_model, str) and self.save_model != ""),
                 "save_model", self.save_model, "the path of a file")
        from .layer_parallel.options import model_error
        refused = model_error(self.trainer.parallel, self.model.model, self.model.layers, self.model.jk)
        if refused is not None:
            raise ConfigError(*refused)

    def to_dict(self) -> dict[str, Any]:
        """The resolved config as plain JSON values (a link as its ``latency_ms=L,gbps=B`` string)."""
        return to_dict(self)


def to_dict(config: Any) -> dict[str, Any]:
    """A config dataclass as nested plain values (what the metrics file and checkpoints store)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, LinkModel):
            out[f.name] = to_dict(value)
        else:
            out[f.name] = str(value) if isinstance(value, LinkModel) else value
    return out

