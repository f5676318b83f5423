"""Writers of the typed input layouts, for the tests: a HeteroGraph as an OGB heterogeneous folder
(ogbn-mag's raw/ and split/), as a typed npy-dir, and as knowledge-graph triples."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from partitioners.hetero import HeteroGraph


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(text)


def write_ogb_folder(root: Path, g: HeteroGraph) -> None:
    """``g`` in ogbn-mag's layout: raw/num-node-dict, relations/S___R___D, node-feat, node-label, split."""
    raw = root / "raw"
    _put(raw / "num-node-dict.csv.gz", ",".join(g.node_types) + "\n"
         + ",".join(str(n) for n in g.num_nodes_dict.values()) + "\n")
    for (s, r, d), (src, dst) in g.edges.items():
        _put(raw / "relations" / f"{s}___{r}___{d}" / "edge.csv.gz",
             "".join(f"{a},{b}\n" for a, b in zip(src.tolist(), dst.tolist())))
    for t, x in g.features.items():
        _put(raw / "node-feat" / t / "node-feat.csv.gz", "".join(",".join(f"{v:.9g}" for v in row) + "\n"
                                                                for row in x.tolist()))
    for t, y in g.labels.items():
        _put(raw / "node-label" / t / "node-label.csv.gz", "".join(f"{v}\n" for v in y.tolist()))
        for key, stem in (("train", "train"), ("val", "valid"), ("test", "test")):
            ids = np.flatnonzero(g.masks[t][key])
            _put(root / "split" / "random" / t / f"{stem}.csv.gz", "".join(f"{i}\n" for i in ids.tolist()))


def write_typed_npy_dir(root: Path, g: HeteroGraph) -> None:
    """``g`` as a typed npy-dir: nodes.json, TYPE/{features,labels,*_mask}.npy, SRC__REL__DST/{src,dst}.npy."""
    root.mkdir(parents=True, exist_ok=True)
    doc = {"num_nodes": g.num_nodes_dict, "target_type": g.target_type, "num_classes": g.num_classes or None}
    (root / "nodes.json").write_text(json.dumps({k: v for k, v in doc.items() if v is not None}))
    for t in g.node_types:
        arrays = {"features": g.features.get(t), "labels": g.labels.get(t),
                  **{f"{k}_mask": m for k, m in g.masks.get(t, {}).items()}}
        for key, a in arrays.items():
            if a is not None:
                (root / t).mkdir(exist_ok=True)
                np.save(root / t / f"{key}.npy", a)
    for (s, r, d), (src, dst) in g.edges.items():
        folder = root / f"{s}__{r}__{d}"
        folder.mkdir()
        np.save(folder / "src.npy", src)
        np.save(folder / "dst.npy", dst)


def write_triples(path: Path, triples: list[tuple[str, str, str]]) -> Path:
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples))
    return path
