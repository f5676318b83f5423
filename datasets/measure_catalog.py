"""Measure the built-in datasets: size, generation time, peak RSS, structure and baselines.

Usage: ``python datasets/measure_catalog.py [NAME ...] [--seed S] [--no-baselines] [--json OUT]``
(default: every dataset except the ``*-large`` ones). Each dataset is generated once in a fresh
child process, so its peak RSS (``VmHWM``, interpreter and numpy included) is the
generator's alone; the baselines are then computed in this process on a second generation.

Baselines (test-mask accuracy, fitted on the train mask only):
  * ``nc``: nearest class centroid (class means of the train rows);
  * ``lr``: multinomial logistic regression (L-BFGS, L2 1e-4 per train row);
each on raw features ``X``, on ``A_hat X`` and on ``A_hat^2 X`` with
``A_hat = D^-1/2 (A + I) D^-1/2`` (the GCN propagation matrix, no learned weights).

Planted multi-label and regression datasets (``label_kind`` ``multilabel``, ``regression``) get a
ridge regression (closed form, L2 1e-3 per train row) on the same three inputs instead, scored as
their tasks are: micro-F1 of the outputs thresholded at 0.5, and R^2 on the test rows.

Structure: homophily (edges whose ends share a label; multi-label: ``(edge, label)`` pairs that
agree; regression: the correlation of the targets at an edge's two ends), for ``sbm-*`` the fraction of edges inside
one planted community (:func:`partitioners.synthetic.sbm_communities`), and with the baselines
the communication volume (halo rows) of METIS over that of a random partition at 4 parts.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from partitioners.catalog import dataset_info, list_datasets, load_dataset  # noqa: E402
from partitioners.synthetic import sbm_communities  # noqa: E402


def _peak_rss_mib() -> int:
    """This process's peak resident set (``VmHWM``; ``ru_maxrss`` survives exec on Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _generate_child(name: str, seed: int) -> dict:
    t0 = time.perf_counter()
    g = load_dataset(name, seed=seed)
    elapsed = time.perf_counter() - t0
    peak = _peak_rss_mib()  # the generator's, before the statistics below allocate anything
    deg = g.in_degree()
    src, dst = g.edges()
    info = dataset_info(name)
    local = None
    if info.family == "sbm":
        community = sbm_communities(info.num_nodes, info.num_classes,
                                    community_size=info.params.get("community_size"), seed=seed)
        local = round(float((community[src] == community[dst]).mean()), 4)
    return {"name": name, "seed": seed, "num_nodes": g.num_nodes, "num_edges": g.num_edges,
            "gen_time_s": round(elapsed, 2),
            "peak_rss_mib": peak,
            "max_degree": int(deg.max()), "mean_degree": round(float(deg.mean()), 2),
            "isolated_frac": round(float((deg == 0).mean()), 4),
            "homophily": round(_homophily(info.label_kind, g.y, src, dst), 4),
            "intra_community": local,
            "preprocessing": g.preprocessing}


def _homophily(label_kind: str, y: np.ndarray, src: np.ndarray, dst: np.ndarray) -> float:
    """Class labels: the edges whose ends share a label; multi-label: the ``(edge, label)`` pairs
    that agree; regression: the correlation of the targets at the two ends (every dimension)."""
    if label_kind == "regression":
        a, b = y[src].astype(np.float64).ravel(), y[dst].astype(np.float64).ravel()
        return float(np.corrcoef(a, b)[0, 1])
    return float((y[src] == y[dst]).mean())


def _ridge(x: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray, l2: float = 1e-3) -> np.ndarray:
    """Test-row predictions of a ridge regression (with a bias) fitted on the train rows."""
    xtr = np.hstack([x[train], np.ones((int(train.sum()), 1))])
    ytr = y[train].astype(np.float64).reshape(int(train.sum()), -1)
    reg = l2 * len(xtr) * np.eye(xtr.shape[1])
    reg[-1, -1] = 0.0
    w = np.linalg.solve(xtr.T @ xtr + reg, xtr.T @ ytr)
    return np.hstack([x[test], np.ones((int(test.sum()), 1))]) @ w


def _micro_f1(pred: np.ndarray, truth: np.ndarray) -> float:
    tp = float((pred & truth).sum())
    return 2 * tp / max(1.0, float(pred.sum() + truth.sum()))


def _r2(pred: np.ndarray, truth: np.ndarray) -> float:
    truth = truth.astype(np.float64).reshape(pred.shape)
    return 1.0 - float(((pred - truth) ** 2).sum() / ((truth - truth.mean(0)) ** 2).sum())


def _nearest_centroid(x: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray,
                      k: int) -> float:
    mu = np.stack([x[train & (y == c)].mean(0) for c in range(k)])
    xt = x[test]
    dist = (mu ** 2).sum(1)[None, :] - 2 * xt @ mu.T
    return float((dist.argmin(1) == y[test]).mean())


def _logistic(x: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray, k: int,
              l2: float = 1e-4) -> float:
    from scipy.optimize import minimize

    xtr = np.hstack([x[train], np.ones((int(train.sum()), 1))])
    ytr = y[train]
    n, f = xtr.shape
    onehot = np.eye(k)[ytr]

    def loss(w_flat: np.ndarray) -> tuple[float, np.ndarray]:
        w = w_flat.reshape(f, k)
        z = xtr @ w
        z -= z.max(1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(1, keepdims=True)
        val = -np.log(p[np.arange(n), ytr] + 1e-30).mean() + l2 * (w[:-1] ** 2).sum()
        grad = xtr.T @ (p - onehot) / n
        grad[:-1] += 2 * l2 * w[:-1]
        return val, grad.ravel()

    w = minimize(loss, np.zeros(f * k), jac=True, method="L-BFGS-B",
                 options={"maxiter": 500}).x.reshape(f, k)
    xte = np.hstack([x[test], np.ones((int(test.sum()), 1))])
    return float(((xte @ w).argmax(1) == y[test]).mean())


def _baselines(name: str, seed: int) -> dict:
    import scipy.sparse as sp

    g = load_dataset(name, seed=seed)
    a = g.to_scipy().astype(np.float64) + sp.identity(g.num_nodes, format="csr")
    dinv = sp.diags(1.0 / np.sqrt(np.asarray(a.sum(1)).ravel()))
    a_hat = (dinv @ a @ dinv).tocsr()
    x0 = g.x.astype(np.float64)
    x1 = a_hat @ x0
    x2 = a_hat @ x1
    out = {}
    kind = dataset_info(name).label_kind
    for tag, x in (("X", x0), ("AX", x1), ("A2X", x2)):
        if kind == "multilabel":
            pred = _ridge(x, g.y, g.train_mask, g.test_mask) > 0.5
            out[f"ridge_micro_f1_{tag}"] = round(_micro_f1(pred, g.y[g.test_mask].astype(bool)), 4)
        elif kind == "regression":
            out[f"ridge_r2_{tag}"] = round(_r2(_ridge(x, g.y, g.train_mask, g.test_mask), g.y[g.test_mask]), 4)
        else:
            out[f"nc_{tag}"] = round(_nearest_centroid(x, g.y, g.train_mask, g.test_mask, g.num_classes), 4)
            out[f"lr_{tag}"] = round(_logistic(x, g.y, g.train_mask, g.test_mask, g.num_classes), 4)
    out["metis_vs_random_volume_p4"] = _volume_ratio(g, 4, seed)
    return out


def _volume_ratio(g: object, num_parts: int, seed: int) -> float | None:
    """METIS's communication volume over a random partition's (None without pymetis)."""
    from partitioners.methods import assign_parts
    from partitioners.quality import partition_quality

    try:
        vol = {m: partition_quality(g, assign_parts(g, num_parts, m, seed=seed), num_parts)["comm_volume"]
               for m in ("metis", "random")}
    except ValueError:  # pymetis missing
        return None
    return round(vol["metis"] / vol["random"], 4)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-baselines", action="store_true")
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        sys.stdout.write(json.dumps(_generate_child(args.names[0], args.seed)) + "\n")
        return 0
    names = args.names or [d.name for d in list_datasets() if not d.name.endswith("-large")]
    results = []
    for name in names:
        proc = subprocess.run([sys.executable, __file__, name, "--seed", str(args.seed), "--child"],
                              check=True, capture_output=True, text=True)
        row = json.loads(proc.stdout)
        if not args.no_baselines:
            row["baselines"] = _baselines(name, args.seed)
        results.append(row)
        sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.flush()
    if args.json is not None:
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps(results, indent=2) + "\n")
        tmp.replace(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
