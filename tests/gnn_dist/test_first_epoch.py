"""The first training step does no start-up work: the kernel backend is chosen, imported and its
cached kernel loaded when the partition is loaded (``load_partition``), so a fresh process's
first epoch imports nothing (numba's import and its first cached-kernel load took 1-3 s of the
first epoch before). Checked by what the first ``fit`` imports, in a fresh interpreter; the time
itself is a benchmark figure (docs/performance.md), not a test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from partitioners.format.writer import write_partition
from train_helpers import REPO, make_graph

pytest.importorskip("numba")

SCRIPT = textwrap.dedent("""
    import json, sys
    import gnn_dist
    from gnn_dist.models import build_model
    part = gnn_dist.load_partition(sys.argv[1])
    loaded = {m for m in sys.modules if m.split(".")[0] in ("numba", "llvmlite")}
    model = build_model("gcn", in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=2)
    trainer = gnn_dist.Trainer(model, part, lr=0.01, log_every=0)
    before = set(sys.modules)
    trainer.fit(1)
    new = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ("numba", "llvmlite", "gnn_dist"))
    print(json.dumps({"backend": part.block.backend_for(part.x).name, "loaded_at_load": len(loaded), "new": new}))
""")


@pytest.mark.timeout(120)
def test_the_first_step_imports_nothing(tmp_path):
    g = make_graph(80, seed=4)
    write_partition(g, np.zeros(g.num_nodes, dtype=np.int32), 1, tmp_path / "p1", method="test",
                    method_params={}, seed=0)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env.pop("GNN_DIST_KERNELS", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "p1")], env=env, capture_output=True,
                          text=True, timeout=100)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["backend"] == "numba" and out["loaded_at_load"] > 0, out
    assert out["new"] == [], out   # numba, its cached kernels and gnn_dist's kernel modules came at load
