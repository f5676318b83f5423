"""``benchmarks/gpu_check.py`` runs end to end on the CPU (``--device cpu``), so the script a lent
GPU's scarce minutes depend on cannot rot between the sessions that get a GPU.

On the CPU the ``triton`` rows use the CPU fallback (no interpreter here: ``TRITON_INTERPRET``
is removed), so the model check compares numba's results with torch's and the timing code runs
every unit; what the figures say about a GPU is nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
UNITS = {"spmm", "spmm_gcn_scaled", "spmm_heads", "spmm_heads_t", "sddmm_heads", "edge_softmax_fwd_bwd",
         "gcn_epoch", "gat_epoch"}


def test_gpu_check_runs_on_the_cpu(tmp_path):
    out = tmp_path / "gpu_check.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--device", "cpu",
                           "--dataset", "sbm-tiny", "--nodes", "300", "--edges", "2000", "--reps", "1",
                           "--out", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["backends"][0] == "torch"
    for backend in report["backends"]:
        diffs = report["max_rel_diff_vs_cpu"][backend]
        assert set(diffs) == {"gcn", "sage", "gat", "gin"}
        assert all(0.0 <= d <= 1e-4 for d in diffs.values()), (backend, diffs)
    assert report["gnn_dist_step_s"] > 0 and report["pyg_sparse_step_s"] > 0
    assert set(report["kernels"]) == UNITS
    for unit, row in report["kernels"].items():
        assert row["faster"] in report["backends"], unit
        assert all(row[b] > 0 for b in report["backends"]), unit
    assert report["kernels"]["spmm"]["min_bytes"] == 2000 * 128 * 4 + 300 * 128 * 4


def test_gpu_check_script_parses_and_names_existing_files():
    import re

    script = REPO / "benchmarks" / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, timeout=30).returncode == 0
    text = script.read_text()
    paths = set(re.findall(r"(?:benchmarks|tests)/[\w/]+\.py", text))
    assert "benchmarks/gpu_check.py" in paths
    assert all((REPO / p).is_file() for p in paths), sorted(p for p in paths if not (REPO / p).is_file())


def test_gpu_check_script_flags_parse():
    """The training and partitioning commands of gpu_check.sh use flags that exist (a renamed flag
    would otherwise fail only on a lent GPU)."""
    import shlex

    from gnn_dist.config_cli import parse_run_config
    from gnn_dist_cli.command import build_parser as partition_parser

    text = (REPO / "benchmarks" / "gpu_check.sh").read_text().replace("\\\n", " ")
    lines = text.splitlines()
    (base,) = [line.split("-m gnn_dist.train", 1)[1] for line in lines if "-m gnn_dist.train" in line]
    base = base.replace('"$epochs"', "1").replace('"$OUT/$metrics"', "m").replace('"$@"', "")
    runs = [line.split(" train ", 1)[1].split(None, 2)[2] for line in lines if line.startswith('step "NCCL training')]
    part = [line.split("-m gnn_dist_cli", 1)[1] for line in lines if "-m gnn_dist_cli" in line]
    assert len(runs) >= 4 and part
    for extra in runs:
        parse_run_config(shlex.split(base.replace("$DATA", "d") + " " + extra))   # flags and values
    for args in part:
        partition_parser().parse_args(shlex.split(args.replace("$DATA", "d")))


def test_compare_metrics(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("compare_metrics", REPO / "benchmarks" / "compare_metrics.py")
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    a, b, c = (tmp_path / n for n in ("a.jsonl", "b.jsonl", "c.jsonl"))
    a.write_text("".join(json.dumps({"epoch": e, "train_loss": 1.0 / (e + 1)}) + "\n" for e in range(5)))
    b.write_text("".join(json.dumps({"epoch": e, "train_loss": 1.0 / (e + 1) * (1 + 1e-7)}) + "\n" for e in range(3)))
    c.write_text(json.dumps({"epoch": 2, "train_loss": 0.4}) + "\n")
    assert compare.main([str(a), str(b)]) == 0
    assert compare.main([str(a), str(c)]) == 1
    assert compare.main([str(b), str(c), "--rtol", "0.5"]) == 0
    c.write_text("{not json\n")
    try:
        compare.main([str(a), str(c)])
        raise AssertionError("a bad line must be an error")
    except SystemExit as exc:
        assert "c.jsonl:1: not a metrics line" in str(exc)
