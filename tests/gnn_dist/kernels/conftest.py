"""The ``block`` fixture: every awkward block of :mod:`kernel_cases`."""

from __future__ import annotations

import pytest

from kernel_cases import blocks
from gnn_dist.nn import Block


@pytest.fixture(params=blocks(), ids=lambda p: p[0])
def block(request) -> Block:
    return request.param[1]
