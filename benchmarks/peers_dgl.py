"""The DGL side of ``benchmarks/peers.py``, run with the DGL venv's python (``dgl_env.sh``).

``python peers_dgl.py partition GRAPH.npz P OUT``: the benchmark's graph as PipeGCN and BNS-GCN
load their datasets (their ``load_data``: self-loops removed, then one added to every node), cut
by ``dgl.distributed.partition_graph`` as their ``graph_partition`` cuts it (METIS, objective
``vol``, nodes balanced, the degrees they read stored as node data: PipeGCN's ``in_degree``,
BNS-GCN's ``in_deg`` and ``out_deg``), into ``OUT/peers/peers.json`` + parts, with BNS-GCN's
``meta.json`` beside it and ``OUT/assignment.npy`` (the part of every original node id, from
DGL's node map and its id mapping) from which gnn-dist's folder is written (``peers_partition.py``).

Also imported by the patched peers' ``main.py``/``helper/utils.py``: :func:`peer_graph`, their
dataset ``peers`` (``$PEERS_GRAPH``), and :func:`cpu_mode` (``$PEERS_DEVICE``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

GRAPH_NAME = "peers"


def cpu_mode() -> bool:
    return os.environ.get("PEERS_DEVICE", "cpu") == "cpu"


def peer_graph(path: str | None = None):
    """The benchmark's graph as a ``DGLGraph`` with ``feat``, ``label`` and the three masks."""
    import dgl
    import torch

    data = np.load(path or os.environ["PEERS_GRAPH"])
    g = dgl.graph((torch.from_numpy(data["src"]), torch.from_numpy(data["dst"])), num_nodes=int(data["num_nodes"]))
    g.ndata["feat"] = torch.from_numpy(data["features"])
    g.ndata["label"] = torch.from_numpy(data["labels"])
    for mask in ("train_mask", "val_mask", "test_mask"):
        g.ndata[mask] = torch.from_numpy(data[mask])
    return g


def loaded_graph(path: str):
    """``peer_graph`` after their ``load_data``'s last steps (self-loops removed, one per node added)."""
    import dgl

    g = peer_graph(path)
    return dgl.add_self_loop(dgl.remove_self_loop(g))


def partition(graph_npz: str, num_parts: int, out: str) -> None:
    import dgl
    from dgl.distributed import partition_graph

    g = loaded_graph(graph_npz)
    g.ndata["in_degree"] = g.in_degrees()
    g.ndata["in_deg"] = g.in_degrees()
    g.ndata["out_deg"] = g.out_degrees()
    part_dir = Path(out) / GRAPH_NAME
    orig_nids, _ = partition_graph(g, GRAPH_NAME, num_parts, str(part_dir), part_method="metis",
                                   balance_edges=False, objtype="vol", return_mapping=True)
    meta = {"n_feat": int(g.ndata["feat"].shape[1]), "n_class": int(g.ndata["label"].max()) + 1,
            "n_train": int(g.ndata["train_mask"].sum())}
    (part_dir / "meta.json").write_text(json.dumps(meta))
    config = json.loads((part_dir / f"{GRAPH_NAME}.json").read_text())
    np.save(Path(out) / "orig_nids.npy", orig_nids.numpy())
    from peers_partition import assignment_from_dgl   # numpy only

    np.save(Path(out) / "assignment.npy", assignment_from_dgl(config, orig_nids.numpy()))
    print(json.dumps({"partition": str(part_dir), "dgl": dgl.__version__, **meta}))


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "partition":
        sys.exit("usage: peers_dgl.py partition GRAPH.npz P OUT")
    partition(sys.argv[2], int(sys.argv[3]), sys.argv[4])
