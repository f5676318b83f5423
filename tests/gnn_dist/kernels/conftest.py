"""The ``block`` fixture: every awkward block of :mod:`kernel_cases`; Triton's interpreter on.

``TRITON_INTERPRET=1`` must be set before :mod:`gnn_dist.kernels.triton_gpu` is imported (Triton
decides at decoration whether a kernel is compiled or interpreted): this file is imported before
the kernel tests, and nothing imports that module earlier.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from kernel_cases import blocks
from gnn_dist.nn import Block


@pytest.fixture(params=blocks(), ids=lambda p: p[0])
def block(request) -> Block:
    return request.param[1]
