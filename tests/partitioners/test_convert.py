"""``gnn-dist convert``: edge lists and the two OGB layouts into an npy-dir, streaming.

Each conversion is checked against what the in-memory readers make of the same input
(:func:`partitioners.io.read_graph`, and the edge arrays in file order), every test calls
:func:`gnn_dist_cli.command.main` in-process on small files, and one test measures (with
tracemalloc) that the memory of a conversion does not grow with the number of edges.
"""

from __future__ import annotations

import gzip
import json
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from corpus.corpus_utils import run_cli
from partitioners import Graph
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE
from partitioners.convert import convert_graph
from partitioners.convert.npy_stream import NpyStreamWriter
from partitioners.io import read_graph
from partitioners.io.edgelist import read_edge_arrays

pytestmark = pytest.mark.usefixtures("clean_registry")


def convert(capsys, *argv) -> tuple[int, str]:
    """``gnn-dist convert ARGV --no-progress``: ``(exit code, stderr)``."""
    code, out, err = run_cli(capsys, "convert", *argv, "--no-progress")
    assert out == ""
    return code, err


def load(folder: Path) -> dict[str, np.ndarray]:
    """Every ``.npy`` of an npy-dir, memory-mapped."""
    return {p.stem: np.load(p, mmap_mode="r", allow_pickle=False) for p in sorted(folder.glob("*.npy"))}


def graph_json(folder: Path) -> dict:
    return json.loads((folder / "graph.json").read_text())


def assert_only(folder: Path, *names: str) -> None:
    """The npy-dir holds exactly these files, and no temporary folder is left beside it."""
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)
    assert [p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}.")] == []


def assert_same_csr(src: np.ndarray, dst: np.ndarray, num_nodes: int, ref: Graph, weight=None) -> None:
    g = Graph.from_edges(np.asarray(src), np.asarray(dst), num_nodes, edge_weight=weight)
    assert g.num_nodes == ref.num_nodes
    assert np.array_equal(g.indptr, ref.indptr) and np.array_equal(g.indices, ref.indices)
    if weight is not None:
        assert np.array_equal(g.edge_weight, ref.edge_weight)


# ------------------------------------------------------------------------------- edge lists
def write_edge_list(path: Path, rng: np.random.Generator, num_edges: int, *, num_nodes: int = 500,
                    weighted: bool = False, compress: bool = False) -> Path:
    src, dst = rng.integers(0, num_nodes, num_edges).tolist(), rng.integers(0, num_nodes, num_edges).tolist()
    w = np.round(rng.uniform(0.1, 9, num_edges), 3).tolist()
    lines = [f"{a}\t{b}\t{c}" for a, b, c in zip(src, dst, w)] if weighted else \
        [f"{a}\t{b}" for a, b in zip(src, dst)]
    lines[::97] = [line + "\n% another comment" for line in lines[::97]]
    data = "\n".join(["# a comment", "source\ttarget" + ("\tweight" if weighted else ""), *lines, ""]).encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.mark.parametrize("chunk_bytes, compress, weighted", [(61, True, True), (32 << 20, False, False)])
def test_edge_list_matches_the_reader(capsys, tmp_path, chunk_bytes, compress, weighted):
    path = write_edge_list(tmp_path / ("edges.tsv.gz" if compress else "edges.tsv"), np.random.default_rng(1),
                           3000, weighted=weighted, compress=compress)
    out = tmp_path / "npy"
    flags = ["--weighted"] if weighted else []
    code, err = convert(capsys, "--input", path, "--out", out, "--chunk-bytes", chunk_bytes, *flags)
    assert code == EXIT_OK, err
    arrays = load(out)
    src, dst, weight, _ = read_edge_arrays(path, weighted=weighted)
    assert arrays["src"].dtype == np.int32 and arrays["dst"].dtype == np.int32
    assert np.array_equal(arrays["src"], src) and np.array_equal(arrays["dst"], dst)  # the file's order
    ref = read_graph(path, weighted=weighted)
    meta = graph_json(out)
    assert meta["num_nodes"] == ref.num_nodes and meta["name"] == "edges"
    assert meta["source"]["format"] == "edgelist" and meta["source"]["num_edges"] == 3000
    assert meta["source"]["header_line"] == 2 and meta["source"]["delimiter"] == "whitespace"
    if weighted:
        assert arrays["edge_weight"].dtype == np.float32 and np.array_equal(arrays["edge_weight"], weight)
        assert_same_csr(arrays["src"], arrays["dst"], meta["num_nodes"], ref, arrays["edge_weight"])
        assert_only(out, "src.npy", "dst.npy", "edge_weight.npy", "graph.json")
    else:
        assert_same_csr(arrays["src"], arrays["dst"], meta["num_nodes"], ref)
        assert_only(out, "src.npy", "dst.npy", "graph.json")


def test_ids_become_int64_when_a_late_block_needs_it(capsys, tmp_path):
    big = 2**31 + 5
    rows = [f"{i},{i + 1}" for i in range(200)] + [f"7,{big}", "3,4"]
    path = tmp_path / "wide.csv"
    path.write_text("\n".join(rows) + "\n")
    code, err = convert(capsys, "--input", path, "--out", tmp_path / "npy", "--chunk-bytes", 64,
                        "--delimiter", "comma")
    assert code == EXIT_OK, err
    arrays = load(tmp_path / "npy")
    src, dst, _, _ = read_edge_arrays(path)
    assert arrays["src"].dtype == np.int64 and arrays["dst"].dtype == np.int64
    assert np.array_equal(arrays["src"], src) and np.array_equal(arrays["dst"], dst)
    assert graph_json(tmp_path / "npy")["num_nodes"] == big + 1


def test_memory_does_not_grow_with_the_edges(tmp_path):
    """Peak traced allocations of a conversion in 64 KiB blocks: the same for 20k and 160k edges."""
    rng = np.random.default_rng(0)
    convert_graph(write_edge_list(tmp_path / "warm.txt", rng, 10), tmp_path / "warm")  # imports done
    peaks = []
    for num_edges in (20_000, 160_000):
        path = write_edge_list(tmp_path / f"e{num_edges}.txt", rng, num_edges, num_nodes=100_000)
        tracemalloc.start()
        try:
            convert_graph(path, tmp_path / f"npy{num_edges}", chunk_bytes=64 << 10)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert np.array_equal(np.load(tmp_path / f"npy{num_edges}" / "dst.npy"), read_edge_arrays(path)[1])
    assert path.stat().st_size > 24 * (64 << 10)  # the large file is many blocks
    assert peaks[1] < 1.25 * peaks[0], peaks
    assert peaks[1] < 16 * (64 << 10), peaks


@pytest.mark.parametrize("text, flags, message", [
    ("0 1\n-3 2\n", [], r"bad\.txt, line 2: source id -3 is negative.*relabel the file first, or partition it directly with `gnn-dist partition --input FILE --relabel`"),
    ("0 1\nalice 2\n", [], r"bad\.txt, line 2: field 1 \('alice'\) is not an integer.*--relabel"),
    ("0 1\n2\n", [], r"bad\.txt, line 2: expected 2 fields, found 1: '2'"),
    ("0 1 x\n", ["--weighted"], r"bad\.txt, line 1: field 3 \('x'\) is not a number"),
    ("# nothing\n", [], r"bad\.txt: no edges found"),
    ("0 1\n", ["--ogb-split", "time"], r"--ogb-split applies to --input-format ogb and ogb-npz, not to edgelist"),
    ("0 1\n", ["--delimiter", "7"], r"argument --delimiter: '7' is not a field separator"),
])
def test_bad_edge_lists_are_one_line_and_exit_2(capsys, tmp_path, text, flags, message):
    (tmp_path / "bad.txt").write_text(text)
    code, err = convert(capsys, "--input", tmp_path / "bad.txt", "--out", tmp_path / "npy", *flags)
    assert code == EXIT_USAGE
    errors = [line for line in err.splitlines() if "error" in line]
    assert len(errors) == 1 and re.search(message, errors[0]), err
    assert not (tmp_path / "npy").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.txt"]  # the temporary folder is gone


def test_output_folder_rules(capsys, tmp_path):
    path = tmp_path / "e.txt"
    path.write_text("0 1\n1 2\n")
    out = tmp_path / "npy"
    out.mkdir()  # an empty folder may be written
    assert convert(capsys, "--input", path, "--out", out)[0] == EXIT_OK
    code, err = convert(capsys, "--input", path, "--out", out)
    assert code == EXIT_USAGE and "already holds an npy-dir; pass overwrite=True (CLI: --overwrite)" in err
    path.write_text("0 1\n1 2\n2 3\n")
    assert convert(capsys, "--input", path, "--out", out, "--overwrite")[0] == EXIT_OK
    assert np.array_equal(np.load(out / "dst.npy"), [1, 2, 3]) and graph_json(out)["num_nodes"] == 4
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    code, err = convert(capsys, "--input", path, "--out", other, "--overwrite")
    assert code == EXIT_USAGE and "not an npy-dir (no src.npy and dst.npy); refusing to replace it" in err
    assert (other / "notes.txt").read_text() == "keep me"
    inside = out / "edges.txt"
    inside.write_text("0 1\n")
    code, err = convert(capsys, "--input", inside, "--out", out, "--overwrite")
    assert code == EXIT_USAGE and "is inside" in err and inside.is_file()
    code, err = convert(capsys, "--input", tmp_path / "missing.txt", "--out", tmp_path / "x")
    assert code == EXIT_USAGE and "--input" in err and "no such file or directory" in err


def test_npy_stream_writer_round_trips_and_widens(tmp_path):
    rng = np.random.default_rng(0)
    for dtype, shape in ((np.float16, (5, 3)), (np.bool_, (7,)), (np.float32, (0, 4))):
        a = rng.random(shape).astype(dtype) if dtype != np.bool_ else rng.random(shape) > 0.5
        with NpyStreamWriter(tmp_path / "a.npy", a.dtype, a.shape[1:], rows=len(a)) as w:
            for start in range(0, len(a), 2):
                w.append(a[start:start + 2])
        b = np.load(tmp_path / "a.npy", mmap_mode="r")
        assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(b, a)
        assert b.offset % 64 == 0
    w = NpyStreamWriter(tmp_path / "ids.npy", np.int32)
    w.append(np.arange(10))
    w.widen(np.int64)
    w.append(np.array([2**40]))
    w.close()
    assert np.array_equal(np.load(tmp_path / "ids.npy"), [*range(10), 2**40])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "ids.npy"]
    w = NpyStreamWriter(tmp_path / "short.npy", np.int32, rows=3)
    w.append(np.arange(2))
    with pytest.raises(ValueError, match="2 rows were written, 3 expected"):
        w.close()


# --------------------------------------------------------------------------------- OGB layouts
def write_csv_gz(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(",".join(str(v) for v in np.atleast_1d(r)) + "\n" for r in rows)
    path.write_bytes(gzip.compress(text.encode()))


def ogb_data(num_nodes: int = 50, seed: int = 0) -> dict:
    """A small node-property dataset: edges, features, labels with NaN, a split (the truth)."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, num_nodes - 3, 400), rng.integers(0, num_nodes - 3, 400)  # 3 isolated nodes
    labels = rng.integers(0, 6, num_nodes).astype(np.float64)
    perm = rng.permutation(num_nodes)
    split = {"train": np.sort(perm[:25]), "valid": np.sort(perm[25:33]), "test": np.sort(perm[33:40])}
    labels[split["train"][0]] = 5
    labels[perm[40:]] = np.nan  # unlabelled, in no split
    return dict(src=src, dst=dst, num_nodes=num_nodes, labels=labels, split=split,
                features=np.round(rng.normal(size=(num_nodes, 6)), 4).astype(np.float32))


def write_split(root: Path, d: dict) -> None:
    for name, ids in d["split"].items():
        write_csv_gz(root / "split" / "time" / f"{name}.csv.gz", ids)


def write_ogb_csv(root: Path, d: dict) -> None:
    write_csv_gz(root / "raw" / "edge.csv.gz", np.stack([d["src"], d["dst"]], axis=1))
    write_csv_gz(root / "raw" / "num-node-list.csv.gz", [d["num_nodes"]])
    write_csv_gz(root / "raw" / "node-feat.csv.gz", d["features"])
    write_csv_gz(root / "raw" / "node-label.csv.gz", [["nan" if np.isnan(v) else int(v)] for v in d["labels"]])
    write_split(root, d)


def write_ogb_npz(root: Path, d: dict, save, **members) -> None:
    (root / "raw").mkdir(parents=True)
    arrays = dict(edge_index=np.stack([d["src"], d["dst"]]).astype(np.int64), node_feat=d["features"],
                  num_nodes_list=np.array([d["num_nodes"]]), num_edges_list=np.array([d["src"].size]))
    arrays.update(members)
    save(root / "raw" / "data.npz", **arrays)
    save(root / "raw" / "node-label.npz", node_label=d["labels"].reshape(-1, 1))
    write_split(root, d)


def assert_ogb_npy_dir(out: Path, d: dict, *, features: bool = True) -> None:
    arrays = load(out)
    assert np.array_equal(arrays["src"], d["src"]) and np.array_equal(arrays["dst"], d["dst"])
    assert arrays["src"].dtype == np.int32
    if features:
        assert arrays["features"].dtype == np.float32 and np.array_equal(arrays["features"], d["features"])
    else:
        assert "features" not in arrays
    nan = np.isnan(d["labels"])
    assert arrays["labels"].dtype == np.int64
    assert np.array_equal(arrays["labels"], np.where(nan, 0, d["labels"]).astype(np.int64))
    for mask, name in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
        assert arrays[mask].dtype == np.bool_
        assert np.array_equal(np.flatnonzero(arrays[mask]), d["split"][name])
        assert not arrays[mask][nan].any()
    meta = graph_json(out)
    assert meta["num_nodes"] == d["num_nodes"] and meta["num_classes"] == 6 and meta["name"] == "ogbn_fake"
    assert meta["source"]["split"] == "time" and meta["source"]["unlabelled_nodes"] == int(nan.sum())


@pytest.mark.parametrize("chunk_bytes", [40, 32 << 20])
def test_ogb_csv_matches_the_reader(capsys, tmp_path, chunk_bytes):
    d = ogb_data()
    root = tmp_path / "ogbn_fake"
    write_ogb_csv(root, d)
    out = tmp_path / "npy"
    code, err = convert(capsys, "--input", root, "--out", out, "--chunk-bytes", chunk_bytes)
    assert code == EXIT_OK, err
    assert_ogb_npy_dir(out, d)
    ref = read_graph(root)
    arrays = load(out)
    assert np.array_equal(arrays["features"], ref.x) and np.array_equal(arrays["labels"], ref.y)
    for mask in ("train_mask", "val_mask", "test_mask"):
        assert np.array_equal(arrays[mask], getattr(ref, mask))
    assert_same_csr(arrays["src"], arrays["dst"], d["num_nodes"], ref)
    assert graph_json(out)["source"]["format"] == "ogb"


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed], ids=["stored", "deflated"])
@pytest.mark.parametrize("chunk_bytes", [24, 32 << 20])
def test_ogb_npz_member_by_member(capsys, tmp_path, save, chunk_bytes):
    d = ogb_data(seed=1)
    root = tmp_path / "ogbn_fake"
    edge_feat = np.random.default_rng(5).standard_normal((d["src"].size, 3))  # float64, row e = column e
    write_ogb_npz(root, d, save, edge_feat=edge_feat)
    out = tmp_path / "npy"
    code, err = convert(capsys, "--input", root, "--out", out, "--chunk-bytes", chunk_bytes)
    assert code == EXIT_OK, err
    assert_ogb_npy_dir(out, d)
    attr = load(out)["edge_attr"]
    assert attr.dtype == np.float32 and np.array_equal(attr, edge_feat.astype(np.float32))
    meta = graph_json(out)
    assert meta["source"]["format"] == "ogb-npz"
    assert meta["source"]["files"] == {"edges": "raw/data.npz", "features": "raw/data.npz",
                                       "edge_features": "raw/data.npz", "labels": "raw/node-label.npz"}


def test_ogb_npz_none_members_are_absent_and_never_unpickled(capsys, tmp_path):
    d = ogb_data(seed=2)
    root = tmp_path / "ogbn_fake"
    write_ogb_npz(root, d, np.savez_compressed, node_feat=None, edge_feat=None)  # pickled 0-d objects
    code, err = convert(capsys, "--input", root, "--out", tmp_path / "npy", "-v")
    assert code == EXIT_OK, err
    assert "node_feat is None (a pickled object, not read)" in err
    assert "edge_feat is None (a pickled object, not read)" in err
    assert_ogb_npy_dir(tmp_path / "npy", d, features=False)
    assert not (tmp_path / "npy" / "edge_attr.npy").exists()


def _fortran(d):
    return {"edge_index": np.asfortranarray(np.stack([d["src"], d["dst"]]))}


@pytest.mark.parametrize("change, message", [
    (lambda d: {"edge_index": np.stack([d["src"], np.where(d["dst"] == 7, 50, d["dst"])])},
     r"data\.npz, array 'edge_index'\[1, \d+\]: destination id 50 is out of range: num_nodes_list says 50 nodes"),
    (lambda d: {"edge_index": np.stack([np.where(d["src"] == 7, -1, d["src"]), d["dst"]])},
     r"data\.npz, array 'edge_index'\[0, \d+\]: source id -1 is negative"),
    (_fortran, r"data\.npz, array 'edge_index': stored in Fortran order; save it in C order"),
    (lambda d: {"edge_index": np.stack([d["src"], d["dst"]]).astype(np.float64)},
     r"array 'edge_index': dtype float64 is not an integer array of node ids"),
    (lambda d: {"node_feat": np.array([[1, "x"]] * 50, dtype=object)},
     r"array 'node_feat': dtype object holds pickled Python objects, which are never read"),
    (lambda d: {"node_feat": np.vstack([d["features"][:-1], [[np.inf] * 6]])},
     r"array 'node_feat'\[49, 0\]: feature is not finite"),
    (lambda d: {"node_feat": d["features"][:-1]},
     r"data\.npz, array 'node_feat': 49 rows, but num_nodes_list says 50 nodes \(one row per node\)"),
    (lambda d: {"edge_feat": np.zeros((d["src"].size - 1, 2))},
     r"data\.npz, array 'edge_feat': \d+ rows, but edge_index holds \d+ edges \(one row per edge\)"),
    (lambda d: {"edge_feat": np.zeros(d["src"].size)},
     r"data\.npz, array 'edge_feat': shape \[\d+\]; expected \[E, D\] \(one row per edge\)"),
    (lambda d: {"edge_feat": np.where(np.arange(d["src"].size * 2).reshape(-1, 2) == 7, np.nan, 1.0)},
     r"array 'edge_feat'\[3, 1\]: feature is not finite"),
    (lambda d: {"num_nodes_list": np.array([50, 3])},
     r"array 'num_nodes_list': expected one count \(one graph\), found \[50, 3\]"),
])
def test_bad_npz_members_are_one_line_and_exit_2(capsys, tmp_path, change, message):
    d = ogb_data()
    root = tmp_path / "ogbn_fake"
    write_ogb_npz(root, d, np.savez, **change(d))
    code, err = convert(capsys, "--input", root, "--out", tmp_path / "npy", "--chunk-bytes", 64)
    assert code == EXIT_USAGE, err
    errors = [line for line in err.splitlines() if "error" in line]
    assert len(errors) == 1 and re.search(message, errors[0]), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ogbn_fake"]


def test_ogb_errors_and_flags(capsys, tmp_path):
    d = ogb_data()
    root = tmp_path / "ogbn_fake"
    write_ogb_npz(root, d, np.savez)
    bad = d["labels"].copy()
    bad[d["split"]["valid"][0]] = np.nan  # a node of the split without a label
    np.savez(root / "raw" / "node-label.npz", node_label=bad.reshape(-1, 1))
    code, err = convert(capsys, "--input", root, "--out", tmp_path / "npy")
    assert code == EXIT_USAGE and f"valid.csv.gz: node {d['split']['valid'][0]} is in this split but has no label" in err
    code, err = convert(capsys, "--input", root, "--out", tmp_path / "npy", "--weighted")
    assert code == EXIT_USAGE and "--weighted applies to --input-format edgelist, not to ogb-npz" in err
    code, err = convert(capsys, "--input", root, "--out", tmp_path / "npy", "--ogb-split", "year")
    assert code == EXIT_USAGE and "split scheme 'year' not found; available: ['time']" in err
    write_ogb_csv(root, d)  # now both layouts are there
    code, err = convert(capsys, "--input", root, "--out", tmp_path / "npy")
    assert code == EXIT_USAGE and "several formats (ogb, ogb-npz); choose one" in err
    code, err = convert(capsys, "--input", root, "--input-format", "ogb", "--out", tmp_path / "npy")
    assert code == EXIT_OK, err
    assert_ogb_npy_dir(tmp_path / "npy", d)
    (root / "raw" / "data.npz").write_bytes(b"PK\x03\x04 not really a zip")
    code, err = convert(capsys, "--input", root, "--input-format", "ogb-npz", "--out", tmp_path / "npz")
    assert code == EXIT_USAGE and "data.npz: not an .npz archive" in err


def test_a_corrupt_member_is_caught_by_its_crc(capsys, tmp_path):
    d = ogb_data()
    root = tmp_path / "ogbn_fake"
    write_ogb_npz(root, d, np.savez)  # stored: a flipped bit is still a finite float
    data = bytearray((root / "raw" / "data.npz").read_bytes())
    data[data.find(b"node_feat.npy") + 400] ^= 0x01
    (root / "raw" / "data.npz").write_bytes(bytes(data))
    code, err = convert(capsys, "--input", root, "--out", tmp_path / "npy")
    assert code == EXIT_USAGE and "array 'node_feat': corrupt or truncated archive data (Bad CRC-32" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ogbn_fake"]
