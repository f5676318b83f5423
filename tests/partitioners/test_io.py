"""Graph readers: edge lists, numpy/scipy arrays, OGB folders; round trips and every error path."""

from __future__ import annotations

import gzip
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from partitioners import Graph, GraphError
from partitioners.io import (FORMATS, infer_format, read_edgelist, read_graph, read_npy, read_npz,
                             read_ogb, read_scipy_npz)
from partitioners.io.edgelist import read_edge_arrays


def random_edges(seed: int, num_nodes: int = 30, num_edges: int = 120) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges)
    dst = rng.integers(0, num_nodes, num_edges)
    src[0], dst[0] = num_nodes - 1, 0  # the largest id appears, so num_nodes = max + 1
    src[1], dst[1] = 3, 3  # a self-loop
    src[2], dst[2] = src[3], dst[3]  # a duplicate
    return src, dst


def assert_same_graph(g: Graph, ref: Graph) -> None:
    assert g.num_nodes == ref.num_nodes
    assert np.array_equal(g.indptr, ref.indptr)
    assert np.array_equal(g.indices, ref.indices)
    for name in ("edge_weight", "x", "y", "train_mask", "val_mask", "test_mask"):
        a, b = getattr(g, name), getattr(ref, name)
        assert (a is None) == (b is None), name
        if a is not None:
            assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert g.num_classes == ref.num_classes
    assert g.preprocessing == ref.preprocessing


def write_text(path: Path, text: str, compress: bool = False) -> Path:
    data = text.encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def edge_text(src, dst, weights=None, sep: str = " ") -> str:
    cols = [src, dst] if weights is None else [src, dst, weights]
    return "".join(sep.join(str(c[i]) for c in cols) + "\n" for i in range(len(src)))


# ----------------------------------------------------------------------------- edge lists
@pytest.mark.parametrize("sep", [" ", ",", "\t", "  "])
@pytest.mark.parametrize("header", ["", "src{sep}dst\n"])
@pytest.mark.parametrize("compress", [False, True])
def test_edgelist_round_trip(tmp_path, sep, header, compress):
    src, dst = random_edges(0)
    text = "# a comment\n% another\n\n" + header.format(sep=sep) + edge_text(src, dst, sep=sep)
    path = write_text(tmp_path / ("g.csv.gz" if compress else "g.txt"), text, compress)
    g = read_graph(path)
    assert_same_graph(g, Graph.from_edges(src, dst))
    assert g.name == "g"


def test_edgelist_gzip_is_detected_by_magic_bytes_not_name(tmp_path):
    src, dst = random_edges(1)
    gz_named_plain = write_text(tmp_path / "a.txt", edge_text(src, dst), compress=True)
    plain_named_gz = write_text(tmp_path / "b.txt.gz", edge_text(src, dst))
    ref = Graph.from_edges(src, dst)
    assert_same_graph(read_graph(gz_named_plain), ref)
    assert_same_graph(read_graph(plain_named_gz), ref)


def test_edgelist_truncated_gzip(tmp_path):
    src, dst = random_edges(1, num_edges=5000)
    data = gzip.compress(edge_text(src, dst).encode())
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(GraphError, match=r"cut\.txt\.gz: corrupt or truncated gzip data"):
        read_graph(path)


def test_edgelist_weighted_crlf_and_trailing_comments(tmp_path):
    src, dst = random_edges(2)
    w = np.round(np.random.default_rng(2).normal(size=src.size), 3)
    lines = [f"{s},{d},{x} # note\r\n" for s, d, x in zip(src, dst, w)]
    path = write_text(tmp_path / "w.csv", "source,target,weight\r\n" + "".join(lines))
    g = read_graph(path, weighted=True)
    assert_same_graph(g, Graph.from_edges(src, dst, edge_weight=w.astype(np.float32)))
    unweighted = read_graph(path)  # the weight column is ignored (with a warning)
    assert unweighted.edge_weight is None and unweighted.num_edges == src.size


def test_edgelist_extra_columns_are_reported(tmp_path, caplog):
    path = write_text(tmp_path / "e.txt", "0 1 7\n1 2 8\n")
    with caplog.at_level(logging.WARNING, logger="partitioners.io.edgelist"):
        g = read_edgelist(path)
    assert g.num_edges == 2
    assert "only the first 2 are used" in caplog.text and "weighted=True" in caplog.text


@pytest.mark.parametrize("chunk_bytes", [1, 5, 13, 64, 1 << 20])
def test_edgelist_chunks_give_the_same_graph(tmp_path, chunk_bytes):
    src, dst = random_edges(3, num_nodes=50, num_edges=300)
    w = np.arange(src.size) / 4
    text = "".join(f"{s}\t{d}\t{x}\n" + ("# mid-file comment\n" if i % 37 == 0 else "")
                   for i, (s, d, x) in enumerate(zip(src, dst, w)))
    path = write_text(tmp_path / "c.tsv.gz", "src\tdst\tw\n" + text, compress=True)
    g = read_edgelist(path, weighted=True, chunk_bytes=chunk_bytes)
    assert_same_graph(g, Graph.from_edges(src, dst, edge_weight=w.astype(np.float32)))


@pytest.mark.parametrize("chunk_bytes", [3, 40, 1 << 20])
def test_edgelist_error_line_numbers_survive_chunking(tmp_path, chunk_bytes):
    lines = ["# header comment"] + [f"{i} {i + 1}" for i in range(100)]
    lines[77] = "76 x7"
    path = write_text(tmp_path / "bad.txt", "\n".join(lines) + "\n")
    with pytest.raises(GraphError, match=r"bad\.txt, line 78: field 2 \('x7'\) is not an integer: '76 x7'"):
        read_edgelist(path, chunk_bytes=chunk_bytes)


def test_edge_arrays_are_int32_until_an_id_needs_int64(tmp_path):
    small = write_text(tmp_path / "s.txt", "0 1\n2147483647 3\n")
    src, dst, w, _ = read_edge_arrays(small, chunk_bytes=4)
    assert src.dtype == dst.dtype == np.int32 and w is None
    assert src.tolist() == [0, 2147483647] and dst.tolist() == [1, 3]
    big = write_text(tmp_path / "b.txt", "0 1\n2 3\n3000000000 4\n")
    src, dst, _, _ = read_edge_arrays(big, chunk_bytes=4)  # early chunks int32, a later one int64
    assert src.dtype == np.int64 and src.tolist() == [0, 2, 3000000000] and dst.tolist() == [1, 3, 4]


def test_edgelist_options_pass_through(tmp_path):
    src, dst = random_edges(4)
    path = write_text(tmp_path / "o.edgelist", edge_text(src, dst))
    opts = dict(symmetrize=True, remove_self_loops=True, remove_duplicates=True)
    g = read_graph(path, num_nodes=40, name="mine", **opts)
    assert_same_graph(g, Graph.from_edges(src, dst, 40, **opts))
    assert g.name == "mine" and g.preprocessing["self_loops_removed"] >= 1
    labels = np.arange(40) % 3
    g = read_graph(path, num_nodes=40, labels=labels, train_mask=labels == 0)
    assert g.num_classes == 3 and g.train_mask.sum() == 14


def test_edgelist_forced_header_and_explicit_delimiter(tmp_path):
    path = write_text(tmp_path / "h.txt", "5;6\n0;1\n1;2\n")
    g = read_edgelist(path, delimiter=";", header=True)
    assert g.num_edges == 2 and g.num_nodes == 3
    g = read_edgelist(path, delimiter=";", header=False)
    assert g.num_edges == 3 and g.num_nodes == 7


def test_edgelist_without_edges(tmp_path):
    path = write_text(tmp_path / "empty.txt", "# nothing\nsrc dst\n\n")
    with pytest.raises(GraphError, match=r"empty\.txt: no edges found.*pass num_nodes="):
        read_graph(path)
    g = read_graph(path, num_nodes=4)
    assert g.num_nodes == 4 and g.num_edges == 0


@pytest.mark.parametrize("text, options, match", [
    ("0 1\n1 2 3\n", {}, r"line 2: expected 2 fields, found 3: '1 2 3'"),
    ("0 1\n2\n", {}, r"line 2: expected 2 fields, found 1: '2'"),
    ("0 1\n1 2.5\n", {}, r"line 2: field 2 \('2.5'\) is not an integer: '1 2.5'"),
    ("0,1\n1,,2\n", {}, r"line 2: expected 2 fields, found 3: '1,,2'"),
    ("0 1\n1 99999999999999999999\n", {}, r"line 2: field 2 \('99999999999999999999'\) is not an integer"),
    ("# c\n7\n", {}, r"line 2: an edge line needs 2 fields \(src dst\), found 1: '7'"),
    ("0 1\n2 3\n", {"weighted": True}, r"line 1: weighted=True needs a third field"),
    ("0 1 1.0\n1 2 zz\n", {"weighted": True}, r"line 2: field 3 \('zz'\) is not a number: '1 2 zz'"),
    ("0 1 1.0\n1 2 nan\n", {"weighted": True}, r"line 2: edge weight nan is not finite"),
    ("0 1\n\n# c\n-4 2\n", {}, r"line 4: source id -4 is negative; node ids must be >= 0: '-4 2'"),
    ("0 1\n2 9\n", {"num_nodes": 5}, r"line 2: destination id 9 is out of range: num_nodes is 5: '2 9'"),
])
def test_edgelist_malformed_lines_name_file_line_and_text(tmp_path, text, options, match):
    path = write_text(tmp_path / "bad.txt", text)
    with pytest.raises(GraphError, match=r"bad\.txt, " + match):
        read_graph(path, **options)


# ----------------------------------------------------------------------------- dispatch
def test_read_graph_dispatch_errors(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(FileNotFoundError, match=r"nope\.txt: no such file"):
        read_graph(missing)
    path = write_text(tmp_path / "g.txt", "0 1\n")
    with pytest.raises(ValueError, match=r"unknown graph format fmt='gml'; valid formats: \['edgelist', 'npz', 'npy', 'scipy', 'ogb', 'planetoid', 'npy-dir', 'partition'\]"):
        read_graph(path, fmt="gml")
    with pytest.raises(ValueError, match=r"read_graph\(fmt='edgelist'\) does not take option\(s\) \['split'\]; valid options: .*'delimiter'"):
        read_graph(path, split="time")
    odd = write_text(tmp_path / "g.dat", "0 1\n")
    with pytest.raises(ValueError, match=r"g\.dat: cannot tell the format from the name; pass fmt="):
        read_graph(odd)
    assert read_graph(odd, fmt="edgelist").num_edges == 1
    with pytest.raises(ValueError, match=r"a folder is read as an npy-dir \(src\.npy, dst\.npy\), an OGB "
                                         r"dataset \(raw/edge\.csv\.gz or, typed, raw/num-node-dict\.csv\.gz\), "
                                         r"a Planetoid set \(ind\.NAME\.graph, \.\.\.\), a typed npy-dir "
                                         r"\(nodes\.json\) or a partition folder or family \(partition\.json, "
                                         r"family\.json\), but it has none"):
        read_graph(tmp_path)
    assert FORMATS == ("edgelist", "npz", "npy", "scipy", "ogb", "planetoid", "npy-dir", "partition")


# ----------------------------------------------------------------------------- arrays
def node_data(num_nodes: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    split = rng.integers(0, 3, num_nodes)
    return dict(features=rng.normal(size=(num_nodes, 5)).astype(np.float32),
                labels=rng.integers(0, 4, num_nodes), train_mask=split == 0, val_mask=split == 1,
                test_mask=split == 2)


def test_npz_round_trip_with_node_data(tmp_path):
    src, dst = random_edges(5)
    n = 35  # nodes 30..34 are isolated: num_nodes comes from the file
    data = node_data(n)
    w = np.linspace(0, 1, src.size, dtype=np.float32)
    path = tmp_path / "g.npz"
    np.savez(path, src=src, dst=dst, x=data["features"], y=data["labels"][:, None], edge_weight=w,
             train_mask=data["train_mask"], val_mask=data["val_mask"], test_mask=data["test_mask"],
             num_nodes=np.array(n))
    assert infer_format(path) == "npz"
    g = read_graph(path)
    assert_same_graph(g, Graph.from_edges(src, dst, n, edge_weight=w, **data))
    with pytest.raises(GraphError, match=r"g\.npz: the file says num_nodes=35 but num_nodes=40 was passed"):
        read_graph(path, num_nodes=40)


def test_npz_edge_index_and_aliases(tmp_path, caplog):
    src, dst = random_edges(6)
    data = node_data(30, seed=6)
    path = tmp_path / "g.npz"
    np.savez(path, edge_index=np.stack([src, dst]), features=data["features"], labels=data["labels"],
             node_year=np.arange(30))
    with caplog.at_level(logging.WARNING, logger="partitioners.io.arrays"):
        g = read_npz(path, symmetrize=True)
    assert "ignoring arrays ['node_year']" in caplog.text
    ref = Graph.from_edges(src, dst, features=data["features"], labels=data["labels"], symmetrize=True)
    assert_same_graph(g, ref)


@pytest.mark.parametrize("arrays, match", [
    (dict(a=np.arange(3)), r"no edges: expected arrays 'src' and 'dst', or 'edge_index'; found keys \['a'\]"),
    (dict(src=[0], dst=[1], edge_index=np.zeros((2, 1), int)), r"has both 'edge_index' and 'src'/'dst'"),
    (dict(edge_index=np.zeros((3, 4), int)), r"'edge_index' must have shape \[2, E\], got \(3, 4\)"),
    (dict(src=[0], dst=[1], x=np.ones((2, 1)), features=np.ones((2, 1))), r"two arrays give the features"),
    (dict(src=[0], dst=[1], num_nodes=np.array([1.5])), r"'num_nodes' must be one integer"),
    (dict(src=[0], dst=[1], y=[0, 1, 1], num_nodes=2), r"labels has 3 rows but the graph has 2 nodes"),
    (dict(src=[0], dst=[-1]), r"dst\[0\] = -1 is negative"),
    (dict(src=np.array([0], dtype=object), dst=[1]), r"array 'src' cannot be read without pickle"),
])
def test_npz_errors_name_the_file(tmp_path, arrays, match):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(GraphError, match=r"bad\.npz: " + match):
        read_graph(path)


def test_npz_not_a_zip(tmp_path):
    path = write_text(tmp_path / "junk.npz", "not a zip")
    with pytest.raises(GraphError, match=r"junk\.npz: not a readable \.npz file"):
        read_graph(path, fmt="npz")


@pytest.mark.parametrize("layout", ["2xE", "Ex2"])
def test_npy_edge_list(tmp_path, layout):
    src, dst = random_edges(7)
    a = np.stack([src, dst]) if layout == "2xE" else np.stack([src, dst], axis=1)
    np.save(tmp_path / "e.npy", a)
    g = read_graph(tmp_path / "e.npy", remove_duplicates=True)
    assert_same_graph(g, Graph.from_edges(src, dst, remove_duplicates=True))
    assert g.name == "e"


def test_npy_wrong_shape(tmp_path):
    np.save(tmp_path / "e.npy", np.zeros((3, 3), np.int64))
    with pytest.raises(GraphError, match=r"e\.npy: a \.npy edge list must have shape \[2, E\] or \[E, 2\], got \(3, 3\)"):
        read_npy(tmp_path / "e.npy")


@pytest.mark.parametrize("matrix_format", ["csr", "coo", "csc"])
def test_scipy_npz(tmp_path, matrix_format):
    src, dst = random_edges(8)
    w = np.arange(1, src.size + 1, dtype=np.float32)
    adj = sp.coo_matrix((w, (src, dst)), shape=(32, 32)).asformat(matrix_format)
    path = tmp_path / "adj.npz"
    sp.save_npz(path, adj)
    assert infer_format(path) == "scipy"
    g = read_graph(path, weighted=True)
    # csr/csc conversion merges the duplicate entry: compare against the stored entries
    coo = adj.tocoo()
    assert_same_graph(g, Graph.from_edges(coo.row, coo.col, 32, edge_weight=coo.data))
    assert read_scipy_npz(path).edge_weight is None
    with pytest.raises(GraphError, match=r"adj\.npz: this is a scipy\.sparse\.save_npz file .* fmt='scipy'"):
        read_graph(path, fmt="npz")
    with pytest.raises(GraphError, match=r"adj\.npz: the matrix has 32 rows but num_nodes=5 was passed"):
        read_graph(path, num_nodes=5)


def test_scipy_non_square(tmp_path):
    sp.save_npz(tmp_path / "r.npz", sp.csr_matrix(np.ones((2, 3))))
    with pytest.raises(GraphError, match=r"r\.npz: the adjacency matrix must be square, got shape \(2, 3\)"):
        read_graph(tmp_path / "r.npz")


# ----------------------------------------------------------------------------- OGB layout
def write_csv_gz(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(",".join(str(v) for v in np.atleast_1d(r)) + "\n" for r in rows)
    path.write_bytes(gzip.compress(text.encode()))


def fake_ogb(root: Path, *, num_nodes: int = 40, seed: int = 0, multilabel: bool = False,
             schemes: tuple[str, ...] = ("time",)) -> dict:
    """A small dataset in OGB's raw node-property layout; returns what it wrote."""
    rng = np.random.default_rng(seed)
    src, dst = random_edges(seed, num_nodes=num_nodes - 2, num_edges=150)  # 2 isolated nodes
    feats = np.round(rng.normal(size=(num_nodes, 4)), 4).astype(np.float32)
    perm = rng.permutation(num_nodes)
    train, valid, test = np.sort(perm[:20]), np.sort(perm[20:28]), np.sort(perm[28:34])
    unlabelled = np.sort(perm[34:])  # in no split
    if multilabel:
        labels = rng.integers(0, 2, (num_nodes, 3))
    else:
        labels = rng.integers(0, 5, num_nodes)
        labels[train[0]] = 4  # so num_classes is 5
    no_label = ["nan"] * 3 if multilabel else "nan"
    label_rows = [no_label if i in set(unlabelled.tolist()) else labels[i] for i in range(num_nodes)]
    write_csv_gz(root / "raw" / "edge.csv.gz", np.stack([src, dst], axis=1))
    write_csv_gz(root / "raw" / "num-node-list.csv.gz", [num_nodes])
    write_csv_gz(root / "raw" / "num-edge-list.csv.gz", [src.size])
    write_csv_gz(root / "raw" / "node-feat.csv.gz", feats)
    write_csv_gz(root / "raw" / "edge-feat.csv.gz", np.ones((src.size, 2)))
    write_csv_gz(root / "raw" / "node-label.csv.gz", label_rows)
    for scheme in schemes:
        for name, ids in (("train", train), ("valid", valid), ("test", test)):
            write_csv_gz(root / "split" / scheme / f"{name}.csv.gz", ids)
    labels = labels.copy()
    labels[unlabelled] = 0
    return dict(src=src, dst=dst, num_nodes=num_nodes, features=feats,
                labels=labels.astype(np.uint8) if multilabel else labels,
                train_mask=Graph.mask_from_index(train, num_nodes), val_mask=Graph.mask_from_index(valid, num_nodes),
                test_mask=Graph.mask_from_index(test, num_nodes), unlabelled=unlabelled)


def ogb_reference(d: dict, **options) -> Graph:
    return Graph.from_edges(d["src"], d["dst"], d["num_nodes"], features=d["features"], labels=d["labels"],
                            train_mask=d["train_mask"], val_mask=d["val_mask"], test_mask=d["test_mask"],
                            **options)


@pytest.mark.parametrize("chunk_bytes", [7, 1 << 20])
def test_ogb_round_trip(tmp_path, chunk_bytes):
    root = tmp_path / "ogbn_fake"
    d = fake_ogb(root)
    assert infer_format(root) == "ogb"
    g = read_graph(root, chunk_bytes=chunk_bytes)
    assert_same_graph(g, ogb_reference(d))
    assert g.name == "ogbn_fake" and g.num_classes == 5
    assert not (g.train_mask | g.val_mask | g.test_mask)[d["unlabelled"]].any()
    sym = read_ogb(root, symmetrize=True)
    assert_same_graph(sym, ogb_reference(d, symmetrize=True))


def test_ogb_multilabel(tmp_path):
    d = fake_ogb(tmp_path / "ml", multilabel=True)
    g = read_graph(tmp_path / "ml")
    assert g.multilabel and g.num_classes == 3
    assert_same_graph(g, ogb_reference(d))


def test_ogb_split_schemes(tmp_path):
    root = tmp_path / "two"
    d = fake_ogb(root, schemes=("time", "random"))
    with pytest.raises(GraphError, match=r"two: several split schemes \['random', 'time'\]; choose one with split="):
        read_graph(root)
    assert_same_graph(read_graph(root, split="time"), ogb_reference(d))
    with pytest.raises(GraphError, match=r"split scheme 'year' not found; available: \['random', 'time'\]"):
        read_graph(root, split="year")


def test_ogb_without_split_or_count(tmp_path):
    root = tmp_path / "bare"
    d = fake_ogb(root)
    shutil.rmtree(root / "split")
    (root / "raw" / "num-node-list.csv.gz").unlink()
    g = read_graph(root)
    assert g.train_mask is None and g.num_nodes == d["num_nodes"]  # from the feature rows
    assert np.array_equal(g.y, d["labels"])


def test_ogb_nan_label_in_a_split_is_an_error(tmp_path):
    root = tmp_path / "nan"
    d = fake_ogb(root)
    node = int(d["unlabelled"][0])
    ids = np.sort(np.append(np.flatnonzero(d["val_mask"]), node))
    write_csv_gz(root / "split" / "time" / "valid.csv.gz", ids)
    with pytest.raises(GraphError, match=rf"valid\.csv\.gz: node {node} is in this split but has no label \(NaN in .*node-label\.csv\.gz\)"):
        read_graph(root)


@pytest.mark.parametrize("file, rows, match", [
    ("raw/node-feat.csv.gz", np.ones((39, 4)), r"node-feat\.csv\.gz: the node feature file has 39 rows, but the dataset has 40 nodes"),
    ("raw/node-feat.csv.gz", np.ones((41, 4)), r"node-feat\.csv\.gz: the node feature file has more than 40 rows"),
    ("raw/node-feat.csv.gz", [[1, 2, 3, 4]] * 5 + [[1, 2, "inf", 4]] + [[0] * 4] * 34, r"node-feat\.csv\.gz, line 6: feature 3 is inf \(not finite\): '1,2,inf,4'"),
    ("raw/node-feat.csv.gz", [[1, 2, 3, 4]] * 5 + [[1, 2, 3]] + [[0] * 4] * 34, r"node-feat\.csv\.gz, line 6: expected 4 fields, found 3"),
    ("raw/node-label.csv.gz", [0] * 10 + [2.5] + [0] * 29, r"node-label\.csv\.gz, line 11: label field 1 = 2\.5 is not a class id"),
    ("raw/node-label.csv.gz", [[0, 1]] * 10 + [[0, 3]] + [[0, 1]] * 29, r"node-label\.csv\.gz, line 11: label field 2 = 3\.0 is not 0 or 1"),
    ("raw/edge.csv.gz", [[0, 1], [2, 40]], r"edge\.csv\.gz, line 2: destination id 40 is out of range: num_nodes is 40"),
    ("raw/num-node-list.csv.gz", [40, 12], r"num-node-list\.csv\.gz: expected one positive node count \(one graph\), found \[40, 12\]"),
    ("split/time/test.csv.gz", [1, 2, 45], r"test\.csv\.gz, line 3: node id 45 is out of range \[0, 40\)"),
    ("split/time/train.csv.gz", [[1, 2]], r"train\.csv\.gz, line 1: a split file holds one node id per line"),
])
def test_ogb_malformed_files(tmp_path, file, rows, match):
    root = tmp_path / "bad"
    fake_ogb(root)
    write_csv_gz(root / file, rows)
    with pytest.raises(GraphError, match=match):
        read_graph(root, chunk_bytes=16)


def test_ogb_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"raw/edge\.csv\.gz: no such file; .* is not an OGB node-property dataset"):
        read_graph(tmp_path, fmt="ogb")
    root = tmp_path / "m"
    fake_ogb(root)
    (root / "split" / "time" / "test.csv.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"time/test\.csv\.gz: no such file"):
        read_graph(root)
    (root / "raw" / "num-node-list.csv.gz").write_bytes(gzip.compress(b"40\n"))
    with pytest.raises(GraphError, match=r"num-node-list\.csv\.gz: the dataset has 40 nodes but num_nodes=50 was passed"):
        read_graph(root, num_nodes=50)
