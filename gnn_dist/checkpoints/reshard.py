"""A stateful schedule's saved state carried to another cut of the same graph: every rank of the
new cut reads the rank files of every rank of the old one, one at a time, and the schedule picks
its own rows by original id (``load_other_cut``, :mod:`gnn_dist.pipeline.stale_reshard` for
``stale``; :mod:`gnn_dist.layer_parallel.reshard` for a layer-parallel run on another layout).
Rank files sit in the checkpoint folder, so this needs it on a filesystem every host sees (a
rank that cannot see one makes every rank start the schedule fresh, with a warning).

Reading: ``P_old`` files per rank, each checked against the size and sha256 the main file
recorded; memory: one old rank's state at a time besides the schedule's own tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..pipeline.stale_reshard import NoRowIds
from . import files as ckpt
from .format import CheckpointError

__all__ = ["can_reshard", "missing_rank_file", "load_other_cut", "describe"]


def can_reshard(pipeline: Any) -> bool:
    """Whether a schedule places a saved state of another cut (it has ``load_other_cut`` and
    ``describe_other_cut``; its optional ``other_cut_refusal`` says why it cannot this time)."""
    return callable(getattr(pipeline, "load_other_cut", None))


def missing_rank_file(directory: Path, info: dict[str, Any]) -> str | None:
    """The name of the first rank file of the old cut this rank cannot see, or None."""
    for entry in info["rank_files"]:
        path = directory / str(entry.get("name"))
        if not path.exists() and not path.is_symlink():
            return str(entry.get("name"))
    return None


def _states(directory: Path, info: dict[str, Any], epoch: int) -> Iterator[dict[str, Any]]:
    for rank, entry in enumerate(info["rank_files"]):
        state = ckpt.load_rank_state(directory, entry, epoch=epoch, rank=rank, num_parts=int(info["num_parts"]))
        if state is None:
            raise CheckpointError("the rank file was deleted while it was read", path=directory / entry["name"])
        yield state


def load_other_cut(pipeline: Any, directory: Path, info: dict[str, Any], epoch: int) -> tuple[dict[str, int] | None,
                                                                                            str | None]:
    """Load the old cut's rank files (described by the main file's ``pipeline_state`` ``info``) into
    ``pipeline``: ``(its counts, None)`` (``load_other_cut``'s), or ``(None, why)`` when the files
    hold no node ids (written by an older gnn-dist: the schedule starts fresh).

    Raises:
        CheckpointError: a rank file is corrupt, or does not fit (the message names the folder).
    """
    try:
        return dict(pipeline.load_other_cut(_states(directory, info, epoch))), None
    except NoRowIds as exc:
        return None, str(exc)
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"the P={info['num_parts']} rank files do not fit this cut's {pipeline.name} "
                              f"pipeline ({exc})", path=directory) from exc


def describe(pipeline: Any, counts: list[dict[str, int]]) -> str:
    """What a re-sharded resume did, over every rank's ``counts`` (one clause of the resume line,
    the schedule's ``describe_other_cut``)."""
    return str(pipeline.describe_other_cut(counts))
