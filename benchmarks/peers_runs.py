"""The runs of ``benchmarks/peers.py``: each framework's command line for one recipe and mode, one
run (a subprocess tree), and its figures from the probe's per-step lines (``peers_probe.py``).

A :class:`Recipe` is the model and its training (the same for all: GraphSAGE, mean over the
neighbours and the node's self-loop, or GCN (BNS-GCN only: PipeGCN has none), no normalisation
layer, dropout 0.5 before every layer, the precomputed input included (gnn-dist's
``--input-dropout`` with ``--precompute-first-layer on``), Adam, lr 0.01, no weight decay, the
first layer's aggregation precomputed); a :class:`Mode` is one side of a pair: gnn-dist's flags or
a peer's (``pipegcn``/``bnsgcn``) flags.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Recipe", "Mode", "PAIRS", "MODELS", "Setup", "gnn_dist_command", "peer_command", "run_once", "collect",
           "epoch_figures"]

HERE = Path(__file__).resolve().parent
GNN_DIST = "gnn-dist"


@dataclass(frozen=True)
class Recipe:
    name: str
    layers: int
    hidden: int
    epochs: int
    evaluate: bool
    """Evaluate the test accuracy after the last epoch (the peers on rank 0's full graph)."""
    model: str = "sage"
    """A key of :data:`MODELS`."""


MODELS: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...]]] = {
    "sage": ("GraphSAGE", "graphsage", ("pipegcn", "bnsgcn"), ("--sage-init", "concat")),
    "gcn": ("GCN", "gcn", ("bnsgcn",), ()),
}
"""gnn-dist's model name: its display name, the peers' ``--model``, the peers that have it and
gnn-dist's flags of the peers' initialisation (their precomputed GraphSAGE layer is one linear
map of ``[x_v, mean x_u]``: ``--sage-init concat``)."""


@dataclass(frozen=True)
class Mode:
    pair: str
    framework: str
    """``gnn-dist``, ``pipegcn`` or ``bnsgcn``."""
    flags: tuple[str, ...]


def _pair(name: str, ours: tuple[str, ...], peer: str, theirs: tuple[str, ...]) -> tuple[Mode, Mode]:
    return Mode(name, GNN_DIST, ours), Mode(name, peer, theirs)


PAIRS: dict[str, tuple[Mode, Mode]] = {
    "sync": _pair("sync", ("--pipeline", "sync"), "pipegcn", ()),
    "stale": _pair("stale", ("--pipeline", "stale"), "pipegcn", ("--enable-pipeline",)),
    "stale+smoothing": _pair("stale+smoothing", ("--pipeline", "stale", "--stale-smoothing", "0.95"), "pipegcn",
                             ("--enable-pipeline", "--feat-corr", "--grad-corr", "--corr-momentum", "0.95")),
    "bns-0.1": _pair("bns-0.1", ("--boundary-sample-rate", "0.1"), "bnsgcn", ("--sampling-rate", "0.1")),
    "bns-1.0": _pair("bns-1.0", ("--boundary-sample-rate", "1.0"), "bnsgcn", ("--sampling-rate", "1.0")),
}
"""gnn-dist's side and the peer's of each pair: PipeGCN vanilla and pipelined (± its feature and
gradient smoothing, momentum 0.95), BNS-GCN at sampling rate 0.1 and 1.0."""


@dataclass(frozen=True)
class Setup:
    """What every run of one benchmark shares."""

    gnn_dist_data: Path
    dgl_parts: Path
    """The DGL partition's parent folder (``peers/peers.json`` in it)."""
    graph_npz: Path
    meta: dict[str, int]
    """``n_feat``, ``n_class``, ``n_train``."""
    num_parts: int
    threads: int
    device: str
    venv_python: Path
    trees: dict[str, Path]
    """Patched peer trees by framework."""


def gnn_dist_command(setup: Setup, recipe: Recipe, mode: Mode, metrics: Path) -> list[str]:
    return [sys.executable, "-m", "gnn_dist_cli", "train", "--data", str(setup.gnn_dist_data),
            "--nproc", str(setup.num_parts), "--import", str(HERE / "peers_probe.py"), "--model", recipe.model,
            "--layers", str(recipe.layers), "--hidden", str(recipe.hidden), "--dropout", "0.5",
            "--input-dropout", "0.5", "--lr", "0.01", "--weight-decay", "0", "--epochs", str(recipe.epochs),
            "--seed", "0", "--precompute-first-layer", "on", "--eval-every",
            str(recipe.epochs if recipe.evaluate else 0), "--log-every", "0", "--metrics", str(metrics),
            *MODELS[recipe.model][3], *mode.flags]


def peer_command(setup: Setup, recipe: Recipe, mode: Mode, port: int) -> list[str]:
    meta = setup.meta
    cmd = [str(setup.venv_python), "main.py", "--dataset", "peers", "--graph-name", "peers", "--model",
           MODELS[recipe.model][1],
           "--n-layers", str(recipe.layers), "--n-hidden", str(recipe.hidden), "--dropout", "0.5", "--lr", "0.01",
           "--weight-decay", "0", "--norm", "none", "--use-pp", "--n-epochs", str(recipe.epochs),
           "--n-partitions", str(setup.num_parts), "--parts-per-node", str(setup.num_parts),
           "--log-every", str(recipe.epochs), "--fix-seed", "--seed", "0", "--skip-partition",
           "--port", str(port), "--eval" if recipe.evaluate else "--no-eval"]
    if mode.framework == "pipegcn":
        cmd += ["--n-feat", str(meta["n_feat"]), "--n-class", str(meta["n_class"]), "--n-train", str(meta["n_train"])]
    else:
        cmd += ["--part-path", str(setup.dgl_parts)]
    return cmd + list(mode.flags)


def _environment(setup: Setup, mode: Mode, probe_dir: Path) -> dict[str, str]:
    env = dict(os.environ, PEERS_PROBE_DIR=str(probe_dir), PEERS_REPO=str(HERE.parent),
               OMP_NUM_THREADS=str(setup.threads), MKL_NUM_THREADS=str(setup.threads))
    if mode.framework == GNN_DIST:
        env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), str(HERE.parent / "tests")])
        return env
    env.pop("PYTHONPATH", None)          # the peers' venv has its own torch
    env.update(PEERS_GRAPH=str(setup.graph_npz), PEERS_DEVICE=setup.device, PEERS_THREADS=str(setup.threads),
               DGLBACKEND="pytorch")
    if setup.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""   # their launcher then gives every rank the "device" ''
    return env


def run_once(setup: Setup, recipe: Recipe, mode: Mode, scratch: Path, port: int, timeout: float) -> dict[str, Any]:
    """One run: its command, exit, per-rank epoch figures and (with ``recipe.evaluate``) accuracy."""
    probe_dir = scratch / "probe"
    probe_dir.mkdir(parents=True)
    metrics = scratch / "metrics.jsonl"
    if mode.framework == GNN_DIST:
        cmd, cwd = gnn_dist_command(setup, recipe, mode, metrics), HERE.parent
    else:
        cmd, cwd = peer_command(setup, recipe, mode, port), setup.trees[mode.framework]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=_environment(setup, mode, probe_dir), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out = proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out = proc.communicate()[0]
        raise RuntimeError(f"{mode.framework} {mode.pair} ran past {timeout:.0f} s:\n{out[-3000:]}") from None
    (scratch / "output.txt").write_text(out)
    (scratch / "run.json").write_text(json.dumps({"command": " ".join(cmd), "cwd": str(cwd), "exit": proc.returncode,
                                                  "run_wall_s": time.monotonic() - start}))
    return collect(scratch, recipe, mode, setup.num_parts)


def collect(scratch: Path, recipe: Recipe, mode: Mode, num_parts: int) -> dict[str, Any]:
    """A finished run's record from its folder: ``output.txt``, ``run.json`` (absent for runs of
    older harness code), the probe's lines, gnn-dist's metrics."""
    out = (scratch / "output.txt").read_text()
    run = json.loads((scratch / "run.json").read_text()) if (scratch / "run.json").is_file() else \
        {"command": "(not recorded)", "cwd": "", "exit": 0, "run_wall_s": None}
    ranks = [_rank_lines(p) for p in sorted((scratch / "probe").glob("rank-*.jsonl"))]
    if run["exit"] != 0 or len(ranks) != num_parts:
        raise RuntimeError(f"{mode.framework} {mode.pair} failed (exit {run['exit']}, "
                           f"{len(ranks)} ranks stepped):\n{out[-3000:]}")
    metrics = scratch / "metrics.jsonl"
    result = {"framework": mode.framework, "pair": mode.pair, "recipe": recipe.name, **run,
              "ranks": ranks, "accuracy": _accuracy(mode, out, metrics) if recipe.evaluate else None}
    if mode.framework == GNN_DIST:
        result["gnn_dist_halo_bytes"] = _metrics_column(metrics, "halo_bytes")
    return result


def _rank_lines(path: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _metrics_column(metrics: Path, key: str) -> list[float]:
    recs = [json.loads(line) for line in metrics.read_text().splitlines()]
    return [r[key] for r in recs if "epoch" in r and key in r]


_PEER_TEST = re.compile(r"Test Result \| Accuracy ([0-9.]+)%")


def _accuracy(mode: Mode, out: str, metrics: Path) -> float | None:
    if mode.framework == GNN_DIST:
        accs = [a for a in _metrics_column(metrics, "test_acc") if a is not None]
        return accs[-1] if accs else None
    found = _PEER_TEST.findall(out)
    return float(found[-1]) / 100 if found else None


def epoch_figures(result: dict[str, Any], warmup: int) -> dict[str, Any]:
    """Per epoch after ``warmup`` epochs, from the probe's lines: wall, CPU and run-queue seconds
    (the busiest rank's wall; CPU and wait the ranks' mean), bytes sent point to point (rank 0's),
    and every rank's peak RSS."""
    if warmup < 1:
        raise ValueError(f"warm-up {warmup}: at least 1 epoch (the first step's line is the base)")
    per_rank = []
    for lines in sorted(result["ranks"], key=lambda lines: lines[0]["rank"]):
        if len(lines) <= warmup:
            raise ValueError(f"{result['framework']} {result['pair']}: {len(lines)} steps, warm-up {warmup}")
        base, b, n = lines[warmup - 1], lines[-1], len(lines) - warmup
        per_rank.append({k: (b[k] - base[k]) / n for k in ("wall", "cpu", "wait", "sent")} | {"rss": b["rss"]})
    figures = {"wall_s": max(r["wall"] for r in per_rank),
               "cpu_s": sum(r["cpu"] for r in per_rank) / len(per_rank),
               "wait_s": sum(r["wait"] for r in per_rank) / len(per_rank),
               "peak_rss_bytes": [r["rss"] for r in per_rank]}
    halo = result.get("gnn_dist_halo_bytes")
    figures["halo_bytes"] = (sum(halo[warmup:]) / len(halo[warmup:])) if halo else per_rank[0]["sent"]
    return figures
