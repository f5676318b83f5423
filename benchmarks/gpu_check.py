"""CUDA checks and GPU figures for a lent GPU machine (run by ``benchmarks/gpu_check.sh``).

1. Correctness on the device: every built-in layer and model gives the same forward and
   gradients on ``--device`` as on the CPU (1e-4 relative, float32; cuSPARSE sums in another order).
2. Timing on the device, same run: one-rank 2-layer GCN training step (hidden 128) on an SBM
   graph against PyG ``GCNConv`` on a sparse CSR ``adj_t``, and the SpMM alone (torch.sparse).

``--device cpu`` runs the same code on the CPU (how this script is tested without a GPU).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

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


def check_models(device: torch.device, graph) -> dict[str, float]:
    """Max relative difference of logits and gradients between ``device`` and the CPU."""
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
        for dev in (torch.device("cpu"), device):
            m = model.to(dev)
            m.zero_grad()
            logits = m(FullGraph(block.to(dev)), x.to(dev))
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--dataset", default="sbm-medium")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--out", default=None, help="JSON file for the figures")
    args = p.parse_args()
    device = torch.device(args.device)
    from partitioners.catalog import load_dataset

    report = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "torch": torch.__version__}
    report["max_rel_diff_vs_cpu"] = check_models(device, load_dataset("sbm-tiny"))
    bad = {k: v for k, v in report["max_rel_diff_vs_cpu"].items() if not v <= 1e-4}
    timing = time_gcn(device, load_dataset(args.dataset), args.reps)
    report.update(timing, dataset=args.dataset, ratio_vs_pyg=timing["gnn_dist_step_s"] / timing["pyg_sparse_step_s"])
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if bad:
        raise SystemExit(f"device results differ from the CPU's: {bad}")


if __name__ == "__main__":
    main()
