"""Full-graph training on P ranks that computes exactly what one device computes.

Per step: every rank runs the model on its part (halo exchange inside each layer), the loss is
the **sum** over the rank's training rows divided by the **global** training count, gradients are
summed over ranks in one flat all-reduce, and every rank applies the same optimizer step. So the
weights stay identical on all ranks (they are broadcast from rank 0 once at the start, never
trusted to a seed) and equal the one-device run's. Ranks without training rows still take part in
every collective.

The training schedule (``pipeline=``, see :mod:`gnn_dist.pipeline`) decides when halo rows
travel and in which :class:`~gnn_dist.distributed.Transport` (``halo_dtype``,
``simulate_link``); evaluation always uses the part's exact, synchronous exchange. The trainer
holds four helpers: the schedule, the :class:`~gnn_dist.checkpoints.CheckpointManager`, the
:class:`~gnn_dist.metrics.MetricsFile` and the :class:`~gnn_dist.selection.ModelSelection` (which
weights the run ends with, when it stops early); a step's figures are a
:class:`~gnn_dist.metrics.StepStats`.

Failure handling: a check that depends only on what every rank sees alike (the config, the model,
the partition metadata, the all-reduced loss) raises on every rank by itself; a step that may fail
on one rank only runs inside :func:`~gnn_dist.distributed.all_ranks_agree`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from pathlib import Path
from typing import Any

import torch

from .cache.input import InputFeatures
from .cache.store import FeatureStore, StoreCounts
from .checkpoints import CheckpointManager
from .config import RESUME_MODES, TrainerConfig, to_dict
from .distributed.per_rank import is_per_rank
from .distributed import (all_gather_json, all_ranks_agree, all_reduce_grads, all_reduce_sum, broadcast_module, get_rank,
                          is_distributed)
from . import run_queue
from .metrics import MetricsFile, StepStats, progress_line, summary_line
from .measured_peak import current_memory_bytes, peak_memory_bytes, peak_memory_kind, reset_peak
from .rank_balance import balance_line, median_compute_s
from .pipeline import Pipeline, build_schedule
from .pipeline.recompute import with_recompute
from .offload import ActivationOffload, check_offload_device
from .precision import autocast
from .tensorboard_log import TensorBoardLog
from .selection import ModelSelection
from .tasks import Task

__all__ = ["Trainer", "TrainerConfig"]

log = logging.getLogger(__name__)


def default_logging(rank: int) -> None:
    """Log like ``gnn_dist.train`` (``[rankR] message`` on stderr; rank 0 its progress, the others
    warnings) when the host has not set up logging: a script that builds a :class:`Trainer` sees
    its epoch lines without a ``logging`` call. A host with a handler on the root or the
    ``gnn_dist`` logger is left alone."""
    package = logging.getLogger("gnn_dist")
    if logging.getLogger().handlers or package.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(f"[rank{rank}] %(message)s"))
    package.addHandler(handler)
    package.setLevel(logging.INFO if rank == 0 else logging.WARNING)

_OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}


class Trainer:
    """Train ``model`` on the rank's ``part``; ``fit(epochs)`` returns one metrics dict per epoch.

    Configure it with a :class:`~gnn_dist.config.TrainerConfig`, or with its fields by name
    (``Trainer(model, part, lr=0.01, pipeline="overlap")``: see :meth:`TrainerConfig.from_fields
    <gnn_dist.config.TrainerConfig.from_fields>`). Epoch numbers are absolute: after
    :meth:`resume` they continue from the checkpoint's. Building it is a collective (the weights
    are broadcast from rank 0; with static halo rows their input features are fetched).
    """

    predicted_peak: list[int] | None = None
    """The memory planner's predicted peak of each rank, in bytes, as the measured peak counts it
    (:attr:`gnn_dist.memory_plan.RankPlan.allocated`; ``gnn_dist.train`` sets it): logged and
    recorded beside the measured peaks."""

    def __init__(self, model: torch.nn.Module, part: Any, config: TrainerConfig | None = None, *,
                 run_config: dict[str, Any] | None = None, **fields: Any) -> None:
        if config is not None and fields:
            raise ValueError(f"pass a TrainerConfig or its fields, not both (got config and {', '.join(fields)})")
        self.config = config if config is not None else TrainerConfig.from_fields(**fields)
        self._check_part(part)
        self.task: Task = self.config.task.resolve(part.meta.label_kind, where=str(part.path),
                                                   edge_split=getattr(part.meta, "edge_split", None) is not None)
        """What the run learns (:mod:`gnn_dist.tasks`): the loss, the metrics, what selection watches."""
        self.task.check_data(part.meta, part.path)
        self._check_model_fits(model, part, self.task)
        if self.config.memory.offload_activations:
            check_offload_device(part.device)
        self.part = part
        self.task.attach(model, part, seed=int(getattr(model, "seed", 0)))   # e.g. link prediction's decoder
        self.model = model.to(part.device)
        self.rank = get_rank()
        default_logging(self.rank)
        self.pipeline: Pipeline = self.new_pipeline()
        c = self.config
        self.checkpoints = CheckpointManager(c.checkpoint, part)
        self.inputs: InputFeatures | None = None
        """The first layer's input (a feature store, static halo rows) for models that accept it."""
        if getattr(model, "accepts_layer_input", False):
            f = c.features
            self.inputs = InputFeatures(part, storage=f.feature_storage, cache_budget=f.feature_cache_budget,
                                        cache_policy=f.feature_cache_policy, static_halo=f.static_halo,
                                        precompute_first_layer=f.precompute_first_layer,
                                        first_layer_chunk_rows=f.first_layer_chunk_rows)
        broadcast_module(self.model, src=0)
        kind = _OPTIMIZERS[c.optim.optimizer]
        self.optimizer = kind(self.model.parameters(), lr=c.optim.lr, weight_decay=c.optim.weight_decay)
        self.epoch = 0
        self.history: list[dict[str, Any]] = []
        self.selection = ModelSelection(c.selection, self.task.select_metric, self.task.lower_is_better)
        """The best epoch so far and the weights it had (``select``), the early stop (``patience``)."""
        self.metrics = None if c.report.metrics_path is None else MetricsFile(c.report.metrics_path)
        self.tensorboard: TensorBoardLog | None = None
        if c.report.tensorboard is not None:
            with all_ranks_agree(f"opening the TensorBoard log {c.report.tensorboard}"):
                if self.rank == 0:
                    self.tensorboard = TensorBoardLog(c.report.tensorboard, metrics=self.task.metrics_shown)
        self._run_config = run_config if run_config is not None else {"trainer": to_dict(self.config)}
        self._metrics_started = False

    @staticmethod
    def _check_part(part: Any) -> None:
        if part.features is None and getattr(part, "typed", None) is None:
            raise ValueError(f"{part.path}: the partition has no node features to train on")

    @staticmethod
    def _check_model_fits(model: torch.nn.Module, part: Any, task: Task) -> None:
        """The model's input/output widths against the partition's and the task's (same on every
        rank: no collective)."""
        in_dim, out_dim = getattr(model, "features_in", getattr(model, "in_dim", None)), getattr(model, "out_dim", None)
        if isinstance(in_dim, int) and in_dim != part.feature_dim:
            raise ValueError(f"{part.path}: the model's input width in_dim={in_dim} does not match the "
                             f"partition's feature width {part.feature_dim}; build the model with "
                             f"in_dim={part.feature_dim}")
        why = task.width_problem(out_dim, part.num_classes) if isinstance(out_dim, int) else None
        if why is not None:
            raise ValueError(f"{part.path}: {why}")

    def new_pipeline(self) -> Pipeline:
        """A fresh schedule (a stale one starts with a synchronous step); boundary samples are
        seeded with the model's ``seed``."""
        return build_schedule(self.config.schedule, self.part, seed=int(getattr(self.model, "seed", 0)))

    # ------------------------------------------------------------------ one step
    def _all_reduce_grads(self) -> int:
        """Sum the gradients over ranks; returns the bytes this rank sent (0 on one rank)."""
        all_reduce_grads(self.model.parameters())
        if not is_distributed():
            return 0
        return sum(p.numel() * p.element_size() for p in self.model.parameters()
                   if p.requires_grad and not is_per_rank(p))

    def _check_finite_loss(self, value: float) -> None:
        """Raise (on every rank alike: ``value`` is the all-reduced loss) when the loss is not finite."""
        if not math.isfinite(value):
            raise FloatingPointError(f"epoch {self.epoch}: the training loss is {value}; lower the "
                                     f"learning rate (lr={self.config.optim.lr}) or check the input features")

    def train_step(self) -> StepStats:
        """One optimizer step on every rank (a collective)."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        store = None if self.inputs is None else self.inputs.store
        with self.part.exchanger.recording() as comm, _recording(store) as rows:
            view = with_recompute(self.pipeline.begin_step(self.epoch), self.config.memory.recompute)
            offload = ActivationOffload() if self.config.memory.offload_activations else contextlib.nullcontext()
            with autocast(self.part.device, self.config.memory.precision), offload:
                logits = self.model(view, self._model_input())
            loss = self.task.train_loss(logits.float(), self.part, self.epoch)
            loss.backward()
            grad_bytes = self._all_reduce_grads()
            loss_total = loss.detach().reshape(1).clone()
            all_reduce_sum(loss_total)
            value = float(loss_total.item())
            self._check_finite_loss(value)
            self.optimizer.step()
        if self.inputs is not None:
            self.inputs.end_epoch()
        step_s = time.perf_counter() - t0
        return StepStats(train_loss=value, halo_bytes=comm.bytes_sent, allreduce_bytes=grad_bytes,
                         compute_time_s=step_s - comm.exposed_comm_s, comm_time_s=comm.comm_time_s,
                         exposed_comm_s=comm.exposed_comm_s,
                         bytes_per_layer=comm.bytes_per_layer(int(getattr(self.model, "num_layers", 0))),
                         staleness=self.pipeline.staleness(), feature_hits=rows.hits, feature_misses=rows.misses,
                         feature_h2d_bytes=rows.h2d_bytes, fetch_bytes=self.task.step_fetch_bytes())

    def _model_input(self) -> Any:
        """What the model's ``x`` is: the :class:`InputFeatures`, or the part's ``x`` for a model
        that takes a tensor."""
        return self.inputs if self.inputs is not None else self.part.x

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """The task's metrics on the train/val/test masks, over all ranks (accuracy; micro-F1 and
        ROC-AUC for multi-label; mse, mae and r2 for regression: ``train_acc``, ``val_mse`` ...),
        with the exact exchange (never the training schedule's wire format or link): the model's
        forward, then :meth:`_eval_metrics`."""
        self.model.eval()
        with autocast(self.part.device, self.config.memory.precision):
            logits = self.model(self.part, self._model_input()).float()
        return self._eval_metrics(logits)

    def _eval_metrics(self, logits: torch.Tensor) -> dict[str, float]:
        """The evaluation metrics of this rank's float ``logits`` ``[I, out_dim]`` (a collective:
        the task's :meth:`~gnn_dist.tasks.Task.metrics`)."""
        return self.task.metrics(logits, self.part)

    # ------------------------------------------------------------------ loop
    def fit(self, epochs: int) -> list[dict[str, Any]]:
        """Run ``epochs`` more epochs, fewer when the ``patience`` runs out; returns their metrics
        (one dict per epoch). With ``select="best-val"`` the model holds the best epoch's weights
        afterwards (a later ``fit`` trains on from the last epoch's)."""
        if epochs < 0:
            raise ValueError(f"epochs={epochs} must be >= 0")
        self._start_metrics()
        self.selection.resume_training(self.model)
        reset_peak(self.part.device)   # the peaks below count from here: a warm baseline (loaded, built)
        baseline = current_memory_bytes(self.part.device)
        out: list[dict[str, Any]] = []
        report = self.config.report
        if epochs and self.selection.stopped and self.rank == 0:
            log.info(f"early stop: already stopped at epoch {self.epoch} (patience "
                     f"{self.config.selection.patience}); nothing to train")
        for _ in range(epochs):
            if self.selection.stopped:
                break
            t0, threads = time.perf_counter(), run_queue.snapshot()
            step = self.train_step()
            rec: dict[str, Any] = {"epoch": self.epoch, **step.to_record(), "epoch_time_s": time.perf_counter() - t0,
                                   "wait_cpu_s": run_queue.wait_since(threads)}
            if len(out) == epochs - 1:
                self.pipeline.flush()  # nothing of the mode stays in flight after fit
            rec["comm_bytes"] = rec["halo_bytes"] + rec["allreduce_bytes"] + rec.get("fetch_bytes", 0)
            if report.eval_every and (self.epoch + 1) % report.eval_every == 0:
                t1 = time.perf_counter()
                rec.update(self.evaluate())
                rec["eval_time_s"] = time.perf_counter() - t1
                self.selection.observe(rec, self.model)
            else:
                rec.update(self.task.unevaluated())
            self.epoch += 1
            self.history.append(rec)
            out.append(rec)
            stop = self.selection.stopped and len(out) < epochs
            if stop:
                self.pipeline.flush()
                self._log_early_stop()
            if self.metrics is not None:   # every rank's peak so far (a collective) and its prediction
                both = all_gather_json([peak_memory_bytes(self.part.device), baseline], what="gather of peak memory")
                rec["peak_memory_bytes"] = [peak for peak, _ in both]
                rec["memory_baseline_bytes"] = [base for _, base in both]
                rec["predicted_peak_bytes"] = self.predicted_peak
            self._after_epoch(rec, last=len(out) == epochs or stop)
        if out and report.log_every:
            ranks = all_gather_json([peak_memory_bytes(self.part.device), median_compute_s(out)],
                                    what="gather of peak memory and compute time")
            if self.rank == 0:
                log.info("summary: " + summary_line(out, self.part.meta.num_edges, [peak for peak, _ in ranks],
                                                    peak_memory_kind(self.part.device), self.predicted_peak,
                                                    metric=self.task.select_metric,
                                                    lower_is_better=self.task.lower_is_better))
                balance = balance_line(self.part.meta.part_weights, [c for _, c in ranks])
                if balance is not None:
                    log.info(balance)
        best = self.selection.restore_best(self.model)
        if best is not None and self.rank == 0:
            m = self.selection.metric
            log.info(f"select best-val: the model holds the weights of epoch {best['epoch']} "
                     f"(val{_shown(m)} {best[f'val_{m}']:.4f}, test {best[f'test_{m}']:.4f})")
        return out

    def _log_early_stop(self) -> None:
        best = self.selection.best
        if self.rank == 0 and best is not None:
            m = self.selection.metric
            what = "accuracy" if m == "acc" else m
            log.info(f"early stop after epoch {self.epoch - 1}: the validation {what} has not improved for "
                     f"{self.selection.since_best} evaluations (best {best[f'val_{m}']:.4f} at epoch {best['epoch']})")

    def _start_metrics(self) -> None:
        """Rank 0 (re)starts the metrics file once: the config record (the run's configuration and
        its resolved task: what ``gnn-dist report`` charts and picks the best epoch by), then the
        epoch records before this trainer's epoch (a resumed run)."""
        if self.metrics is None or self._metrics_started:
            return
        self._metrics_started = True
        task = self.task.record()
        from .atomic_file import all_ranks_write

        with all_ranks_write(f"preparing the metrics file {self.metrics.path}"):   # a full disk: one line, exit 1
            if self.rank == 0:
                self.metrics.start({**self._run_config, "task": task}, self.epoch)
                resized = getattr(self.checkpoints, "resized", None)
                if resized is not None:   # an elastic job went on with another number of ranks
                    self.metrics.append(resized)

    def _after_epoch(self, rec: dict[str, Any], last: bool) -> None:
        c = self.config
        if self.rank == 0:
            if self.metrics is not None:
                self.metrics.append(rec)
            if self.tensorboard is not None:
                self.tensorboard.write(rec)
            if c.report.log_every and (rec["epoch"] % c.report.log_every == 0 or last):
                log.info(progress_line(rec, feature_store=self.inputs is not None
                                       and self.inputs.store.storage != "device"))
        if c.checkpoint.checkpoint_dir and (self.epoch % c.checkpoint.checkpoint_every == 0 or last):
            self.save_checkpoint()

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self) -> Path:
        """Checkpoint the state after ``self.epoch`` epochs (a collective; see
        :meth:`CheckpointManager.save <gnn_dist.checkpoints.CheckpointManager.save>`)."""
        return self.checkpoints.save(self)

    def resume(self, path: str | Path | None = None) -> bool:
        """Continue from a checkpoint (a collective); False when there is none. ``path`` defaults
        to the config's ``resume`` (``auto``/``latest``: the newest in ``checkpoint_dir``; else a
        checkpoint file). See :meth:`CheckpointManager.resume
        <gnn_dist.checkpoints.CheckpointManager.resume>`."""
        c = self.config.checkpoint
        if path is None and c.resume not in (None, *RESUME_MODES):
            path = c.resume
        if path is None and c.checkpoint_dir is None:
            raise ValueError("resume needs a path or checkpoint_dir")
        return self.checkpoints.resume(self, path)


def _shown(metric: str) -> str:
    """`` mse`` in a log line for a metric other than the accuracy (which is shown bare)."""
    return "" if metric == "acc" else f" {metric}"


def _recording(store: FeatureStore | None) -> contextlib.AbstractContextManager[StoreCounts]:
    """The feature store's recording of a step, or zeros without a store."""
    return store.recording() if store is not None else contextlib.nullcontext(StoreCounts())
