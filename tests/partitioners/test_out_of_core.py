"""The out-of-core path (issue 14): the on-disk CSR build, the npy-dir reader, the streaming
writer. Each is checked against the in-memory path it must equal, byte for byte, and for what it
must not do: hold an ``[E]`` or ``[N, F]`` array in memory, or leave scratch files behind."""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from partitioners import Graph, partition_graph
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE, main
from partitioners.errors import GraphError
from partitioners.format import npyio, relabel as relabel_mod, writer as writer_mod
from partitioners.graph_csr import build_csr
from partitioners.io import infer_format, read_graph
from partitioners.memory import BASELINE_BYTES, estimate_partition_memory
from partitioners.methods.metis import symmetric_adjacency, symmetric_adjacency_on_disk
from partitioners.outofcore import csr_build, npy_dir
from partitioners.outofcore.csr_build import build_csr_on_disk
from partitioners.outofcore.scratch import Scratch
from partitioners import graph_checks, quality
from outofcore_checks import folder_bytes, meta_without_timings, scratch_left, shrink_chunks

pytestmark = pytest.mark.usefixtures("clean_registry")


@pytest.fixture
def small_chunks(monkeypatch):
    """Every chunked loop of the path takes a few entries at a time, so chunk boundaries fall
    inside rows, parts and node-data blocks."""
    shrink_chunks(monkeypatch)


@pytest.mark.parametrize("seed", range(4))
def test_the_disk_build_equals_the_in_memory_build(tmp_path, seed, small_chunks):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    e = int(rng.integers(0, 160))
    src = rng.integers(0, n, e).astype(np.int32 if seed % 2 else np.int64)
    dst = rng.integers(0, n, e)
    w = rng.random(e).astype(np.float32) if seed % 3 else None
    for sym, loops, dup in itertools.product([False, True], repeat=3):
        ref = build_csr(src, dst, n, None if w is None else w.copy(), symmetrize=sym,
                        remove_self_loops=loops, remove_duplicates=dup)

        def chunks():
            return ((src[i:i + 5], dst[i:i + 5], None if w is None else w[i:i + 5])
                    for i in range(0, e, 5))

        with Scratch(tmp_path) as scratch:
            got = build_csr_on_disk(chunks, n, scratch, weighted=w is not None, symmetrize=sym,
                                    remove_self_loops=loops, remove_duplicates=dup)
            what = (sym, loops, dup)
            assert np.array_equal(ref[0], got.indptr), what
            assert got.indices.dtype == ref[1].dtype and np.array_equal(ref[1], got.indices), what
            if w is not None:
                assert np.array_equal(ref[2], got.edge_weight), what
            assert list(ref[3].items()) == list(got.report.items()), what
    assert scratch_left(tmp_path) == []


def test_the_disk_build_names_the_first_bad_id(tmp_path):
    src, dst = np.array([0, 1, 2, 3]), np.array([1, 2, -4, 0])
    with Scratch(tmp_path) as scratch:
        with pytest.raises(GraphError, match=r"^dst\[2\] = -4 is negative; node ids must be in \[0, 4\)$"):
            build_csr_on_disk(lambda: iter([(src[:2], dst[:2], None), (src[2:], dst[2:], None)]),
                              4, scratch, weighted=False)
        with pytest.raises(GraphError, match=r"^src\[3\] = 3 is out of range: num_nodes is 3"):
            build_csr_on_disk(lambda: iter([(src, np.abs(dst) % 3, None)]), 3, scratch, weighted=False)


@pytest.mark.parametrize("seed", range(3))
def test_metis_adjacency_on_disk_equals_scipys(tmp_path, seed, small_chunks):
    rng = np.random.default_rng(seed)
    g = Graph.from_edges(rng.integers(0, 30, 150), rng.integers(0, 30, 150), 30)
    xadj, adjncy = symmetric_adjacency(g, np.int64)
    g.scratch_dir = tmp_path
    for dtype in (np.int64, np.int32):
        got_xadj, got_adjncy = symmetric_adjacency_on_disk(g, dtype)
        assert got_xadj.dtype == dtype and got_adjncy.dtype == dtype
        assert np.array_equal(got_xadj, xadj) and np.array_equal(got_adjncy, adjncy)
    del got_xadj, got_adjncy
    assert scratch_left(tmp_path) == []


@pytest.mark.parametrize("background", [False, True])
@pytest.mark.parametrize("dtype, shape", [(np.int64, (10,)), (np.int32, (0,)), (np.float16, (7, 3)),
                                          (np.float32, (5, 0)), (np.bool_, (4,)), (np.uint8, (4, 3))])
def test_array_stream_writes_save_arrays_bytes(tmp_path, dtype, shape, background):
    """Also with the hashing and the writes on the background threads (``background_io``)."""
    a = (np.arange(int(np.prod(shape))) % 3).astype(dtype).reshape(shape)
    whole = npyio.save_array(tmp_path, "whole.npy", a)
    with npyio.background_io() if background else contextlib.nullcontext():
        with npyio.ArrayStream(tmp_path, "stream.npy", dtype, shape) as out:
            for lo in range(0, shape[0], 3):
                out.write(a[lo:lo + 3])
    assert (tmp_path / "whole.npy").read_bytes() == (tmp_path / "stream.npy").read_bytes()
    got = out.entry
    assert (got.sha256, got.size, got.dtype, got.shape) == (whole.sha256, whole.size, whole.dtype, whole.shape)


def test_array_stream_refuses_a_short_file(tmp_path):
    with pytest.raises(ValueError, match=r"short\.npy: 2 rows written, the header says 3"):
        with npyio.ArrayStream(tmp_path, "short.npy", np.int64, (3,)) as out:
            out.write(np.arange(2))


def _write_npy_dir(path: Path, seed: int = 0, n: int = 300, e: int = 2400, *, weighted: bool = False,
                   multilabel: bool = False, edge_attr: bool = False) -> dict[str, np.ndarray]:
    """An npy-dir in the dtypes a user would hand us (int32 ids, float64 features, int32 labels,
    0/1 uint8 masks) and the arrays it holds."""
    rng = np.random.default_rng(seed)
    path.mkdir()
    arrays = {"src": rng.integers(0, n, e).astype(np.int32), "dst": rng.integers(0, n, e),
              "features": rng.standard_normal((n, 6)),
              "labels": (rng.integers(0, 2, (n, 4)) if multilabel else rng.integers(0, 5, n)).astype(np.int32),
              "train_mask": (rng.random(n) < 0.5).astype(np.uint8), "val_mask": rng.random(n) < 0.3}
    if weighted:
        arrays["edge_weight"] = rng.random(e)
    if edge_attr:  # float64 [E, 3]: stored float32, gathered by each edge's input position
        arrays["edge_attr"] = rng.standard_normal((e, 3))
    for name, a in arrays.items():
        np.save(path / f"{name}.npy", a)
    (path / "graph.json").write_text(json.dumps({"name": "mine"}))
    return arrays


@pytest.mark.parametrize("weighted, multilabel, edge_attr", [(False, False, False), (True, True, False),
                                                             (False, False, True), (True, False, True)])
def test_read_npy_dir_equals_from_edges(tmp_path, small_chunks, weighted, multilabel, edge_attr):
    arrays = _write_npy_dir(tmp_path / "g", weighted=weighted, multilabel=multilabel, edge_attr=edge_attr)
    assert infer_format(tmp_path / "g") == "npy-dir"
    for sym, dup in ((False, False), (True, True)):
        got = read_graph(tmp_path / "g", symmetrize=sym, remove_duplicates=dup, scratch_dir=tmp_path)
        ref = Graph.from_edges(arrays["src"], arrays["dst"], features=arrays["features"],
                               labels=arrays["labels"], train_mask=arrays["train_mask"],
                               val_mask=arrays["val_mask"], edge_weight=arrays.get("edge_weight"),
                               edge_attr=arrays.get("edge_attr"), symmetrize=sym, remove_duplicates=dup)
        for field in ("indptr", "indices", "edge_weight", "edge_attr", "x", "y", "train_mask", "val_mask", "test_mask"):
            a, b = getattr(got, field), getattr(ref, field)
            assert (a is None) == (b is None), field
            if a is not None:
                assert a.dtype == b.dtype and np.array_equal(a, b), field
        assert (got.num_classes, got.preprocessing, got.name) == (ref.num_classes, ref.preprocessing, "mine")
        assert isinstance(got.indices.base, np.memmap) or isinstance(got.indices, np.memmap)
        assert got.scratch_dir is not None and got.scratch_dir.parent == tmp_path
    del got
    assert scratch_left(tmp_path) == []


@pytest.mark.parametrize("method, flags", [
    ("metis", []), ("fennel", ["--symmetrize", "--remove-duplicates"]), ("ldg", ["--remove-self-loops"]),
    ("random", ["--balance", "nodes,edges"]), ("metis", ["--refine", "--balance", "nodes,train"]),
    ("random", ["--symmetrize"]),   # with edge features (below): reverses get their forward edge's rows
])
def test_the_out_of_core_folder_is_byte_identical_to_the_in_memory_one(tmp_path, small_chunks,
                                                                         method, flags):
    arrays = _write_npy_dir(tmp_path / "g", weighted=method == "fennel",
                            edge_attr=method in ("fennel", "random"))
    np.savez(tmp_path / "g.npz", **arrays)
    outs = []
    for source in ("g", "g.npz"):
        out = tmp_path / f"out-{source}"
        assert main(["-q", "partition", "--input", str(tmp_path / source), "--parts", "3",
                     "--method", method, "--out", str(out), "--no-progress", *flags]) == EXIT_OK
        outs.append(out)
    disk, memory = outs
    assert folder_bytes(disk) == folder_bytes(memory) and len(folder_bytes(disk)) > 30
    a, b = meta_without_timings(disk), meta_without_timings(memory)
    assert a.pop("name") == "mine" and b.pop("name") == "g"
    assert a == b
    assert scratch_left(tmp_path) == []
    assert main(["-q", "inspect", "--verify", str(disk)]) == EXIT_OK


def test_the_writer_never_holds_a_parts_features_or_edges(tmp_path, monkeypatch):
    """tracemalloc sees numpy's allocations: with small chunks the peak of the whole out-of-core
    run (read, assign, quality, write) stays far below the features of one part, and below the
    in-memory run's peak by more than the graph."""
    n, f = 4000, 1024  # features: 16 MB in all, 4 MB a part
    monkeypatch.setattr(csr_build, "SEGMENT_ENTRIES", 1 << 12)
    monkeypatch.setattr(npy_dir, "CHUNK_BYTES", 1 << 16)
    monkeypatch.setattr(writer_mod, "NODE_DATA_STEP_BYTES", 1 << 16)
    monkeypatch.setattr(graph_checks, "CHECK_BYTES", 1 << 16)
    monkeypatch.setattr(relabel_mod, "CHUNK_EDGES", 1 << 12)
    monkeypatch.setattr(quality, "_CHUNK_EDGES", 1 << 12)
    rng = np.random.default_rng(0)
    g = tmp_path / "g"
    g.mkdir()
    np.save(g / "src.npy", rng.integers(0, n, 40_000))
    np.save(g / "dst.npy", rng.integers(0, n, 40_000))
    np.save(g / "features.npy", rng.standard_normal((n, f)).astype(np.float32))
    read_graph(g, scratch_dir=tmp_path)  # numba's first call outside the measurement
    gc.collect()
    tracemalloc.start()
    try:
        graph = read_graph(g, scratch_dir=tmp_path)
        partition_graph(graph, 4, "fennel", tmp_path / "out")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    part_features = n * f * 4 // 4
    assert peak < part_features / 4, peak
    estimate = estimate_partition_memory(graph, "fennel", 4)
    assert estimate.parts["graph"] == 0 and peak <= estimate.total - BASELINE_BYTES
    del graph
    assert scratch_left(tmp_path) == []


@pytest.mark.parametrize("setup, message", [
    (lambda d: np.save(d / "dst.npy", np.array([0, 1])), r"src\.npy has 3 edges but dst\.npy has 2"),
    (lambda d: np.save(d / "src.npy", np.array([0.5, 1, 2])), r"src\.npy: must be a 1-D integer array \[E\]"),
    (lambda d: np.save(d / "src.npy", np.array([0, 1, 9])), r"src\.npy\[2\] = 9 is out of range: num_nodes is 4"),
    (lambda d: np.save(d / "features.npy", np.zeros((3, 2))), r"features\.npy: has 3 rows but the graph has 4 nodes"),
    (lambda d: np.save(d / "features.npy", np.asfortranarray(np.zeros((4, 2)))), r"features\.npy: stored in Fortran order"),
    (lambda d: np.save(d / "labels.npy", np.array(["a"] * 4, dtype=object), allow_pickle=True),
     r"labels\.npy: not a readable \.npy array"),
    (lambda d: np.save(d / "train_mask.npy", np.array([0, 1, 2, 0])), r"train_mask\[2\] = 2; a mask holds only 0/1"),
    (lambda d: (d / "graph.json").write_text('{"num_nodes": "four"}'), r"graph\.json: 'num_nodes' must be a non-negative integer"),
])
def test_bad_npy_dirs_get_one_line_and_exit_2(tmp_path, capsys, setup, message):
    d = tmp_path / "g"
    d.mkdir()
    np.save(d / "src.npy", np.array([0, 1, 2]))
    np.save(d / "dst.npy", np.array([1, 2, 3]))
    (d / "graph.json").write_text('{"num_nodes": 4}')
    setup(d)
    code = main(["partition", "--input", str(d), "--parts", "2", "--method", "random",
                 "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE, err
    lines = [line for line in err.splitlines() if "error" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert str(d) in lines[0]
    assert __import__("re").search(message, lines[0]), lines[0]
    assert not (tmp_path / "out").exists() and scratch_left(tmp_path) == []


def test_npy_dir_flags_that_do_not_fit_are_refused(tmp_path, capsys):
    _write_npy_dir(tmp_path / "g")
    np.save(tmp_path / "x.npy", np.zeros((300, 2)))
    base = ["partition", "--input", str(tmp_path / "g"), "--parts", "2", "--out", str(tmp_path / "o"),
            "--no-progress"]
    assert main([*base, "--features", str(tmp_path / "x.npy")]) == EXIT_USAGE   # the folder has its own
    assert "already has features.npy; drop --features" in capsys.readouterr().err
    assert main([*base, "--scratch-dir", str(tmp_path / "nope")]) == EXIT_USAGE
    assert f"--scratch-dir {tmp_path / 'nope'}: no such folder" in capsys.readouterr().err
    edges = tmp_path / "e.txt"
    edges.write_text("0 1\n")
    assert main(["partition", "--input", str(edges), "--parts", "1", "--out", str(tmp_path / "o2"),
                 "--scratch-dir", str(tmp_path), "--no-progress"]) == EXIT_USAGE
    assert "--scratch-dir applies to --input-format npy-dir" in capsys.readouterr().err


def test_max_memory_refuses_before_the_build(tmp_path, capsys, monkeypatch):
    _write_npy_dir(tmp_path / "g")
    built = []
    monkeypatch.setattr(npy_dir, "build_csr_on_disk", lambda *a, **k: built.append(1))
    code = main(["partition", "--input", str(tmp_path / "g"), "--parts", "2", "--method", "metis",
                 "--max-memory", "1MiB", "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and built == []
    assert "with metis needs ~" in err and "graph 0 B" in err and "--method fennel needs ~" in err
    assert scratch_left(tmp_path) == []


def test_convert_then_partition_equals_partitioning_the_edge_list(tmp_path, small_chunks):
    """``gnn-dist convert`` + the out-of-core path give the folder the in-memory edge-list
    reader gives: the whole pipeline of a user whose graph is too large for memory."""
    rng = np.random.default_rng(3)
    lines = [f"{s}\t{d}\t{w:.3f}" for s, d, w in zip(rng.integers(0, 200, 900), rng.integers(0, 200, 900),
                                                    rng.random(900))]
    edges = tmp_path / "edges.tsv"
    edges.write_text("# src dst weight\n" + "\n".join(lines) + "\n")
    assert main(["-q", "convert", "--input", str(edges), "--weighted", "--out", str(tmp_path / "g"),
                 "--no-progress"]) == EXIT_OK
    common = ["--parts", "3", "--method", "fennel", "--symmetrize", "--split", "0.5,0.25,0.25",
              "--no-progress"]
    assert main(["-q", "partition", "--input", str(tmp_path / "g"), "--out", str(tmp_path / "disk"),
                 *common]) == EXIT_OK
    assert main(["-q", "partition", "--input", str(edges), "--weighted", "--out", str(tmp_path / "memory"),
                 *common]) == EXIT_OK
    assert folder_bytes(tmp_path / "disk") == folder_bytes(tmp_path / "memory")
    assert scratch_left(tmp_path) == []


def test_metis_with_isolated_nodes_out_of_core_equals_in_memory(tmp_path):
    """Isolated nodes skip METIS: the renumbered adjacency is a memory map too, same result."""
    rng = np.random.default_rng(5)
    g = tmp_path / "g"
    g.mkdir()
    np.save(g / "src.npy", rng.integers(0, 150, 600))
    np.save(g / "dst.npy", rng.integers(0, 150, 600))
    (g / "graph.json").write_text('{"num_nodes": 190}')  # ids 150..189 have no edge
    np.savez(tmp_path / "g.npz", src=np.load(g / "src.npy"), dst=np.load(g / "dst.npy"), num_nodes=190)
    for source in ("g", "g.npz"):
        assert main(["-q", "partition", "--input", str(tmp_path / source), "--parts", "3", "--method",
                     "metis", "--out", str(tmp_path / f"out-{source}"), "--no-progress"]) == EXIT_OK
    assert folder_bytes(tmp_path / "out-g") == folder_bytes(tmp_path / "out-g.npz")
    assert scratch_left(tmp_path) == []


def test_a_full_scratch_disk_is_one_line_before_any_map(tmp_path, capsys, monkeypatch):
    """A memory map that cannot get a page from a full disk dies of SIGBUS: the scratch files
    are allocated up front, so a full disk is an error line naming the folder and the fix."""
    import errno
    import os

    _write_npy_dir(tmp_path / "g")

    def no_room(fd, offset, size):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", no_room, raising=False)
    code = main(["partition", "--input", str(tmp_path / "g"), "--parts", "2", "--method", "random",
                 "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err
    assert code != EXIT_OK and "Traceback" not in err
    assert f"scratch folder {tmp_path}: no room for a work array" in err
    assert "pass --scratch-dir on a disk with room" in err
    assert not (tmp_path / "o").exists() and scratch_left(tmp_path) == []
