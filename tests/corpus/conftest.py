"""Fixtures of the bad-input corpus: a small valid partition folder to break.

The folder holds every optional file (features, labels, masks, edge weights) so a mutation can
reach each kind of part file; it is written once per session and copied per test.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from corpus_utils import NUM_PARTS, registry_and_logging_kept, small_graph
from partitioners.format.writer import write_partition


@pytest.fixture(scope="session")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid partition folder (3 parts of 4 nodes); never modified: copy it with ``folder``."""
    out = tmp_path_factory.mktemp("corpus") / "good"
    write_partition(small_graph(), np.arange(12) // 4, NUM_PARTS, out, method="test",
                    method_params={}, seed=0)
    return out


@pytest.fixture
def folder(pristine: Path, tmp_path: Path) -> Path:
    """A fresh copy of the valid folder, for one test to break."""
    out = tmp_path / "parts"
    shutil.copytree(pristine, out)
    return out


@pytest.fixture(autouse=True)
def kept_state():
    """Each test leaves the method registry and the ``partitioners`` logger as it found them."""
    with registry_and_logging_kept():
        yield
