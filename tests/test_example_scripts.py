"""The shell examples run as their header says, on their own tiny data, and do what they claim.

- ``examples/own_edge_list.sh``: an edge list with names, features, labels and a random split
  partitioned, trained on 2 ranks, saved and predicted; the predictions come out under the
  nodes' own names, one per node, and the run learns (test accuracy well above chance).
- ``examples/multi_node_localhost.sh``: two torchrun agents, one rank each, meet at a c10d
  rendezvous on 127.0.0.1 and train one 2-part folder; exactly one rank 0 reports.
Each script runs in its own session; on timeout its whole process tree is killed (``run_tree``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from train_helpers import run_tree

pytestmark = pytest.mark.slow   # started first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, work: Path, timeout: float = 240) -> str:
    res = run_tree(["bash", str(ROOT / "examples" / name), str(work)], timeout)
    assert res.returncode == 0, f"{name} exited {res.returncode}:\n{res.stdout[-4000:]}"
    return res.stdout


@pytest.mark.timeout(300)
def test_own_edge_list_example(tmp_path):
    out = run_example("own_edge_list.sh", tmp_path)
    preds = np.load(tmp_path / "preds.npz")
    assert len(preds["node_ids"]) == 300 and sorted(preds["node_ids"].tolist()) == list(range(300))
    shown = re.findall(r"^(user-\d+)\t(\d)$", out, re.M)
    assert len(shown) == 5, out[-2000:]
    meta = json.loads((tmp_path / "parts" / "partition.json").read_text())
    assert meta["split"]["fractions"] == [0.6, 0.2, 0.2]
    final = json.loads(re.search(r"final: (\{.*\})", out).group(1))
    assert final["test_acc"] > 0.6, final   # 3 balanced classes: chance is about 0.33


@pytest.mark.timeout(300)
def test_multi_node_localhost_example(tmp_path):
    out = run_example("multi_node_localhost.sh", tmp_path)
    finals = re.findall(r"\[rank0\] final: (\{.*\})", out)
    assert len(finals) == 1, out[-3000:]
    assert json.loads(finals[0])["epochs"] == 20
    logs = [(tmp_path / f"node{i}.log").read_text() for i in (0, 1)]
    assert sum("init_distributed: rank 0/2" in log for log in logs) == 1   # one rank 0, on either node
    assert not any("error" in log.lower() for log in logs), logs
