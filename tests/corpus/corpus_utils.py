"""Helpers of the bad-input corpus (``tests/corpus``): a small graph, the CLI, metadata edits.

Also imported as ``corpus.corpus_utils`` by ``tests/partitioners/conftest.py`` (``tests`` is on
the import path), for :func:`registry_and_logging_kept`.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from partitioners import Graph
from gnn_dist_cli.command import CLI_LOGGERS, main

NUM_PARTS = 3


def small_graph() -> Graph:
    """12 nodes in a ring with chords, weighted, with features, labels and all three masks."""
    n = 12
    src = np.concatenate([np.arange(n), np.arange(0, n, 3)])
    dst = np.concatenate([(np.arange(n) + 1) % n, (np.arange(0, n, 3) + 5) % n])
    rng = np.random.default_rng(0)
    return Graph.from_edges(src, dst, n, symmetrize=True, edge_weight=rng.random(src.size),
                            features=rng.standard_normal((n, 3)).astype(np.float32),
                            labels=np.arange(n) % 4, train_mask=np.arange(n) % 2 == 0,
                            val_mask=np.arange(n) % 4 == 1, test_mask=np.arange(n) % 4 == 3,
                            name="corpus")


@contextlib.contextmanager
def cli_logging_kept() -> Iterator[None]:
    """On exit, restore the loggers ``cli.main`` configures (their handler and level)."""
    loggers = [logging.getLogger(name) for name in CLI_LOGGERS]
    saved = [(list(logger.handlers), logger.level) for logger in loggers]
    try:
        yield
    finally:
        for logger, (handlers, level) in zip(loggers, saved):
            logger.handlers[:] = handlers
            logger.setLevel(level)


@contextlib.contextmanager
def registry_and_logging_kept() -> Iterator[None]:
    """On exit, restore the partition-method registry (tests register methods) and the loggers
    ``cli.main`` configures."""
    from partitioners.methods import registry

    saved = dict(registry._REGISTRY)
    try:
        with cli_logging_kept():
            yield
    finally:
        registry._REGISTRY.clear()
        registry._REGISTRY.update(saved)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    """``gnn-dist argv`` in-process: ``(exit code, stdout, stderr)``."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def edit_meta(folder: Path, change: Callable[[dict], Any]) -> None:
    """Load ``partition.json``, apply ``change`` to the dict in place, write it back."""
    path = folder / "partition.json"
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def error_lines(err: str) -> list[str]:
    """The ``[gnn-dist] error:`` lines of the CLI's stderr."""
    return [line for line in err.splitlines() if line.startswith("[gnn-dist] error:")]


def rehash(folder: Path, rel_path: str) -> None:
    """Record the current size and sha256 of ``folder/rel_path`` in ``partition.json``, as if the
    writer had made the file: so the loader gets past the checksum to the file's content."""
    from partitioners.format.npyio import sha256_file

    path = folder / rel_path

    def change(meta: dict) -> None:
        entries = [meta["files"]] + [pm["files"] for pm in meta["parts"]]
        for files in entries:
            for entry in files.values():
                if entry["path"] == rel_path:
                    entry.update(size=path.stat().st_size, sha256=sha256_file(path))

    edit_meta(folder, change)


def edit_npy_header(data: bytes, old: bytes, new: bytes) -> bytes:
    """``.npy`` bytes with ``old`` replaced by ``new`` in the (format 1.0) header; the header's
    space padding absorbs the change of length, so the data stays where it was."""
    end = 10 + int.from_bytes(data[8:10], "little")
    header = data[:end]
    assert old in header, (old, header)
    body = header.replace(old, new, 1).rstrip(b" \n")
    assert len(body) < end, "the edited header does not fit in the old one's padding"
    return body + b" " * (end - 1 - len(body)) + b"\n" + data[end:]


def one_line(exc: pytest.ExceptionInfo, *names: str) -> str:
    """The raised error's message, asserted to be one line naming each of ``names``."""
    text = str(exc.value)
    assert "\n" not in text, text
    for name in names:
        assert name in text, (name, text)
    return text

