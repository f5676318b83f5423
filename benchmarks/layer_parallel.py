"""Layer parallelism (GNNPipe) and hybrid against graph parallelism: bytes, accuracy, epoch time.

GCNII (``--layers``, default 16 and 32; hidden 64) on ``sbm-medium`` (METIS partitions, cached
like ``train.py``'s) at P = 4 ranks:

- ``graph sync`` and ``graph stale``: a 4-part folder, one part per rank;
- ``layer S=4``: a 1-part folder, a stage of L/4 layers per rank, ``--chunks K`` chunks;
- ``hybrid S=2 G=2``: a 2-part folder, two stages each graph-parallel over two parts.

Per run: the bytes every rank sent in an epoch, summed over the ranks (halo rows, stage-to-stage
rows and gradients, gradient all-reduces; the last epoch's), the median epoch time of the
slowest rank, and the test accuracy after the same number of epochs (evaluated once, at the
end). ``--simulate-link latency_ms=L,gbps=B`` puts every training transfer on that link.
Targets (issue 17): bytes of ``layer`` <= 0.2x and of ``hybrid`` <= 0.5x those of ``graph sync``;
test accuracy within 1 point of ``graph sync``.

Usage::

    python benchmarks/layer_parallel.py --epochs 20                 # sbm-medium, 16 and 32 layers
    python benchmarks/layer_parallel.py --quick                     # sbm-small, 16 layers, 3 epochs
    python benchmarks/layer_parallel.py --layers 32 16 --epochs 2 --runs "graph sync" "layer S=4" \
        "hybrid S=2 G=2" --suffix _32layers                         # the byte target at 32 layers

Results: ``benchmarks/results/layer_parallel_[hardware]_[date][_quick].{md,json}``.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent

import common  # noqa: E402
from mp_utils import run_ranks  # noqa: E402

log = logging.getLogger("benchmarks.layer_parallel")

RUNS: dict[str, tuple[int, dict[str, Any]]] = {
    "graph sync": (4, {"pipeline": "sync"}),
    "graph stale": (4, {"pipeline": "stale"}),
    "layer S=4": (1, {"parallel": "layer", "stages": 4}),
    "hybrid S=2 G=2": (2, {"parallel": "hybrid", "stages": 2}),
}
"""Name -> (the folder's parts, Trainer fields)."""


def rank_run(rank: int, world: int, path: str, fields: dict[str, Any], layers: int, epochs: int,
             seed: int) -> dict[str, Any]:
    import torch

    import gnn_dist
    from gnn_dist.config import TrainerConfig
    from gnn_dist.models import build_model

    fields = {"lr": 0.01, "log_every": 0, "eval_every": 0, **fields}
    if fields.get("parallel", "graph") != "graph":
        from gnn_dist.layer_parallel import LayerParallelTrainer, load_stage

        part, layout, groups = load_stage(path, fields["parallel"], fields["stages"], layers)
        torch.manual_seed(seed)
        model = build_model("gcnii", in_dim=part.feature_dim, hidden_dim=64, out_dim=part.num_classes,
                            num_layers=layers, dropout=0.5, seed=seed)
        trainer = LayerParallelTrainer(model, part, TrainerConfig.from_fields(**fields), layout=layout,
                                       groups=groups)
    else:
        part = gnn_dist.load_partition(path)
        torch.manual_seed(seed)
        model = build_model("gcnii", in_dim=part.feature_dim, hidden_dim=64, out_dim=part.num_classes,
                            num_layers=layers, dropout=0.5, seed=seed)
        trainer = gnn_dist.Trainer(model, part, **fields)
    hist = trainer.fit(epochs)
    final = trainer.evaluate()
    return {"bytes": hist[-1]["halo_bytes"] + hist[-1]["allreduce_bytes"],
            "epoch_s": [h["epoch_time_s"] for h in hist], "test_acc": final["test_acc"],
            "stages": hist[-1].get("stages")}


def measure(name: str, path: str, fields: dict[str, Any], layers: int, epochs: int, seed: int,
            timeout: float) -> dict[str, Any]:
    results = run_ranks(rank_run, 4, path, fields, layers, epochs, seed, timeout=timeout)
    warm = 1 if epochs > 1 else 0
    slowest = [max(r["epoch_s"][e] for r in results) for e in range(warm, epochs)]
    return {"run": name, "layers": layers, "bytes_per_epoch": sum(r["bytes"] for r in results),
            "epoch_s": statistics.median(slowest), "test_acc": results[0]["test_acc"], "stages": results[0]["stages"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="sbm-medium")
    ap.add_argument("--layers", type=int, nargs="+", default=[16, 32])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--chunk-by", default="hash", help="the layer/hybrid runs' --chunk-by (hash, graph)")
    ap.add_argument("--simulate-link", default=None, metavar="latency_ms=L,gbps=B")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", nargs="+", choices=list(RUNS), default=list(RUNS),
                    help="the runs to measure ('graph sync', the reference of the ratios, is always run)")
    ap.add_argument("--quick", action="store_true", help="sbm-small, 16 layers, 3 epochs")
    ap.add_argument("--suffix", default="", help="appended to the results' file name")
    ap.add_argument("--cache-dir", default=str(_HERE / ".cache"))
    ap.add_argument("--timeout", type=float, default=3600)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.quick:
        args.dataset, args.layers, args.epochs = "sbm-small", [16], 3
    needed = sorted({RUNS[name][0] for name in ["graph sync", *args.runs]})
    folders = common.cached_metis_partitions(args.dataset, needed, args.seed, args.cache_dir)
    rows = []
    for layers in args.layers:
        for name, (parts, fields) in RUNS.items():
            if name != "graph sync" and name not in args.runs:
                continue
            fields = dict(fields)
            if "stages" in fields:
                fields["chunks"] = args.chunks
                fields["chunk_by"] = args.chunk_by
            if args.simulate_link:
                fields["simulate_link"] = args.simulate_link
            rec = measure(name, folders[parts], fields, layers, args.epochs, args.seed, args.timeout)
            log.info("%s, %d layers: %s/epoch, %.3f s/epoch, test %.4f", name, layers,
                     common.fmt_bytes(rec["bytes_per_epoch"]), rec["epoch_s"], rec["test_acc"])
            rows.append(rec)
    table = []
    for rec in rows:
        ref = next(r for r in rows if r["layers"] == rec["layers"] and r["run"] == "graph sync")
        table.append([rec["run"], rec["layers"], common.fmt_bytes(rec["bytes_per_epoch"]),
                      common.fmt_ratio(rec["bytes_per_epoch"] / ref["bytes_per_epoch"]), f"{rec['epoch_s']:.3f}",
                      common.fmt_ratio(rec["epoch_s"] / ref["epoch_s"]), f"{rec['test_acc']:.4f}",
                      f"{100 * (rec['test_acc'] - ref['test_acc']):+.2f}"])
    md = (f"# Layer parallelism: {args.dataset}, GCNII hidden 64, P = 4, {args.epochs} epochs, chunks {args.chunks} "
          f"(by {args.chunk_by})"
          f"{', link ' + args.simulate_link if args.simulate_link else ''}\n\n"
          + common.markdown_table(["run", "layers", "bytes/epoch", "x sync", "epoch s", "x sync", "test acc",
                                   "pts vs sync"], table) + "\n")
    print(md)
    stem = common.default_result_stem("layer_parallel", ("_quick" if args.quick else "") + args.suffix)
    common.write_results(stem, {"args": vars(args), "environment": common.environment(["torch"]), "runs": rows}, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
