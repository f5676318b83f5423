"""Training checkpoints: model, optimizer, epoch, RNG states, config, history, the model
selection's state (:mod:`gnn_dist.selection`) and the data's identity (the partition folder's
fingerprint, the graph fingerprint and the number of parts: :func:`~.resume.check_same_data`),
plus each rank's pipeline state where the mode keeps one (``pipeline="stale"``).

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

Every file here is read as untrusted (:mod:`gnn_dist.safe_read`): ``latest`` and the checksum
files must be regular files of at most 4 KiB, a checkpoint or rank file a regular file of the size
recorded for it (checked on the open descriptor, before reading: a link to ``/dev/zero`` or a FIFO
is refused, never read), its archive's records must not inflate past its size, and what it loads
must be dense CPU tensors and plain values nested at most 64 deep. A checksum only proves that a
file is the one its ``.sha256`` names, so :func:`~.state.check_state` also checks the type of every field
a resume reads (one :class:`CheckpointError` naming the file and the field). A write the disk
refuses (full, read-only) is a :class:`~gnn_dist.atomic_file.StorageError`, and a checkpoint whose
checksum or pointer could not be written is removed again: ``latest`` keeps naming the previous one.

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

import contextlib
import errno
import hashlib
import io
import os
from pathlib import Path
from typing import IO, Any

import torch

from partitioners.format.npyio import HashingWriter

from .. import safe_read
from ..atomic_file import StorageError, atomic_write
from .format import (_NAME_RE, _PARTIAL_RE, _RANK_NAME_RE, _SHA256_RE, _SUFFIX, _SUM_RE, CHECKPOINT_FORMAT,
                     CHECKPOINT_VERSION, LATEST, RANK_STATE_FORMAT, REQUIRED_KEYS, CheckpointError)
from .state import check_state

__all__ = ["checkpoint_path", "save_checkpoint", "load_checkpoint", "latest_checkpoint", "rank_state_path",
           "save_rank_state", "load_rank_state", "checkpoint_epochs", "prune_checkpoints", "remove_partial_writes",
           "resolve_pointer", "read_checkpoint", "parse_checkpoint"]


def checkpoint_path(directory: str | os.PathLike, epoch: int) -> Path:
    """``DIR/checkpoint-EEEEEE.pt``: where the checkpoint after ``epoch`` epochs lives."""
    return Path(directory) / f"checkpoint-{int(epoch):06d}.pt"


def save_checkpoint(directory: str | os.PathLike, epoch: int, state: dict[str, Any]) -> Path:
    """Write ``state`` as the checkpoint after ``epoch`` completed epochs; returns its path.

    ``state`` must hold :data:`REQUIRED_KEYS` (tensors and plain values only); ``format`` and
    ``version`` are added. The file and its checksum file are complete before ``latest`` names it.

    Raises:
        StorageError: a file could not be written (full or read-only disk): what this call wrote
            is removed again, so ``latest`` and the files it names are as they were.
        CheckpointError: the folder cannot be created.
    """
    missing = [k for k in REQUIRED_KEYS if k not in state]
    assert not missing, f"checkpoint state lacks {missing}"
    d = _make_folder(directory)
    path = checkpoint_path(d, epoch)
    checksum = path.with_name(path.name + _SUFFIX)
    entry = _write_hashed(path, {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, **state})
    try:
        atomic_write(checksum, lambda f: f.write(f"{entry['sha256']}  {entry['size']}  {path.name}\n".encode()),
                     what="the checkpoint's checksum file ")
        atomic_write(d / LATEST, lambda f: f.write(path.name.encode() + b"\n"), what="the checkpoint pointer ")
    except StorageError:
        for written in (checksum, path):   # a checkpoint that latest does not name, or without checksum: none
            with contextlib.suppress(OSError):
                written.unlink()
        raise
    return path


_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})
"""Errors of the disk rather than of the path given: a :class:`StorageError` (exit code 1)."""


def _make_folder(directory: str | os.PathLike) -> Path:
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno in _STORAGE_ERRNOS:
            raise StorageError.of(exc, d, "the checkpoint folder ") from exc
        raise CheckpointError(f"cannot create the checkpoint folder ({exc})", path=d) from exc
    return d


def _write_hashed(path: Path, payload: dict[str, Any]) -> dict[str, Any]:
    """``torch.save`` ``payload`` to ``path`` atomically; returns ``{"name", "size", "sha256"}``."""
    writers: list[HashingWriter] = []

    def write(f: IO[bytes]) -> None:
        writers.append(HashingWriter(f))
        torch.save(payload, writers[-1])  # type: ignore[arg-type]

    atomic_write(path, write, what="the checkpoint file ")
    return {"name": path.name, "size": writers[-1].size, "sha256": writers[-1].h.hexdigest()}


def _read_verified(path: Path, size: int, sha256: str, what: str, fix: str) -> bytes:
    """The bytes of ``path`` after checking that it is a regular file of ``size`` bytes (before
    reading it: a link to ``/dev/zero`` or a FIFO is refused, not read) and their sha256."""
    try:
        f, actual = safe_read.open_regular(path, what, CheckpointError)
    except FileNotFoundError:
        raise CheckpointError(f"no such {what}", path=path) from None
    with f:
        if actual != size:
            raise CheckpointError(f"the {what} is {actual} bytes, {size} were written: truncated or overwritten{fix}",
                                  path=path)
        try:
            data = safe_read.read_exactly(f, size)
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
    """``torch.load(weights_only=True)`` of a file's bytes: tensors and plain values only, once the
    archive is checked (:func:`~gnn_dist.safe_read.check_torch_archive`: no record inflates past
    the file's size); every tensor in it then dense, on the CPU, of an allowed dtype and backed by
    its bytes, and no container nested deeper than :data:`~gnn_dist.safe_read.MAX_DEPTH`."""
    safe_read.check_torch_archive(data, len(data), what, CheckpointError, path)
    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise CheckpointError(f"not a readable {what}: it holds more than tensors and plain values, or is "
                              f"damaged ({type(exc).__name__}: {first})", path=path) from None
    safe_read.check_loaded(obj, what, CheckpointError, path)
    return obj


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
    if not pointer.exists() and not pointer.is_symlink():
        return _scan(d)
    try:
        name = safe_read.read_small(pointer, "pointer file", CheckpointError).decode().strip()
    except CheckpointError as exc:
        raise CheckpointError(f"{str(exc).removeprefix(f'{pointer}: ')}; delete it to use the newest "
                              f"checkpoint-*.pt", path=pointer) from None
    except FileNotFoundError:   # deleted meanwhile, or a link to nothing
        return _scan(d)
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"unreadable pointer file ({exc}); delete it to use the newest "
                              f"checkpoint-*.pt", path=pointer) from None
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
    if p.name == LATEST and (p.exists() or p.is_symlink()) and not p.is_dir():
        found = latest_checkpoint(p.parent)
        if found is None:   # a link to nothing, in a folder without checkpoints
            raise CheckpointError("names no checkpoint, and the folder holds none", path=p)
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
    if path.is_dir():
        raise CheckpointError("not a checkpoint file", path=path)
    checksum = path.with_name(path.name + _SUFFIX)
    try:
        fields = safe_read.read_small(checksum, "checksum file", CheckpointError).decode().split()
    except FileNotFoundError:
        raise CheckpointError(f"has no checksum file {checksum.name}: it was not written by gnn-dist "
                              f"(checkpoint format {CHECKPOINT_VERSION}), or its write did not complete",
                              path=path) from None
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"unreadable checksum file {checksum.name} ({exc})", path=path) from None
    if len(fields) != 3 or not _SHA256_RE.match(fields[0]) or not fields[1].isdigit() or not fields[1].isascii():
        raise CheckpointError(f"unreadable checksum file {checksum.name} (expected 'SHA256  SIZE  NAME', holds "
                              f"{' '.join(fields)[:120]!r})", path=path)
    return path, _read_verified(path, int(fields[1]), fields[0], "checkpoint", "; resume from an earlier checkpoint")


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
    check_state(state, path)
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
    name = entry.get("name")
    if not isinstance(name, str) or not _RANK_NAME_RE.match(name):   # a name in the folder, never ../../x
        raise CheckpointError(f"the checkpoint names the rank file {str(name)[:80]!r} for rank {rank}, which is not "
                              f"a rank file's name ({rank_state_path('', epoch, rank, num_parts).name})",
                              path=Path(directory))
    path = Path(directory) / name
    if not path.exists() and not path.is_symlink():
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
