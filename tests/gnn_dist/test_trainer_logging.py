"""A script that builds a :class:`gnn_dist.Trainer` without setting up logging sees the epoch lines
as ``gnn_dist.train`` prints them (``gnn_dist.trainer.default_logging``); run in a subprocess,
since pytest configures the root logger."""

from __future__ import annotations

import os
import subprocess
import sys

from partitioners import partition_graph
from partitioners.catalog import load_dataset

def test_a_trainer_in_a_script_logs_like_the_cli(tmp_path):
    partition_graph(load_dataset("sbm-tiny"), 1, "metis", str(tmp_path / "p1"), seed=0)
    script = tmp_path / "my_training.py"
    script.write_text(
        "from gnn_dist import Trainer, load_partition\n"
        "from gnn_dist.models import build_model\n"
        f"part = load_partition({str(tmp_path / 'p1')!r})\n"
        "model = build_model('gcn', in_dim=part.feature_dim, out_dim=part.num_classes, hidden_dim=8, num_layers=2)\n"
        "Trainer(model, part, log_every=1).fit(2)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert any(line.startswith("[rank0] epoch    1  loss ") for line in lines), done.stderr[-2000:]
    assert any(line.startswith("[rank0] summary: 2 epochs") for line in lines)
