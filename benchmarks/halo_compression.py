"""Compressed halo messages: wire bytes, accuracy and epoch time per wire format, and the cost of
packing against the link time it saves.

For each dataset (default ``sbm-medium`` and ``sbm-small``) and P (default 2 and 4), on METIS
partitions (cached like ``train.py``'s), one launch of P ranks trains one model per setting
(fp32, bf16, int8, int4, int2, adaptive:3 and adaptive:2 with ``sync``; int8 with ``overlap``;
fp32 and int4 with ``stale``), every one on a simulated link (default 10 Gbit/s, 0.5 ms: the
issue's), from the same initial weights, **interleaved**: epoch ``e`` of every setting, then
epoch ``e + 1`` ..., so the machine's background load falls on all of them alike. Per setting:
the halo bytes sent per epoch (the busiest rank; the wire's real bytes, scales included), the
median epoch time and exposed communication over the epochs after the warm-up, and the test
accuracy after the last epoch (evaluation itself is exact: fp32, no link).

Then, in this process, the packing cost: encode + decode of a ``[rows, hidden]`` block of halo
rows (numba on CPU), interleaved with an fp32 copy of the same rows, per value, against the link
time a value saves at the link's bandwidth.

Targets (issue 16): int8 bytes <= 0.27x fp32's and test accuracy within 0.5 points; int4 <= 0.14x
and within 1 point; adaptive:3 within 1 point; on the link, sync int8 epoch <= 0.5x sync fp32's
and stale int4 <= 0.35x.

Usage::

    python benchmarks/halo_compression.py            # sbm-medium + sbm-small, P = 2, 4 (~25 min on 2 cores)
    python benchmarks/halo_compression.py --quick    # sbm-small, P = 2, 12 epochs (< 2 min)
    python benchmarks/halo_compression.py --packing-only   # the packing cost alone (< 1 min)

Results: ``benchmarks/results/halo_compression_[hardware]_[date][_quick].{md,json}``.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent

import common  # noqa: E402
from mp_utils import run_ranks  # noqa: E402

log = logging.getLogger("benchmarks.halo_compression")

SETTINGS: dict[str, dict[str, Any]] = {
    "sync fp32": {},
    "sync bf16": {"halo_dtype": "bf16"},
    "sync int8": {"halo_dtype": "int8"},
    "sync int4": {"halo_dtype": "int4"},
    "sync int2": {"halo_dtype": "int2"},
    "sync adaptive:3": {"halo_bits": "adaptive:3"},
    "sync adaptive:2": {"halo_bits": "adaptive:2"},
    "overlap int8": {"pipeline": "overlap", "halo_dtype": "int8"},
    "stale fp32": {"pipeline": "stale"},
    "stale int4": {"pipeline": "stale", "halo_dtype": "int4"},
}
"""The runs, as Trainer keyword arguments."""


@dataclass(kw_only=True, slots=True)
class BenchConfig:
    datasets: tuple[str, ...] = ("sbm-medium", "sbm-small")
    parts: tuple[int, ...] = (2, 4)
    model: str = "gcn"
    hidden: int = 128
    num_layers: int = 2
    dropout: float = 0.5
    lr: float = 0.01
    epochs: int = 60
    """Training epochs per setting (accuracy after the last)."""
    warmup: int = 3
    """Epochs not timed (stale's first, synchronous epoch is among them)."""
    link: str = "latency_ms=0.5,gbps=10"
    threads: int = 1
    seed: int = 0
    cache_dir: str = str(_HERE / ".cache")
    timeout_s: float = 3600.0
    paths: dict[str, dict[int, str]] = field(default_factory=dict)


# ============================================================================ in the spawned ranks
def rank_job(rank: int, world_size: int, cfg: dict[str, Any], dataset: str,
             settings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every setting's trainer, stepped one epoch each in turn; per-epoch metrics, test accuracy."""
    import torch

    torch.set_num_threads(int(cfg["threads"]))
    logging.basicConfig(level=logging.WARNING)
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(cfg["paths"][dataset][str(world_size)])
    torch.manual_seed(cfg["seed"])
    model = build_model(cfg["model"], in_dim=part.feature_dim, hidden_dim=cfg["hidden"], out_dim=part.num_classes,
                        num_layers=cfg["num_layers"], dropout=cfg["dropout"], seed=cfg["seed"])
    trainers = {}
    for name, kwargs in settings.items():
        clone = build_model(cfg["model"], in_dim=part.feature_dim, hidden_dim=cfg["hidden"],
                            out_dim=part.num_classes, num_layers=cfg["num_layers"], dropout=cfg["dropout"],
                            seed=cfg["seed"])
        clone.load_state_dict(model.state_dict())
        trainers[name] = gnn_dist.Trainer(clone, part, lr=cfg["lr"], eval_every=0, log_every=0,
                                          simulate_link=cfg["link"], **kwargs)
    history: dict[str, list[dict[str, Any]]] = {name: [] for name in settings}
    for _ in range(cfg["epochs"]):
        for name, trainer in trainers.items():
            history[name].extend(trainer.fit(1))
    out: dict[str, Any] = {}
    for name, trainer in trainers.items():
        adaptive = trainer.pipeline.transport.adaptive
        out[name] = {"history": history[name][cfg["warmup"]:], "eval": trainer.evaluate(),
                     "widths": None if adaptive is None else sorted(adaptive.table.values())}
    return out


# ============================================================================ in the parent
def summarize_setting(results: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """Per epoch the busiest rank's numbers, then the median over the measured epochs."""
    keys = ("epoch_time_s", "exposed_comm_s", "comm_time_s", "halo_bytes")
    n = len(results[0][name]["history"])
    per_epoch = {k: [max(float(r[name]["history"][e][k]) for r in results) for e in range(n)] for k in keys}
    out: dict[str, Any] = {k: statistics.median(v) for k, v in per_epoch.items()}
    out["test_acc"] = results[0][name]["eval"]["test_acc"]
    out["widths"] = results[0][name]["widths"]
    return out


def check_targets(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    fp32, stale_fp32 = rows["sync fp32"], rows.get("stale fp32")
    t: dict[str, Any] = {}

    def bytes_acc(name: str, ref: dict[str, Any], max_ratio: float | None, max_drop: float) -> None:
        r = rows[name]
        ratio = r["halo_bytes"] / ref["halo_bytes"]
        drop = (ref["test_acc"] - r["test_acc"]) * 100
        t[name] = {"bytes_ratio": ratio, "acc_drop_points": drop,
                   "bytes_ok": None if max_ratio is None else ratio <= max_ratio, "acc_ok": drop <= max_drop,
                   "max_ratio": max_ratio, "max_drop": max_drop}
    bytes_acc("sync int8", fp32, 0.27, 0.5)
    bytes_acc("sync int4", fp32, 0.14, 1.0)
    bytes_acc("sync adaptive:3", fp32, None, 1.0)
    if stale_fp32 is not None:
        bytes_acc("stale int4", stale_fp32, 0.14, 1.0)
    t["epoch: sync int8 / sync fp32"] = {"ratio": rows["sync int8"]["epoch_time_s"] / fp32["epoch_time_s"],
                                         "max": 0.5}
    t["epoch: stale int4 / sync fp32"] = {"ratio": rows["stale int4"]["epoch_time_s"] / fp32["epoch_time_s"],
                                          "max": 0.35}
    t["exposed: sync int8 / sync fp32"] = {
        "ratio": rows["sync int8"]["exposed_comm_s"] / max(fp32["exposed_comm_s"], 1e-12), "max": None}
    for v in t.values():
        if "ratio" in v and v.get("max") is not None:
            v["ok"] = v["ratio"] <= v["max"]
    return t


def packing_cost(hidden: int, rows: int, gbps: float, rounds: int = 7) -> dict[str, Any]:
    """ns per value of encode + decode (numba, this process's threads) against an fp32 copy of the
    same rows and the link time a value saves at ``gbps``."""
    import torch

    from gnn_dist.distributed.quantize import RowKey, decode_rows, encode_rows

    x = torch.randn(rows, hidden)
    ids = torch.arange(rows)
    runners: dict[str, Any] = {"fp32 copy": lambda: x.clone()}
    for bits in (8, 4, 2, 1):
        runners[f"int{bits}"] = (lambda b=bits: decode_rows(encode_rows(x, ids, b, RowKey(0, 1, 1)), b, (hidden,),
                                                            torch.float32))
    times = common.interleave(runners, rounds=rounds, warmup=1)
    values = rows * hidden
    out: dict[str, Any] = {"rows": rows, "hidden": hidden, "gbps": gbps}
    for name, ts in times.items():
        ns = statistics.median(ts) / values * 1e9
        entry: dict[str, Any] = {"ns_per_value": ns}
        if name != "fp32 copy":
            bits = int(name[3:])
            saved_bytes = 4 - (bits / 8 + 6 / hidden)
            entry["link_ns_saved_per_value"] = saved_bytes * 8 / gbps
            entry["cost_over_saving"] = ns / entry["link_ns_saved_per_value"]
        out[name] = entry
    return out


def _ms(x: float) -> str:
    return f"{x * 1e3:.0f}"


def _ok(v: bool | None) -> str:
    return "n/a" if v is None else ("met" if v else "**missed**")


def render(cfg: BenchConfig, env: dict[str, Any], results: dict[str, Any], args: str, wall_s: float) -> str:
    title = f"{', '.join(cfg.datasets)}; P = {', '.join(map(str, cfg.parts))}" if cfg.datasets else "packing cost only"
    L = [f"# Compressed halo messages ({title})", ""]
    L.append(f"Generated by `python benchmarks/halo_compression.py{args}` on {env['date']} in {wall_s / 60:.1f} min.")
    L.append("")
    L.append(f"- Model: {cfg.model.upper()}, {cfg.num_layers} layers, hidden {cfg.hidden}, dropout {cfg.dropout}, "
             f"Adam lr {cfg.lr}, {cfg.epochs} epochs; METIS partitions (seed {cfg.seed}); static halo cache on "
             f"(layer 0 makes no exchange: the halo rows are the hidden layer's, {cfg.hidden} wide); "
             f"{cfg.threads} thread per rank; gloo; every run on the simulated link `{cfg.link}`.")
    L.append(f"- The settings train interleaved (epoch e of each, then e + 1); medians over epochs "
             f"{cfg.warmup} to {cfg.epochs - 1} of the busiest rank's epoch time, exposed communication and "
             f"halo bytes sent (the wire's real bytes: packed values and per-row scales). Test accuracy "
             f"after the last epoch, evaluated exactly (fp32, no link).")
    L.append(f"- Hardware: {env['cpu_model']} ({env['cpu_count']} logical CPUs), load average at start "
             f"{env['load_average_1_5_15']}; Python {env['python']}, torch {env['packages'].get('torch')}. "
             f"The cores are shared with other jobs: compare settings within one table.")
    L.append("")
    for ds, per_p in results["runs"].items():
        for p, res in per_p.items():
            L.append(f"## {ds}, P = {p}")
            L.append("")
            fp32 = res["rows"]["sync fp32"]
            rows = []
            for name, r in res["rows"].items():
                rows.append([name, common.fmt_bytes(r["halo_bytes"]), f"{r['halo_bytes'] / fp32['halo_bytes']:.3f}",
                             f"{r['test_acc'] * 100:.2f}", _ms(r["epoch_time_s"]), _ms(r["exposed_comm_s"]),
                             f"{r['epoch_time_s'] / fp32['epoch_time_s']:.2f}",
                             "" if r["widths"] is None else
                             f"{sum(r['widths']) / len(r['widths']):.2f} over {len(r['widths'])} groups"])
            L.append(common.markdown_table(["setting", "halo bytes/epoch", "x fp32", "test acc %", "epoch ms",
                                            "exposed ms", "epoch x sync fp32", "adaptive mean width"], rows))
            L.append("")
            L.append("Targets:")
            for name, v in res["targets"].items():
                if "bytes_ratio" in v:
                    b = "" if v["max_ratio"] is None else (f"bytes {v['bytes_ratio']:.3f}x (<= {v['max_ratio']}): "
                                                           f"{_ok(v['bytes_ok'])}; ")
                    L.append(f"- {name}: {b}accuracy {-v['acc_drop_points']:+.2f} points "
                             f"(>= -{v['max_drop']}): {_ok(v['acc_ok'])}")
                else:
                    lim = "" if v["max"] is None else f" (<= {v['max']}): {_ok(v['ok'])}"
                    L.append(f"- {name} = {v['ratio']:.2f}{lim}")
            L.append("")
    pc = results["packing"]
    L.append(f"## Packing cost against the link time it saves ({pc['rows']} rows x {pc['hidden']}, this process)")
    L.append("")
    rows = [[name, f"{v['ns_per_value']:.2f}", f"{v.get('link_ns_saved_per_value', 0):.2f}" if name != "fp32 copy"
             else "", f"{v['cost_over_saving']:.2f}" if "cost_over_saving" in v else ""]
            for name, v in pc.items() if isinstance(v, dict)]
    L.append(common.markdown_table(["format", "encode + decode ns/value", f"link ns saved/value at {pc['gbps']:g} Gbit/s",
                                    "cost / saving"], rows))
    L.append("")
    L.append("A cost/saving below 1 means compressing a value costs less CPU time than the link time it "
             "saves (on the critical path in `sync`; in `stale` and `overlap` the link time is hidden "
             "anyway and only the bytes matter).")
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="sbm-small, P = 2, 12 epochs")
    ap.add_argument("--datasets", default=None, help="comma-separated catalog names")
    ap.add_argument("--parts", default=None, help="comma-separated P values")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--link", default=None, help="simulated link (default latency_ms=0.5,gbps=10)")
    ap.add_argument("--packing-only", action="store_true", help="only the packing cost (no training runs)")
    ap.add_argument("--out", default=None, help="result stem (default benchmarks/results/halo_compression_[hw]_[date])")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cfg = BenchConfig()
    if a.quick:
        cfg.datasets, cfg.parts, cfg.epochs = ("sbm-small",), (2,), 12
    if a.datasets:
        cfg.datasets = tuple(d.strip() for d in a.datasets.split(","))
    if a.parts:
        cfg.parts = tuple(int(p) for p in a.parts.split(","))
    if a.epochs:
        cfg.epochs = a.epochs
    if a.link:
        cfg.link = a.link
    env = common.environment(("torch", "numpy", "numba"))
    t0 = time.perf_counter()
    if a.packing_only:
        cfg.datasets = ()
    for ds in cfg.datasets:
        cfg.paths[ds] = {str(p): v for p, v in common.cached_metis_partitions(ds, cfg.parts, cfg.seed,
                                                                               cfg.cache_dir).items()}
    suffix = "_quick" if a.quick else ("_packing" if a.packing_only else "")
    stem = Path(a.out) if a.out else common.default_result_stem("halo_compression", suffix)
    args = "".join(f" {shlex.quote(x)}" for x in (sys.argv[1:] if argv is None else argv))
    results: dict[str, Any] = {"runs": {}, "packing": None}
    from gnn_dist.distributed import LinkModel

    gbps = LinkModel.parse(cfg.link).gbps
    results["packing"] = packing_cost(cfg.hidden, 20000 if a.quick else 100000, gbps)
    log.info("packing: %s", results["packing"])
    if a.packing_only:
        payload = {"config": {k: v for k, v in asdict(cfg).items() if k != "paths"}, "environment": env,
                   "results": results, "wall_s": time.perf_counter() - t0}
        json_path, md_path = common.write_results(stem, payload, render(cfg, env, results, args,
                                                                        time.perf_counter() - t0))
        log.info("wrote %s and %s", md_path, json_path)
    for ds in cfg.datasets:
        for p in cfg.parts:
            res = run_ranks(rank_job, p, asdict(cfg), ds, SETTINGS, timeout=cfg.timeout_s)
            rows = {name: summarize_setting(res, name) for name in SETTINGS}
            results["runs"].setdefault(ds, {})[str(p)] = {"rows": rows, "targets": check_targets(rows)}
            log.info("%s P=%d: %s", ds, p, results["runs"][ds][str(p)]["targets"])
            wall = time.perf_counter() - t0  # written after every launch: a later failure keeps the earlier ones
            payload = {"config": {k: v for k, v in asdict(cfg).items() if k != "paths"}, "environment": env,
                       "results": results, "wall_s": wall}
            json_path, md_path = common.write_results(stem, payload, render(cfg, env, results, args, wall))
            log.info("wrote %s and %s", md_path, json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
