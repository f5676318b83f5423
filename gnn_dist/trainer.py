"""Full-graph training on P ranks that computes exactly what one device computes.

Per step: every rank runs the model on its part (halo exchange inside each layer), the loss is
the **sum** over the rank's training rows divided by the **global** training count, gradients are
summed over ranks in one flat all-reduce, and every rank applies the same optimizer step. So the
weights stay identical on all ranks (they are broadcast from rank 0 once at the start, never
trusted to a seed) and equal the one-device run's. Ranks without training rows still take part in
every collective.
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
import torch.nn.functional as F

from . import checkpoint as ckpt
from .distributed import all_reduce_grads, all_reduce_sum, broadcast_module, get_rank, get_world_size

__all__ = ["Trainer", "TrainerConfig", "PIPELINES"]

log = logging.getLogger(__name__)

PIPELINES = ("sync",)
OPTIMIZERS = ("adam", "adamw", "sgd")


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
    """Halo-exchange schedule: ``sync`` (exchange, then compute)."""
    checkpoint_dir: str | None = None
    """Where rank 0 writes checkpoints; None writes none."""
    checkpoint_every: int = 10
    """Checkpoint every this many epochs (and after the last epoch of each ``fit``)."""
    metrics_path: str | None = None
    """A JSON-lines file rank 0 appends one object per epoch to."""
    log_every: int = 1
    """Rank 0 logs a progress line every this many epochs; 0 logs none."""

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer={self.optimizer!r} is not supported; choose from {', '.join(OPTIMIZERS)}")
        if self.pipeline not in PIPELINES:
            raise ValueError(f"pipeline={self.pipeline!r} is not supported; choose from {', '.join(PIPELINES)}")
        if self.lr <= 0 or not math.isfinite(self.lr):
            raise ValueError(f"lr={self.lr} must be a positive number")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay={self.weight_decay} must be >= 0")
        for name in ("eval_every", "checkpoint_every", "log_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 0")


class Trainer:
    """Train ``model`` on the rank's ``part``; ``fit(epochs)`` returns one metrics dict per epoch.

    Keyword arguments are the fields of :class:`TrainerConfig`. Epoch numbers are absolute: after
    :meth:`resume` they continue from the checkpoint's.
    """

    def __init__(self, model: torch.nn.Module, part: Any, **config: Any) -> None:
        self.config = TrainerConfig(**config)
        self.model = model.to(part.device)
        self.part = part
        if part.x is None:
            raise ValueError(f"{part.path}: the partition has no node features to train on")
        if part.y is None:
            raise ValueError(f"{part.path}: the partition has no labels to train on")
        if self.part.global_num_train == 0:
            raise ValueError(f"{part.path}: the partition has no training nodes (train_mask is empty everywhere)")
        broadcast_module(self.model, src=0)
        self.optimizer = self._build_optimizer()
        self.epoch = 0
        self.history: list[dict[str, Any]] = []
        self.rank = get_rank()

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

    def train_step(self) -> dict[str, float]:
        """One optimizer step on the full graph; returns the global loss and comm bytes."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        ex = self.part.exchanger
        halo_before = ex.bytes_sent
        logits = self.model(self.part, self.part.x)
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
        return {"train_loss": value, "halo_bytes": ex.bytes_sent - halo_before, "allreduce_bytes": grad_bytes}

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Accuracy (micro-F1 for multi-label) on the train/val/test masks, over all ranks."""
        self.model.eval()
        logits = self.model(self.part, self.part.x)
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
                    f.write(json.dumps(rec) + "\n")
            if c.log_every and (rec["epoch"] % c.log_every == 0 or last):
                accs = "" if rec["val_acc"] is None else (
                    f"  train {rec['train_acc']:.4f}  val {rec['val_acc']:.4f}  test {rec['test_acc']:.4f}")
                log.info(f"epoch {rec['epoch']:4d}  loss {rec['train_loss']:.4f}{accs}  "
                         f"{rec['epoch_time_s'] * 1e3:.1f} ms  comm {rec['comm_bytes'] / 2**20:.2f} MiB")
        if c.checkpoint_dir and (self.epoch % max(c.checkpoint_every, 1) == 0 or last):
            self.save_checkpoint()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "epoch": self.epoch, "rng": ckpt.rng_state(), "config": asdict(self.config),
                "history": self.history}

    def save_checkpoint(self) -> Path | None:
        """Rank 0 writes the checkpoint after ``self.epoch`` epochs (atomically)."""
        if self.config.checkpoint_dir is None:
            raise ValueError("save_checkpoint needs checkpoint_dir")
        if self.rank != 0:
            return None
        return ckpt.save_checkpoint(self.config.checkpoint_dir, self.epoch, self.state_dict())

    def resume(self, path: str | Path | None = None) -> bool:
        """Load ``path`` (default: the latest checkpoint in ``checkpoint_dir``); False if none."""
        if path is None:
            if self.config.checkpoint_dir is None:
                raise ValueError("resume needs a path or checkpoint_dir")
            path = ckpt.latest_checkpoint(self.config.checkpoint_dir)
            if path is None:
                return False
        state = ckpt.load_checkpoint(path)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.epoch = int(state["epoch"])
        self.history = list(state.get("history", []))
        ckpt.set_rng_state(state["rng"])
        log.info(f"resumed from {path} at epoch {self.epoch}")
        return True
