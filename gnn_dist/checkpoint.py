"""Training checkpoints: model, optimizer, epoch, RNG states, config, history and the model
selection's state (:mod:`gnn_dist.selection`), plus each rank's pipeline state where the mode
keeps one (``pipeline="stale"``).

On disk::

    DIR/
      checkpoint-000010.pt                       # the state after 10 completed epochs (torch.save of a dict)
      checkpoint-000010.pt.sha256                # its sha256 and size, checked before it is loaded
      checkpoint-000010.rank-00000-of-00002.pt   # rank 0's pipeline state at that point (stale only)
      checkpoint-000010.rank-00001-of-00002.pt   # rank 1's (on rank 1's filesystem)
      checkpoint-000020.pt
      latest                                     # one line: the file name of the newest complete checkpoint

Rank 0 writes ``checkpoint-EEEEEE.pt`` atomically (temp file in ``DIR``, fsync, rename, fsync of
the folder), then its checksum file, and only then points ``latest`` at it (also by rename), so a
crash at any moment leaves either the previous or the new checkpoint as ``latest``, never a
half-written one; the temp files of a killed write (``.checkpoint-*.tmp``) are removed at the
next start (:func:`remove_partial_writes`).

Nothing in a checkpoint runs code: every file holds tensors and plain containers only (RNG
states as tensors and ints, the config as JSON values) and is loaded with
``torch.load(weights_only=True)``, after its sha256 is checked against its checksum file (the
main file) or against what the main file recorded (rank files). A flipped bit in a weight is a
:class:`CheckpointError`, not a resumed run. Format version 1 (which stored Python objects and
had no checksum) is refused.

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

"""

from __future__ import annotations

import hashlib
import io
import os
import random
import re
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

from partitioners.format.npyio import HashingWriter

from .atomic_file import atomic_write

__all__ = ["CheckpointError", "CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "REQUIRED_KEYS", "checkpoint_path",
           "save_checkpoint", "load_checkpoint", "latest_checkpoint", "rng_state", "set_rng_state",
           "RANK_STATE_FORMAT", "rank_state_path", "save_rank_state", "load_rank_state", "checkpoint_epochs",
           "prune_checkpoints", "remove_partial_writes", "resolve_pointer", "read_checkpoint", "parse_checkpoint"]

LATEST = "latest"
"""Name of the pointer file in the checkpoint folder."""
CHECKPOINT_FORMAT = "gnn-dist-checkpoint"
"""Value of the ``format`` key of every checkpoint."""
CHECKPOINT_VERSION = 2
"""Value of the ``version`` key; a reader refuses other versions (1: Python objects, no checksum)."""
REQUIRED_KEYS = ("model", "optimizer", "epoch", "rng", "config")
"""Keys a checkpoint must hold (besides ``format`` and ``version``)."""
RANK_STATE_FORMAT = "gnn-dist-rank-state"
"""Value of the ``format`` key of every rank file (its ``version`` is :data:`CHECKPOINT_VERSION`)."""

_NAME_RE = re.compile(r"^checkpoint-(\d{6,})\.pt$")
_SUM_RE = re.compile(r"^checkpoint-(\d{6,})\.pt\.sha256$")
_RANK_NAME_RE = re.compile(r"^checkpoint-(\d{6,})\.rank-(\d{5,})-of-(\d{5,})\.pt$")
_PARTIAL_RE = re.compile(r"^\.(checkpoint-\d{6,}\S*|latest)\.[^.]+\.tmp$")
_SUFFIX = ".sha256"


class CheckpointError(ValueError):
    """A checkpoint file or folder is missing, unreadable, corrupt or does not fit the run.

    ``path`` is the file (or folder) that is wrong.
    """

    def __init__(self, message: str, *, path: str | os.PathLike | None = None) -> None:
        super().__init__(f"{path}: {message}" if path is not None else message)
        self.path = None if path is None else str(path)


def rng_state() -> dict[str, Any]:
    """The RNG states of python, numpy and torch (CPU, and CUDA when present), as tensors and
    ints only (what ``weights_only`` loading accepts)."""
    version, words, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": {"version": int(version), "words": torch.tensor(words, dtype=torch.int64),
                   "gauss": None if gauss is None else float(gauss)},
        "numpy": {"kind": str(kind), "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the states :func:`rng_state` returned (CUDA only when both sides have it)."""
    py = state["python"]
    random.setstate((py["version"], tuple(int(w) for w in py["words"].tolist()), py["gauss"]))
    npy = state["numpy"]
    np.random.set_state((npy["kind"], npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"],
                         npy["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def checkpoint_path(directory: str | os.PathLike, epoch: int) -> Path:
    """``DIR/checkpoint-EEEEEE.pt``: where the checkpoint after ``epoch`` epochs lives."""
    return Path(directory) / f"checkpoint-{int(epoch):06d}.pt"


def save_checkpoint(directory: str | os.PathLike, epoch: int, state: dict[str, Any]) -> Path:
    """Write ``state`` as the checkpoint after ``epoch`` completed epochs; returns its path.

    ``state`` must hold :data:`REQUIRED_KEYS` (tensors and plain values only); ``format`` and
    ``version`` are added. The file and its checksum file are complete before ``latest`` names it.
    """
    missing = [k for k in REQUIRED_KEYS if k not in state]
    assert not missing, f"checkpoint state lacks {missing}"
    d = _make_folder(directory)
    path = checkpoint_path(d, epoch)
    entry = _write_hashed(path, {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, **state})
    atomic_write(path.with_name(path.name + _SUFFIX),
                  lambda f: f.write(f"{entry['sha256']}  {entry['size']}  {path.name}\n".encode()))
    atomic_write(d / LATEST, lambda f: f.write(path.name.encode() + b"\n"))
    return path


def _make_folder(directory: str | os.PathLike) -> Path:
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CheckpointError(f"cannot create the checkpoint folder ({exc})", path=d) from exc
    return d


def _write_hashed(path: Path, payload: dict[str, Any]) -> dict[str, Any]:
    """``torch.save`` ``payload`` to ``path`` atomically; returns ``{"name", "size", "sha256"}``."""
    writers: list[HashingWriter] = []

    def write(f: IO[bytes]) -> None:
        writers.append(HashingWriter(f))
        torch.save(payload, writers[-1])  # type: ignore[arg-type]

    atomic_write(path, write)
    return {"name": path.name, "size": writers[-1].size, "sha256": writers[-1].h.hexdigest()}


def _read_verified(path: Path, size: int, sha256: str, what: str, fix: str) -> bytes:
    """The bytes of ``path`` after checking their size and sha256."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"unreadable {what} ({exc})", path=path) from exc
    if len(data) != size:
        raise CheckpointError(f"the {what} is {len(data)} bytes, {size} were written: truncated or overwritten{fix}",
                              path=path)
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise CheckpointError(f"the {what}'s sha256 {digest[:12]}... is not the {sha256[:12]}... written with it: "
                              f"corrupt or overwritten{fix}", path=path)
    return data


def _parse(data: bytes, path: Path, what: str) -> Any:
    """``torch.load(weights_only=True)`` of a file's bytes: tensors and plain values only."""
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CheckpointError(f"not a readable {what}: it holds more than tensors and plain values, or is "
                              f"damaged ({type(exc).__name__}: {first})", path=path) from exc


def remove_partial_writes(directory: str | os.PathLike) -> list[Path]:
    """Delete the temp files a killed checkpoint write left in ``directory`` (``.checkpoint-*.tmp``,
    ``.latest.*.tmp``); returns them. A missing folder has none."""
    d = Path(directory)
    removed: list[Path] = []
    if not d.is_dir():
        return removed
    for entry in d.iterdir():
        if _PARTIAL_RE.match(entry.name) and entry.is_file():
            try:
                entry.unlink()
                removed.append(entry)
            except OSError:
                continue
    return removed


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


def resolve_pointer(path: str | os.PathLike) -> Path:
    """``path`` itself, or the checkpoint a ``latest`` pointer file (or a folder's) names."""
    p = Path(path)
    if p.is_dir():
        found = latest_checkpoint(p)
        if found is None:
            raise CheckpointError("the folder holds no checkpoint", path=p)
        return found
    if p.name == LATEST and p.is_file():
        found = latest_checkpoint(p.parent)
        assert found is not None
        return found
    return p


def read_checkpoint(path: str | os.PathLike) -> tuple[Path, bytes]:
    """``(path, bytes)`` of a checkpoint, its sha256 checked against its checksum file (not
    parsed: :func:`parse_checkpoint`). ``path`` may also be a checkpoint folder or its ``latest``
    file (the checkpoint it names is read).

    Raises:
        CheckpointError: the file is missing, unreadable, truncated or corrupt, or has no
            checksum file; the message names the file.
    """
    path = resolve_pointer(path)
    if not path.exists():
        raise CheckpointError("no such checkpoint file", path=path)
    if not path.is_file():
        raise CheckpointError("not a checkpoint file", path=path)
    checksum = path.with_name(path.name + _SUFFIX)
    try:
        digest, size, _ = checksum.read_text().split()
        expected = int(size)
    except FileNotFoundError:
        raise CheckpointError(f"has no checksum file {checksum.name}: it was not written by gnn-dist "
                              f"(checkpoint format {CHECKPOINT_VERSION}), or its write did not complete",
                              path=path) from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"unreadable checksum file {checksum.name} ({exc})", path=path) from exc
    return path, _read_verified(path, expected, digest, "checkpoint", "; resume from an earlier checkpoint")


def parse_checkpoint(data: bytes, path: str | os.PathLike) -> dict[str, Any]:
    """The state in a checkpoint's verified bytes (``torch.load(weights_only=True)``: no code
    runs), checked for format, version and required keys; ``path`` names it in errors."""
    path = Path(path)
    state = _parse(data, path, "checkpoint")
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"not a gnn-dist checkpoint (no format={CHECKPOINT_FORMAT!r} entry)", path=path)
    if state.get("version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"checkpoint version {state.get('version')!r} is not supported (this gnn-dist "
                              f"reads version {CHECKPOINT_VERSION})", path=path)
    missing = [k for k in REQUIRED_KEYS if k not in state]
    if missing:
        raise CheckpointError(f"the checkpoint lacks {', '.join(missing)}", path=path)
    return state


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read, verify and parse a checkpoint on CPU (:func:`read_checkpoint`, then
    :func:`parse_checkpoint`): its sha256 is checked before ``torch.load(weights_only=True)``.

    Raises:
        CheckpointError: the file is missing, unreadable, truncated or corrupt, holds anything but
            tensors and plain values, is not a gnn-dist checkpoint, of another version, or lacks a
            required key; the message names the file.
    """
    where, data = read_checkpoint(path)
    return parse_checkpoint(data, where)


# ---------------------------------------------------------------- per-rank pipeline state
def rank_state_path(directory: str | os.PathLike, epoch: int, rank: int, num_parts: int) -> Path:
    """``DIR/checkpoint-EEEEEE.rank-RRRRR-of-PPPPP.pt``: rank ``rank``'s state after ``epoch``."""
    return Path(directory) / f"checkpoint-{int(epoch):06d}.rank-{int(rank):05d}-of-{int(num_parts):05d}.pt"


def save_rank_state(directory: str | os.PathLike, epoch: int, rank: int, num_parts: int,
                    state: dict[str, Any]) -> dict[str, Any]:
    """Write rank ``rank``'s ``state`` (atomically, see the module docstring); returns its entry
    for the main checkpoint: ``{"name", "size", "sha256"}``.

    Raises:
        CheckpointError: the folder cannot be created.
    """
    path = rank_state_path(_make_folder(directory), epoch, rank, num_parts)
    return _write_hashed(path, {"format": RANK_STATE_FORMAT, "version": CHECKPOINT_VERSION, "epoch": int(epoch),
                                "rank": int(rank), "num_parts": int(num_parts), "state": state})


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
    data = _read_verified(path, int(entry["size"]), str(entry["sha256"]), "rank file",
                          "; delete it to resume without it (the pipeline then restarts fresh)")
    payload = _parse(data, path, "rank file")
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
        main = _NAME_RE.match(entry.name) or _SUM_RE.match(entry.name)
        ranked = _RANK_NAME_RE.match(entry.name)
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
