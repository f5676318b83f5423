"""Training checkpoints: model, optimizer, epoch, RNG states, config and history.

Rank 0 writes ``DIR/checkpoint-EEEEEE.pt`` atomically (temp file, fsync, rename) and then points
``DIR/latest`` at it (also by rename). Every rank reads the same file on resume (a single node, or
a shared filesystem across nodes). Weights are identical on all ranks after each step (gradients
are all-reduced), so rank 0's copy is the model.
"""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["save_checkpoint", "load_checkpoint", "latest_checkpoint", "rng_state", "set_rng_state"]

LATEST = "latest"


def rng_state() -> dict[str, Any]:
    """The RNG states of python, numpy and torch (CPU, and CUDA when present)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _atomic_write_bytes(path: Path, write) -> None:
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


def save_checkpoint(directory: str | os.PathLike, epoch: int, state: dict[str, Any]) -> Path:
    """Write ``state`` as the checkpoint after ``epoch`` completed epochs; returns its path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"checkpoint-{epoch:06d}.pt"
    _atomic_write_bytes(path, lambda f: torch.save(state, f))
    _atomic_write_bytes(d / LATEST, lambda f: f.write(path.name.encode() + b"\n"))
    return path


def latest_checkpoint(directory: str | os.PathLike) -> Path | None:
    """The checkpoint ``DIR/latest`` names, or None when the folder has none."""
    d = Path(directory)
    pointer = d / LATEST
    if not pointer.exists():
        return None
    path = d / pointer.read_text().strip()
    if not path.exists():
        raise FileNotFoundError(f"{pointer} names {path.name}, which does not exist")
    return path


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load a checkpoint on CPU. It holds RNG states (numpy arrays, tuples): not weights-only."""
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise ValueError(f"{path}: not a readable gnn-dist checkpoint ({exc})") from exc
