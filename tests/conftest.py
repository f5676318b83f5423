"""Suite-wide: the long tests first, and the ``one_thread`` fixture.

Tests marked ``slow`` or ``elastic`` (a few torchrun jobs, doc and example scripts: tens of
seconds each) run before the rest, in their files' order, so that on ``pytest -n 2`` the workers
end on short tests instead of one worker finishing a long one while the other idles. The sort
is stable and moves whole marked modules together (a module's fixtures are built once per
worker as before); nothing is skipped or deselected.
"""

from __future__ import annotations

import pytest

LONG_MARKERS = ("elastic", "slow")
"""Markers of the tests that start first, in this order."""


def _rank(item: pytest.Item) -> int:
    for i, name in enumerate(LONG_MARKERS):
        if item.get_closest_marker(name) is not None:
            return i
    return len(LONG_MARKERS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_rank)


@pytest.fixture
def one_thread():
    """One torch thread for the test (tiny graphs, where a loaded machine's threads only contend:
    two spinning threads per worker on a 2-core machine made a 10 s test take 300 s); torch is
    imported here, not at the top, as some tests check that it is never imported."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
