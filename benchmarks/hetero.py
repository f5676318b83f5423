"""Heterogeneous-graph benchmark: one-rank R-GCN training step, gnn-dist against PyG and DGL.

Same graph (an ogbn-mag-shaped :func:`~partitioners.hetero.synthetic.mag_graph`: paper, author,
institution, field, 4 relations and their reverses, 128-d paper features), same model (2 R-GCN
layers, hidden 64, ReLU, mean per relation, a root weight, a bias, no dropout, 128-d learnable
rows for the featureless types, Adam), same measured unit: one training step (forward,
cross-entropy on the training papers, backward, Adam, the loss read back to the host).

Peers:

- ``gnn-dist``: ``Trainer.train_step()`` on the one-part partition (``RGCNConv``: one root
  weight per node type; the same products as one shared root);
- ``pyg``: PyG's ``RGCNConv(aggr="mean")`` on ``edge_index``/``edge_type`` over the union ids
  (the partition's own arrays and node order, :mod:`hetero_peers`). PyG's fast path
  (``segment_matmul``, where ``is_sorted=True`` saves a sort) needs ``pyg-lib``; without it
  ``is_sorted`` changes nothing and the row is left out (the reason recorded);
- ``dgl``: DGL 2.1's ``RelGraphConv(regularizer=None, self_loop=True)``, edges presorted by
  relation (its ``segment_mm`` path) and normalised by 1 / in-edges per relation, in its own
  venv and process (``benchmarks/dgl_env.sh``); left out, logged, when that venv is missing.

Per torch thread count (1, 2), steps interleaved A B C A B C ... after warm-up (the DGL peer
restarted per setting with ``OMP_NUM_THREADS``); medians reported, and the ratios gnn-dist/peer
of medians measured in the same run. The machine is shared: absolute times are noisy, the
interleaved ratios are the result.

Usage (from the repository root)::

    python benchmarks/hetero.py                  # 100k nodes, ~1M stored edges; ~10 min on 2 cores
    python benchmarks/hetero.py --quick          # a 20k-node smoke run

Writes ``benchmarks/results/hetero_<hw>_<date>.json`` (raw numbers) and ``.md`` (the report).
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import common

import numba  # noqa: E402
import torch  # noqa: E402

import hetero_peers  # noqa: E402

log = logging.getLogger("hetero")


@dataclass
class Config:
    num_nodes: int = 100_000
    num_edges: int = 500_000
    """Edges drawn before the reverses (``mag_graph``): about twice as many stored."""
    num_classes: int = 16
    feature_dim: int = 128
    hidden: int = 64
    embedding_dim: int = 128
    lr: float = 0.01
    threads: tuple[int, ...] = (1, 2)
    warmup: int = 2
    rounds: int = 5
    seed: int = 0
    cache_dir: str = str(common.repo_root() / "benchmarks" / ".cache")
    out: str | None = None


def partition(cfg: Config) -> Path:
    """The one-part partition of the graph (made once, kept under ``cache_dir``; the folder
    name carries the graph's parameters and a digest of the partitioner's sources)."""
    from partitioners.api import partition_graph
    from partitioners.hetero.synthetic import mag_graph

    digest = common.source_digest(common.repo_root() / "partitioners")[:12]
    name = f"mag-{cfg.num_nodes}-{cfg.num_edges}-c{cfg.num_classes}-f{cfg.feature_dim}-seed{cfg.seed}"
    path = Path(cfg.cache_dir) / "partitions" / f"{name}-p1-{digest}"
    if not (path / "partition.json").exists():
        graph, t = common.timed(mag_graph, cfg.num_nodes, cfg.num_edges, cfg.num_classes, cfg.feature_dim,
                                seed=cfg.seed, name=name)
        log.info("generated %s in %.1f s", graph, t)
        partition_graph(graph, 1, "random", path, seed=cfg.seed, overwrite=True)
    return path


def gnn_dist_step(part: Any, cfg: Config) -> tuple[Any, Any]:
    """``(trainer, step)``: gnn-dist's R-GCN and one training step."""
    import gnn_dist
    from gnn_dist.models import build_model

    torch.manual_seed(0)
    model = build_model("rgcn", in_dim=part.feature_dim, hidden_dim=cfg.hidden, out_dim=part.num_classes,
                        num_layers=2, dropout=0.0, seed=cfg.seed, typed=part.typed, embedding_dim=cfg.embedding_dim)
    trainer = gnn_dist.Trainer(model, part, lr=cfg.lr, log_every=0, eval_every=0)

    def step() -> None:
        trainer.train_step()
    return trainer, step


def _set_threads(n: int) -> None:
    """torch's and numba's thread counts (numba's first parallel launch resets OpenMP's, torch's
    included: set again before every step)."""
    torch.set_num_threads(n)
    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))


def measure(part: Any, data: hetero_peers.UnionArrays, cfg: Config, threads: int,
            why: dict[str, str]) -> dict[str, Any]:
    """Every peer's step times at ``threads`` threads, interleaved."""
    _set_threads(threads)
    _, ours = gnn_dist_step(part, cfg)
    runners = {"gnn-dist": ours, "pyg": hetero_peers.pyg_step(data, cfg.hidden, cfg.embedding_dim, cfg.lr)}
    import torch_geometric.typing as pyg_typing

    if pyg_typing.WITH_SEGMM:
        runners["pyg (is_sorted)"] = hetero_peers.pyg_step(data, cfg.hidden, cfg.embedding_dim, cfg.lr,
                                                           is_sorted=True)
    else:
        why["pyg (is_sorted)"] = ("PyG without pyg-lib (torch_geometric.typing.WITH_SEGMM is False): RGCNConv "
                                  "loops over the relations whatever is_sorted says, so the row would repeat 'pyg'")
    with hetero_peers.dgl_peer(data, cfg.hidden, cfg.embedding_dim, cfg.lr, threads, why) as dgl:
        if dgl is not None:
            runners["dgl"] = dgl.run
            why.setdefault("dgl_versions", f"DGL {dgl.versions['dgl']} / torch {dgl.versions['torch']}")

        def held(fn: Any) -> Any:
            def run() -> Any:
                _set_threads(threads)
                return fn()
            return run

        times = common.interleave({k: held(v) for k, v in runners.items()}, cfg.rounds, warmup=cfg.warmup)
    summary = {k: common.summarize(v) for k, v in times.items()}
    ours_med = summary["gnn-dist"]["median"]
    ratios = {k: ours_med / s["median"] for k, s in summary.items() if k != "gnn-dist"}
    log.info("threads %d: %s; ratios %s", threads, {k: round(s["median"], 3) for k, s in summary.items()},
             {k: round(r, 3) for k, r in ratios.items()})
    return {"threads": threads, "times_s": times, "summary": summary, "ratios": ratios}


TARGETS = {"pyg": 0.5, "dgl": 0.7}
"""Issue 34's targets: gnn-dist's step at most this fraction of the peer's."""


def report(cfg: Config, graph: dict[str, Any], results: list[dict[str, Any]], why: dict[str, str],
           env: dict[str, Any]) -> str:
    peers = sorted({k for r in results for k in r["ratios"]}, key=lambda k: (k != "pyg", k))
    rows = []
    for r in results:
        s = r["summary"]
        for p in peers:
            target = TARGETS.get(p)
            ratio = r["ratios"].get(p)
            met = "-" if target is None or ratio is None else ("yes" if ratio <= target else "no")
            rows.append([r["threads"], p, f"{s['gnn-dist']['median'] * 1e3:.0f}",
                         f"{s[p]['median'] * 1e3:.0f}" if p in s else "-", common.fmt_ratio(ratio),
                         "-" if target is None else f"<= {target}x", met])
    lines = [
        f"# R-GCN training step: gnn-dist vs PyG RGCNConv and DGL RelGraphConv ({env['date']})", "",
        f"Graph: `mag_graph({cfg.num_nodes}, {cfg.num_edges}, {cfg.num_classes}, {cfg.feature_dim})` "
        f"(reverses included): {graph['num_nodes']} nodes, {graph['num_edges']} stored edges, "
        f"{graph['num_relations']} relations; {graph['train']} training papers. Model: 2 layers, hidden "
        f"{cfg.hidden}, {cfg.num_classes} classes, {cfg.embedding_dim}-d learnable rows for "
        f"{graph['learnable_rows']} featureless nodes, no dropout, Adam. {cfg.warmup} warm-up step(s), "
        f"{cfg.rounds} measured, interleaved; medians (ms) and ratios gnn-dist / peer of the medians.", "",
        common.markdown_table(["threads", "peer", "gnn-dist ms", "peer ms", "gnn-dist / peer", "target", "met"], rows),
        "",
        f"Machine: {env['cpu_model']}, {env['cpu_count']} logical CPUs (shared: load average "
        f"{env['load_average_1_5_15']}), Python {env['python']}, torch {env['packages'].get('torch')}, "
        f"PyG {env['packages'].get('torch_geometric')}, numba {env['packages'].get('numba')}; "
        f"{why.get('dgl_versions', 'DGL not run')}; git {env['git_revision']}.",
    ]
    for k, v in why.items():
        if k != "dgl_versions":
            lines.append(f"- `{k}` left out: {v}")
    lines += ["", "Rerun: `python benchmarks/hetero.py` (`bash benchmarks/dgl_env.sh` first for the DGL rows)."]
    return "\n".join(lines) + "\n"


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    import gnn_dist

    path = partition(cfg)
    part = gnn_dist.load_partition(path)
    data = hetero_peers.union_arrays(part)
    graph = {"num_nodes": data.num_nodes, "num_edges": int(data.src.numel()), "num_relations": data.num_relations,
             "train": int(data.train.numel()), "learnable_rows": int(sum(r.numel() for r in data.learnable))}
    log.info("graph %s", graph)
    why: dict[str, str] = {}
    t0 = time.perf_counter()
    results = [measure(part, data, cfg, n, why) for n in cfg.threads]
    env = common.environment(("torch", "torch_geometric", "numba", "numpy"))
    payload = {"config": asdict(cfg), "graph": graph, "results": results, "left_out": why, "targets": TARGETS,
               "environment": env, "wall_s": time.perf_counter() - t0}
    return payload, report(cfg, graph, results, why, env)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-nodes", type=int, default=Config.num_nodes)
    p.add_argument("--num-edges", type=int, default=Config.num_edges)
    p.add_argument("--rounds", type=int, default=Config.rounds)
    p.add_argument("--warmup", type=int, default=Config.warmup)
    p.add_argument("--threads", type=int, nargs="+", default=list(Config.threads))
    p.add_argument("--quick", action="store_true", help="20k nodes, 100k edges, 3 rounds (a smoke run)")
    p.add_argument("--out", help="result stem (default benchmarks/results/hetero_<hw>_<date>)")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    cfg = Config(num_nodes=a.num_nodes, num_edges=a.num_edges, rounds=a.rounds, warmup=a.warmup,
                 threads=tuple(a.threads), out=a.out)
    if a.quick:
        cfg.num_nodes, cfg.num_edges, cfg.rounds, cfg.warmup = 20_000, 100_000, 3, 1
    payload, markdown = run(cfg)
    stem = cfg.out or common.default_result_stem("hetero", "_quick" if a.quick else "")
    for f in common.write_results(stem, payload, markdown):
        log.info("wrote %s", f)
    print(markdown)


if __name__ == "__main__":
    main()
