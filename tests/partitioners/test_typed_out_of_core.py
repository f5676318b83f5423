"""The typed out-of-core path (issue 34): ``gnn-dist partition --input-format typed-npy-dir`` builds
the union graph in scratch memory maps (:mod:`partitioners.hetero.outofcore`). Its folder must
equal the in-memory path's (``read_hetero`` + ``HeteroGraph.to_union``) for the same method and
seed, file for file; it must not hold the graph's edges or features whole, nor leave scratch
files behind."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from partitioners import partition_graph
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE, main
from partitioners.hetero import HeteroGraph
from partitioners.hetero import outofcore as hetero_outofcore
from partitioners.hetero.npy_dir import open_typed_npy_dir
from partitioners.hetero.outofcore import disk_sizes, read_typed_npy_dir_on_disk
from partitioners.hetero.readers import read_hetero
from partitioners.format import reader
from partitioners.format.reader import load_part
from partitioners.io import partition_input
from outofcore_checks import folder_bytes, meta_without_timings, scratch_left, shrink_chunks
from typed_inputs import write_typed_npy_dir

pytestmark = pytest.mark.usefixtures("clean_registry")


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunk boundaries inside relations, rows and parts."""
    shrink_chunks(monkeypatch)


def _graph(seed: int = 0, scale: int = 1, width: int = 3) -> HeteroGraph:
    """Three types, repeated edges across and within relations, float64 features on one type
    (converted on the way) and float32 on another, a train mask on the target type."""
    rng = np.random.default_rng(seed)
    p, a, f = 40 * scale, 25 * scale, 6
    return HeteroGraph(
        {"paper": p, "author": a, "field": f},
        {("author", "writes", "paper"): (rng.integers(0, a, 90 * scale), rng.integers(0, p, 90 * scale)),
         ("paper", "cites", "paper"): (rng.integers(0, p, 120 * scale), rng.integers(0, p, 120 * scale)),
         ("paper", "has_topic", "field"): (np.arange(p), rng.integers(0, f, p))},
        features={"paper": rng.standard_normal((p, width)),
                  "author": rng.standard_normal((a, 2)).astype(np.float32)},
        labels={"paper": rng.integers(0, 3, p).astype(np.int32)},
        masks={"paper": {"train": np.arange(p) < p // 2, "val": np.arange(p) >= p - 5}})


def _meta(out: Path) -> dict:
    meta = meta_without_timings(out)
    return {k: meta[k] for k in ("num_nodes", "num_edges", "parts", "hetero", "quality", "method_params",
                                 "minor_version", "name")}


@pytest.mark.parametrize("method, reverse", [("ldg", False), ("fennel", True), ("random", False), ("metis", True)])
def test_the_out_of_core_typed_folder_equals_the_in_memory_one(tmp_path, small_chunks, method, reverse):
    write_typed_npy_dir(tmp_path / "typed", _graph(1))
    flags = ["--add-reverse"] if reverse else []
    assert main(["-q", "partition", "--input", str(tmp_path / "typed"), "--parts", "3", "--method", method,
                 "--seed", "5", "--out", str(tmp_path / "disk"), "--no-progress", *flags]) == EXIT_OK
    memory = read_hetero(tmp_path / "typed", "typed-npy-dir", add_reverse=reverse)
    partition_graph(memory, 3, method, tmp_path / "memory", seed=5)
    disk, ref = folder_bytes(tmp_path / "disk"), folder_bytes(tmp_path / "memory")
    assert disk == ref and any(k.endswith("edge_type.npy") for k in disk) and len(disk) > 30
    assert _meta(tmp_path / "disk") == _meta(tmp_path / "memory")
    assert _meta(tmp_path / "disk")["minor_version"] == 3
    assert scratch_left(tmp_path) == []
    assert main(["-q", "inspect", "--verify", str(tmp_path / "disk")]) == EXIT_OK


def test_the_union_arrays_are_memory_maps_equal_to_to_union(tmp_path, small_chunks):
    g = _graph(2)
    write_typed_npy_dir(tmp_path / "typed", g)
    want = read_hetero(tmp_path / "typed", "typed-npy-dir", add_reverse=True, target_type="paper").to_union()
    disk = read_typed_npy_dir_on_disk(tmp_path / "typed", add_reverse=True, target_type="paper",
                                      scratch_dir=tmp_path)
    got = disk.to_union()
    for a, b in ((got.node_type, want.node_type), (got.edge_type, want.edge_type),
                 (got.in_degree_rel, want.in_degree_rel), (got.graph.indptr, want.graph.indptr),
                 (got.graph.indices, want.graph.indices), (got.graph.train_mask, want.graph.train_mask)):
        assert a.dtype == b.dtype and np.array_equal(a, b)
        assert isinstance(a, np.memmap) or isinstance(a.base, np.memmap)
    assert disk.features["paper"].dtype == np.float32 and disk.labels["paper"].dtype == np.int64
    assert disk.num_classes == 3 and len(disk.relations) == 6
    del disk, got
    assert scratch_left(tmp_path) == []


def _peak(run: Any) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_typed_read_never_holds_the_edges_or_the_features(tmp_path, monkeypatch):
    """tracemalloc sees numpy's allocations: the out-of-core read holds no [E] or [N, F] array
    (its peak is below one int64 [E] array and an eighth of the features), nor does the read of
    its typed folder back for a re-cut (below one int64 [E] array, its parts' checks aside); the whole run (read, fennel, typed rebalance, quality,
    write) stays below the in-memory run's."""
    shrink_chunks(monkeypatch, {"segment": 1 << 12, "edges": 1 << 12, "bytes": 1 << 16, "relabel": 1 << 12,
                                "node_data": 1 << 16, "check": 1 << 16, "quality": 1 << 12})
    write_typed_npy_dir(tmp_path / "typed", _graph(3, scale=400, width=64))  # 100k edges, 16k x 64 float64
    num_edges, features = 250 * 400, 16_000 * 64 * 4
    read_typed_npy_dir_on_disk(tmp_path / "typed", scratch_dir=tmp_path)  # numba's first calls, unmeasured
    read = _peak(lambda: read_typed_npy_dir_on_disk(tmp_path / "typed", scratch_dir=tmp_path))
    assert read < min(8 * num_edges, features / 8), (read, num_edges, features)

    def partition(out: str, reader: Any) -> None:
        partition_graph(reader(), 4, "fennel", tmp_path / out)

    disk = _peak(lambda: partition("disk", lambda: read_typed_npy_dir_on_disk(tmp_path / "typed",
                                                                              scratch_dir=tmp_path)))
    memory = _peak(lambda: partition("memory", lambda: read_hetero(tmp_path / "typed", "typed-npy-dir")))
    assert disk < memory, (disk, memory)
    assert folder_bytes(tmp_path / "disk") == folder_bytes(tmp_path / "memory")
    monkeypatch.setattr(partition_input, "_EDGE_CHUNK", 1 << 10)
    monkeypatch.setattr(partition_input, "_ROW_BYTES", 1 << 16)
    # a re-cut's read (issue 37), the parts' checks aside (they hold one part's arrays at a time)
    monkeypatch.setattr(reader, "load_part", lambda *a, **k: load_part(*a, **{**k, "verify": False}))
    partition_input.read_partition_input(tmp_path / "disk", scratch_dir=tmp_path)   # its imports, unmeasured
    recut = _peak(lambda: partition_input.read_partition_input(tmp_path / "disk", scratch_dir=tmp_path))
    assert recut < 8 * num_edges, (recut, num_edges)
    assert scratch_left(tmp_path) == []


def test_bad_typed_inputs_out_of_core_are_one_line_and_exit_2(tmp_path, capsys):
    g = _graph(4)
    write_typed_npy_dir(tmp_path / "typed", g)
    np.save(tmp_path / "typed" / "paper" / "labels.npy", -np.ones(40, np.int64))
    assert main(["-q", "partition", "--input", str(tmp_path / "typed"), "--parts", "2", "--method", "ldg",
                 "--out", str(tmp_path / "o"), "--no-progress"]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "labels.npy" in err and "negative" in err, err
    assert main(["-q", "partition", "--input", str(tmp_path / "typed"), "--parts", "2",
                 "--scratch-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")]) == EXIT_USAGE
    assert "--scratch-dir" in capsys.readouterr().err
    assert scratch_left(tmp_path) == []


def test_max_memory_refuses_a_typed_npy_dir_before_the_build(tmp_path, capsys, monkeypatch):
    """Sized from the headers (the union's nodes and edges, reverses counted) before any scratch file."""
    write_typed_npy_dir(tmp_path / "typed", _graph(5))
    built = []
    monkeypatch.setattr(hetero_outofcore, "build_csr_on_disk", lambda *a, **k: built.append(1))
    code = main(["partition", "--input", str(tmp_path / "typed"), "--parts", "2", "--method", "ldg", "--add-reverse",
                 "--max-memory", "1MiB", "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and built == []
    assert "with ldg needs ~" in err and "graph 0 B" in err, err
    assert scratch_left(tmp_path) == []
    size = disk_sizes(open_typed_npy_dir(tmp_path / "typed"), add_reverse=True)
    assert (size.num_nodes, size.num_edges, size.feature_bytes, size.on_disk) == (71, 2 * 250, 12, True)


def test_the_estimate_counts_the_typed_balance(tmp_path):
    """The typed rebalance's in-adjacency and [C, N] weights are a stage of the estimate, for
    the out-of-core sizes and the in-memory graph alike."""
    from partitioners.memory import estimate_partition_memory
    from partitioners.methods.refine import refine_memory

    write_typed_npy_dir(tmp_path / "typed", _graph(6))
    size = disk_sizes(open_typed_npy_dir(tmp_path / "typed"))
    for graph in (size, read_hetero(tmp_path / "typed", "typed-npy-dir")):
        stages = estimate_partition_memory(graph, "ldg", 3).parts
        want = refine_memory(size, 3) + 8 * 4 * 71
        assert stages["typed balance"] == want, (type(graph), stages)
    assert "typed balance" not in estimate_partition_memory(size, "ldg", 1).parts
