"""How a training step runs on the ranks: the halo-exchange schedule and its transport
(:class:`ScheduleConfig`), the first layer's input features (:class:`FeatureConfig`), what
backward keeps (:class:`MemoryConfig`) and layer parallelism (:class:`ParallelConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .fields import ConfigError, check_choice, flag, int_at_least, is_int, is_number, require
from .registry import choices, choices_of, run_checks

__all__ = ["PARALLEL_MODES", "ScheduleConfig", "FeatureConfig", "MemoryConfig", "ParallelConfig"]

PARALLEL_MODES = ("graph", "layer", "hybrid")
"""``parallel``: graph parallelism (a part per rank), layer parallelism (GNNPipe: a stage of
consecutive layers per rank, node chunks flowing stage to stage) or both (stages x parts):
:mod:`gnn_dist.layer_parallel`."""


@dataclass(kw_only=True, slots=True)
class ScheduleConfig:
    pipeline: str = flag("--pipeline", default="sync", choices=choices_of("schedule"))
    """Halo-exchange schedule of training steps: sync (exchange, then compute; exact), overlap (exact;
    boundary rows are computed first and travel while the other rows compute) or stale (PipeGCN:
    previous-epoch halo rows and gradients, communication hidden)."""
    stale_smoothing: float | None = flag("--stale-smoothing", metavar="GAMMA")
    """With pipeline stale: moving average of the stale halo features and gradients, factor GAMMA in
    [0, 1), bias-corrected (default: none)."""
    boundary_sample_rate: float = flag("--boundary-sample-rate", default=1.0, metavar="P")
    """Boundary sampling (BNS-GCN): send a random fraction P in (0, 1] of the boundary rows each epoch,
    rescaled by 1/P (1: all, exact)."""
    halo_dtype: str | None = flag("--halo-dtype", choices=choices_of("wire_dtype"))
    """Wire format of halo rows (and their gradients) during training: a float dtype, or int8/int4/int2/
    int1 (per-row scale, unbiased stochastic rounding); compute stays in the model's dtype and
    evaluation exchanges exactly (default: as computed)."""
    halo_grad_dtype: str | None = flag("--halo-grad-dtype", choices=choices_of("wire_dtype"))
    """Wire format of the halo gradients, independently of the rows' (default: the rows')."""
    halo_bits: str | None = flag("--halo-bits", metavar="adaptive:B")
    """Adaptive bit widths for the halo rows (and, without --halo-grad-dtype, their gradients): per
    layer and pair of ranks, minimising the rounding variance under an average of B bits per value."""
    halo_bits_every: int = flag("--halo-bits-every", default=10, metavar="K")
    """With --halo-bits: training steps between bit-width decisions."""
    # a gnn_dist.distributed.LinkModel, or None; its string (or dict) is turned into one by the check
    simulate_link: Any = flag("--simulate-link", metavar="latency_ms=L,gbps=B")
    """Delay each training exchange as a link of latency L ms and bandwidth B Gbit/s would."""
    overlap_chunks: int = flag("--overlap-chunks", default=4, metavar="N")
    """With pipeline overlap: chunks a hidden layer computes its boundary rows in, each starting its
    piece of the next exchange (0: no boundary-first schedule)."""

    def __post_init__(self) -> None:
        check_choice("pipeline", self.pipeline, choices("schedule"))
        if self.stale_smoothing is not None:
            require(is_number(self.stale_smoothing) and 0 <= self.stale_smoothing < 1, "stale_smoothing",
                    self.stale_smoothing, "a factor in [0, 1)")
            if self.pipeline != "stale":
                raise ConfigError("stale_smoothing", f"{self.stale_smoothing} applies to pipeline='stale' only, "
                                                     f"not pipeline={self.pipeline!r}")
        require(is_number(self.boundary_sample_rate) and 0 < self.boundary_sample_rate <= 1,
                "boundary_sample_rate", self.boundary_sample_rate, "a fraction in (0, 1]")
        check_choice("halo_dtype", self.halo_dtype, choices("wire_dtype"), optional=True)
        check_choice("halo_grad_dtype", self.halo_grad_dtype, choices("wire_dtype"), optional=True)
        int_at_least("halo_bits_every", self.halo_bits_every, 1)
        run_checks("schedule", self)   # the transport's: halo_bits, simulate_link (gnn_dist.distributed.options)
        require(is_int(self.overlap_chunks) and 0 <= self.overlap_chunks <= 1024, "overlap_chunks",
                self.overlap_chunks, "an integer in [0, 1024]")


@dataclass(kw_only=True, slots=True)
class FeatureConfig:
    feature_storage: str = flag("--feature-storage", default="device", choices=choices_of("feature_storage"))
    """Where input features live: all on the device, or in host memory / read from disk (mmap) with a
    device cache of the hottest rows."""
    feature_cache_budget: str | int | float | None = flag("--feature-cache-budget", metavar="SIZE")
    """Device cache size for feature_storage host/mmap: bytes, a size (4GB, 512MiB), a percentage of
    the features (25%) or a fraction (0.25) (default: all rows)."""
    feature_cache_policy: str = flag("--feature-cache-policy", default="degree", choices=choices_of("cache_policy"))
    """Which rows the device cache holds: degree (inner and halo rows by their reads per epoch), halo
    (rows sent to most peers first), frequency (counted in the first epoch), none."""
    static_halo: bool = flag("--no-static-halo", default=True, action="store_false")
    """Fetch the halo rows' input features once at start (the flag turns it off: exchange them every
    epoch)."""
    precompute_first_layer: str = flag("--precompute-first-layer", default="auto", choices=("auto", "on", "off"),
                                       action="optional", const="on")
    """Aggregate the input features of a gcn/sage/gin first layer once and train on that (exact): auto
    does when the features are all on the device, the halo rows static and no input dropout; on
    (the flag alone) insists, with --input-dropout dropping the aggregate; off never (true/false in a
    TOML file mean on/off)."""
    first_layer_chunk_rows: int | None = flag("--first-layer-chunk-rows", metavar="N")
    """Run the first layer over chunks of N destination rows, fetching each chunk's source rows
    through the feature cache; 0 never chunks (default: chunk when the cache does not hold every row)."""

    def __post_init__(self) -> None:
        run_checks("features", self)   # the feature store's (gnn_dist.cache.input)


@dataclass(kw_only=True, slots=True)
class MemoryConfig:
    recompute: str = flag("--recompute", default="none", choices=choices_of("recompute"))
    """Recompute each layer in backward instead of keeping what autograd saves: layers (the conv and
    activation, from the layer's exchanged rows; sync or stale), all (the exchange too, from the
    inner rows alone; sync). Exact: the same losses, bit for bit."""
    precision: str = flag("--precision", default="fp32", choices=choices_of("precision"))
    """Compute dtype of training and evaluation: fp32, or bf16 (autocast; float32 weights, optimizer
    state, loss and all-reduce; activations and halo rows in bfloat16)."""

    offload_activations: bool = flag("--offload-activations", default=False, action="store_true")
    """On CUDA: what autograd saves for backward waits in pinned host memory (copied on a side
    stream, back ahead of its backward); exact. Refused on CPU."""

    def __post_init__(self) -> None:
        check_choice("recompute", self.recompute, choices("recompute"))
        require(isinstance(self.offload_activations, bool), "offload_activations", self.offload_activations,
                "true or false")
        check_choice("precision", self.precision, choices("precision"))


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
    chunk_by: str = flag("--chunk-by", default="hash", choices=choices_of("chunk_by"))
    """With chunks > 1: a row's chunk from a hash of its original id (hash), or from a METIS partition
    of each part's rows (graph: fewer of a chunk's neighbours in later chunks, so fewer historical rows)."""
    history_smoothing: float | None = flag("--history-smoothing", metavar="GAMMA")
    """With parallel layer/hybrid and chunks > 1: moving average of the historical rows, factor GAMMA in
    [0, 1), bias-corrected (default: none, the previous epoch's rows)."""

    def __post_init__(self) -> None:
        check_choice("parallel", self.parallel, PARALLEL_MODES)
        int_at_least("stages", self.stages, 1)
        int_at_least("chunks", self.chunks, 1)
        check_choice("chunk_by", self.chunk_by, choices("chunk_by"))
        if self.history_smoothing is not None:
            require(is_number(self.history_smoothing) and 0 <= self.history_smoothing < 1, "history_smoothing",
                    self.history_smoothing, "a factor in [0, 1)")
        if self.parallel == "graph":
            for name, value, unset in (("stages", self.stages, 1), ("chunks", self.chunks, 1),
                                       ("chunk_by", self.chunk_by, "hash"),
                                       ("history_smoothing", self.history_smoothing, None)):
                if value != unset:
                    raise ConfigError(name, f"{value} applies to parallel layer or hybrid only, not parallel='graph' "
                                            f"(--parallel layer --stages S)")


