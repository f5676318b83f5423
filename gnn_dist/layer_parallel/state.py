"""What a stage keeps between steps, and its checkpoints.

:class:`StageState` stands where a graph-parallel trainer holds its schedule (``trainer.pipeline``):
a stateful mode, so the :class:`~gnn_dist.checkpoints.CheckpointManager` has every rank write
its own rank file: the step count, the history of each of the stage's layer inputs (its
moving average, :class:`~gnn_dist.pipeline.stale.EMABuffer`) and the optimizer state of the
parameters this stage trains (only its own have any). The main file (rank 0) holds the full
model: before a checkpoint each stage's weights are broadcast to every rank
(:meth:`LayerParallelTrainer.sync_weights <gnn_dist.layer_parallel.LayerParallelTrainer.sync_weights>`),
so ``gnn-dist predict`` and a graph-parallel run read it as any other. A resume restores the
rank files for the same mode, stages, chunks, smoothing, ranks and partition, else starts the
history afresh (its first step with one chunk) with a warning on every rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..checkpoints import CheckpointManager
from ..config import CheckpointConfig
from ..pipeline.stale import EMABuffer

__all__ = ["StageState", "StageCheckpoints"]


class StageState:
    """The history of this stage's layer inputs, the step count and the stage's optimizer state."""

    stateful = True

    def __init__(self, name: str, layers: list[int], gamma: float | None, chunks: int, device: torch.device,
                 optimizer: torch.optim.Optimizer | None = None) -> None:
        self.name = name
        self.chunks = chunks
        self.device = device
        self.steps = 0
        self.history = {i: EMABuffer(gamma) for i in layers}
        self.optimizer = optimizer
        self.pending_optimizer: dict[str, Any] | None = None
        """The optimizer state of a loaded rank file, applied by the trainer after the resume."""

    @property
    def step_chunks(self) -> int:
        """The chunks of the next step: one while there is no history yet."""
        return 1 if self.steps == 0 else self.chunks

    def begin_step(self, epoch: int) -> None:
        return None

    def staleness(self) -> int:
        """Epochs of staleness the next step reads (1 with historical rows, else 0)."""
        return int(self.step_chunks > 1)

    def flush(self) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        assert self.optimizer is not None
        return {"steps": self.steps, "history": {str(i): b.state_dict() for i, b in self.history.items()},
                "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        history = state.get("history")
        if not isinstance(state.get("steps"), int) or not isinstance(history, dict) or \
                sorted(history) != sorted(str(i) for i in self.history):
            raise ValueError(f"the rank file's stage state does not fit this stage's layers {sorted(self.history)}")
        for i, buf in self.history.items():
            saved = dict(history[str(i)])
            if isinstance(saved.get("m"), torch.Tensor):
                saved["m"] = saved["m"].to(self.device)
            buf.load_state_dict(saved)
        self.steps = int(state["steps"])
        self.pending_optimizer = state.get("optimizer")


@dataclass(frozen=True, slots=True)
class _AllRanks:
    """A part as the checkpoint manager sees it: its folder, and one rank file per world rank."""

    part: Any
    num_parts: int

    @property
    def meta(self) -> Any:
        return self.part.meta

    @property
    def path(self) -> Any:
        return self.part.path


class StageCheckpoints(CheckpointManager):
    """The checkpoint manager of a layer-parallel run: rank files for every world rank, and the
    mode (``layer(stages=S,chunks=K)``) and ``history_smoothing`` that a resume must match."""

    def __init__(self, config: CheckpointConfig, part: Any, *, mode: str, world_size: int,
                 smoothing: float | None) -> None:
        super().__init__(config, _AllRanks(part, world_size))
        self.mode, self.smoothing = mode, smoothing

    def _schedule_info(self, trainer: Any) -> dict[str, Any]:
        return {"mode": self.mode, "smoothing": self.smoothing, "num_parts": int(self.part.num_parts),
                "partition": self.fingerprint, "rank_files": None}
