"""The runtime computes what it computed when the goldens were recorded, bit for bit.

``goldens.json`` holds, for every model x schedule x feature-storage configuration of
:mod:`golden_runs` at P=1 and P=2, the per-epoch losses (``float.hex``) and a sha256 of the
final weights. A refactor must leave every one unchanged; a change that alters the order of
float operations on purpose re-records them (``python tests/golden/record.py``) and says which
configurations moved and why in its commit, while the P ranks = one rank tests still hold.

The bits depend on torch's CPU kernels: with another torch version or processor architecture
than the recording's, the losses are compared to 1e-5 instead (and the weights not at all).
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest
import torch

import golden_runs
from mp_utils import run_ranks

GOLDENS = json.loads((Path(__file__).with_name("goldens.json")).read_text())
SAME_PLATFORM = GOLDENS["torch"] == torch.__version__ and GOLDENS["machine"] == platform.machine()


def test_goldens_cover_every_configuration():
    for p in ("P1", "P2"):
        assert sorted(GOLDENS["runs"][p]) == sorted(golden_runs.configs())


@pytest.mark.parametrize("num_parts", [1, 2])
def test_losses_and_weights_are_the_recorded_bits(tmp_path, num_parts):
    path = golden_runs.write(num_parts, str(tmp_path / "parts"))
    results = run_ranks(golden_runs.run_all, num_parts, path, timeout=600)
    got, want = results[0], GOLDENS["runs"][f"P{num_parts}"]
    for other in results[1:]:
        assert other == got, "the ranks disagree"
    if SAME_PLATFORM:
        moved = sorted(name for name in want if got[name] != want[name])
        assert not moved, f"{len(moved)} golden run(s) changed: {', '.join(moved)}"
    else:
        for name, run in want.items():
            ref = [float.fromhex(v) for v in run["loss"]]
            now = [float.fromhex(v) for v in got[name]["loss"]]
            assert now == pytest.approx(ref, rel=1e-5), name
