"""The whole run: the trainer's sections together (:class:`TrainerConfig`), the model
(:class:`ModelConfig`), the data (:class:`DataConfig`), the processes (:class:`DistributedConfig`)
and :class:`RunConfig`, with :func:`to_dict`, the plain values a metrics file and checkpoints
store."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .fields import (MAX_HEADS, MAX_LAYERS, MAX_SEED, MAX_TIMEOUT_S, MAX_WIDTH, ConfigError, check_choice, flag,
                     int_at_least, is_number, require)
from .loop import CheckpointConfig, OptimizerConfig, ReportConfig, SelectionConfig, TaskConfig
from .registry import choices, choices_of, run_checks
from .step import FeatureConfig, MemoryConfig, ParallelConfig, ScheduleConfig
from ..resize_cut import RESIZE_METHODS

__all__ = ["SECTIONS", "TrainerConfig", "ModelConfig", "DataConfig", "DistributedConfig", "RunConfig", "to_dict"]

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
        run_checks("trainer", self)   # across sections: recompute vs the schedule, layer parallelism's refusals
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
    model: str = flag("--model", default="gcn", choices=choices_of("model"))
    """The model: a built-in one, or your own registered with register_model (load its file with --import)."""
    hidden: int = flag("--hidden", default=64)
    """Hidden width; for gat the total width of a hidden layer, heads x per-head width, so a multiple of
    the heads (--hidden 64 --heads 8: 8 heads of 8)."""
    layers: int = flag("--layers", default=2)
    """Number of layers."""
    dropout: float = flag("--dropout", default=0.5)
    """Feature dropout after each hidden layer, a probability in [0, 1)."""
    input_dropout: float = flag("--input-dropout", default=0.0, metavar="P")
    """Dropout on the input features before the first layer, a probability in [0, 1); keyed by original
    node id like the other masks, so P ranks train what one does. It turns auto's precomputation off;
    with --precompute-first-layer on it drops the precomputed aggregate and each node's own input row
    instead (each on its own mask, as PipeGCN's and BNS-GCN's --use-pp do)."""
    activation: str = flag("--activation", default="relu", choices=choices_of("activation"))
    """The nonlinearity after each hidden layer (elu: the GAT paper's)."""
    jk: str = flag("--jk", default="last", choices=choices_of("jk"))
    """Jumping knowledge: the last layer's output (last), or every layer's concatenated (cat) or their
    element-wise maximum (max), then a linear map to the classes; models gcn, sage, gat, gin, resgcn,
    ressage."""
    heads: int | None = flag("--heads")
    """With model gat or hgt: attention heads of the hidden layers, whose width is a multiple of them
    (default: gat 8, hgt 1)."""
    out_heads: int | None = flag("--out-heads", metavar="K")
    """With model gat: attention heads of the output layer, averaged (default: 1)."""
    attn_dropout: float = flag("--attn-dropout", default=0.0, metavar="P")
    """With model gat: dropout of the attention coefficients of every layer, a probability in [0, 1);
    keyed by both endpoints' original ids, so P ranks train what one does."""
    sage_init: str = flag("--sage-init", default="pyg", choices=choices_of("sage_init"))
    """With model sage: the initial weights of each layer's two maps (self and neighbour mean): pyg,
    each drawn as its own linear layer (PyG's SAGEConv); concat, both and the bias drawn as one linear
    layer on the concatenation [mean, self] (the GraphSAGE paper's, PipeGCN's and BNS-GCN's), so
    their sum starts at one map's scale."""
    edge_dim: int | None = flag("--edge-dim", metavar="D")
    """Width of the edge features the model reads, models gine (which needs them) and gat (which reads
    them when the partition has them); must equal the partition's edge_feature_dim, or 0: gat ignores
    them (default: the partition's)."""
    num_bases: int | None = flag("--num-bases", metavar="B")
    """With model rgcn: the basis decomposition of the relation weights, B bases shared by every
    relation (default: one full weight per relation)."""
    embedding_dim: int | None = flag("--embedding-dim", metavar="D")
    """On a typed (heterogeneous) partition: the width of the learnable rows of the node types
    without features, each row kept and updated by its owner only (docs/heterogeneous.md)."""
    seed: int = flag("--seed", default=0)
    """Seed of the initial weights, dropout masks and boundary samples."""

    def __post_init__(self) -> None:
        check_choice("model", self.model, choices("model"))
        int_at_least("hidden", self.hidden, 1, maximum=MAX_WIDTH)
        int_at_least("layers", self.layers, 1, maximum=MAX_LAYERS)
        require(is_number(self.dropout) and 0 <= self.dropout < 1, "dropout", self.dropout, "a probability in [0, 1)")
        require(is_number(self.input_dropout) and 0 <= self.input_dropout < 1, "input_dropout", self.input_dropout,
                "a probability in [0, 1)")
        check_choice("activation", self.activation, choices("activation"))
        check_choice("jk", self.jk, choices("jk"))
        check_choice("sage_init", self.sage_init, choices("sage_init"))
        run_checks("model.jk", self)   # the model's jk modes (gnn_dist.models.options)
        int_at_least("heads", self.heads, 1, optional=True, maximum=MAX_HEADS)
        int_at_least("out_heads", self.out_heads, 1, optional=True, maximum=MAX_HEADS)
        require(is_number(self.attn_dropout) and 0 <= self.attn_dropout < 1, "attn_dropout", self.attn_dropout,
                "a probability in [0, 1)")
        int_at_least("num_bases", self.num_bases, 1, optional=True, maximum=MAX_WIDTH)
        int_at_least("embedding_dim", self.embedding_dim, 1, optional=True, maximum=MAX_WIDTH)
        run_checks("model", self)   # the model's options, edge features and own check (gnn_dist.models.options)
        int_at_least("seed", self.seed, 0, maximum=MAX_SEED)


@dataclass(kw_only=True, slots=True)
class DataConfig:
    data: str | None = flag("--data")
    """Partition folder (gnn-dist partition --out)."""
    target_type: str | None = flag("--target-type", metavar="TYPE")
    """On a typed partition: the node type whose labels the run learns; the one the folder was
    partitioned for (the default; another is refused: re-partition with --target-type)."""
    verify: bool = flag("--no-verify", default=True, action="store_false")
    """Check the sha256 of the part files at load (the flag skips it)."""
    repartition_on_resize: str | None = flag("--repartition-on-resize", action="optional", const="ldg",
                                             choices=RESIZE_METHODS, metavar="METHOD")
    """When the world size has no partition (no member of the family --data, or --data a folder of another
    number of parts): cut one from the family's largest member (or the folder) with this streaming method
    (ldg, what the flag alone means; fennel; random; not metis, whose memory is not bounded) into
    CHECKPOINT_DIR/partitions/pP, once (rank 0; a later restart reuses it), and train on it; needs
    --checkpoint-dir (docs/concepts.md, elastic jobs)."""

    def __post_init__(self) -> None:
        require(self.data is None or (isinstance(self.data, str) and self.data != ""), "data", self.data,
                "a partition folder")
        require(self.target_type is None or (isinstance(self.target_type, str) and self.target_type != ""),
                "target_type", self.target_type, "a node type's name")
        require(isinstance(self.verify, bool), "verify", self.verify, "true or false")
        check_choice("repartition_on_resize", self.repartition_on_resize, RESIZE_METHODS, optional=True)


@dataclass(kw_only=True, slots=True)
class DistributedConfig:
    backend: str | None = flag("--backend", choices=("nccl", "gloo"))
    """Process-group backend (default: nccl on GPU, gloo on CPU)."""
    timeout: float = flag("--timeout", default=300.0)
    """Collective timeout in seconds: a dead or stuck peer ends the job after it."""
    kernels: str | None = flag("--kernels", choices=choices_of("kernels"))
    """Aggregation kernels: auto (numba on CPU, cuSPARSE on CUDA), torch, numba, or triton (fused Triton
    kernels on CUDA) (default: $GNN_DIST_KERNELS, else auto)."""
    max_memory: str | None = flag("--max-memory", metavar="SIZE[,SIZE...]")
    """Refuse to start when the estimated peak memory of this machine's ranks exceeds SIZE (8GB, 512MiB;
    default: the memory available when the run starts); one size per rank (40G,20G,20G: a cluster whose
    devices differ) checks each rank against its own."""

    def __post_init__(self) -> None:
        check_choice("backend", self.backend, ("nccl", "gloo"), optional=True)
        if self.max_memory is not None:
            from partitioners.memory import parse_size_list

            try:
                parse_size_list(self.max_memory)
            except ValueError as exc:
                raise ConfigError("max_memory", str(exc)) from None
        require(is_number(self.timeout) and 0 < self.timeout <= MAX_TIMEOUT_S, "timeout", self.timeout,
                f"a positive number of seconds, at most {MAX_TIMEOUT_S:.0f} (a week)")
        check_choice("kernels", self.kernels, choices("kernels"), optional=True)


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
        int_at_least("epochs", self.epochs, 0)
        require(self.save_model is None or (isinstance(self.save_model, str) and self.save_model != ""),
                "save_model", self.save_model, "the path of a file")
        if self.data.repartition_on_resize is not None and self.trainer.checkpoint.checkpoint_dir is None:
            raise ConfigError("repartition_on_resize", f"{self.data.repartition_on_resize} writes the cut into "
                                                       f"CHECKPOINT_DIR/partitions/pP: add --checkpoint-dir DIR")
        run_checks("run", self)   # across sections: a model layer parallelism can cut into stages

    def to_dict(self) -> dict[str, Any]:
        """The resolved config as plain JSON values (a link as its ``latency_ms=L,gbps=B`` string)."""
        return to_dict(self)


def to_dict(config: Any) -> dict[str, Any]:
    """A config dataclass as nested plain values (what the metrics file and checkpoints store)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if _is_section(f):
            out[f.name] = to_dict(value)
        else:   # a value object (the simulated link) as its string
            out[f.name] = str(value) if dataclasses.is_dataclass(value) else value
    return out


def _is_section(f: dataclasses.Field) -> bool:
    """A field holding a section (its default factory a config dataclass), not a value."""
    return f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory)

