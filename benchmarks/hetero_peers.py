"""The peers of ``benchmarks/hetero.py``: PyG's ``RGCNConv`` in this process and DGL's
``RelGraphConv`` in its own environment and process (``benchmarks/dgl_env.sh``).

Both get the one-part partition's arrays (the same node order as gnn-dist, so the same memory
locality): the union graph as ``edge_index``/``edge_type``, the static features (zero rows for
the featureless types), learnable rows for the featureless types written into them, the labels
and the training rows. Their model is gnn-dist's: 2 layers, ReLU between, mean per relation,
a root (self-loop) weight, a bias, no dropout; one measured unit is one training step
(forward, cross-entropy on the training rows, backward, Adam, the loss read back).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from dgl_peer import dgl_peer_process

log = logging.getLogger("hetero")


@dataclass
class UnionArrays:
    """The one-part partition as plain arrays (union ids, the part's order)."""

    src: torch.Tensor
    dst: torch.Tensor
    edge_type: torch.Tensor
    """int64 ``[E]``, relation ids."""
    num_nodes: int
    num_relations: int
    x: torch.Tensor
    """float32 ``[N, F]``: the static features, zero rows for the featureless types."""
    learnable: list[torch.Tensor]
    """Per featureless type, its rows (int64)."""
    y: torch.Tensor
    train: torch.Tensor
    """int64: the training rows."""
    num_classes: int


def union_arrays(part: Any) -> UnionArrays:
    """The arrays of a loaded one-part typed partition (``gnn_dist.load_partition``)."""
    block, typed = part.block, part.typed
    assert block.num_src == block.num_dst, "a one-part partition has no halo rows"
    dst = torch.repeat_interleave(torch.arange(block.num_dst), block.indptr.diff())
    return UnionArrays(src=block.indices.long(), dst=dst, edge_type=block.types.edge_type.long(),
                       num_nodes=block.num_dst, num_relations=len(typed.relations),
                       x=typed.static_input(part.num_inner, torch.device("cpu")),
                       learnable=[typed.inner_rows[t].long() for t in typed.featureless],
                       y=part.y.long(), train=torch.nonzero(part.train_mask).flatten(), num_classes=part.num_classes)


class PygRGCN(nn.Module):
    """PyG's ``RGCNConv(aggr="mean")`` x 2 with learnable rows for the featureless types."""

    def __init__(self, data: UnionArrays, hidden: int, embedding_dim: int, *, is_sorted: bool = False) -> None:
        from torch_geometric.nn import RGCNConv

        super().__init__()
        width = max(data.x.shape[1], embedding_dim)
        self.rows = data.learnable
        self.emb = nn.ParameterList([nn.Parameter(torch.rand(r.numel(), embedding_dim) * 0.1 - 0.05)
                                     for r in data.learnable])
        self.width = width
        self.conv1 = RGCNConv(width, hidden, data.num_relations, aggr="mean", is_sorted=is_sorted)
        self.conv2 = RGCNConv(hidden, data.num_classes, data.num_relations, aggr="mean", is_sorted=is_sorted)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_type: torch.Tensor) -> torch.Tensor:
        if x.shape[1] < self.width:
            x = nn.functional.pad(x, (0, self.width - x.shape[1]))
        for rows, w in zip(self.rows, self.emb):
            x = x.index_copy(0, rows, nn.functional.pad(w, (0, self.width - w.shape[1])))
        h = torch.relu(self.conv1(x, edge_index, edge_type))
        return self.conv2(h, edge_index, edge_type)


def pyg_step(data: UnionArrays, hidden: int, embedding_dim: int, lr: float, *,
             is_sorted: bool = False) -> Callable[[], None]:
    """One PyG training step; with ``is_sorted`` the edges are given sorted
    by relation."""
    torch.manual_seed(0)
    model = PygRGCN(data, hidden, embedding_dim, is_sorted=is_sorted)
    src, dst, et = data.src, data.dst, data.edge_type
    if is_sorted:
        order = torch.argsort(et, stable=True)
        src, dst, et = src[order], dst[order], et[order]
    edge_index = torch.stack([src, dst])
    opt = torch.optim.Adam(model.parameters(), lr=lr)

    def run() -> None:   # None: common.interleave times the call
        opt.zero_grad(set_to_none=True)
        out = model(data.x, edge_index, et)
        loss = nn.functional.cross_entropy(out[data.train], data.y[data.train])
        loss.backward()
        opt.step()
        float(loss.detach())
    return run


DGL_SCRIPT = r'''
import json, sys, time
import numpy as np, torch, dgl
from dgl.nn import RelGraphConv
torch.set_num_threads(int(sys.argv[2]))
d = np.load(sys.argv[1])
n, R, hidden, emb_dim, C = (int(d[k]) for k in ("n", "R", "hidden", "emb_dim", "C"))
et = torch.from_numpy(d["etype"])
order = torch.argsort(et, stable=True)              # presorted: edges grouped by relation (DGL's segment_mm path)
src, dst, et = torch.from_numpy(d["src"])[order], torch.from_numpy(d["dst"])[order], et[order]
g = dgl.graph((src, dst), num_nodes=n); g.create_formats_()
cnt = torch.bincount(dst * R + et, minlength=n * R).float()
norm = (1.0 / cnt[dst * R + et]).unsqueeze(1)      # mean per relation: 1 / in-edges of that relation
x0 = torch.from_numpy(d["x"]); y = torch.from_numpy(d["y"]); train = torch.from_numpy(d["train"])
rows = [torch.from_numpy(d[f"rows{i}"]) for i in range(int(d["num_learnable"]))]
width = max(x0.shape[1], emb_dim)
torch.manual_seed(0)
class Net(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = torch.nn.ParameterList([torch.nn.Parameter(torch.rand(r.numel(), emb_dim) * 0.1 - 0.05) for r in rows])
        s.c1 = RelGraphConv(width, hidden, R, regularizer=None, self_loop=True)
        s.c2 = RelGraphConv(hidden, C, R, regularizer=None, self_loop=True)
    def forward(s):
        x = torch.nn.functional.pad(x0, (0, width - x0.shape[1])) if x0.shape[1] < width else x0
        for r, w in zip(rows, s.emb):
            x = x.index_copy(0, r, torch.nn.functional.pad(w, (0, width - w.shape[1])))
        h = torch.relu(s.c1(g, x, et, norm=norm, presorted=True))
        return s.c2(g, h, et, norm=norm, presorted=True)
model = Net(); opt = torch.optim.Adam(model.parameters(), lr=float(d["lr"]))
def step():
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model()[train], y[train]); loss.backward(); opt.step()
    return float(loss.detach())
print(json.dumps({"dgl": dgl.__version__, "torch": torch.__version__}), flush=True)
for line in sys.stdin:
    torch.set_num_threads(int(sys.argv[2]))
    t0 = time.perf_counter(); step(); print(time.perf_counter() - t0, flush=True)
'''


def _save_npz(path: Path, data: UnionArrays, hidden: int, embedding_dim: int, lr: float) -> None:
    rows = {f"rows{i}": r.numpy() for i, r in enumerate(data.learnable)}
    np.savez(path, src=data.src.numpy(), dst=data.dst.numpy(), etype=data.edge_type.numpy(), n=data.num_nodes,
             R=data.num_relations, hidden=hidden, emb_dim=embedding_dim, C=data.num_classes, lr=lr,
             x=data.x.numpy(), y=data.y.numpy(), train=data.train.numpy(), num_learnable=len(rows), **rows)


def dgl_peer(data: UnionArrays, hidden: int, embedding_dim: int, lr: float, threads: int,
             why: dict[str, str]) -> Any:
    """The DGL peer at ``threads`` threads (a context manager: a :class:`~dgl_peer.DglPeer`, or
    None with the reason in ``why["dgl"]``, logged)."""
    return dgl_peer_process(DGL_SCRIPT, lambda path: _save_npz(path, data, hidden, embedding_dim, lr), threads, why)
