"""gnn-dist beside PipeGCN and BNS-GCN, on one graph, one partition, one model (issue 35).

Runs the user's own checkouts of PipeGCN and BNS-GCN (``--pipegcn DIR --bnsgcn DIR``; nothing of
theirs is in this project): each is copied to a temporary folder and patched there to run on
this machine (``peers_patches.py``: small text substitutions, each listed with its reason in
docs/performance.md), in the DGL venv of ``benchmarks/dgl_env.sh`` (``--dgl-venv``, default
``$DGL_VENV`` or ``benchmarks/.dgl-venv``). gnn-dist runs from this checkout.

1. **One graph**: a degree-corrected SBM of ``--nodes`` nodes (default 20,000; average degree
   20, 64 features, 8 classes, 10% train), with a self-loop on every node as the peers load graphs.
2. **One partition**: DGL's ``partition_graph`` cuts it as the peers' own scripts do (METIS,
   objective ``vol``); gnn-dist's folder is written from that cut (the part of every node read
   from DGL's node map), checked node for node: both frameworks exchange the same halo rows.
3. **Pairs**, the same recipe on both sides (``peers_runs.py``): gnn-dist ``sync`` vs PipeGCN
   vanilla; ``stale`` (± smoothing 0.95) vs PipeGCN pipelined (± its feature/gradient
   correction, momentum 0.95); boundary sampling vs BNS-GCN at rate 0.1 and 1.0. Each rank has
   ``--threads`` torch threads (1 by default). The runs are interleaved: every round runs every
   pair, gnn-dist first in even rounds, the peer first in odd ones.
4. **Per run**, from one probe inside every rank (``peers_probe.py``, after each optimizer step):
   wall seconds per epoch (busiest rank), CPU seconds and run-queue wait per epoch (``/proc``
   schedstat of all the rank's threads; mean of the ranks), each rank's peak RSS, halo bytes per
   epoch (rank 0: gnn-dist's metrics, the peers' bytes sent by ``isend``), and, with the
   accuracy recipe, the test accuracy after the last epoch.

Recipes: ``speed`` (GraphSAGE 4 layers 256 wide, ``--epochs`` epochs of which ``--warmup`` are
not measured, no evaluation; ``--epochs 0`` leaves it out) and ``accuracy`` (2 layers 64 wide,
GraphSAGE or, with ``--accuracy-model gcn``, GCN against BNS-GCN, ``--accuracy-epochs``, one
evaluation at the end).

Usage::

    bash benchmarks/dgl_env.sh                      # once: the DGL venv (DGL_VENV=... to place it),
    $DGL_VENV/bin/pip install ogb scikit-learn      # and what the peers' code imports besides DGL
    git --git-dir=PIPEGCN.git archive HEAD | tar -x -C /tmp/peers/pipegcn   # or a clone
    python benchmarks/peers.py --pipegcn /tmp/peers/pipegcn --bnsgcn /tmp/peers/bnsgcn \\
        --dgl-venv /tmp/dgl-venv --nodes 20000 --epochs 8 --warmup 3 --accuracy-pairs sync stale bns-0.1
                                                    # 16 runs: 33 min on 2 loaded cores (load 10-20)
    python benchmarks/peers.py --bnsgcn /tmp/peers/bnsgcn --dgl-venv /tmp/dgl-venv --epochs 0 \\
        --accuracy-epochs 30 --accuracy-model gcn --pairs bns-0.1 bns-1.0   # GCN's accuracy, BNS-GCN only
    python benchmarks/peers.py ... --device cuda    # the day a GPU is lent: no CPU patches, no shim

Results: ``benchmarks/results/peers_[hardware]_[date].{md,json}``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

import common  # noqa: E402
import peers_partition as pp  # noqa: E402
from peers_patches import PatchError, prepare_tree  # noqa: E402
from peers_runs import GNN_DIST, MODELS, PAIRS, Recipe, Setup, collect, epoch_figures, run_once  # noqa: E402

EXIT_USAGE = 2


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pipegcn", metavar="DIR", help="a PipeGCN checkout (its main.py at the root)")
    p.add_argument("--bnsgcn", metavar="DIR", help="a BNS-GCN checkout (its main.py at the root)")
    p.add_argument("--dgl-venv", metavar="DIR", default=os.environ.get("DGL_VENV", str(_HERE / ".dgl-venv")),
                   help="the venv of benchmarks/dgl_env.sh (default: $DGL_VENV or benchmarks/.dgl-venv)")
    p.add_argument("--pairs", nargs="+", choices=list(PAIRS), default=list(PAIRS))
    p.add_argument("--accuracy-pairs", nargs="+", choices=list(PAIRS), default=None,
                   help="the pairs of the accuracy recipe (default: --pairs)")
    p.add_argument("--nodes", type=int, default=20_000)
    p.add_argument("--parts", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank (default: 1)")
    p.add_argument("--epochs", type=int, default=20, help="speed recipe's epochs; 0: no speed recipe (default: 20)")
    p.add_argument("--warmup", type=int, default=5, help="speed recipe's unmeasured first epochs (default: 5)")
    p.add_argument("--accuracy-epochs", type=int, default=50, help="0: no accuracy recipe (default: 50)")
    p.add_argument("--accuracy-model", choices=list(MODELS), default="sage",
                   help="the accuracy recipe's model; gcn: BNS-GCN's pairs only (default: sage)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    p.add_argument("--work", metavar="DIR", help="scratch folder (default: a temporary one, removed)")
    p.add_argument("--render-from", metavar="WORK", help="no runs: the tables of the runs a --work folder holds "
                   "(a benchmark stopped early; the runs that finished)")
    p.add_argument("--out", help="result stem (default: benchmarks/results/peers_[hardware]_[date])")
    args = p.parse_args(argv)
    problem = _usage_problem(args)
    if problem:
        print(f"peers.py: {problem}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    return args


def _needed(args: argparse.Namespace) -> set[str]:
    return {PAIRS[name][1].framework for recipe in recipes(args) for name in _recipe_pairs(args, recipe)}


def _model_problem(args: argparse.Namespace) -> str | None:
    """A peer of the accuracy pairs without ``--accuracy-model``'s model (PipeGCN has no GCN)."""
    name, _, peers, _ = MODELS[args.accuracy_model]
    pairs = args.accuracy_pairs or args.pairs
    lacking = [p for p in pairs if PAIRS[p][1].framework not in peers]
    if not args.accuracy_epochs or not lacking:
        return None
    fitting = " ".join(p for p in PAIRS if PAIRS[p][1].framework in peers)
    return (f"--accuracy-model {args.accuracy_model}: {PAIRS[lacking[0]][1].framework} has no {name} (pairs "
            f"{', '.join(lacking)}); pass --accuracy-pairs {fitting}")


def _usage_problem(args: argparse.Namespace) -> str | None:
    problem = _model_problem(args)
    if problem:
        return problem
    for peer in sorted(_needed(args)):
        folder = getattr(args, peer)
        if folder is None:
            return f"--{peer} DIR is required for the pairs {args.pairs} (or leave those pairs out with --pairs)"
        if not (Path(folder) / "main.py").is_file():
            return f"--{peer} {folder}: no main.py there; pass the root of a {peer} checkout"
    python = Path(args.dgl_venv) / "bin" / "python"
    if not python.is_file():
        return (f"--dgl-venv {args.dgl_venv}: no bin/python; build it with "
                f"`DGL_VENV={args.dgl_venv} bash benchmarks/dgl_env.sh`")
    missing = subprocess.run([str(python), "-c", "import dgl, ogb, sklearn"], capture_output=True, text=True)
    if missing.returncode != 0:
        return (f"--dgl-venv {args.dgl_venv}: {missing.stderr.strip().splitlines()[-1]}; the peers import dgl, ogb "
                f"and sklearn: `{python.parent}/pip install ogb scikit-learn` (after benchmarks/dgl_env.sh)")
    if args.epochs and (args.warmup < 1 or args.epochs <= args.warmup):
        return f"--epochs {args.epochs} --warmup {args.warmup}: need 1 <= warmup < epochs (or --epochs 0)"
    if not args.epochs and not args.accuracy_epochs:
        return "--epochs 0 --accuracy-epochs 0: no recipe left to run"
    if args.parts < 2:
        return f"--parts {args.parts}: at least 2 (the peers are distributed-only)"
    return None


def prepare(args: argparse.Namespace, work: Path) -> Setup:
    """The graph, DGL's partition, gnn-dist's folder from it (checked), the patched peer trees."""
    graph = pp.make_graph(args.nodes)
    npz = pp.write_graph_npz(graph, work / "graph.npz")
    dgl_out = work / "dgl"
    venv_python = Path(args.dgl_venv) / "bin" / "python"
    done = subprocess.run([str(venv_python), str(_HERE / "peers_dgl.py"), "partition", str(npz), str(args.parts),
                           str(dgl_out)], env=dict(os.environ, PYTHONPATH=str(_HERE), DGLBACKEND="pytorch"),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"DGL partition failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    import json

    meta = json.loads(done.stdout.strip().splitlines()[-1])
    import numpy as np

    assignment = np.load(dgl_out / "assignment.npy")
    folder = pp.write_gnn_dist_folder(pp.with_self_loops(graph), assignment, work / "gnn-dist")
    problems = pp.parts_match(folder, assignment)
    if problems:
        raise RuntimeError("gnn-dist's folder differs from DGL's partition: " + "; ".join(problems))
    trees, patched = {}, {}
    for peer in sorted(_needed(args)):
        trees[peer] = work / peer
        patched[peer] = prepare_tree(Path(getattr(args, peer)), trees[peer], peer, args.device)
    if "pipegcn" in trees:
        (trees["pipegcn"] / "partitions").symlink_to(dgl_out)   # PipeGCN reads partitions/NAME/NAME.json
    setup = Setup(gnn_dist_data=folder, dgl_parts=dgl_out, graph_npz=npz,
                  meta={k: int(meta[k]) for k in ("n_feat", "n_class", "n_train")}, num_parts=args.parts,
                  threads=args.threads, device=args.device, venv_python=venv_python, trees=trees)
    args.patched = patched
    args.dgl_version = meta.get("dgl")
    return setup


def recipes(args: argparse.Namespace) -> list[Recipe]:
    out = [Recipe("speed", layers=4, hidden=256, epochs=args.epochs, evaluate=False)] if args.epochs else []
    if args.accuracy_epochs:
        out.append(Recipe("accuracy", layers=2, hidden=64, epochs=args.accuracy_epochs, evaluate=True,
                          model=args.accuracy_model))
    return out


def run_all(args: argparse.Namespace, setup: Setup, work: Path) -> list[dict[str, Any]]:
    """Every recipe, round and pair, interleaved; one record per run."""
    results, port = [], 29_400 + os.getpid() % 500
    for recipe in recipes(args):
        for r in range(args.rounds):
            for name in _recipe_pairs(args, recipe):
                modes = PAIRS[name] if r % 2 == 0 else PAIRS[name][::-1]
                for mode in modes:
                    port += 1
                    scratch = work / "runs" / f"{recipe.name}-{r}-{name}-{mode.framework}"
                    print(f"[peers] {recipe.name} round {r} {name}: {mode.framework} ...", file=sys.stderr, flush=True)
                    results.append(_measured(args, setup, recipe, mode, scratch, port) | {"round": r})
                    common.write_json_atomic(work / "runs.json", results)   # what a killed benchmark measured
    return results


def gather(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """The records of the finished runs a ``--work`` folder holds (``--render-from``)."""
    results = []
    for recipe in recipes(args):
        for r in range(args.rounds):
            for name in _recipe_pairs(args, recipe):
                for mode in PAIRS[name]:
                    scratch = work / "runs" / f"{recipe.name}-{r}-{name}-{mode.framework}"
                    if (scratch / "output.txt").is_file():
                        results.append(_measured(args, None, recipe, mode, scratch, 0) | {"round": r})
    return results


def _patch_lines(args: argparse.Namespace) -> dict[str, list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        return {peer: prepare_tree(Path(getattr(args, peer)), Path(tmp) / peer, peer, args.device)
                for peer in sorted(_needed(args))}


def _recipe_pairs(args: argparse.Namespace, recipe: Recipe) -> list[str]:
    return args.pairs if recipe.name == "speed" or not args.accuracy_pairs else args.accuracy_pairs


def _measured(args: argparse.Namespace, setup: Setup | None, recipe: Recipe, mode: Any, scratch: Path,
              port: int) -> dict[str, Any]:
    """One run's record (``setup`` None: collected from ``scratch``); a failed run is recorded (its
    error's last lines) and the others go on."""
    try:
        res = collect(scratch, recipe, mode, args.parts) if setup is None else \
            run_once(setup, recipe, mode, scratch, port, args.timeout)
        res["figures"] = epoch_figures(res, args.warmup if recipe.name == "speed" else 1)
    except (RuntimeError, ValueError) as e:
        print(f"[peers]   failed: {e}", file=sys.stderr, flush=True)
        return {"framework": mode.framework, "pair": mode.pair, "recipe": recipe.name, "error": str(e)[-2000:]}
    print(f"[peers]   {res['figures']['wall_s'] * 1e3:.0f} ms/epoch, CPU {res['figures']['cpu_s']:.2f} s/epoch, "
          f"accuracy {res['accuracy']}", file=sys.stderr, flush=True)
    return res


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r["figures"][key] for r in runs)


def _row(pair: str, framework: str, runs: list[dict[str, Any]], base: tuple[float, float] | None) -> list[str]:
    """One table row; ``base``: gnn-dist's (wall, CPU) of the pair, None on gnn-dist's own row."""
    wall, cpu = _median(runs, "wall_s"), _median(runs, "cpu_s")
    ranks = range(len(runs[0]["figures"]["peak_rss_bytes"]))
    rss = [max(r["figures"]["peak_rss_bytes"][i] for r in runs) for i in ranks]
    accs = [r["accuracy"] for r in runs if r["accuracy"] is not None]
    return [pair, framework, f"{wall * 1e3:.0f}", "—" if base is None else common.fmt_ratio(wall / base[0]),
            f"{cpu:.2f}", "—" if base is None else common.fmt_ratio(cpu / base[1]), f"{_median(runs, 'wait_s'):.2f}",
            ", ".join(common.fmt_bytes(x) for x in rss), common.fmt_bytes(_median(runs, "halo_bytes")),
            f"{statistics.median(accs):.3f}" if accs else "—", str(len(runs))]


def render(args: argparse.Namespace, env: dict[str, Any], results: list[dict[str, Any]], wall_s: float | None) -> str:
    headers = ["pair", "framework", "wall ms/epoch", "vs gnn-dist", "CPU s/epoch (rank mean)", "vs gnn-dist",
               "run-queue s/epoch", "peak RSS per rank", "halo/epoch (rank 0)", "test acc", "runs"]
    parts = [f"# gnn-dist beside PipeGCN and BNS-GCN (issue 35)\n\n{env['date']}, {env['cpu_model']}, "
             f"{env['cpu_count']} CPUs, load average before {env['load_average_1_5_15']} (a shared machine: other "
             f"users' tests ran meanwhile); device {args.device}; DGL {args.dgl_version}; SBM {args.nodes:,} nodes, "
             f"P = {args.parts}, {args.threads} thread(s) per rank, {args.rounds} round(s), whole run "
             f"{'?' if wall_s is None else f'{wall_s / 60:.1f}'} min.\n"]
    for recipe in recipes(args):
        rows = []
        for pair in _recipe_pairs(args, recipe):
            runs = {fw: [r for r in results if r["recipe"] == recipe.name and r["pair"] == pair and r["framework"] == fw
                         and "error" not in r] for fw in (GNN_DIST, PAIRS[pair][1].framework)}
            base = (_median(runs[GNN_DIST], "wall_s"), _median(runs[GNN_DIST], "cpu_s")) if runs[GNN_DIST] else None
            rows += [_row(pair, fw, rs, None if fw == GNN_DIST else base) if rs else
                     [pair, fw, "failed (see the JSON)"] + ["—"] * (len(headers) - 3) for fw, rs in runs.items()]
        what = (f"{MODELS[recipe.model][0]} {recipe.layers} layers, {recipe.hidden} wide, {recipe.epochs} epochs"
                + (f" ({args.warmup} not measured)" if recipe.name == "speed" else ", evaluated once at the end"))
        parts.append(f"## {recipe.name}: {what}\n\n" + common.markdown_table(headers, rows) + "\n")
    parts.append("## Commands\n\n" + "\n".join(f"- `{r['command']}` (in `{r['cwd']}`)" for r in results
                                                if r["round"] == 0 and "command" in r) + "\n")
    parts.append("## Patches applied to the peers' copies\n\n" + "\n".join(
        f"- {peer}: {line}" for peer, lines in args.patched.items() for line in lines) + "\n")
    return "\n".join(parts)


def _run(args: argparse.Namespace) -> list[dict[str, Any]] | None:
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="peers-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return run_all(args, prepare(args, work), work)
    except PatchError as e:
        print(f"peers.py: {e}", file=sys.stderr)
        return None
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env = common.environment(["torch", "numba"])
    t0 = time.monotonic()
    if args.render_from:
        args.patched, args.dgl_version = _patch_lines(args), subprocess.run(
            [str(Path(args.dgl_venv) / "bin" / "python"), "-c", "import dgl; print(dgl.__version__)"],
            capture_output=True, text=True).stdout.strip()
        results, wall_s = gather(args, Path(args.render_from)), None
    else:
        results = _run(args)
        wall_s = time.monotonic() - t0
    if results is None:
        return EXIT_USAGE
    md = render(args, env, results, wall_s)
    payload = {"args": {k: v for k, v in vars(args).items() if k != "patched"}, "patched": args.patched,
               "environment": env, "runs": results}
    paths = common.write_results(args.out or common.default_result_stem("peers"), payload, md)
    print(md)
    print("wrote " + ", ".join(map(str, paths)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
