"""CUDA checks and GPU figures for a lent GPU machine (run by ``benchmarks/gpu_check.sh``).

1. Correctness on the device: every built-in layer and model gives the same forward and
   gradients on ``--device`` as on the CPU (1e-4 relative, float32; cuSPARSE sums in another
   order), with each CUDA kernel backend: ``torch`` (cuSPARSE) and ``triton`` (when it imports).
2. Timing on the device, same run: one-rank 2-layer GCN training step (hidden 128) on an SBM
   graph against PyG ``GCNConv`` on a sparse CSR ``adj_t``, and the SpMM alone (torch.sparse).
3. Kernel backends, same run, on the graph of ``benchmarks/kernels.py`` (``--nodes`` 100k nodes,
   ``--edges`` 4M uniform random edges, 128-wide float32): ``torch`` (cuSPARSE) against
   ``triton`` (fused Triton kernels), units interleaved A B A B, median of ``--reps``:
   unweighted SpMM, GCN's scaled SpMM, 4-head weighted SpMM (GAT's aggregation), its transposed
   backward, 4-head SDDMM, edge softmax forward + backward, and a GCN and a GAT training epoch
   (the shapes of ``benchmarks/kernels.py``). ``faster`` names the backend ``auto`` should take
   on CUDA for each unit; the report gives ``triton / torch`` per unit and, for the SpMM/SDDMM
   units, the bytes they must move at least (gathered rows + output) per second of each backend,
   to set against the card's bandwidth (about 4.3 TB/s measured on the H200 for a copy).

``--device cpu`` runs the same code on the CPU: ``tests/benchmarks/test_gpu_check.py`` runs it
so, with the Triton rows on the CPU fallback (with ``TRITON_INTERPRET=1`` and a tiny
``--nodes``/``--edges`` they run Triton's interpreter instead).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(fn, device: torch.device, reps: int) -> float:
    fn()
    _sync(device)
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def check_models(device: torch.device, graph, backend: str = "torch") -> dict[str, float]:
    """Max relative difference of logits and gradients between ``device`` (kernel ``backend``)
    and the CPU with the torch kernels (on ``--device cpu``: each CPU backend against torch)."""
    from gnn_dist.models import FullGraph, build_model
    from gnn_dist.nn import Block

    block = Block.from_graph(torch.from_numpy(graph.indptr), torch.from_numpy(graph.indices).long())
    x = torch.from_numpy(graph.x)
    out = {}
    for name in ("gcn", "sage", "gat", "gin"):
        torch.manual_seed(0)
        model = build_model(name, in_dim=x.shape[1], hidden_dim=16, out_dim=graph.num_classes, num_layers=2,
                            dropout=0.0, **({"heads": 2} if name == "gat" else {}))
        results = []
        for dev, kernels in ((torch.device("cpu"), "torch"), (device, backend)):   # reference: torch on CPU
            m = model.to(dev)
            m.zero_grad()
            logits = m(FullGraph(block.to(dev).with_kernels(kernels)), x.to(dev))
            logits.square().sum().backward()
            grads = torch.cat([p.grad.reshape(-1) for p in m.parameters()]).cpu()
            results.append((logits.detach().cpu(), grads))
        (l0, g0), (l1, g1) = results
        out[name] = max(float((l1 - l0).abs().max() / l0.abs().max()), float((g1 - g0).abs().max() / g0.abs().max()))
    return out


def time_gcn(device: torch.device, graph, reps: int) -> dict[str, float]:
    """Seconds per training step: gnn-dist GCN vs PyG GCNConv on a sparse CSR adj_t."""
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv as PyGGCNConv

    from gnn_dist.models import GCN, FullGraph
    from gnn_dist.nn import Block, spmm

    block = Block.from_graph(torch.from_numpy(graph.indptr), torch.from_numpy(graph.indices).long()).to(device)
    x = torch.from_numpy(graph.x).to(device)
    y = torch.from_numpy(graph.y).to(device)
    mask = torch.from_numpy(graph.train_mask).to(device)
    part = FullGraph(block)
    ours = GCN(x.shape[1], 128, graph.num_classes, num_layers=2, dropout=0.5).to(device)
    opt = torch.optim.Adam(ours.parameters(), lr=0.01)

    def step_ours() -> None:
        opt.zero_grad()
        F.cross_entropy(ours(part, x)[mask], y[mask]).backward()
        opt.step()

    adj_t = torch.sparse_csr_tensor(block.indptr, block.indices, torch.ones(block.num_edges, device=device),
                                    (block.num_dst, block.num_src))
    convs = torch.nn.ModuleList([PyGGCNConv(x.shape[1], 128, cached=True),
                                 PyGGCNConv(128, graph.num_classes, cached=True)]).to(device)
    opt2 = torch.optim.Adam(convs.parameters(), lr=0.01)

    def step_pyg() -> None:
        opt2.zero_grad()
        h = F.dropout(F.relu(convs[0](x, adj_t)), 0.5, training=True)
        F.cross_entropy(convs[1](h, adj_t)[mask], y[mask]).backward()
        opt2.step()

    h = torch.randn(block.num_src, 128, device=device)
    return {"gnn_dist_step_s": _time(step_ours, device, reps), "pyg_sparse_step_s": _time(step_pyg, device, reps),
            "spmm_128_s": _time(lambda: spmm(block, h), device, reps)}


def compare_backends(device: torch.device, backends: list[str], num_nodes: int, num_edges: int, width: int,
                     reps: int) -> dict[str, dict[str, float]]:
    """Seconds per unit (median of ``reps``, units interleaved across backends) for each kernel backend."""
    from kernels import csr_block, random_graph

    from gnn_dist.models import GAT, GCN, FullGraph
    from gnn_dist.nn import prepare
    from gnn_dist.nn.sparse import _csr_t, edge_softmax, sddmm, spmm, spmm_scaled

    heads = 4
    base = csr_block(num_nodes, *random_graph(num_nodes, num_edges, seed=0)).to(device)
    blocks = {name: prepare(base.with_kernels(name)) for name in backends}   # each backend's own block
    g = torch.Generator().manual_seed(0)
    x = torch.randn(num_nodes, width, generator=g).to(device)
    y = torch.randint(0, 16, (num_nodes,), generator=g).to(device)
    values = torch.rand(num_edges, heads, generator=g).to(device)
    score = torch.randn(num_edges, heads, generator=g).to(device).requires_grad_()
    scale = (base.in_count.clamp(min=1).float() ** -0.5).to(device)
    up = torch.randn(num_edges, heads, generator=g).to(device)

    def epoch(model: torch.nn.Module, b: Any) -> Callable[[], None]:
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        part = FullGraph(b)

        def run() -> None:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(part, x), y).backward()
            opt.step()
        return run

    units: dict[str, Callable[[Any], Callable[[], Any]]] = {
        "spmm": lambda b: lambda: spmm(b, x),
        "spmm_gcn_scaled": lambda b: lambda: spmm_scaled(b, x, scale, scale),
        "spmm_heads": lambda b: lambda: spmm(b, x, values),
        "spmm_heads_t": lambda b: lambda: b.backend_for(x).spmm(_csr_t(b), values, x),
        "sddmm_heads": lambda b: lambda: sddmm(b, x, x, heads=heads),
        "edge_softmax_fwd_bwd": lambda b: lambda: torch.autograd.grad(edge_softmax(b, score)[0], score, up),
    }
    runners: dict[str, dict[str, Callable[[], Any]]] = {unit: {} for unit in [*units, "gcn_epoch", "gat_epoch"]}
    for name in backends:
        for unit, make in units.items():
            runners[unit][name] = make(blocks[name])
        torch.manual_seed(0)
        runners["gcn_epoch"][name] = epoch(GCN(width, 128, 16, num_layers=2, dropout=0.0).to(device), blocks[name])
        torch.manual_seed(0)
        runners["gat_epoch"][name] = epoch(GAT(width, 128, 16, num_layers=2, dropout=0.0, heads=heads).to(device),
                                           blocks[name])

    def timed(name: str, fn: Callable[[], Any]) -> float:
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        return time.perf_counter() - t0

    samples: dict[str, dict[str, list[float]]] = {u: {b: [] for b in backends} for u in runners}
    for unit, by_backend in runners.items():
        for name, fn in by_backend.items():
            timed(name, fn)   # warm-up: Triton compiles, cuSPARSE plans
        for _ in range(reps):
            for name, fn in by_backend.items():
                samples[unit][name].append(timed(name, fn))
    # bytes a unit must move at least: its gathered rows (E x F, float32) and its output once
    gathered = {"spmm": num_edges * width * 4 + num_nodes * width * 4,
                "spmm_gcn_scaled": num_edges * width * 4 + num_nodes * width * 4,
                "spmm_heads": num_edges * (width + heads) * 4 + num_nodes * width * 4,
                "sddmm_heads": num_edges * width * 4 + num_edges * heads * 4}
    result = {}
    for unit, by_backend in samples.items():
        row: dict[str, Any] = {name: statistics.median(times) for name, times in by_backend.items()}
        row["faster"] = min(backends, key=lambda b: row[b])
        if "triton" in row and "torch" in row:
            row["triton_over_torch"] = row["triton"] / row["torch"]
        if unit in gathered:
            row["min_bytes"] = gathered[unit]
            row.update({f"{b}_GBps": gathered[unit] / row[b] / 1e9 for b in backends})
        result[unit] = row
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--dataset", default="sbm-medium")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--nodes", type=int, default=100_000, help="kernel comparison graph: nodes")
    p.add_argument("--edges", type=int, default=4_000_000, help="kernel comparison graph: edges")
    p.add_argument("--skip-pyg", action="store_true", help="leave out the GCN step against PyG")
    p.add_argument("--out", default=None, help="JSON file for the figures")
    args = p.parse_args()
    device = torch.device(args.device)
    from partitioners.catalog import load_dataset

    from gnn_dist.kernels import triton_available

    backends = ["torch"] + (["triton"] if triton_available() else [])
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                              "torch": torch.__version__, "backends": backends}
    if "triton" in backends:
        import triton
        report["triton"] = triton.__version__
    tiny = load_dataset("sbm-tiny")
    report["max_rel_diff_vs_cpu"] = {b: check_models(device, tiny, b) for b in backends}
    bad = {f"{b}/{m}": v for b, diffs in report["max_rel_diff_vs_cpu"].items() for m, v in diffs.items()
           if not v <= 1e-4}
    if not args.skip_pyg:
        timing = time_gcn(device, load_dataset(args.dataset), args.reps)
        report.update(timing, dataset=args.dataset,
                      ratio_vs_pyg=timing["gnn_dist_step_s"] / timing["pyg_sparse_step_s"])
    report["kernel_graph"] = {"nodes": args.nodes, "edges": args.edges, "width": 128}
    report["kernels"] = compare_backends(device, backends, args.nodes, args.edges, 128, args.reps)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if bad:
        raise SystemExit(f"device results differ from the CPU's: {bad}")


if __name__ == "__main__":
    main()
