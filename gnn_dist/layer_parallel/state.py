"""What a stage keeps between steps, and its checkpoints.

:class:`StageState` stands where a graph-parallel trainer holds its schedule (``trainer.pipeline``):
a stateful mode, so the :class:`~gnn_dist.checkpoints.CheckpointManager` has every rank write
its own rank file: the step count, the history of each of the stage's layer inputs (its
moving average, :class:`~gnn_dist.pipeline.stale.EMABuffer`) with the original ids of its rows,
the optimizer state of the parameters this stage trains (only its own have any) with their
indices, and the layout. The main file (rank 0) holds the full
model: before a checkpoint each stage's weights are broadcast to every rank
(:meth:`LayerParallelTrainer.sync_weights <gnn_dist.layer_parallel.LayerParallelTrainer.sync_weights>`),
so ``gnn-dist predict`` and a graph-parallel run read it as any other.

A resume with the same stages, ranks and partition reads each rank's own file (bit for bit; the
chunks may change: the history is per row). On another layout (stages, graph parts, or another
cut of the same graph, ``layer`` and ``hybrid`` alike) every rank reads every old rank's file,
one at a time, and picks its layers' rows and its parameters' optimizer state by original id
and parameter (:mod:`.reshard`; the resume line says what it carried). The smoothing must match,
and a checkpoint of another mode, of another graph or whose files hold no row ids (written
before they were saved) starts the history afresh (its first step with one chunk) with a
warning on every rank.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..checkpoints import CheckpointManager
from ..config import CheckpointConfig
from ..pipeline.stale import EMABuffer
from ..pipeline.stale_reshard import NoRowIds
from .reshard import collect

__all__ = ["StageState", "StageCheckpoints", "stage_mode", "mode_stages"]

log = logging.getLogger(__name__)

_MODE = re.compile(r"(?:layer|hybrid)\(stages=(\d+),chunks=\d+(?:,chunk_by=\w+)?\)")


def stage_mode(parallel: str, stages: int, chunks: int, chunk_by: str) -> str:
    """The mode a layer-parallel checkpoint records: ``layer(stages=S,chunks=K)`` (``,chunk_by=graph``
    after the chunks unless ``hash``, as checkpoints before ``--chunk-by`` wrote it)."""
    by = "" if chunk_by == "hash" else f",chunk_by={chunk_by}"
    return f"{parallel}(stages={stages},chunks={chunks}{by})"


def mode_stages(mode: Any) -> int | None:
    """The stages of a layer-parallel :func:`stage_mode`; None for any other mode."""
    m = _MODE.fullmatch(mode) if isinstance(mode, str) else None
    return None if m is None else int(m.group(1))


class StageState:
    """The history of this stage's layer inputs, the step count and the stage's optimizer state.

    ``row_ids``: the original ids of the rank's rows (inner then halo); ``trained``: the indices
    (in ``model.parameters()`` order) of the parameters it trains; ``layout``: ``(stages, graph
    parts)``. They are saved beside the history so that another layout can pick its own
    (:meth:`load_other_cut`)."""

    stateful = True

    def __init__(self, name: str, layers: list[int], gamma: float | None, chunks: int, device: torch.device,
                 optimizer: torch.optim.Optimizer | None = None, *, row_ids: torch.Tensor | None = None,
                 trained: Iterable[int] = (), layout: tuple[int, int] = (1, 1)) -> None:
        self.name = name
        self.chunks = chunks
        self.device = device
        self.steps = 0
        self.gamma = gamma
        self.history = {i: EMABuffer(gamma) for i in layers}
        self.optimizer = optimizer
        self.row_ids = row_ids
        self.trained = sorted(int(j) for j in trained)
        self.layout = layout
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
        state = {"steps": self.steps, "history": {str(i): b.state_dict() for i, b in self.history.items()},
                 "optimizer": self.optimizer.state_dict(), "trained": list(self.trained),
                 "stages": self.layout[0], "graph_parts": self.layout[1]}
        if self.row_ids is not None:
            state["row_ids"] = self.row_ids.detach().cpu().to(torch.int64)
        return state

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

    def load_other_cut(self, states: Iterable[dict[str, Any]]) -> dict[str, int]:
        """Continue from the saved states of every rank of another layout (read one at a time):
        each historical layer's rows by original id, with their moving average's count, and the
        optimizer state of the parameters this rank trains (:mod:`.reshard`). Returns this rank's
        counts: ``{"restored": rows, "missing": rows, "params": parameters with optimizer state,
        "from_stages": S, "from_graph_parts": G}`` (``missing``: rows of its layers no old rank
        saved, summed over the layers; none in the files of one run).

        Raises:
            NoRowIds: the states, or this rank, hold no original row ids.
            ValueError: the states are malformed or disagree.
        """
        if self.row_ids is None:
            raise NoRowIds("the stage has no original row ids to place the saved rows by")
        got = collect(states, self.history, self.row_ids, self.trained)
        restored = missing = 0
        for i, buf in self.history.items():
            entry = got.layers.get(i)
            if got.steps == 0:   # nothing saved, nothing read: the first step runs with one chunk
                continue
            if entry is None:
                missing += self.row_ids.numel()
                continue
            buf.load_state_dict({"gamma": entry.gamma, "count": entry.count, "m": entry.m.to(self.device)})
            found = int(entry.found.sum())
            restored, missing = restored + found, missing + entry.found.numel() - found
        self.steps = got.steps
        self.pending_optimizer = got.optimizer
        return {"restored": restored, "missing": missing, "params": len(got.optimizer["state"]),
                "from_stages": got.stages, "from_graph_parts": got.graph_parts}

    def restart_history(self) -> None:
        """Drop the history: the next step runs with one chunk (exact, reading none) and starts it."""
        self.history = {i: EMABuffer(self.gamma) for i in self.history}
        self.steps = 0

    @staticmethod
    def describe_other_cut(counts: list[dict[str, int]]) -> str:
        """What :meth:`load_other_cut` did on every rank (``counts``: each rank's), a clause of the
        resume line (rows and parameters counted once per rank that holds them)."""
        restored = sum(c.get("restored", 0) for c in counts)
        missing = sum(c.get("missing", 0) for c in counts)
        params = sum(c.get("params", 0) for c in counts)
        old = counts[0] if counts else {}
        line = (f" re-sharded by node id from {old.get('from_stages')} stage(s) x {old.get('from_graph_parts')} "
                f"part(s) ({restored} history rows restored, the optimizer state of {params} parameters from the "
                f"ranks that trained them")
        if missing:
            return line + (f"; {missing} rows had no saved value: the history restarts, the first resumed step "
                           f"runs with one chunk)")
        return line + ")"


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
    mode (:func:`stage_mode`) and ``history_smoothing`` of the run; a resume on another layout
    places the rank files by id (see the module docstring)."""

    def __init__(self, config: CheckpointConfig, part: Any, *, mode: str, world_size: int,
                 smoothing: float | None) -> None:
        super().__init__(config, _AllRanks(part, world_size))
        self.mode, self.smoothing = mode, smoothing

    def _schedule_info(self, trainer: Any) -> dict[str, Any]:
        return {"mode": self.mode, "smoothing": self.smoothing, "num_parts": int(self.part.num_parts),
                "partition": self.fingerprint, "rank_files": None}

    def _mismatch(self, trainer: Any, saved: dict[str, Any] | None, other_cut: bool) -> str | None:
        """Why the saved stage states cannot be restored (None: they can, on any layout of the
        same graph, with any chunks)."""
        if saved is None or not saved.get("rank_files"):
            return "the checkpoint holds no pipeline state"
        if mode_stages(saved.get("mode")) is None:
            return f"the checkpoint was written with pipeline={saved.get('mode')!r}, this run uses {self.mode!r}"
        if saved.get("smoothing") != self.smoothing:
            return (f"the checkpoint was written with history_smoothing={saved.get('smoothing')}, this run has "
                    f"history_smoothing={self.smoothing}")
        if saved.get("partition") != self.fingerprint and not other_cut:
            return "the checkpoint was written for another partition"
        return None

    def _reshards(self, info: dict[str, Any]) -> bool:
        """Placed by id on another layout: another partition, number of ranks or of stages."""
        return (info.get("partition") != self.fingerprint or info.get("num_parts") != int(self.part.num_parts)
                or mode_stages(info.get("mode")) != mode_stages(self.mode))

    def _restore_pipeline(self, trainer: Any, saved: Any, other_cut: bool) -> tuple[Any, Any]:
        """The manager's, then, when some rank found rows no old rank saved (files not of one
        run), the history restarts on every rank (every rank sees every rank's counts)."""
        pipeline, carried = super()._restore_pipeline(trainer, saved, other_cut)
        if pipeline is not None and carried and any(c.get("missing") for c in carried):
            pipeline.restart_history()
        return pipeline, carried

    def _warn_fresh(self, trainer: Any, path: Path, info: dict[str, Any] | None, why: str | None) -> None:
        if why is not None:
            log.warning(f"{path}: {why}; the layer-parallel history and the later stages' optimizer state are "
                        f"not restored (the history starts afresh: the first resumed step runs with one chunk), so "
                        f"the resumed run will not reproduce the uninterrupted one")
