"""Users' own data into ``gnn-dist partition``: node data files (features, labels, masks as bool
or id lists), ``--split``, ``--weighted``, ``--relabel`` (names kept in ``original_names.npy``),
the warnings about untrainable folders and sparse ids, and the folder the trainer then loads."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

from corpus.corpus_utils import edit_meta, error_lines, run_cli
from partitioners import GraphError, load_part, load_partition_meta, verify_partition
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE
from partitioners.format import load_original_names
from partitioners.io import read_edgelist, read_graph
from partitioners.io.relabel_ids import merge_block_names, block_codes

pytestmark = [pytest.mark.usefixtures("clean_registry"),
              pytest.mark.filterwarnings("ignore:Unable to enable fault handler:UserWarning")]  # train.main

N = 12
SRC = np.concatenate([np.arange(N), np.arange(0, N, 3)])
DST = np.concatenate([(np.arange(N) + 1) % N, (np.arange(0, N, 3) + 5) % N])


def edges_file(tmp_path: Path, lines: list[str] | None = None, name: str = "edges.tsv") -> Path:
    path = tmp_path / name
    text = "".join(lines if lines is not None else [f"{s}\t{d}\n" for s, d in zip(SRC, DST)])
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def save(tmp_path: Path, name: str, a) -> Path:
    path = tmp_path / name
    np.save(path, np.asarray(a))
    return path


def node_data(n: int = N) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((n, 4)).astype(np.float32), "y": np.arange(n) % 3}


def partition(capsys, tmp_path: Path, *flags, out: str = "out", parts: int = 2) -> tuple[int, str, Path]:
    folder = tmp_path / out
    code, _, err = run_cli(capsys, "partition", *flags, "--parts", parts, "--out", folder, "--no-progress")
    return code, err, folder


def stored(folder: Path, name: str) -> np.ndarray:
    """The array ``name`` of every part, rows in original-id order (``original_ids`` of inner rows)."""
    meta = load_partition_meta(folder)
    rows, values = [], []
    for p in range(meta.num_parts):
        part = load_part(folder, p)
        rows.append(part.original_ids[:part.num_inner])
        values.append(getattr(part, name))
    order = np.argsort(np.concatenate(rows))
    return np.concatenate(values)[order]


# ----------------------------------------------------------------------------- node data
def test_node_data_files_make_a_trainable_folder(capsys, tmp_path):
    d = node_data()
    train = np.arange(N) < 6                       # a bool mask ...
    val_ids, test_ids = np.array([6, 8]), np.array([7, 9, 10, 11], np.int32)   # ... and id lists
    code, err, out = partition(capsys, tmp_path, "--input", edges_file(tmp_path),
                               "--features", save(tmp_path, "x.npy", d["x"]),
                               "--labels", save(tmp_path, "y.npy", d["y"][:, None]),   # [N, 1] squeezed
                               "--train-mask", save(tmp_path, "train.npy", train),
                               "--val-mask", save(tmp_path, "val.npy", val_ids),
                               "--test-mask", save(tmp_path, "test.npy", test_ids),
                               "--balance", "nodes,train")
    assert code == EXIT_OK, err
    assert "cannot be trained" not in err
    meta = load_partition_meta(out)
    assert (meta.feature_dim, meta.num_classes, meta.label_kind) == (4, 3, "class")
    assert sum(pm.num_train for pm in meta.parts) == 6 and meta.split is None
    np.testing.assert_array_equal(stored(out, "features"), d["x"])
    np.testing.assert_array_equal(stored(out, "labels"), d["y"])
    assert np.flatnonzero(stored(out, "val_mask")).tolist() == [6, 8]
    assert np.flatnonzero(stored(out, "test_mask")).tolist() == [7, 9, 10, 11]
    assert verify_partition(out) == []


@pytest.mark.parametrize("flag, make, pattern", [
    ("--features", lambda: np.zeros((N - 2, 4), np.float32),
     r"--features \S+x\.npy: shape \[10, 4\] but the graph has 12 nodes; expected \[12, F\] numbers"),
    ("--labels", lambda: np.zeros(N + 1, np.int64),
     r"--labels \S+x\.npy: shape \[13\] but the graph has 12 nodes; expected \[12\] int class ids"),
    ("--train-mask", lambda: np.ones(N - 1, bool),
     r"--train-mask \S+x\.npy: shape \[11\] but the graph has 12 nodes; expected bool \[12\] or int node ids"),
    ("--val-mask", lambda: np.array([0, 12]),
     r"--val-mask \S+x\.npy: node id 12 \(entry 1\) is out of range: the graph has 12 nodes"),
    ("--test-mask", lambda: (np.arange(N) % 2),
     r"--test-mask \S+x\.npy: an int array of 0/1 of length 12: a mask or node ids\? save a mask as bool"),
    ("--test-mask", lambda: np.array([1, 4, 4]), r"--test-mask \S+x\.npy: node ids repeat \(1 duplicates\)"),
    ("--train-mask", lambda: np.zeros(N, np.float32), r"--train-mask \S+x\.npy: dtype float32, shape \[12\]; "
                                                      r"expected a bool \[12\] mask or a 1-D int array"),
    ("--features", lambda: np.full((N, 2), np.nan), r"--features \S+x\.npy: features\[0, 0\] = nan is not finite"),
    ("--labels", lambda: -np.ones(N, np.int64), r"--labels \S+x\.npy: labels\[0\] = -1 is negative"),
    ("--features", lambda: np.array([{"a": 1}] * N, dtype=object),
     r"--features \S+x\.npy: not a plain \.npy array \(.*allow_pickle=False.*\); save a numeric array"),
])
def test_node_data_that_does_not_fit_is_one_line_naming_flag_file_and_shape(capsys, tmp_path, flag, make, pattern):
    npz = tmp_path / "g.npz"   # a fixed node count: no isolated nodes are added
    np.savez(npz, src=SRC, dst=DST, num_nodes=N)
    bad = tmp_path / "x.npy"
    np.save(bad, make(), allow_pickle=True)
    code, err, out = partition(capsys, tmp_path, "--input", npz, flag, bad)
    lines = error_lines(err)
    assert code == EXIT_USAGE and len(lines) == 1 and re.search(pattern, lines[0]), err
    assert not out.exists()


def test_refusals_before_reading(capsys, tmp_path):
    path = edges_file(tmp_path)
    mask = save(tmp_path, "m.npy", np.ones(N, bool))
    for flags, pattern in [
        (["--input", path, "--split", "0.5,0.2,0.2", "--train-mask", mask], r"--split makes the masks, "
                                                                            r"--train-mask gives one"),
        (["--dataset", "sbm-tiny", "--features", mask], r"--features applies to --input only"),
        (["--input", path, "--labels", tmp_path / "missing.npy"], r"--labels \S+missing\.npy: no such file"),
        (["--input", path, "--split", "0.6,0.5,0.2"], r"argument --split: split fractions sum to 1\.3, more than 1"),
        (["--input", path, "--split", "a,b,c"], r"argument --split: expected 3 comma-separated fractions"),
        (["--input", path, "--split", "0.5,0.5"], r"argument --split: a split is 3 fractions"),
        (["--input", path, "--split", "0,0.5,0.5"], r"argument --split: split fractions must be in \(0, 1\], got 0\.0,0\.5,0\.5"),
    ]:
        code, err, _ = partition(capsys, tmp_path, *flags)
        assert code == EXIT_USAGE and re.search(pattern, err), (flags, err)
        assert "] reading " not in err                   # refused before any reading


def test_node_data_with_more_rows_adds_isolated_nodes_to_an_edge_list(capsys, tmp_path):
    d = node_data(n=N + 3)                # ids 12..14 have no edge in the file
    code, err, out = partition(capsys, tmp_path, "--input", edges_file(tmp_path),
                               "--features", save(tmp_path, "x.npy", d["x"]),
                               "--labels", save(tmp_path, "y.npy", d["y"]), "--split", "0.5,0.25,0.25")
    assert code == EXIT_OK, err
    assert "15 nodes from the node data (the edges' largest id is 11): ids 12..14 have no edge" in err
    assert load_partition_meta(out).num_nodes == N + 3
    np.testing.assert_array_equal(stored(out, "features"), d["x"])
    npz = tmp_path / "g.npz"
    np.savez(npz, src=SRC, dst=DST, x=d["x"][:N])    # an input with its own features
    code, err, _ = partition(capsys, tmp_path, "--input", npz, "--features", tmp_path / "x.npy", out="o2")
    assert code == EXIT_USAGE and re.search(r"--features \S+x\.npy: the input already has features", err)


# --------------------------------------------------------------------------------- split
def test_split_is_seeded_disjoint_and_recorded(capsys, tmp_path):
    d = node_data()
    inputs = ["--input", edges_file(tmp_path), "--features", save(tmp_path, "x.npy", d["x"]),
              "--labels", save(tmp_path, "y.npy", d["y"])]
    masks = {}
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        code, err, out = partition(capsys, tmp_path, *inputs, "--split", "0.5,0.25,0.25", "--seed", seed,
                                   "--balance", "nodes,train", out=name)
        assert code == EXIT_OK, err
        masks[name] = np.stack([stored(out, m) for m in ("train_mask", "val_mask", "test_mask")])
    assert np.array_equal(masks["a"], masks["b"]) and not np.array_equal(masks["a"], masks["c"])
    assert masks["a"].sum(axis=1).tolist() == [6, 3, 3] and masks["a"].sum(axis=0).max() == 1
    meta = load_partition_meta(tmp_path / "a")
    assert meta.split == {"kind": "random", "fractions": [0.5, 0.25, 0.25], "seed": 3,
                          "counts": {"train": 6, "val": 3, "test": 3}}
    assert sum(pm.num_train for pm in meta.parts) == 6
    edit_meta(tmp_path / "a", lambda m: m.pop("split"))     # a folder written before: still readable
    assert load_partition_meta(tmp_path / "a").split is None and verify_partition(tmp_path / "a") == []
    # an input with its own masks refuses --split
    npz = tmp_path / "g.npz"
    np.savez(npz, src=SRC, dst=DST, train_mask=np.ones(N, bool))
    code, err, _ = partition(capsys, tmp_path, "--input", npz, "--split", "0.5,0.2,0.2", out="o")
    assert code == EXIT_USAGE and "--split: " in err and "has its own train mask; drop --split" in err


def test_a_split_may_leave_nodes_out_and_is_the_catalog_split(tmp_path):
    from partitioners.io import with_random_split
    from partitioners.synthetic import random_split

    g = read_edgelist(edges_file(tmp_path))
    split, record = with_random_split(g, (0.25, 0.25, 0.25), seed=5)
    assert record["counts"] == {"train": 3, "val": 3, "test": 3}
    masks = np.stack([split.train_mask, split.val_mask, split.test_mask])
    assert masks.sum(axis=0).max() == 1 and masks.sum() == 9           # 3 of the 12 nodes in no split
    assert np.array_equal(masks, np.stack(random_split(N, 0.25, 0.25, 0.25, 5)))


def test_a_folder_that_cannot_be_trained_is_warned_about(capsys, tmp_path):
    code, err, _ = partition(capsys, tmp_path, "--input", edges_file(tmp_path))
    warnings = [line for line in err.splitlines() if "cannot be trained" in line]
    assert code == EXIT_OK and len(warnings) == 1
    assert ("no features (add --features F.npy, float [N, F]); no labels (add --labels L.npy, int [N]); "
            "no training nodes (add --train-mask M.npy, or --split 0.6,0.2,0.2)") in warnings[0]
    d = node_data()
    code, err, _ = partition(capsys, tmp_path, "--input", edges_file(tmp_path),
                             "--features", save(tmp_path, "x.npy", d["x"]),
                             "--labels", save(tmp_path, "y.npy", d["y"]),
                             "--train-mask", save(tmp_path, "t.npy", np.zeros(N, bool)), out="o2")
    warnings = [line for line in err.splitlines() if "cannot be trained" in line]
    assert code == EXIT_OK and len(warnings) == 1 and "no features" not in warnings[0]
    assert "no labels" not in warnings[0] and "no training nodes" in warnings[0]


# ------------------------------------------------------------------------------- weights
def test_weighted_reads_the_third_field_and_without_it_a_warning(capsys, tmp_path):
    w = np.round(np.linspace(0.5, 3.0, SRC.size), 3)
    path = edges_file(tmp_path, [f"{s} {d} {x}\n" for s, d, x in zip(SRC, DST, w)], name="w.txt")
    code, err, out = partition(capsys, tmp_path, "--input", path, "--weighted")
    assert code == EXIT_OK and "ignored" not in err, err
    assert load_partition_meta(out).weighted
    got = {}
    for p in range(2):
        part = load_part(out, p)
        dst = np.repeat(part.original_ids[:part.num_inner], np.diff(part.indptr))
        for s, t, x in zip(part.original_ids[part.indices], dst, part.edge_weight):
            got[(int(s), int(t))] = float(x)
    assert got == {(int(s), int(d)): float(np.float32(x)) for s, d, x in zip(SRC, DST, w)}
    code, err, out = partition(capsys, tmp_path, "--input", path, out="plain")
    assert code == EXIT_OK and not load_partition_meta(out).weighted
    warning = [line for line in err.splitlines() if "fields" in line]
    assert len(warning) == 1 and "only the first 2 are used, the rest is ignored" in warning[0]
    assert "CLI: --weighted" in warning[0]
    npz = tmp_path / "g.npz"
    np.savez(npz, src=SRC, dst=DST)
    code, err, _ = partition(capsys, tmp_path, "--input", npz, "--weighted", out="o3")
    assert code == EXIT_USAGE and "--weighted applies to edge lists (their third field)" in err


# ------------------------------------------------------------------------------- relabel
def test_relabel_names_nodes_in_sorted_order_and_keeps_the_names(capsys, tmp_path):
    names = np.array(["ann", "bob", "cy", "dee", "eve", "fay"])
    rng = np.random.default_rng(1)
    pairs = [(names[i], names[(i + 1) % 6]) for i in range(6)] + [("fay", "bob"), ("cy", "ann")]
    rng.shuffle(pairs)                         # edge order does not matter: ids are sorted
    path = edges_file(tmp_path, ["source,target\n"] + [f"{a},{b}\n" for a, b in pairs], name="names.csv.gz")
    x = rng.standard_normal((6, 3)).astype(np.float32)    # row i: the i-th name in sorted order
    (tmp_path / "names.txt").write_text("\n".join(names) + "\n")   # the rows' names (--node-ids)
    code, err, out = partition(capsys, tmp_path, "--input", path, "--relabel", "--symmetrize",
                               "--node-ids", tmp_path / "names.txt", "--features", save(tmp_path, "x.npy", x),
                               "--labels", save(tmp_path, "y.npy", np.arange(6) % 2), "--split", "0.5,0.25,0.25")
    assert code == EXIT_OK, err
    kept = load_original_names(out)
    assert kept.dtype.kind == "U" and kept.tolist() == names.tolist()
    assert "node names: original_names.npy (strings" in run_cli(capsys, "inspect", out)[2]
    for p in range(2):
        part = load_part(out, p)
        np.testing.assert_array_equal(part.features, x[part.original_ids[:part.num_inner]])
        named = kept[part.original_ids]
        dst = np.repeat(named[:part.num_inner], np.diff(part.indptr))
        edges = set(zip(named[part.indices].tolist(), dst.tolist()))
        assert edges <= {(a, b) for a, b in pairs} | {(b, a) for a, b in pairs}
    assert verify_partition(out) == []


def test_relabel_of_sparse_integer_ids_sorts_them_numerically(tmp_path):
    ids = np.array([-5, 7, 1_000_000_007, 42, 10])
    lines = [f"{ids[i]} {ids[(i + 1) % 5]}\n" for i in range(5)] + ["007 -5\n"]   # 007 is node 7
    g = read_edgelist(edges_file(tmp_path, lines, name="sparse.txt"), relabel=True, chunk_bytes=7)
    assert g.node_names.dtype == np.int64 and g.node_names.tolist() == sorted(ids.tolist())
    src, dst = g.edges()
    named = {(int(g.node_names[s]), int(g.node_names[d])) for s, d in zip(src, dst)}
    assert named == {(int(ids[i]), int(ids[(i + 1) % 5])) for i in range(5)} | {(7, -5)}
    assert g.num_nodes == 5 and g.num_edges == 6
    # .npy edge arrays relabel the same way
    np.save(tmp_path / "e.npy", np.stack([ids, np.roll(ids, -1)]))
    h = read_graph(tmp_path / "e.npy", relabel=True)
    assert h.node_names.tolist() == sorted(ids.tolist()) and h.num_nodes == 5


@pytest.mark.parametrize("lines, weighted, names, num_edges", [
    (["alice bob\n", "bob carol\n"], False, ["alice", "bob", "carol"], 2),        # line 1 is an edge
    (["src,dst\n", "a,b\n", "b,c\n"], False, ["a", "b", "c"], 2),                  # a header
    (["src dst w\n", "a b 1.5\n", "c d 2\n"], True, ["a", "b", "c", "d"], 2),       # a header (weight)
    (["5 6\n", "a b\n"], False, ["5", "6", "a", "b"], 2),             # numbers: never a header
])
def test_relabel_takes_the_first_line_as_a_header_only_when_no_edge_could_be(tmp_path, lines, weighted,
                                                                             names, num_edges):
    g = read_edgelist(edges_file(tmp_path, lines, name="h.txt"), relabel=True, weighted=weighted)
    assert g.node_names.tolist() == names and g.num_edges == num_edges
    if weighted:
        assert sorted(g.edge_weight.tolist()) == [1.5, 2.0]


def test_relabel_blocks_merge_into_one_numbering():
    blocks = [block_codes(np.array([["b", "a"], ["c", "b"]])), block_codes(np.array([["zz", "a"]]))]
    names, codes = merge_block_names(blocks)
    assert names.tolist() == ["a", "b", "c", "zz"] and codes.tolist() == [[1, 0], [2, 1], [3, 0]]


def test_ids_that_need_relabel_say_so(capsys, tmp_path):
    path = edges_file(tmp_path, ["0 1\n", "1 bob\n"], name="n.txt")
    code, err, _ = partition(capsys, tmp_path, "--input", path)
    lines = error_lines(err)
    assert code == EXIT_USAGE and len(lines) == 1
    assert re.search(r"n\.txt, line 2: field 2 \('bob'\) is not an integer: '1 bob'; to read ids that "
                     r"are not integers >= 0 .*pass relabel=True \(CLI: --relabel\)", lines[0]), lines[0]
    negative = edges_file(tmp_path, ["0 1\n", "-3 1\n"], name="neg.txt")
    code, err, _ = partition(capsys, tmp_path, "--input", negative, out="o1")
    assert code == EXIT_USAGE and "source id -3 is negative" in err and "(CLI: --relabel)" in err
    sparse = edges_file(tmp_path, ["0 900\n", "900 50\n", "50 0\n"], name="s.txt")
    code, err, _ = partition(capsys, tmp_path, "--input", sparse, out="o2")
    assert code == EXIT_OK
    assert re.search(r"898 of the 901 node ids 0\.\.900 .* have no edge.*gnn-dist partition --relabel", err)
    npz = tmp_path / "g.npz"
    np.savez(npz, src=SRC, dst=DST)
    code, err, _ = partition(capsys, tmp_path, "--input", npz, "--relabel", out="o3")
    assert code == EXIT_USAGE and "--relabel applies to edge lists and .npy edge arrays, not to --input-format npz" in err
    with pytest.raises(GraphError, match="relabel=True numbers the nodes that have edges"):
        read_edgelist(path, relabel=True, num_nodes=5)


# ------------------------------------------------------------------------------ trainable
def test_readme_example_with_split_trains(capsys, tmp_path):
    """The README's edge-list example (``--balance nodes,train``) with --split, then the
    runtime loads the folder and trains two epochs in-process."""
    pytest.importorskip("torch")
    import gnn_dist
    from gnn_dist.train import main as train_main

    d = node_data()
    y = d["x"][:, :3].argmax(1)
    code, err, out = partition(capsys, tmp_path, "--input", edges_file(tmp_path, name="edges.tsv.gz"),
                               "--symmetrize", "--method", "metis", "--refine", "--balance", "nodes,train",
                               "--features", save(tmp_path, "x.npy", d["x"]), "--labels", save(tmp_path, "y.npy", y),
                               "--split", "0.6,0.2,0.2", parts=1)
    assert code == EXIT_OK, err
    part = gnn_dist.load_partition(out)
    assert (part.feature_dim, part.num_classes, part.global_num_train) == (4, 3, 7)
    assert int(part.val_mask.sum()) + int(part.test_mask.sum()) == 5
    metrics = tmp_path / "m.jsonl"
    assert train_main(["--data", str(out), "--epochs", "2", "--hidden", "4", "--log-every", "0",
                       "--kernels", "torch", "--metrics", str(metrics)]) == 0
    epochs = [r for r in map(json.loads, metrics.read_text().splitlines()) if "epoch" in r]
    assert [r["epoch"] for r in epochs] == [0, 1] and all(np.isfinite(r["train_loss"]) for r in epochs)
