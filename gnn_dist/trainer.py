"""Full-graph training on P ranks that computes exactly what one device computes.

Per step: every rank runs the model on its part (halo exchange inside each layer), the loss is
the **sum** over the rank's training rows divided by the **global** training count, gradients are
summed over ranks in one flat all-reduce, and every rank applies the same optimizer step. So the
weights stay identical on all ranks (they are broadcast from rank 0 once at the start, never
trusted to a seed) and equal the one-device run's. Ranks without training rows still take part in
every collective.

Pipelining (``pipeline=``, see :mod:`gnn_dist.pipeline`): ``sync`` exchanges, then computes, each
layer (the exact reference); ``overlap`` aggregates the inner-source edges while the halo rows
travel (exact); ``stale`` (PipeGCN) uses the previous epoch's halo rows and halo
gradients while this epoch's exchange runs in the background (its first step is synchronous;
checkpoints keep its buffers, one file per rank, so a resume continues it exactly).
Boundary sampling (``boundary_sample_rate < 1``, BNS-GCN), a wire dtype for halo rows
(``halo_dtype``) and a simulated network link (``simulate_link``) combine with either.
Evaluation always uses the exact, synchronous exchange.

Failure handling: a check that depends only on what every rank sees alike (the config, the model,
the partition metadata, the all-reduced loss) raises on every rank by itself; a step that may fail
on one rank only (rank 0 writing or reading a checkpoint) is followed by
:func:`~gnn_dist.distributed.raise_on_all_ranks`, so every rank raises and none waits in a
collective for a peer that has given up.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from . import checkpoint as ckpt
from .distributed.halo import WIRE_DTYPES, LinkModel, parse_wire_dtype
from .checkpoint import CheckpointError
from .distributed import (all_reduce_grads, all_reduce_sum, broadcast_module, get_rank, get_world_size,
                          is_distributed)
from .distributed import raise_on_all_ranks
from .cache.input import InputFeatures, check_feature_options
from .pipeline import PIPELINES, Pipeline, build_pipeline

__all__ = ["Trainer", "TrainerConfig", "PIPELINES"]

log = logging.getLogger(__name__)

OPTIMIZERS = ("adam", "adamw", "sgd")
_ARCH_FIELDS = ("in_dim", "hidden_dim", "out_dim", "num_layers")
"""Model attributes a checkpoint must agree with (its weights' shapes depend on them)."""
_RUN_FIELDS = ("dropout", "seed")
"""Model attributes that may change on resume (with a warning: the run no longer reproduces)."""


def _model_info(model: torch.nn.Module) -> dict[str, Any]:
    """The model's class and the size/seed attributes it has (BasicGNN's), for checkpoints."""
    info: dict[str, Any] = {"class": type(model).__name__}
    for name in (*_ARCH_FIELDS, *_RUN_FIELDS):
        value = getattr(model, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            info[name] = value
    return info


_STATEFUL_PIPELINES = ("stale",)
"""Pipeline modes whose next step reads more than the weights: checkpoints hold their state."""


def _gather(value: Any) -> list[Any]:
    """Every rank's ``value``, in rank order (a collective; ``[value]`` without a group)."""
    if not is_distributed():
        return [value]
    out: list[Any] = [None] * get_world_size()
    dist.all_gather_object(out, value)
    return out


def _json_safe(value: Any) -> Any:
    """``value`` with non-finite floats replaced by None (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(kw_only=True, slots=True)
class TrainerConfig:
    optimizer: str = "adam"
    """One of ``adam``, ``adamw``, ``sgd``."""
    lr: float = 0.01
    """Learning rate."""
    weight_decay: float = 0.0
    """L2 penalty (decoupled for ``adamw``)."""
    eval_every: int = 1
    """Evaluate train/val/test accuracy every this many epochs; 0 never evaluates."""
    pipeline: str = "sync"
    """Halo-exchange schedule of training steps: ``sync`` (exchange, then compute; exact),
    ``overlap`` (boundary rows first, their pieces of the next layer's exchange travel while the
    other rows compute; inner-source edges while a layer's own rows travel; exact) or ``stale``
    (PipeGCN: previous-epoch halo features and gradients, communication hidden)."""
    stale_smoothing: float | None = None
    """``stale`` only: moving-average factor ``gamma`` in ``[0, 1)`` for the stale halo features
    and gradients (with bias correction); None: no smoothing."""
    boundary_sample_rate: float = 1.0
    """Boundary sampling (BNS-GCN): each epoch send a random fraction ``p`` in ``(0, 1]`` of the
    boundary rows to each peer, rescaled by ``1/p``; 1 sends all (exact)."""
    halo_dtype: str | None = None
    """Halo rows (and their gradients) travel as ``fp32``, ``bf16`` or ``fp16``; compute stays in
    the model's dtype. None: as computed."""
    simulate_link: LinkModel | str | None = None
    """Delay every halo exchange as a link of this latency and bandwidth would
    (``"latency_ms=L,gbps=B"`` or a :class:`~gnn_dist.distributed.halo.LinkModel`); None: none."""
    feature_storage: str = "device"
    """Where the input features live: ``device`` (all rows on the training device), ``host``
    (host memory, pinned on CUDA) or ``mmap`` (the part's ``features.npy`` read from disk), the
    last two with a device cache of the hottest rows (see :mod:`gnn_dist.cache`)."""
    feature_cache_budget: str | int | float | None = None
    """The device cache's size: bytes, a fraction of the rows' bytes, or ``"4GB"``/``"25%"``;
    None: every row."""
    feature_cache_policy: str = "degree"
    """How rows are ranked for the device cache: ``degree`` (inner and halo rows by their reads per epoch),
    ``halo`` (fan-out to peers first), ``frequency`` (accesses counted in the first epoch) or
    ``none`` (no device cache)."""
    static_halo: bool = True
    """Fetch the halo rows' input features once at start instead of every epoch (layer 0 then
    makes no exchange; exact). Models that take a tensor ``x`` (custom models without
    ``accepts_layer_input``) always exchange them."""
    precompute_first_layer: bool = False
    """Aggregate the raw features of a GCN/SAGE/GIN first layer once and train on that (exact)."""
    first_layer_chunk_rows: int | None = None
    """Destinations per chunk of a chunked first layer; None: chunk when the device cache does not
    hold every row; 0: never chunk."""
    checkpoint_dir: str | None = None
    """Where rank 0 writes checkpoints; None writes none."""
    checkpoint_every: int = 10
    """Checkpoint every this many epochs (and after the last epoch of each ``fit``)."""
    checkpoint_keep: int | None = None
    """Keep only the newest this many checkpoints (older ones are deleted once a new one is
    complete); None keeps all."""
    metrics_path: str | None = None
    """A JSON-lines file rank 0 appends one object per epoch to."""
    log_every: int = 1
    """Rank 0 logs a progress line every this many epochs; 0 logs none."""

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer={self.optimizer!r} is not supported; choose from {', '.join(OPTIMIZERS)}")
        if self.pipeline not in PIPELINES:
            raise ValueError(f"pipeline={self.pipeline!r} is not supported; choose from {', '.join(PIPELINES)}")
        if self.stale_smoothing is not None:
            if self.pipeline != "stale":
                raise ValueError(f"stale_smoothing={self.stale_smoothing} applies to pipeline='stale' only, "
                                 f"not pipeline={self.pipeline!r}")
            if not 0.0 <= self.stale_smoothing < 1.0:
                raise ValueError(f"stale_smoothing={self.stale_smoothing} must be in [0, 1)")
        if not 0.0 < self.boundary_sample_rate <= 1.0:
            raise ValueError(f"boundary_sample_rate={self.boundary_sample_rate} must be in (0, 1]")
        if self.halo_dtype is not None and self.halo_dtype not in WIRE_DTYPES:
            raise ValueError(f"halo_dtype={self.halo_dtype!r} is not supported; choose from "
                             f"{', '.join(WIRE_DTYPES)} (or None)")
        if isinstance(self.simulate_link, str):
            self.simulate_link = LinkModel.parse(self.simulate_link)
        elif self.simulate_link is not None and not isinstance(self.simulate_link, LinkModel):
            raise ValueError(f"simulate_link={self.simulate_link!r} must be 'latency_ms=L,gbps=B', a "
                             f"LinkModel or None")
        check_feature_options(storage=self.feature_storage, cache_policy=self.feature_cache_policy,
                              static_halo=self.static_halo, precompute_first_layer=self.precompute_first_layer,
                              first_layer_chunk_rows=self.first_layer_chunk_rows,
                              cache_budget=self.feature_cache_budget)
        if self.lr <= 0 or not math.isfinite(self.lr):
            raise ValueError(f"lr={self.lr} must be a positive number")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay={self.weight_decay} must be >= 0")
        for name in ("eval_every", "checkpoint_every", "log_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 0")
        if self.checkpoint_keep is not None and (isinstance(self.checkpoint_keep, bool)
                                                 or not isinstance(self.checkpoint_keep, int)
                                                 or self.checkpoint_keep < 1):
            raise ValueError(f"checkpoint_keep={self.checkpoint_keep} must be >= 1 (or None to keep all)")


class Trainer:
    """Train ``model`` on the rank's ``part``; ``fit(epochs)`` returns one metrics dict per epoch.

    Keyword arguments are the fields of :class:`TrainerConfig`. Epoch numbers are absolute: after
    :meth:`resume` they continue from the checkpoint's.
    """

    def __init__(self, model: torch.nn.Module, part: Any, **config: Any) -> None:
        self.config = TrainerConfig(**config)
        self.model = model.to(part.device)
        self.part = part
        if part.features is None:
            raise ValueError(f"{part.path}: the partition has no node features to train on")
        if part.y is None:
            raise ValueError(f"{part.path}: the partition has no labels to train on")
        if self.part.global_num_train == 0:
            raise ValueError(f"{part.path}: the partition has no training nodes (train_mask is empty everywhere)")
        self._check_model_fits(model, part)
        c = self.config
        part.exchanger.wire_dtype = parse_wire_dtype(c.halo_dtype)
        part.exchanger.link = c.simulate_link  # type: ignore[assignment]
        self.pipeline: Pipeline = self._build_pipeline()
        self.inputs: InputFeatures | None = None
        """The first layer's input (a feature store, static halo rows) for models that accept it."""
        if getattr(model, "accepts_layer_input", False):
            self.inputs = InputFeatures(part, storage=c.feature_storage, cache_budget=c.feature_cache_budget,
                                        cache_policy=c.feature_cache_policy, static_halo=c.static_halo,
                                        precompute_first_layer=c.precompute_first_layer,
                                        first_layer_chunk_rows=c.first_layer_chunk_rows)
        broadcast_module(self.model, src=0)
        self.optimizer = self._build_optimizer()
        self.epoch = 0
        self.history: list[dict[str, Any]] = []
        self.rank = get_rank()
        self._partition_id: str | None = None

    @staticmethod
    def _check_model_fits(model: torch.nn.Module, part: Any) -> None:
        """The model's input/output widths against the partition's (same on every rank: no collective)."""
        in_dim, out_dim = getattr(model, "in_dim", None), getattr(model, "out_dim", None)
        if isinstance(in_dim, int) and in_dim != part.feature_dim:
            raise ValueError(f"{part.path}: the model's input width in_dim={in_dim} does not match the "
                             f"partition's feature width {part.feature_dim}; build the model with "
                             f"in_dim={part.feature_dim}")
        if isinstance(out_dim, int):
            if part.multilabel and out_dim != part.num_classes:
                raise ValueError(f"{part.path}: the model's output width out_dim={out_dim} does not match "
                                 f"the {part.num_classes} labels of this multi-label partition")
            if not part.multilabel and out_dim < part.num_classes:
                raise ValueError(f"{part.path}: the model's output width out_dim={out_dim} is smaller than "
                                 f"the partition's {part.num_classes} classes; build it with "
                                 f"out_dim={part.num_classes}")

    def _build_pipeline(self) -> Pipeline:
        """A fresh pipeline mode (a stale one starts with a synchronous step); boundary samples
        are seeded with the model's ``seed``."""
        c = self.config
        return build_pipeline(c.pipeline, self.part, stale_smoothing=c.stale_smoothing,
                              boundary_sample_rate=c.boundary_sample_rate,
                              seed=int(getattr(self.model, "seed", 0)))

    def _build_optimizer(self) -> torch.optim.Optimizer:
        c, params = self.config, self.model.parameters()
        if c.optimizer == "adam":
            return torch.optim.Adam(params, lr=c.lr, weight_decay=c.weight_decay)
        if c.optimizer == "adamw":
            return torch.optim.AdamW(params, lr=c.lr, weight_decay=c.weight_decay)
        return torch.optim.SGD(params, lr=c.lr, weight_decay=c.weight_decay)

    # ------------------------------------------------------------------ one step
    def _loss_sum(self, logits: torch.Tensor) -> torch.Tensor:
        mask = self.part.train_mask
        if self.part.multilabel:
            return F.binary_cross_entropy_with_logits(logits[mask], self.part.y[mask], reduction="sum") \
                / self.part.num_classes
        return F.cross_entropy(logits[mask], self.part.y[mask], reduction="sum")

    def _all_reduce_grads(self) -> int:
        """Sum the gradients over ranks; returns the bytes this rank contributed."""
        all_reduce_grads(self.model.parameters())
        if get_world_size() == 1:
            return 0
        return sum(p.numel() * p.element_size() for p in self.model.parameters() if p.requires_grad)

    def train_step(self) -> dict[str, Any]:
        """One optimizer step on the full graph (through the pipeline mode); returns the global
        loss, comm bytes and the halo-exchange timings of this step."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        ex = self.part.exchanger
        t0 = time.perf_counter()
        halo_before, comm_before, exposed_before = ex.bytes_sent, ex.comm_time_s, ex.exposed_comm_s
        by_layer_before = dict(ex.bytes_by_tag)
        view = self.pipeline.begin_step(self.epoch)
        store_before = self._store_counts()
        logits = self.model(view, self._model_input())
        loss = self._loss_sum(logits) / self.part.global_num_train
        loss.backward()
        grad_bytes = self._all_reduce_grads()
        loss_total = loss.detach().reshape(1).clone()
        all_reduce_sum(loss_total)
        value = float(loss_total.item())
        if not math.isfinite(value):
            raise FloatingPointError(f"epoch {self.epoch}: the training loss is {value}; lower the "
                                     f"learning rate (lr={self.config.lr}) or check the input features")
        self.optimizer.step()
        if self.inputs is not None:
            self.inputs.end_epoch()
        step_s = time.perf_counter() - t0
        exposed = ex.exposed_comm_s - exposed_before
        num_layers = max([k + 1 for k in ex.bytes_by_tag if isinstance(k, int)]
                         + [int(getattr(self.model, "num_layers", 0))])
        return {"train_loss": value, "halo_bytes": ex.bytes_sent - halo_before, "allreduce_bytes": grad_bytes,
                "compute_time_s": step_s - exposed, "comm_time_s": ex.comm_time_s - comm_before,
                "exposed_comm_s": exposed,
                "bytes_per_layer": [ex.bytes_by_tag.get(i, 0) - by_layer_before.get(i, 0) for i in range(num_layers)],
                "staleness": self.pipeline.staleness(), **self._store_delta(store_before)}

    def _model_input(self) -> Any:
        """What the model's ``x`` is: the :class:`InputFeatures`, or the part's ``x`` for a model
        that takes a tensor."""
        return self.inputs if self.inputs is not None else self.part.x

    def _store_line(self, rec: dict[str, Any]) -> str:
        if self.inputs is None or self.inputs.store.storage == "device":
            return ""
        return (f"  features hit rate {rec['feature_hit_rate']:.3f}, "
                f"host-to-device {rec['feature_h2d_bytes'] / 2**20:.2f} MiB")

    def _store_counts(self) -> tuple[int, int, int]:
        if self.inputs is None:
            return (0, 0, 0)
        st = self.inputs.store
        return st.hits, st.misses, st.h2d_bytes

    def _store_delta(self, before: tuple[int, int, int]) -> dict[str, Any]:
        """This step's feature-store counters: rows served from the device cache (hits) and from
        host/disk (misses), and the bytes copied host-to-device."""
        hits, misses, h2d = (a - b for a, b in zip(self._store_counts(), before))
        return {"feature_hits": hits, "feature_misses": misses,
                "feature_hit_rate": hits / (hits + misses) if hits + misses else float("nan"),
                "feature_h2d_bytes": h2d}

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Accuracy (micro-F1 for multi-label) on the train/val/test masks, over all ranks."""
        self.model.eval()
        logits = self.model(self.part, self._model_input())
        p = self.part
        stats = []
        for mask in (p.train_mask, p.val_mask, p.test_mask):
            if p.multilabel:
                pred = (logits[mask] > 0).float()
                true = p.y[mask]
                tp = (pred * true).sum()
                stats += [2 * tp, 2 * tp + (pred * (1 - true)).sum() + ((1 - pred) * true).sum()]
            else:
                stats += [(logits[mask].argmax(-1) == p.y[mask]).sum(), mask.sum()]
        counts = torch.stack([s.to(torch.float64) for s in stats])
        all_reduce_sum(counts)
        c = counts.tolist()
        return {f"{name}_acc": (c[2 * i] / c[2 * i + 1] if c[2 * i + 1] else float("nan"))
                for i, name in enumerate(("train", "val", "test"))}

    # ------------------------------------------------------------------ loop
    def fit(self, epochs: int) -> list[dict[str, Any]]:
        """Run ``epochs`` more epochs; returns their metrics (one dict per epoch)."""
        if epochs < 0:
            raise ValueError(f"epochs={epochs} must be >= 0")
        out = []
        c = self.config
        for _ in range(epochs):
            t0 = time.perf_counter()
            rec: dict[str, Any] = {"epoch": self.epoch}
            rec.update(self.train_step())
            rec["epoch_time_s"] = time.perf_counter() - t0
            if len(out) == epochs - 1:
                self.pipeline.flush()  # nothing of the mode stays in flight after fit
            rec["comm_bytes"] = rec["halo_bytes"] + rec["allreduce_bytes"]
            if c.eval_every and (self.epoch + 1) % c.eval_every == 0:
                t1 = time.perf_counter()
                rec.update(self.evaluate())
                rec["eval_time_s"] = time.perf_counter() - t1
            else:
                rec.update({"train_acc": None, "val_acc": None, "test_acc": None})
            self.epoch += 1
            self.history.append(rec)
            out.append(rec)
            self._after_epoch(rec, last=len(out) == epochs)
        return out

    def _after_epoch(self, rec: dict[str, Any], last: bool) -> None:
        c = self.config
        if self.rank == 0:
            if c.metrics_path:
                with open(c.metrics_path, "a") as f:
                    f.write(json.dumps({k: _json_safe(v) for k, v in rec.items()}) + "\n")
            if c.log_every and (rec["epoch"] % c.log_every == 0 or last):
                accs = "" if rec["val_acc"] is None else (
                    f"  train {rec['train_acc']:.4f}  val {rec['val_acc']:.4f}  test {rec['test_acc']:.4f}")
                log.info(f"epoch {rec['epoch']:4d}  loss {rec['train_loss']:.4f}{accs}  "
                         f"{rec['epoch_time_s'] * 1e3:.1f} ms (compute {rec['compute_time_s'] * 1e3:.1f}, "
                         f"halo comm {rec['comm_time_s'] * 1e3:.1f}, exposed {rec['exposed_comm_s'] * 1e3:.1f})  "
                         f"comm {rec['comm_bytes'] / 2**20:.2f} MiB  staleness {rec['staleness']}"
                         + self._store_line(rec))
        if c.checkpoint_dir and (self.epoch % max(c.checkpoint_every, 1) == 0 or last):
            self.save_checkpoint()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint holds: weights, optimizer state, epoch, RNG states, config, history
        (:meth:`save_checkpoint` adds ``pipeline_state``: the mode, smoothing, number of parts,
        partition fingerprint and the rank files' names, sizes and sha256, or None)."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "epoch": self.epoch, "rng": ckpt.rng_state(), "config": asdict(self.config),
                "model_info": _model_info(self.model), "world_size": get_world_size(),
                "history": self.history}

    def _pipeline_info(self) -> dict[str, Any]:
        """What a pipeline state must match to be restored: mode, smoothing, parts, partition."""
        if self._partition_id is None:
            self._partition_id = ckpt.partition_fingerprint(self.part.meta)
        c = self.config
        return {"mode": c.pipeline, "smoothing": c.stale_smoothing, "num_parts": int(self.part.num_parts),
                "partition": self._partition_id}

    def save_checkpoint(self) -> Path:
        """Checkpoint the state after ``self.epoch`` epochs; returns the path rank 0 wrote.

        Every rank calls it (it is a collective). When the pipeline mode keeps state between
        steps (``stale``), every rank first writes its own rank file (after waiting for its
        exchanges in flight) and all ranks meet; then rank 0 writes the main file atomically
        (see :mod:`gnn_dist.checkpoint`), recording the rank files' checksums, and all ranks meet
        again, so no rank goes on (or reads the checkpoint) before it is complete, ``latest``
        never names a checkpoint with missing rank files, and a failed write raises on every rank.
        """
        if self.config.checkpoint_dir is None:
            raise ValueError("save_checkpoint needs checkpoint_dir")
        directory = self.config.checkpoint_dir
        path = ckpt.checkpoint_path(directory, self.epoch)
        info = {**self._pipeline_info(), "rank_files": None}
        error: BaseException | None = None
        if self.config.pipeline in _STATEFUL_PIPELINES:  # the config, not the state: the same on every rank
            entry = None
            try:
                entry = ckpt.save_rank_state(directory, self.epoch, self.rank, info["num_parts"],
                                             self.pipeline.state_dict())
            except Exception as exc:  # shared with the peers, then re-raised
                error = exc
            raise_on_all_ranks(error, f"writing the rank files of the checkpoint {path}")
            info["rank_files"] = _gather(entry)
        if self.rank == 0:
            try:
                path = ckpt.save_checkpoint(directory, self.epoch, {**self.state_dict(), "pipeline_state": info})
            except Exception as exc:  # shared with the peers, then re-raised
                error = exc
        raise_on_all_ranks(error, f"writing the checkpoint {path}")
        if self.rank == 0:
            log.info(f"saved {path}")
        if self.config.checkpoint_keep is not None:
            self._prune_checkpoints(directory, self.config.checkpoint_keep)
        return path

    def _prune_checkpoints(self, directory: str, keep: int) -> None:
        """Delete the checkpoints beyond the newest ``keep`` (a collective: rank 0 decides which
        epochs stay from the main files it sees; each rank deletes its own rank files)."""
        box: list[Any] = [None]   # None: keep everything (rank 0 could not list the folder)
        if self.rank == 0:
            try:
                older = [e for e in ckpt.checkpoint_epochs(directory) if e < self.epoch]
                box[0] = set(older[-(keep - 1):] if keep > 1 else [])
            except OSError as exc:   # best effort: never a reason to stop training or to skip the broadcast
                log.warning(f"cannot list the checkpoints in {directory} to keep the newest {keep} ({exc})")
        if is_distributed():
            dist.broadcast_object_list(box, src=0)
        if box[0] is None:
            return
        try:
            deleted = ckpt.prune_checkpoints(directory, box[0] | {self.epoch}, self.epoch, rank=self.rank,
                                             num_parts=int(self.part.num_parts))
        except OSError as exc:
            log.warning(f"cannot delete old checkpoints in {directory} ({exc})")
            return
        if deleted:
            log.debug(f"deleted {len(deleted)} old checkpoint file(s) in {directory}, keeping the newest {keep}")

    def resume(self, path: str | Path | None = None) -> bool:
        """Continue from a checkpoint; False (and nothing changes) if there is none.

        ``path`` defaults to the latest checkpoint in ``checkpoint_dir`` (a missing or empty
        folder has none). Every rank calls it (a collective): rank 0 reads the file and
        broadcasts its contents, so only rank 0 needs to see ``path`` (no shared filesystem
        needed) and all ranks resume from the same file. Epoch numbers continue from the
        checkpoint's; the weights, optimizer state, dropout step and RNG states are restored, and
        so is the pipeline mode's state (``stale``: each rank reads its own rank file from the
        checkpoint's folder), so the run reproduces the uninterrupted one exactly. The number of
        ranks may differ from the run that wrote it; the pipeline state is then not restored, nor
        when the partition, the pipeline mode or ``stale_smoothing`` differ or a rank cannot see
        its rank file: a warning says why, and a ``stale`` run's first resumed step is
        synchronous. ``lr`` and ``weight_decay`` are this trainer's (a warning says when the
        checkpoint's differ).

        Raises:
            CheckpointError: (on every rank) the checkpoint file is missing, it or a rank file is
                corrupt or truncated (rank files are checked before anything changes), or the
                checkpoint was written for another model shape or optimizer; the message names
                the file.
        """
        if path is None and self.config.checkpoint_dir is None:
            raise ValueError("resume needs a path or checkpoint_dir")
        state: dict[str, Any] | None = None
        error: BaseException | None = None
        if self.rank == 0:
            try:
                if path is None:
                    path = ckpt.latest_checkpoint(self.config.checkpoint_dir)  # type: ignore[arg-type]
                if path is not None:
                    state = ckpt.load_checkpoint(path)
            except Exception as exc:  # shared with the peers, then re-raised
                error = exc
        raise_on_all_ranks(error, "reading the checkpoint")
        if is_distributed():
            box: list[Any] = [state, None if path is None else str(path)]
            dist.broadcast_object_list(box, src=0)
            state, path = box
        if state is None:
            where = path if path is not None else self.config.checkpoint_dir
            log.info(f"no checkpoint in {where}")
            return False
        pipeline = self._read_pipeline_state(state, Path(path))  # type: ignore[arg-type]
        self._load_state(state, Path(path), pipeline)  # type: ignore[arg-type]
        log.info(f"resumed from {path} at epoch {self.epoch}"
                 + ("" if pipeline is None else f" with the {pipeline.name} pipeline's state"))
        return True

    def _pipeline_mismatch(self, saved: dict[str, Any] | None) -> str | None:
        """Why the checkpoint's pipeline state (``saved``) cannot be restored, or None when it
        can (or when neither side has any); the same on every rank."""
        mine = self._pipeline_info()
        if saved is None:
            return "the checkpoint holds no pipeline state" if self.config.pipeline == "stale" else None
        if saved.get("mode") != mine["mode"]:
            if saved.get("rank_files") or self.config.pipeline == "stale":
                return f"the checkpoint was written with pipeline={saved.get('mode')!r}, this run uses {mine['mode']!r}"
            return None
        if not saved.get("rank_files"):
            return "the checkpoint holds no pipeline state" if self.config.pipeline == "stale" else None
        for key, what in (("smoothing", "stale_smoothing"), ("num_parts", "num_parts")):
            if saved.get(key) != mine[key]:
                return f"the checkpoint was written with {what}={saved.get(key)}, this run has {what}={mine[key]}"
        if saved.get("partition") != mine["partition"]:
            return (f"the checkpoint was written for another partition (fingerprint "
                    f"{str(saved.get('partition'))[:12]}..., this run's {self.part.path} is "
                    f"{mine['partition'][:12]}...)")
        return None

    def _read_pipeline_state(self, state: dict[str, Any], path: Path) -> Pipeline | None:
        """A fresh pipeline holding this rank's saved state, or None (a fresh pipeline then
        starts; a warning says why, on every rank). A collective when the checkpoint has rank
        files: every rank reads its own from ``path``'s folder; a corrupt one raises everywhere."""
        saved = state.get("pipeline_state")
        why = self._pipeline_mismatch(saved)   # from this rank's config and its copy of the partition
        if saved is not None and saved.get("rank_files"):
            # The main checkpoint is rank 0's, broadcast: every rank takes this branch, and makes the
            # same two collectives whatever its own ``why`` (hosts may hold different partition copies).
            pipeline: Pipeline | None = None
            error: BaseException | None = None
            if why is None:
                entry = saved["rank_files"][self.rank]
                try:
                    loaded = ckpt.load_rank_state(path.parent, entry, epoch=int(state["epoch"]), rank=self.rank,
                                                  num_parts=saved["num_parts"])
                    if loaded is not None:
                        pipeline = self._build_pipeline()
                        try:
                            pipeline.load_state_dict(loaded)
                        except (ValueError, KeyError, TypeError) as exc:
                            raise CheckpointError(f"the rank file does not fit this rank's pipeline ({exc})",
                                                  path=path.parent / entry["name"]) from exc
                except Exception as exc:  # shared with the peers, then re-raised
                    error = exc
            raise_on_all_ranks(error, f"reading the rank files of the checkpoint {path}")
            status = _gather((why, pipeline is not None))
            reasons = [(r, w) for r, (w, _) in enumerate(status) if w is not None]
            missing = [r for r, (w, ok) in enumerate(status) if w is None and not ok]
            if reasons:
                r, w = reasons[0]
                why = w if len(reasons) == len(status) else f"on rank {r}, {w}"
            elif missing:
                names = ", ".join(saved["rank_files"][r]["name"] for r in missing)
                why = (f"rank(s) {', '.join(map(str, missing))} cannot see their rank file ({names}) in "
                       f"{path.parent} on their host (no shared filesystem, or it was deleted)")
            else:
                return pipeline
        if why is not None:
            log.warning(f"{path}: {why}; the {saved.get('mode') if saved else 'pipeline'} state is not restored "
                        f"(pipeline={self.config.pipeline!r} starts fresh"
                        + (": its first resumed step is synchronous" if self.config.pipeline == "stale" else "")
                        + "), so the resumed run will not reproduce the uninterrupted one")
        return None

    def _load_state(self, state: dict[str, Any], path: Path, pipeline: Pipeline | None = None) -> None:
        """Apply a checked checkpoint; identical on every rank, so any error is raised by all.
        ``pipeline`` (with its restored state) replaces the current one; None: a fresh one."""
        saved, mine = state["config"], asdict(self.config)
        if saved.get("optimizer") != mine["optimizer"]:
            raise CheckpointError(f"the checkpoint was written with optimizer={saved.get('optimizer')!r}, "
                                  f"this run uses optimizer={mine['optimizer']!r}", path=path)
        info, now = state.get("model_info", {}), _model_info(self.model)
        arch = [k for k in ("class", *_ARCH_FIELDS) if k in info and k in now and info[k] != now[k]]
        if arch:
            diff = ", ".join(f"{k}={info[k]!r} (this run: {now[k]!r})" for k in arch)
            raise CheckpointError(f"the checkpoint was written for another model: {diff}", path=path)
        for k in _RUN_FIELDS:
            if k in info and k in now and info[k] != now[k]:
                log.warning(f"{path}: the checkpoint's model has {k}={info[k]!r}, this run {now[k]!r}; "
                            f"the resumed run will not reproduce the uninterrupted one")
        try:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as exc:
            raise CheckpointError(f"the checkpoint does not fit this model/optimizer ({exc})", path=path) from exc
        for k in ("lr", "weight_decay"):
            if saved.get(k) != mine[k]:
                log.warning(f"{path}: the checkpoint has {k}={saved.get(k)}, continuing with {k}={mine[k]}")
            for group in self.optimizer.param_groups:
                group[k] = mine[k]
        self.epoch = int(state["epoch"])
        self.history = list(state.get("history", []))
        self.pipeline.flush()
        self.pipeline = pipeline if pipeline is not None else self._build_pipeline()  # never this run's old buffers
        ckpt.set_rng_state(state["rng"])
