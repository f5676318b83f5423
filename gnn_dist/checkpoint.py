"""Training checkpoints: model, optimizer, epoch, RNG states, config and history, plus each
rank's pipeline state where the mode keeps one (``pipeline="stale"``).

On disk::

    DIR/
      checkpoint-000010.pt                       # the state after 10 completed epochs (torch.save of a dict)
      checkpoint-000010.rank-00000-of-00002.pt   # rank 0's pipeline state at that point (stale only)
      checkpoint-000010.rank-00001-of-00002.pt   # rank 1's (on rank 1's filesystem)
      checkpoint-000020.pt
      latest                                     # one line: the file name of the newest complete checkpoint

Rank 0 writes ``checkpoint-EEEEEE.pt`` atomically (temp file in ``DIR``, fsync, rename, fsync of
the folder) and only then points ``latest`` at it (also by rename), so a crash at any moment
leaves either the previous or the new checkpoint as ``latest``, never a half-written one.

Rank files (:func:`save_rank_state`): a mode whose next step reads more than the weights (the
``stale`` mode's previous-epoch halo rows and halo gradients, which differ per rank) has **every
rank** write its own ``checkpoint-EEEEEE.rank-RRRRR-of-PPPPP.pt``, atomically as above, before
rank 0 writes the main file. Each rank returns the file's size and sha256; the trainer gathers
them (which is also the barrier: no rank has failed, every rank file is complete) and rank 0
records them in the main file under ``pipeline_state``, with the mode, ``stale_smoothing``, the
number of parts and the partition's fingerprint (:func:`partition_fingerprint`). So ``latest``
never names a checkpoint whose rank files are incomplete, and a rank file that does not match
the checksum its checkpoint recorded (truncated, corrupt, or overwritten by another run) is
refused by :func:`load_rank_state`. Why one file per rank rather than gathering to rank 0: the
state is as large as the halo (``sum over layers of (H + B) * F * itemsize`` per rank, see
:mod:`gnn_dist.pipeline.stale`), which would all pass through rank 0's memory and network link;
per-rank files cost each rank its own share and no traffic.

Who reads it: the :class:`~gnn_dist.trainer.Trainer` loads the main checkpoint on **rank 0
only** and broadcasts the state to the other ranks; each rank reads only its own rank file,
from the same folder name on its own filesystem. So ``DIR`` still does not have to be shared:
without a shared filesystem a resume on the same hosts (each rank finding the file it wrote)
reproduces the run exactly; a rank that cannot see its rank file (e.g. it moved to another host)
makes every rank fall back, with a warning, to a fresh pipeline (the stale mode's first resumed
step is synchronous), as does another number of parts, partition, pipeline mode or smoothing.
Every rank resumes from the same main file even if ``latest`` moves meanwhile. The weights are
identical on all ranks after each step (gradients are all-reduced), so rank 0's copy is the
model. The RNG states are rank 0's and are restored on every rank: the ranks are seeded alike
and training draws no per-rank random numbers (dropout masks are a hash, see
:mod:`gnn_dist.nn.dropout`).

Retention (:func:`prune_checkpoints`, the trainer's ``checkpoint_keep``): after a checkpoint is
complete and ``latest`` names it, the older ones beyond the newest ``keep`` are deleted; rank 0
deletes main files, every rank its own rank files (so no shared filesystem is needed for this
either). Files of epochs after the one just written (left by a run that went further before
this one resumed from an earlier checkpoint) are not touched.

A checkpoint holds numpy RNG states and Python tuples, so it is loaded with
``weights_only=False``: load only checkpoints you wrote yourself.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import torch

from partitioners.format.npyio import HashingWriter, sha256_file

if TYPE_CHECKING:
    from partitioners.format import PartitionMeta

__all__ = ["CheckpointError", "CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "REQUIRED_KEYS", "checkpoint_path",
           "save_checkpoint", "load_checkpoint", "latest_checkpoint", "rng_state", "set_rng_state",
           "RANK_STATE_FORMAT", "rank_state_path", "save_rank_state", "load_rank_state", "partition_fingerprint",
           "checkpoint_epochs", "prune_checkpoints"]

LATEST = "latest"
"""Name of the pointer file in the checkpoint folder."""
CHECKPOINT_FORMAT = "gnn-dist-checkpoint"
"""Value of the ``format`` key of every checkpoint."""
CHECKPOINT_VERSION = 1
"""Value of the ``version`` key; a reader refuses other versions."""
REQUIRED_KEYS = ("model", "optimizer", "epoch", "rng", "config")
"""Keys a checkpoint must hold (besides ``format`` and ``version``)."""
RANK_STATE_FORMAT = "gnn-dist-rank-state"
"""Value of the ``format`` key of every rank file (its ``version`` is :data:`CHECKPOINT_VERSION`)."""

_NAME_RE = re.compile(r"^checkpoint-(\d{6,})\.pt$")
_RANK_NAME_RE = re.compile(r"^checkpoint-(\d{6,})\.rank-(\d{5,})-of-(\d{5,})\.pt$")


class CheckpointError(ValueError):
    """A checkpoint file or folder is missing, unreadable, corrupt or does not fit the run.

    ``path`` is the file (or folder) that is wrong.
    """

    def __init__(self, message: str, *, path: str | os.PathLike | None = None) -> None:
        super().__init__(f"{path}: {message}" if path is not None else message)
        self.path = None if path is None else str(path)


def rng_state() -> dict[str, Any]:
    """The RNG states of python, numpy and torch (CPU, and CUDA when present)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the states :func:`rng_state` returned (CUDA only when both sides have it)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort: not every OS/filesystem allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def checkpoint_path(directory: str | os.PathLike, epoch: int) -> Path:
    """``DIR/checkpoint-EEEEEE.pt``: where the checkpoint after ``epoch`` epochs lives."""
    return Path(directory) / f"checkpoint-{int(epoch):06d}.pt"


def save_checkpoint(directory: str | os.PathLike, epoch: int, state: dict[str, Any]) -> Path:
    """Write ``state`` as the checkpoint after ``epoch`` completed epochs; returns its path.

    ``state`` must hold :data:`REQUIRED_KEYS`; ``format`` and ``version`` are added. The file is
    complete before ``latest`` names it.
    """
    missing = [k for k in REQUIRED_KEYS if k not in state]
    assert not missing, f"checkpoint state lacks {missing}"
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CheckpointError(f"cannot create the checkpoint folder ({exc})", path=d) from exc
    path = checkpoint_path(d, epoch)
    payload = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, **state}
    _atomic_write(path, lambda f: torch.save(payload, f))
    _atomic_write(d / LATEST, lambda f: f.write(path.name.encode() + b"\n"))
    return path


def _scan(directory: Path) -> Path | None:
    """The highest-epoch ``checkpoint-*.pt`` in ``directory`` (a fallback when ``latest`` is gone)."""
    best: tuple[int, Path] | None = None
    for entry in directory.iterdir():
        m = _NAME_RE.match(entry.name)
        if m and entry.is_file() and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), entry)
    return None if best is None else best[1]


def latest_checkpoint(directory: str | os.PathLike) -> Path | None:
    """The checkpoint ``DIR/latest`` names, or None when the folder holds no checkpoint.

    Without a ``latest`` file (a folder written by hand, or a crash between the two renames) the
    highest-numbered ``checkpoint-EEEEEE.pt`` is used. A missing folder has no checkpoint.

    Raises:
        CheckpointError: ``DIR`` is not a folder, or ``latest`` is unreadable or names a file
            that does not exist.
    """
    d = Path(directory)
    if not d.exists():
        return None
    if not d.is_dir():
        raise CheckpointError("the checkpoint folder is not a folder", path=d)
    pointer = d / LATEST
    if not pointer.exists():
        return _scan(d)
    try:
        name = pointer.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"unreadable pointer file ({exc}); delete it to use the newest "
                              f"checkpoint-*.pt", path=pointer) from exc
    if not _NAME_RE.match(name):
        raise CheckpointError(f"does not name a checkpoint file (holds {name[:80]!r}); delete it to use "
                              f"the newest checkpoint-*.pt", path=pointer)
    path = d / name
    if not path.is_file():
        raise CheckpointError(f"names {name}, which does not exist", path=pointer)
    return path


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load and check a checkpoint on CPU (it holds RNG states, so it is not weights-only).

    Raises:
        CheckpointError: the file is missing, unreadable or truncated, not a gnn-dist
            checkpoint, of another version, or lacks a required key; the message names the file.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError("no such checkpoint file", path=path)
    if not path.is_file():
        raise CheckpointError("not a checkpoint file (a folder? pass the .pt file or use checkpoint_dir)",
                              path=path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise CheckpointError(f"not a readable gnn-dist checkpoint; the file is corrupt or truncated "
                              f"({type(exc).__name__}: {exc})", path=path) from exc
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"not a gnn-dist checkpoint (no format={CHECKPOINT_FORMAT!r} entry)", path=path)
    if state.get("version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"checkpoint version {state.get('version')!r} is not supported (this gnn-dist "
                              f"reads version {CHECKPOINT_VERSION})", path=path)
    missing = [k for k in REQUIRED_KEYS if k not in state]
    if missing:
        raise CheckpointError(f"the checkpoint lacks {', '.join(missing)}", path=path)
    return state


# ---------------------------------------------------------------- per-rank pipeline state
def rank_state_path(directory: str | os.PathLike, epoch: int, rank: int, num_parts: int) -> Path:
    """``DIR/checkpoint-EEEEEE.rank-RRRRR-of-PPPPP.pt``: rank ``rank``'s state after ``epoch``."""
    return Path(directory) / f"checkpoint-{int(epoch):06d}.rank-{int(rank):05d}-of-{int(num_parts):05d}.pt"


def partition_fingerprint(meta: PartitionMeta) -> str:
    """Hex sha256 of a partition folder's manifest: the number of parts and every file's path
    and sha256 as ``partition.json`` lists them (top-level files, then each part's). Two folders
    with the same fingerprint hold the same parts, halo rows and row orders; it reads no data."""
    manifest = {"num_parts": int(meta.num_parts),
                "files": sorted((e.path, e.sha256) for e in meta.files.values()),
                "parts": [sorted((e.path, e.sha256) for e in pm.files.values()) for pm in meta.parts]}
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()


def save_rank_state(directory: str | os.PathLike, epoch: int, rank: int, num_parts: int,
                    state: dict[str, Any]) -> dict[str, Any]:
    """Write rank ``rank``'s ``state`` (atomically, see the module docstring); returns its entry
    for the main checkpoint: ``{"name", "size", "sha256"}``.

    Raises:
        CheckpointError: the folder cannot be created.
    """
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CheckpointError(f"cannot create the checkpoint folder ({exc})", path=d) from exc
    path = rank_state_path(d, epoch, rank, num_parts)
    payload = {"format": RANK_STATE_FORMAT, "version": CHECKPOINT_VERSION, "epoch": int(epoch),
               "rank": int(rank), "num_parts": int(num_parts), "state": state}
    writers: list[HashingWriter] = []

    def write(f: IO[bytes]) -> None:
        writers.append(HashingWriter(f))
        torch.save(payload, writers[-1])  # type: ignore[arg-type]

    _atomic_write(path, write)
    return {"name": path.name, "size": writers[-1].size, "sha256": writers[-1].h.hexdigest()}


def load_rank_state(directory: str | os.PathLike, entry: dict[str, Any], *, epoch: int, rank: int,
                    num_parts: int) -> dict[str, Any] | None:
    """Rank ``rank``'s state from the file ``entry`` (of the main checkpoint) names in
    ``directory``, checked against the entry's size and sha256; None when there is no such file.

    Raises:
        CheckpointError: the file is unreadable, of another size or checksum than the checkpoint
            recorded (truncated, corrupt, or overwritten by another run), not a rank file, or of
            another epoch/rank/number of parts; the message names the file.
    """
    path = Path(directory) / str(entry["name"])
    if not path.exists():
        return None
    fix = "; delete it to resume without it (the pipeline then restarts fresh)"
    try:
        size = path.stat().st_size
        if size != entry["size"]:
            raise CheckpointError(f"the rank file is {size} bytes, its checkpoint recorded {entry['size']}: "
                                  f"truncated or overwritten by another run{fix}", path=path)
        digest = sha256_file(path)
    except OSError as exc:
        raise CheckpointError(f"unreadable rank file ({exc})", path=path) from exc
    if digest != entry["sha256"]:
        raise CheckpointError(f"the rank file's sha256 {digest[:12]}... is not the {entry['sha256'][:12]}... its "
                              f"checkpoint recorded: corrupt or overwritten by another run{fix}", path=path)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise CheckpointError(f"not a readable rank file ({type(exc).__name__}: {exc})", path=path) from exc
    want = {"format": RANK_STATE_FORMAT, "version": CHECKPOINT_VERSION, "epoch": int(epoch), "rank": int(rank),
            "num_parts": int(num_parts)}
    got = {k: payload.get(k) for k in want} if isinstance(payload, dict) else {}
    if got != want or "state" not in payload:
        raise CheckpointError(f"not the rank file this checkpoint expects (holds {got}, expected {want})", path=path)
    return payload["state"]


# ---------------------------------------------------------------- retention
def checkpoint_epochs(directory: str | os.PathLike) -> list[int]:
    """The epochs of the main checkpoint files (``checkpoint-EEEEEE.pt``) in ``directory``, sorted."""
    d = Path(directory)
    if not d.is_dir():
        return []
    return sorted(int(m.group(1)) for e in d.iterdir() if (m := _NAME_RE.match(e.name)) and e.is_file())


def prune_checkpoints(directory: str | os.PathLike, keep_epochs: set[int], newest: int, *,
                      rank: int | None, num_parts: int | None = None) -> list[Path]:
    """Delete the checkpoints of epochs before ``newest`` that are not in ``keep_epochs``: the main
    files when ``rank`` is 0 or None, and rank ``rank``'s own rank files (all ranks' when None);
    rank 0 also deletes the rank files of another number of parts than ``num_parts`` (an earlier
    run's, whose ranks are gone). Returns what was deleted. A file that cannot be deleted is
    left; a folder that cannot be listed raises ``OSError`` (the trainer logs both)."""
    d = Path(directory)
    deleted: list[Path] = []
    if not d.is_dir():
        return deleted
    for entry in d.iterdir():
        main, ranked = _NAME_RE.match(entry.name), _RANK_NAME_RE.match(entry.name)
        if main and rank in (0, None):
            epoch = int(main.group(1))
        elif ranked and (rank is None or int(ranked.group(2)) == rank
                         or (rank == 0 and num_parts is not None and int(ranked.group(3)) != num_parts)):
            epoch = int(ranked.group(1))
        else:
            continue
        if epoch < newest and epoch not in keep_epochs and entry.is_file():
            try:
                entry.unlink()
                deleted.append(entry)
            except OSError:
                continue
    return deleted
