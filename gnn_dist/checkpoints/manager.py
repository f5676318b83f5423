"""Checkpoints of a training run: what to save, when every rank must agree, and how a resume is
checked (the file format is :mod:`gnn_dist.checkpoints.files`, the checks
of a resume :mod:`gnn_dist.checkpoints.resume`).

Every method here is a collective: every rank calls it at the same point. A step that may fail
on one rank only (rank 0 writing or reading the main file, a rank its own rank file) runs inside
:func:`~gnn_dist.distributed.all_ranks_agree`, so every rank raises and none waits in a
collective for a peer that has given up.

A checkpoint is tied to its data: it records the partition folder's fingerprint (every file's
sha256, :func:`~gnn_dist.partition.partition_fingerprint`) and the graph fingerprint
(``partition.json``'s ``graph_fingerprint``: the graph by original node ids, the same for every
cut; a typed folder's scheme, and its scheme-1 digest, which compares it with a typed folder or
checkpoint of before scheme 2: :func:`~.resume.check_same_data`). A resume onto another cut of
the same graph (any number of parts) continues exactly, with one line saying so; onto another
graph, or another partition when a folder has no graph fingerprint, it is refused, naming both,
unless ``resume_any_partition``. A stateful schedule
(``stale``) also has every rank write its state to its own rank file before rank 0 writes the
main file; that state is restored for the same schedule and smoothing: as it is on the same
partition, and placed by original node id on another cut of the same graph when the schedule
can (``load_other_cut``, :mod:`.reshard`; the resume line says what it carried). Otherwise the
schedule starts fresh, with a warning on every rank.

A job holds its checkpoint folder for its whole life (:func:`hold_checkpoint_dir`, around the
job in ``gnn_dist.train``): rank 0 takes the folder's lock (:mod:`gnn_dist.run_lock`) before any
rank touches the folder, and a folder another live run holds fails every rank before training.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from partitioners.format.graph_digest import SCHEME_1_FIELD

from .. import run_lock
from ..atomic_file import all_ranks_write
from ..config import RESUME_MODES, CheckpointConfig, TrainerConfig, to_dict
from ..distributed import all_gather_json, all_ranks_agree, broadcast_bytes, broadcast_json, get_rank, get_world_size
from ..partition import partition_fingerprint
from ..selection import ModelSelection
from . import files as ckpt
from . import node_rows, reshard
from .format import CheckpointError
from .resume import _RUN_FIELDS, DataIdentity, _saved_optim, check_applies, check_fits, check_same_data, model_info
from .state import rng_state, set_rng_state

__all__ = ["CheckpointManager", "hold_checkpoint_dir"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def hold_checkpoint_dir(config: CheckpointConfig) -> Iterator[run_lock.RunLock | None]:
    """``with hold_checkpoint_dir(config.trainer.checkpoint):`` around a whole job (a collective):
    rank 0 locks ``checkpoint_dir`` (:func:`gnn_dist.run_lock.acquire`, which also takes over a
    stale lock) and every rank learns the outcome, so a folder held by another live run fails
    every rank here, before anything is built or trained (:class:`~gnn_dist.run_lock.RunLockError`
    on rank 0, one line naming the owner; a ``ValueError`` on the others: exit code 2, no line).
    Rank 0 releases the lock when the block ends (the kernel drops it if the process dies). Yields
    rank 0's :class:`~gnn_dist.run_lock.RunLock`, None on the other ranks and without a folder."""
    if config.checkpoint_dir is None:
        yield None
        return
    lock: run_lock.RunLock | None = None
    try:
        with all_ranks_agree(f"locking the checkpoint folder {config.checkpoint_dir}"):
            if get_rank() == 0:
                lock = run_lock.acquire(config.checkpoint_dir, what="--checkpoint-dir")
        yield lock
    finally:
        if lock is not None:
            lock.release()


class TrainerState(Protocol):
    """What the manager reads and restores of a trainer."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    part: Any
    pipeline: Any
    config: TrainerConfig
    epoch: int
    history: list[dict[str, Any]]
    selection: ModelSelection

    def new_pipeline(self) -> Any: ...


@dataclass(slots=True)
class _Saved:
    """A checkpoint being resumed: its path and its state (rank 0's file, broadcast)."""

    path: Path
    state: dict[str, Any]


class CheckpointManager:
    """Save, prune and resume the checkpoints of one trainer (see the module docstring)."""

    def __init__(self, config: CheckpointConfig, part: Any) -> None:
        self.config = config
        self.part = part
        self.rank = get_rank()
        self.fingerprint = partition_fingerprint(part.meta)
        self.graph_fingerprint: str | None = getattr(part.meta, "graph_fingerprint", None)
        self.graph_fingerprint_scheme: int = getattr(part.meta, "graph_fingerprint_scheme", 1)
        self.scheme_1_graph_fingerprint: str | None = getattr(part.meta, "scheme_1_graph_fingerprint", None)
        self.resized: dict[str, Any] | None = None
        """After a resume on another world size: the metrics file's resize record."""
        if config.checkpoint_dir is not None:
            removed = ckpt.remove_partial_writes(config.checkpoint_dir)
            if removed:
                log.info(f"removed {len(removed)} partial checkpoint file(s) of an interrupted write in "
                         f"{config.checkpoint_dir}")

    @property
    def directory(self) -> str:
        if self.config.checkpoint_dir is None:
            raise ValueError("checkpoints need checkpoint_dir")
        return self.config.checkpoint_dir

    # ------------------------------------------------------------------ save
    def save(self, trainer: TrainerState) -> Path:
        """Checkpoint the state after ``trainer.epoch`` epochs; returns the main file's path.

        A stateful schedule first has every rank write its rank file (after waiting for its
        exchanges in flight); rank 0 then writes the main file, recording the rank files'
        checksums, and all ranks meet again, so ``latest`` never names an incomplete checkpoint.
        """
        path = ckpt.checkpoint_path(self.directory, trainer.epoch)
        info = self._schedule_info(trainer)
        transport = getattr(trainer.pipeline, "transport", None)
        widths = None if transport is None else transport.state_dict()  # adaptive widths: a collective
        if trainer.pipeline.stateful:  # the config, not the data: the same on every rank
            entry = None
            with all_ranks_write(f"writing the rank files of the checkpoint {path}"):
                entry = ckpt.save_rank_state(self.directory, trainer.epoch, self.rank, info["num_parts"],
                                             trainer.pipeline.state_dict())
            info["rank_files"] = all_gather_json(entry)
        rows = self._node_rows(trainer)   # the per-rank rows by id, on rank 0 (a collective)
        with all_ranks_write(f"writing the checkpoint {path}"):   # a full disk: one line on every rank, exit 1
            if self.rank == 0:
                ckpt.save_checkpoint(self.directory, trainer.epoch, {**self._state(trainer, rows),
                                                                     "pipeline_state": info, "halo_widths": widths})
        if self.rank == 0:
            log.info(f"saved {path}")
        if self.config.checkpoint_keep is not None:
            self._prune(trainer.epoch, self.config.checkpoint_keep)
        return path

    def _state(self, trainer: TrainerState, rows: dict[str, Any] | None) -> dict[str, Any]:
        model = trainer.model
        state = {"model": trainer.selection.training_state(model), "optimizer": trainer.optimizer.state_dict(),
                 "epoch": trainer.epoch, "rng": rng_state(), "config": to_dict(trainer.config),
                 "model_info": model_info(model), "world_size": get_world_size(),
                 "partition": self.fingerprint, "graph_fingerprint": self.graph_fingerprint, "history": trainer.history,
                 "selection": trainer.selection.state_dict()}
        if self.graph_fingerprint_scheme != 1:   # recorded when not 1: a homogeneous run's state is as before
            state["graph_fingerprint_scheme"] = self.graph_fingerprint_scheme
        if self.scheme_1_graph_fingerprint is not None:   # a scheme-2 folder's: resumes on an older cut too
            state[SCHEME_1_FIELD] = self.scheme_1_graph_fingerprint
        if rows is None:
            return state
        selection = state["selection"]
        if selection.get("weights") is not None:
            selection = {**selection, "weights": node_rows.shared_state(selection["weights"], model)}
        return {**state, "model": node_rows.shared_state(state["model"], model), "selection": selection,
                "optimizer": node_rows.shared_optimizer_state(state["optimizer"], trainer.optimizer, model),
                "node_rows": rows}

    @staticmethod
    def _node_rows(trainer: TrainerState) -> dict[str, Any] | None:
        """The per-rank rows of the weights, the best epoch's weights and the optimizer, each
        gathered by id on rank 0 (:mod:`.node_rows`); None on the other ranks and for a model
        without per-rank rows (its checkpoints are unchanged)."""
        model = trainer.model
        if not node_rows.per_rank_parameters(model):
            return None
        best = trainer.selection.state_dict().get("weights")
        rows = {"model": node_rows.gather_state_rows(trainer.selection.training_state(model), model),
                "best": None if best is None else node_rows.gather_state_rows(best, model),
                "optimizer": node_rows.gather_optimizer_rows(trainer.optimizer, model)}
        return rows if rows["model"] is not None else None

    def _schedule_info(self, trainer: TrainerState) -> dict[str, Any]:
        s = trainer.config.schedule
        return {"mode": s.pipeline, "smoothing": s.stale_smoothing, "num_parts": int(self.part.num_parts),
                "partition": self.fingerprint, "rank_files": None}

    def _prune(self, epoch: int, keep: int) -> None:
        """Delete the checkpoints beyond the newest ``keep``: rank 0 decides which epochs stay
        from the main files it sees; each rank deletes its own rank files (best effort)."""
        kept: set[int] | None = None  # None: keep everything (rank 0 could not list the folder)
        if self.rank == 0:
            try:
                older = [e for e in ckpt.checkpoint_epochs(self.directory) if e < epoch]
                kept = set(older[-(keep - 1):] if keep > 1 else [])
            except OSError as exc:  # never a reason to stop training or to skip the broadcast
                log.warning(f"cannot list the checkpoints in {self.directory} to keep the newest {keep} ({exc})")
        kept_list = broadcast_json(None if kept is None else sorted(kept))
        kept = None if kept_list is None else set(kept_list)
        if kept is None:
            return
        try:
            ckpt.prune_checkpoints(self.directory, kept | {epoch}, epoch, rank=self.rank,
                                   num_parts=int(self.part.num_parts))
        except OSError as exc:
            log.warning(f"cannot delete old checkpoints in {self.directory} ({exc})")

    # ------------------------------------------------------------------ resume
    def resume(self, trainer: TrainerState, path: str | Path | None = None) -> bool:
        """Continue ``trainer`` from a checkpoint; False (and nothing changes) if there is none.

        ``path`` (a checkpoint file, folder or ``latest`` file) defaults to the config's
        ``resume``: ``auto`` or ``latest`` (the newest in ``checkpoint_dir``; ``latest`` must
        exist) or a file. Rank 0 reads the file and broadcasts it, so only rank 0 needs to see
        it; each rank reads its own rank file. The weights, optimizer state, dropout step, RNG
        states, history, the model selection's state (best epoch, its weights with
        ``select="best-val"``, the patience count) and (same schedule and smoothing) the
        schedule's state are restored (on another cut of the same graph, placed by node id when
        the schedule can: :mod:`.reshard`), and adaptive halo widths with their statistics (same
        partition), so the run reproduces the uninterrupted one exactly; ``lr`` and
        ``weight_decay`` are this run's (a warning says when the checkpoint's differ).

        Raises:
            CheckpointError: (on every rank) the file is missing, corrupt or truncated, was
                written for another partition (unless ``resume_any_partition``), model shape or
                optimizer, or ``resume="latest"`` finds none; the message names the file.
        """
        saved = self._read(path)
        if saved is None:
            return False
        other_cut = self._check_partition(saved)
        pipeline, carried = self._restore_pipeline(trainer, saved, other_cut is not None)
        self._apply(trainer, saved, pipeline)
        before = saved.state.get("world_size")
        if isinstance(before, int) and before != get_world_size():   # an elastic job that went on resized
            carried_line = None if carried is None else reshard.describe(pipeline, carried).strip()
            self.resized = {"event": "resize", "epoch": trainer.epoch, "from_world_size": before,
                            "to_world_size": get_world_size(), **_repartitioned(self.part),
                            **({} if carried_line is None else {"pipeline_state": carried_line})}
        log.info((f"{other_cut}: {saved.path} at epoch {trainer.epoch}" if other_cut else
                  f"resumed from {saved.path} at epoch {trainer.epoch}")
                 + ("" if pipeline is None else f" with the {pipeline.name} pipeline's state")
                 + ("" if carried is None else reshard.describe(pipeline, carried)))
        return True

    def _read(self, path: str | Path | None) -> _Saved | None:
        """Rank 0 finds and verifies the checkpoint and sends its bytes; every rank parses them
        (``weights_only``: never unpickled code). None: there is none."""
        want = str(path) if path is not None else (self.config.resume or "auto")
        where: Path | None = None
        data: bytes | None = None
        with all_ranks_agree("reading the checkpoint"):
            if self.rank == 0:
                where = ckpt.latest_checkpoint(self.directory) if want in RESUME_MODES else Path(want)
                if where is None and want == "latest":
                    raise CheckpointError("--resume latest: the folder holds no checkpoint (use --resume auto to "
                                          "start afresh when there is none)", path=self.directory)
                if where is not None:
                    where, data = ckpt.read_checkpoint(where)
        name = broadcast_json(None if where is None else str(where))
        data = broadcast_bytes(data)
        if name is None or data is None:
            log.info(f"no checkpoint in {self.config.checkpoint_dir}: starting from epoch 0")
            return None
        state: dict[str, Any] = {}
        with all_ranks_agree(f"reading the checkpoint {name}"):
            state = ckpt.parse_checkpoint(data, name)
        return _Saved(Path(name), state)

    def _check_partition(self, saved: _Saved) -> str | None:
        """None: the same partition; the line of a resume on another cut of the same graph
        (:func:`check_same_data`); or a refusal (a warning under ``resume_any_partition``)."""
        mine = DataIdentity(self.fingerprint, self.graph_fingerprint, int(self.part.num_parts),
                            self.graph_fingerprint_scheme, self.scheme_1_graph_fingerprint)
        found = check_same_data(DataIdentity.of_state(saved.state), mine, str(self.part.path),
                                any_partition=self.config.resume_any_partition, path=saved.path)
        if found is None:
            return None
        line, same_graph = found
        if not same_graph:
            log.warning(line)
        return line if same_graph else None

    def _mismatch(self, trainer: TrainerState, saved: dict[str, Any] | None, other_cut: bool) -> str | None:
        """Why the checkpoint's schedule state cannot be restored, or None when it can (or when
        neither side has any; ``other_cut``: on another cut of the same graph, placed by id when
        the schedule can, :mod:`.reshard`); the same on every rank."""
        mine = self._schedule_info(trainer)
        stateful = trainer.pipeline.stateful
        if saved is None:
            return "the checkpoint holds no pipeline state" if stateful else None
        if saved.get("mode") != mine["mode"]:
            if saved.get("rank_files") or stateful:
                return f"the checkpoint was written with pipeline={saved.get('mode')!r}, this run uses {mine['mode']!r}"
            return None
        if not saved.get("rank_files"):
            return "the checkpoint holds no pipeline state" if stateful else None
        if saved.get("smoothing") == mine["smoothing"] and other_cut and reshard.can_reshard(trainer.pipeline):
            return getattr(trainer.pipeline, "other_cut_refusal", None)
        for key, what in (("smoothing", "stale_smoothing"), ("num_parts", "num_parts")):
            if saved.get(key) != mine[key]:
                return f"the checkpoint was written with {what}={saved.get(key)}, this run has {what}={mine[key]}"
        if saved.get("partition") != mine["partition"]:
            return "the checkpoint was written for another partition"
        return None

    def _reshards(self, info: dict[str, Any]) -> bool:
        """Whether a restorable saved schedule state (main file's ``pipeline_state`` ``info``) is
        placed by node id (:mod:`.reshard`) rather than read rank by rank: it is of another cut."""
        return info.get("partition") != self.fingerprint

    def _restore_pipeline(self, trainer: TrainerState, saved: _Saved, other_cut: bool) -> tuple[Any, Any]:
        """A fresh schedule holding this rank's saved state, or None (a warning says why, on every
        rank); and, when it was placed on another cut by id, every rank's counts of what it carried
        (:mod:`.reshard`; else None). Every rank makes the same collectives whatever its own answer
        (hosts may hold different copies of the partition)."""
        info = saved.state.get("pipeline_state")
        why = self._mismatch(trainer, info, other_cut)
        if info is None or not info.get("rank_files"):
            self._warn_fresh(trainer, saved.path, info, why)
            return None, None
        pipeline, counts, lacks = None, None, None
        resharding = why is None and self._reshards(info)
        with all_ranks_agree(f"reading the rank files of the checkpoint {saved.path}"):
            if resharding:
                lacks = reshard.missing_rank_file(saved.path.parent, info)
                if lacks is None:
                    pipeline = trainer.new_pipeline()
                    counts, why = reshard.load_other_cut(pipeline, saved.path.parent, info, int(saved.state["epoch"]))
            elif why is None:
                entry = info["rank_files"][self.rank]
                lacks = entry["name"]
                loaded = ckpt.load_rank_state(saved.path.parent, entry, epoch=int(saved.state["epoch"]),
                                              rank=self.rank, num_parts=info["num_parts"])
                if loaded is not None:
                    pipeline = trainer.new_pipeline()
                    try:
                        pipeline.load_state_dict(loaded)
                    except (ValueError, KeyError, TypeError) as exc:
                        raise CheckpointError(f"the rank file does not fit this rank's pipeline ({exc})",
                                              path=saved.path.parent / entry["name"]) from exc
        status = all_gather_json([why, pipeline is not None, lacks, counts])
        reasons = [(r, w) for r, (w, *_) in enumerate(status) if w is not None]
        missing = [(r, name) for r, (w, ok, name, _) in enumerate(status) if w is None and not ok]
        if reasons:
            r, w = reasons[0]
            why = w if len(reasons) == len(status) else f"on rank {r}, {w}"
        elif missing:
            names = ", ".join(sorted({name for _, name in missing}))
            why = (f"rank(s) {', '.join(str(r) for r, _ in missing)} cannot see their rank file ({names}) in "
                   f"{saved.path.parent} on their host (no shared filesystem, or it was deleted)")
        else:
            return pipeline, ([c for *_, c in status] if resharding else None)
        self._warn_fresh(trainer, saved.path, info, why)
        return None, None

    def _warn_fresh(self, trainer: TrainerState, path: Path, info: dict[str, Any] | None, why: str | None) -> None:
        if why is None:
            return
        fresh = trainer.config.schedule.pipeline
        log.warning(f"{path}: {why}; the {info.get('mode') if info else 'pipeline'} state is not restored "
                    f"(pipeline={fresh!r} starts fresh"
                    + (": its first resumed step is synchronous" if trainer.pipeline.stateful else "")
                    + "), so the resumed run will not reproduce the uninterrupted one")

    def _restore_widths(self, trainer: TrainerState, state: dict[str, Any], path: Path) -> None:
        """The adaptive halo widths and their statistics: decided per pair of ranks, so only for
        the same partition (else they start afresh, with a warning)."""
        transport = getattr(trainer.pipeline, "transport", None)
        if transport is None:
            return
        widths = state.get("halo_widths")
        try:
            why = ("the checkpoint's adaptive halo widths were decided per pair of ranks of another partition"
                   if widths is not None and state.get("partition") != self.fingerprint
                   and getattr(transport, "adaptive", None) is not None else transport.load_state_dict(widths))
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise CheckpointError(f"field halo_widths does not fit this run's halo widths ({exc})", path=path) from None
        if why is not None:
            log.warning(f"{path}: {why}; the halo widths start afresh, so the resumed run will not reproduce "
                        f"the uninterrupted one")

    def _apply(self, trainer: TrainerState, saved: _Saved, pipeline: Any) -> None:
        """Apply a checked checkpoint; identical on every rank, so any error is raised by all.
        Everything is checked against this run's model, optimizer and config
        (:func:`check_applies`) before anything is changed."""
        state, path = saved.state, saved.path
        mine = trainer.config.optim
        theirs = _saved_optim(state)
        check_fits(state, trainer.model, mine.optimizer, path)
        check_applies(state, trainer.model, trainer.optimizer, trainer.config, path)
        info, now = state.get("model_info", {}), model_info(trainer.model)
        for k in _RUN_FIELDS:
            if k in info and k in now and info[k] != now[k]:
                log.warning(f"{path}: the checkpoint's model has {k}={info[k]!r}, this run {now[k]!r}; "
                            f"the resumed run will not reproduce the uninterrupted one")
        rows = state.get("node_rows") or {}
        try:
            trainer.model.load_state_dict(node_rows.local_state(state["model"], rows.get("model"), trainer.model, str(path)))
            trainer.optimizer.load_state_dict(state["optimizer"])
            node_rows.restore_optimizer_rows(trainer.optimizer, trainer.model, rows.get("optimizer"), str(path))
        except (RuntimeError, ValueError, KeyError) as exc:
            raise CheckpointError(f"the checkpoint does not fit this model/optimizer ({exc})", path=path) from exc
        for k in ("lr", "weight_decay"):
            if theirs.get(k) != getattr(mine, k):
                log.warning(f"{path}: the checkpoint has {k}={theirs.get(k)}, continuing with {k}={getattr(mine, k)}")
            for group in trainer.optimizer.param_groups:
                group[k] = getattr(mine, k)
        selection = state.get("selection")
        if rows and selection and selection.get("weights") is not None:   # this rank's rows of the best weights
            selection = {**selection, "weights": node_rows.local_state(selection["weights"], rows.get("best"),
                                                                        trainer.model, str(path))}
        try:
            why = trainer.selection.load_state_dict(selection)
        except ValueError as exc:
            raise CheckpointError(f"the checkpoint's model-selection state is damaged ({exc})", path=path) from exc
        if why is not None:
            log.warning(f"{path}: {why}; select={trainer.config.selection.select!r} and the patience count start "
                        f"afresh at epoch {int(state['epoch'])}")
        trainer.epoch = int(state["epoch"])
        trainer.history = list(state.get("history", []))
        trainer.pipeline.flush()
        trainer.pipeline = pipeline if pipeline is not None else trainer.new_pipeline()  # never old buffers
        self._restore_widths(trainer, state, path)
        try:
            set_rng_state(state["rng"])
        except (ValueError, TypeError, KeyError, RuntimeError) as exc:
            raise CheckpointError(f"field rng is not a state of this machine's random generators ({exc})",
                                  path=path) from None


def _repartitioned(part: Any) -> dict[str, str]:
    """A resize record's ``repartitioned``: where the partition came from when it was cut for
    this world size (``--repartition-on-resize``: ``partition.json``'s ``repartitioned_from``)."""
    source = (getattr(part.meta, "raw", None) or {}).get("repartitioned_from")
    if not isinstance(source, dict):
        return {}
    return {"repartitioned": f"{part.path}, cut with {part.meta.method} from {source.get('folder')} "
                             f"({source.get('num_parts')} parts)"}
