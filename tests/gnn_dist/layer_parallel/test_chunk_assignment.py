"""``--chunk-by``: which chunk each row of a part is in. ``hash`` spreads a row's neighbours over all
chunks; ``graph`` (METIS on the part's rows) keeps most of them in the row's own chunk, so fewer of
the rows a chunk reads are historical; halo rows get their owner's chunk."""

from __future__ import annotations

import pytest
import torch

from lp_utils import write
from mp_utils import run_ranks
from partitioners.catalog import load_dataset

pytest.importorskip("pymetis")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """sbm-tiny (1000 nodes in 4 planted communities) as a 1-part and a 2-part folder."""
    graph = load_dataset("sbm-tiny", seed=0)
    return {parts: write(graph, parts, tmp_path_factory.mktemp("parts") / f"p{parts}") for parts in (1, 2)}


def _cross_chunk_edges(part, chunk: torch.Tensor) -> float:
    """The share of the part's edges whose two ends are in different chunks."""
    block = part.block
    dst = torch.repeat_interleave(torch.arange(block.num_dst), block.indptr.diff())
    return float((chunk[block.indices] != chunk[dst]).float().mean())


def test_graph_chunks_cut_fewer_edges_than_hashed_ones_and_are_balanced(folders):
    import gnn_dist
    from gnn_dist.layer_parallel.chunks import row_chunks

    part = gnn_dist.load_partition(folders[1])
    hashed = row_chunks(part, 4, seed=3, by="hash")
    graph = row_chunks(part, 4, seed=3, by="graph")
    assert graph.dtype == torch.int64 and graph.shape == hashed.shape == (part.num_inner,)
    assert torch.equal(graph, row_chunks(part, 4, seed=3, by="graph"))      # every stage computes the same
    sizes = torch.bincount(graph, minlength=4)
    assert int(sizes.min()) >= 0.9 * part.num_inner / 4, sizes
    assert _cross_chunk_edges(part, hashed) > 0.7                          # hash: ~3/4 of the edges cross
    assert _cross_chunk_edges(part, graph) < 0.5 * _cross_chunk_edges(part, hashed)
    assert torch.equal(row_chunks(part, 1, seed=3, by="graph"), torch.zeros(part.num_inner, dtype=torch.int64))


def _halo_chunks_agree(rank: int, world_size: int, path: str) -> bool:
    import gnn_dist
    from gnn_dist.distributed import all_gather_json
    from gnn_dist.layer_parallel.chunks import row_chunks

    part = gnn_dist.load_partition(path)
    chunk = row_chunks(part, 3, seed=0, by="graph")
    ids = part.original_ids.tolist()
    mine = dict(zip(ids[:part.num_inner], chunk[:part.num_inner].tolist()))
    owners = {}
    for got in all_gather_json(mine, what="gather of the chunk ids"):
        owners.update({int(k): v for k, v in got.items()})
    halo = chunk[part.num_inner:].tolist()
    return len(halo) > 0 and all(owners[u] == c for u, c in zip(ids[part.num_inner:], halo))


def test_a_halo_row_has_its_owners_graph_chunk(folders):
    assert run_ranks(_halo_chunks_agree, 2, folders[2], timeout=120) == [True, True]
