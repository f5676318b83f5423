"""Hand-made halo plans for exchange tests: a random owner per node, random edges, and each
part's send and halo lists built the way the partition writer lays them out."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gnn_dist.distributed import HaloExchanger


def make_plan(num_parts: int, num_nodes: int, num_edges: int, seed: int, *,
              empty: tuple[int, ...] = (), no_halo: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """Per part: ``inner`` (global ids in local order), ``halo`` (global ids of halo rows),
    ``send_index``, ``send_offsets``, ``halo_offsets``. Parts in ``empty`` own no node; parts in
    ``no_halo`` read no row from another part."""
    rng = np.random.default_rng(seed)
    allowed = [p for p in range(num_parts) if p not in empty]
    owner = rng.choice(allowed, size=num_nodes)
    inner = [rng.permutation(np.flatnonzero(owner == p)) for p in range(num_parts)]
    local = np.empty(num_nodes, dtype=np.int64)
    for p in range(num_parts):
        local[inner[p]] = np.arange(inner[p].size)
    src = rng.integers(0, num_nodes, num_edges)
    dst = rng.integers(0, num_nodes, num_edges)
    keep = ~np.isin(owner[dst], list(no_halo)) | (owner[src] == owner[dst])
    src, dst = src[keep], dst[keep]
    halo = []
    for p in range(num_parts):
        h = np.unique(src[(owner[dst] == p) & (owner[src] != p)])
        halo.append(h[np.lexsort((h, owner[h]))])
    plans = []
    for p in range(num_parts):
        halo_counts = [int((owner[halo[p]] == q).sum()) for q in range(num_parts)]
        sends = [local[halo[q][owner[halo[q]] == p]] for q in range(num_parts)]
        plans.append({
            "inner": inner[p], "halo": halo[p],
            "send_index": np.concatenate(sends).astype(np.int64),
            "send_offsets": np.concatenate([[0], np.cumsum([s.size for s in sends])]).tolist(),
            "halo_offsets": np.concatenate([[0], np.cumsum(halo_counts)]).tolist(),
        })
    return plans


def exchanger_for(plan: dict[str, Any], **kw: Any) -> HaloExchanger:
    return HaloExchanger(torch.from_numpy(plan["send_index"]), plan["send_offsets"],
                         plan["halo_offsets"], int(plan["inner"].size), **kw)
