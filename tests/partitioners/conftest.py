"""Fixtures shared by the partitioner tests."""

from __future__ import annotations

import pytest

from corpus.corpus_utils import registry_and_logging_kept


@pytest.fixture
def clean_registry():
    """The test may register partition methods and run ``cli.main``: afterwards the registry and
    the ``partitioners`` logger are as they were."""
    with registry_and_logging_kept():
        yield
