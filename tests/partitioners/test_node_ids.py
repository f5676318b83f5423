"""Issue 36: node data comes with the order of its rows, and the reader says what it keeps.

- ``--relabel`` with node data needs ``--node-ids`` (the name of each row): the rows are joined
  to the nodes by name, never assumed to be in the sorted order of the names; each broken rule
  (a name that is not a node, a name twice, a node not listed) is one line, exit code 2.
- An npy-dir takes node data with the same flags as every other input (memory-mapped, row count
  checked against the folder's node count), so the README's out-of-core lines train.
- Duplicate edges are kept, counted and named in one warning line.
"""

from __future__ import annotations

import gzip
import logging
import re
from pathlib import Path

import numpy as np
import pytest

from corpus.corpus_utils import error_lines, run_cli
from partitioners import GraphError, load_part, load_partition_meta, verify_partition
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE
from partitioners.format import load_original_names
from partitioners.graph import Graph
from partitioners.io import NodeDataFiles, attach_node_data, read_edgelist, read_graph
from partitioners.io import edgelist as edgelist_mod
from partitioners.io import node_data as node_data_mod
from partitioners.io.edgelist import count_duplicate_edges
from partitioners.io.node_data import read_node_ids
from partitioners.io.relabel_ids import nodes_of_names

pytestmark = [pytest.mark.usefixtures("clean_registry")]

N = 40
NAMES = np.array([f"paper-{i}" for i in range(N)])     # sorted order: paper-0, paper-1, paper-10, ...


def named_graph(tmp_path: Path, *, seed: int = 0) -> tuple[Path, np.ndarray]:
    """An edge list of named nodes (a ring, so every name has an edge, plus random chords, no
    duplicate) and a permutation: the user's own row order."""
    rng = np.random.default_rng(seed)
    pairs = {(i, (i + 1) % N) for i in range(N)} | {tuple(p) for p in rng.integers(0, N, (60, 2))}
    lines = [f"{NAMES[s]}\t{NAMES[d]}\n" for s, d in sorted(pairs)]
    rng.shuffle(lines)
    path = tmp_path / "cites.tsv"
    path.write_text("".join(lines))
    return path, rng.permutation(N)


def node_data(tmp_path: Path, order: np.ndarray) -> dict[str, Path]:
    """Features whose column 0 is the paper's number, labels = number % 3, and a bool train mask
    of the even papers: rows in ``order`` (row k is paper ``order[k]``)."""
    x = np.stack([np.arange(N), -np.arange(N)], axis=1).astype(np.float32)
    files = {"x": x[order], "y": (np.arange(N) % 3)[order], "train": (np.arange(N) % 2 == 0)[order]}
    out = {}
    for key, a in files.items():
        out[key] = tmp_path / f"{key}.npy"
        np.save(out[key], a)
    return out


def write_names(path: Path, names, *, gz: bool = False) -> Path:
    text = "".join(f"{n}\n" for n in names)
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def partition(capsys, *flags, out: Path, parts: int = 2) -> tuple[int, str]:
    code, _, err = run_cli(capsys, "partition", *flags, "--parts", parts, "--out", out, "--no-progress")
    return code, err


def number_of(name: str) -> int:
    return int(str(name).split("-")[1])


def stored_by_name(folder: Path) -> dict[str, tuple[np.ndarray, int, bool]]:
    """Name -> (features row, label, in the train mask) as the parts store them."""
    names = load_original_names(folder)
    out = {}
    for p in range(load_partition_meta(folder).num_parts):
        part = load_part(folder, p)
        for r in range(part.num_inner):
            out[str(names[part.original_ids[r]])] = (part.features[r], int(part.labels[r]),
                                                     bool(part.train_mask[r]))
    return out


# ---------------------------------------------------------------------------- --node-ids
def test_rows_in_the_users_order_are_matched_by_name(capsys, tmp_path):
    """The issue's case: names in the edges, x.npy saved in the user's own order. Without the
    names of the rows it is refused before any reading; with them every node gets its row."""
    edges, order = named_graph(tmp_path)
    files = node_data(tmp_path, order)
    flags = ["--input", edges, "--relabel", "--symmetrize", "--features", files["x"], "--labels", files["y"],
             "--train-mask", files["train"]]
    code, err = partition(capsys, *flags, out=tmp_path / "refused")
    lines = error_lines(err)
    assert code == EXIT_USAGE and len(lines) == 1, err
    assert lines[0].startswith(f"[gnn-dist] error: --features {files['x']}: with --relabel the nodes are named")
    assert "pass --node-ids FILE" in lines[0] and "never assumed" in lines[0]
    assert "reading" not in err and not (tmp_path / "refused").exists()

    names = write_names(tmp_path / "ids.txt.gz", NAMES[order], gz=True)
    code, err = partition(capsys, *flags, "--node-ids", names, out=tmp_path / "out")
    assert code == EXIT_OK, err
    assert "node data rows matched to the 40 nodes by name" in err and "cannot be trained" not in err
    kept = stored_by_name(tmp_path / "out")
    assert sorted(kept) == sorted(NAMES.tolist())
    for name, (x, y, train) in kept.items():
        i = number_of(name)
        assert x.tolist() == [i, -i] and y == i % 3 and train == (i % 2 == 0), name
    assert verify_partition(tmp_path / "out") == []


def test_sorted_rows_need_their_names_too_and_give_the_same_folder(capsys, tmp_path):
    """Rows already in the sorted order of the names (what --relabel used to assume) are
    accepted with a names file in that order: the same folder as any other order."""
    edges, order = named_graph(tmp_path)
    folders = []
    for k, rows in enumerate([np.argsort(NAMES), order]):
        sub = tmp_path / f"in{k}"
        sub.mkdir()
        files = node_data(sub, rows)
        names = write_names(sub / "ids.txt", NAMES[rows])
        code, err = partition(capsys, "--input", edges, "--relabel", "--features", files["x"], "--labels",
                              files["y"], "--node-ids", names, "--split", "0.5,0.25,0.25", out=sub / "out")
        assert code == EXIT_OK, err
        folders.append(sub / "out")
    for p in range(2):
        a, b = load_part(folders[0], p), load_part(folders[1], p)
        np.testing.assert_array_equal(a.features, b.features)
        np.testing.assert_array_equal(a.labels, b.labels)
        np.testing.assert_array_equal(a.original_ids, b.original_ids)


def test_integer_mask_lists_rows_and_a_npy_of_names_works(capsys, tmp_path):
    edges, order = named_graph(tmp_path)
    files = node_data(tmp_path, order)
    np.save(tmp_path / "names.npy", NAMES[order])
    rows = np.array([0, 5, 7])                                 # rows of x.npy, not node numbers
    np.save(tmp_path / "test_rows.npy", rows)
    code, err = partition(capsys, "--input", edges, "--relabel", "--features", files["x"], "--labels",
                          files["y"], "--train-mask", files["train"], "--test-mask", tmp_path / "test_rows.npy",
                          "--node-ids", tmp_path / "names.npy", out=tmp_path / "out")
    assert code == EXIT_OK, err
    names = load_original_names(tmp_path / "out")
    tested = set()
    for p in range(2):
        part = load_part(tmp_path / "out", p)
        tested |= {str(names[i]) for i in part.original_ids[:part.num_inner][part.test_mask]}
    assert tested == set(NAMES[order[rows]].tolist())


def test_integer_names_are_matched_as_numbers(capsys, tmp_path):
    """Sparse or negative integer ids: '007' in the names file is node 7, as in the edges."""
    ids = np.array([-5, 7, 1_000_000_007, 42, 10])
    (tmp_path / "e.txt").write_text("".join(f"{ids[i]} {ids[(i + 1) % 5]}\n" for i in range(5)))
    listed = ["42", "007", "-5", "1000000007", "10"]
    np.save(tmp_path / "x.npy", np.array([[42], [7], [-5], [1e9 + 7], [10]], np.float32))
    names = write_names(tmp_path / "ids.txt", [f"  {t}\r" for t in listed])    # whitespace ignored
    code, err = partition(capsys, "--input", tmp_path / "e.txt", "--relabel", "--features", tmp_path / "x.npy",
                          "--node-ids", names, out=tmp_path / "out")
    assert code == EXIT_OK, err
    kept = load_original_names(tmp_path / "out")
    for p in range(2):
        part = load_part(tmp_path / "out", p)
        np.testing.assert_array_equal(part.features[:, 0], kept[part.original_ids[:part.num_inner]].astype(np.float32))


@pytest.mark.parametrize("listed, message", [
    (lambda n: [*n, "paper-99", "paper-77"],
     r"--node-ids \S+: 2 name\(s\) are not nodes of the graph, e\.g\. 'paper-99' on line 41; the nodes are "
     r"the names the edges mention \(a node without edges cannot be added\)"),
    (lambda n: [*n[:6], n[2], *n[6:]],
     r"--node-ids \S+: 1 name\(s\) are listed more than once, e\.g\. '\S+' on lines 3 and 7; list each node once"),
    (lambda n: n[:-1],
     r"--node-ids \S+: 1 of the graph's 40 nodes are not listed, e\.g\. '\S+'; every node the edges mention"),
    (lambda n: [*n[:3], "", *n[3:]], r"--node-ids \S+, line 4: an empty line; the file lists one name per line"),
])
def test_each_broken_rule_is_one_line(capsys, tmp_path, listed, message):
    edges, order = named_graph(tmp_path)
    files = node_data(tmp_path, order)
    names = write_names(tmp_path / "ids.txt", listed(NAMES[order].tolist()))
    code, err = partition(capsys, "--input", edges, "--relabel", "--features", files["x"], "--node-ids", names,
                          out=tmp_path / "out")
    lines = error_lines(err)
    assert code == EXIT_USAGE and len(lines) == 1, err
    assert re.search(message, lines[0]), lines[0]
    assert not (tmp_path / "out").exists()


def test_a_node_data_file_of_another_length_names_the_names_file(capsys, tmp_path):
    edges, order = named_graph(tmp_path)
    files = node_data(tmp_path, order)
    np.save(tmp_path / "y39.npy", np.zeros(N - 1, np.int64))
    names = write_names(tmp_path / "ids.txt", NAMES[order])
    code, err = partition(capsys, "--input", edges, "--relabel", "--features", files["x"], "--labels",
                          tmp_path / "y39.npy", "--node-ids", names, out=tmp_path / "out")
    lines = error_lines(err)
    assert code == EXIT_USAGE and len(lines) == 1
    assert f"--labels {tmp_path / 'y39.npy'}: shape [39] but --node-ids {names} names 40 rows" in lines[0]


def test_node_ids_needs_relabel_and_node_data(capsys, tmp_path):
    edges, order = named_graph(tmp_path)
    files = node_data(tmp_path, order)
    names = write_names(tmp_path / "ids.txt", NAMES[order])
    ints = tmp_path / "ints.txt"
    ints.write_text("0 1\n1 2\n")
    cases = [(["--input", ints, "--features", files["x"], "--node-ids", names],
              "the nodes have names only with --relabel; without it row i of the node data is node i"),
             (["--input", edges, "--relabel", "--node-ids", names], "there is no node data to order"),
             (["--input", edges, "--relabel", "--features", files["x"], "--node-ids", tmp_path / "nope.txt"],
              "nope.txt: no such file"),
             (["--dataset", "sbm-tiny", "--node-ids", names], "--node-ids applies to --input only")]
    for k, (flags, message) in enumerate(cases):
        code, err = partition(capsys, *flags, out=tmp_path / f"o{k}")
        lines = error_lines(err)
        assert code == EXIT_USAGE and len(lines) == 1 and message in lines[0], err


def test_the_python_api_refuses_and_matches_as_the_cli(tmp_path):
    edges, order = named_graph(tmp_path)
    files = node_data(tmp_path, order)
    g = read_edgelist(edges, relabel=True)
    with pytest.raises(GraphError, match=r"features \S+x\.npy: the graph's nodes are named .* pass node_ids FILE"):
        attach_node_data(g, NodeDataFiles(paths={"features": files["x"]}))
    names = write_names(tmp_path / "ids.txt", NAMES[order])
    h = attach_node_data(g, NodeDataFiles(paths={"features": files["x"], "labels": files["y"]}, node_ids=names))
    assert [number_of(n) for n in h.node_names] == h.x[:, 0].astype(int).tolist()
    assert (h.y == h.x[:, 0].astype(int) % 3).all()
    ints = tmp_path / "ints.txt"
    ints.write_text("0 1\n1 2\n")
    with pytest.raises(GraphError, match="the graph's nodes are not named"):
        attach_node_data(read_edgelist(ints), NodeDataFiles(paths={"features": files["x"]}, node_ids=names))


def test_names_are_read_block_by_block(tmp_path, monkeypatch):
    listed = [f"n{i}" for i in range(1000)]
    path = write_names(tmp_path / "ids.txt", listed)
    whole = read_node_ids("--node-ids ids.txt", path, numeric=False)
    monkeypatch.setattr(node_data_mod, "_NAMES_BLOCK_BYTES", 7)
    assert read_node_ids("--node-ids ids.txt", path, numeric=False).tolist() == whole.tolist() == listed
    no_end = tmp_path / "no_end.txt"
    no_end.write_text("3\n1\n2")                                     # no line end after the last name
    assert read_node_ids("x", no_end, numeric=True).tolist() == [3, 1, 2]
    no_end.write_text("3\n1\nbob\n")
    with pytest.raises(GraphError, match=r"x, line 3: 'bob' is not a node of the graph \(its nodes are named "
                                         r"by integers\)"):
        read_node_ids("x", no_end, numeric=True)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert read_node_ids("x", empty, numeric=False).size == 0


def test_nodes_of_names_is_a_sorted_join():
    names = np.array(["a", "b", "d", "zz"])
    assert nodes_of_names(names, np.array(["zz", "c", "a", "zzz", "d"])).tolist() == [3, -1, 0, -1, 2]
    assert nodes_of_names(np.array([-5, 7, 42]), np.array([42, 8, -5])).tolist() == [2, -1, 0]


# ------------------------------------------------------------------------ npy-dir node data
def test_an_npy_dir_takes_node_data_flags_as_the_edge_list_does(capsys, tmp_path):
    """The README's lines: convert, then partition the npy-dir with --features/--labels: the
    same parts as the edge list with the same flags, and trainable."""
    rng = np.random.default_rng(0)
    n = 60
    src, dst = rng.integers(0, n, 400), rng.integers(0, n, 400)
    edges = tmp_path / "edges.tsv.gz"
    edges.write_bytes(gzip.compress("".join(f"{s}\t{d}\n" for s, d in zip(src, dst)).encode()))
    np.save(tmp_path / "x.npy", rng.standard_normal((n, 5)))                # float64: converted
    np.save(tmp_path / "y.npy", np.arange(n) % 4)
    np.save(tmp_path / "train.npy", np.arange(0, n, 3))                      # node ids
    flags = ["--features", tmp_path / "x.npy", "--labels", tmp_path / "y.npy", "--train-mask",
             tmp_path / "train.npy", "--symmetrize", "--method", "fennel"]
    code, err = partition(capsys, "--input", edges, *flags, out=tmp_path / "mem")
    assert code == EXIT_OK, err
    assert run_cli(capsys, "convert", "--input", edges, "--out", tmp_path / "g-npy", "--no-progress")[0] == EXIT_OK
    code, err = partition(capsys, "--input", tmp_path / "g-npy", *flags, out=tmp_path / "ooc")
    assert code == EXIT_OK, err
    assert "cannot be trained" not in err
    for p in range(2):
        a, b = load_part(tmp_path / "mem", p), load_part(tmp_path / "ooc", p)
        for field in ("features", "labels", "train_mask", "original_ids", "indptr", "indices"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert verify_partition(tmp_path / "ooc") == []


def test_npy_dir_node_data_flags_are_checked(capsys, tmp_path):
    folder = tmp_path / "g"
    folder.mkdir()
    np.save(folder / "src.npy", np.array([0, 1, 2, 3]))
    np.save(folder / "dst.npy", np.array([1, 2, 3, 0]))
    (folder / "graph.json").write_text('{"num_nodes": 5}')
    np.save(folder / "labels.npy", np.arange(5) % 2)
    np.save(tmp_path / "x4.npy", np.zeros((4, 2), np.float32))
    np.save(tmp_path / "y.npy", np.arange(5) % 2)
    np.save(tmp_path / "m01.npy", np.array([0, 1, 0, 1, 1]))
    cases = [(["--features", tmp_path / "x4.npy"],
              f"--features {tmp_path / 'x4.npy'}: has 4 rows but the graph has 5 nodes"),
             (["--labels", tmp_path / "y.npy"],
              f"--labels {tmp_path / 'y.npy'}: the npy-dir {folder} already has labels.npy"),
             (["--train-mask", tmp_path / "m01.npy"], "an int array of 0/1 of length 5: a mask or node ids?"),
             (["--relabel", "--node-ids", tmp_path / "y.npy"], "--relabel applies to edge lists and .npy edge arrays")]
    for k, (flags, message) in enumerate(cases):
        code, err = partition(capsys, "--input", folder, *flags, out=tmp_path / f"o{k}")
        lines = error_lines(err)
        assert code == EXIT_USAGE and len(lines) == 1 and message in lines[0], (message, err)


# ------------------------------------------------------------------------ duplicate edges
def brute_duplicates(src, dst) -> int:
    return len(src) - len(set(zip(np.asarray(src).tolist(), np.asarray(dst).tolist())))


@pytest.mark.parametrize("chunk", [1, 3, 1 << 22])
def test_count_duplicate_edges_on_the_csr(monkeypatch, chunk):
    monkeypatch.setattr(edgelist_mod, "_DUPLICATE_CHUNK", chunk)
    rng = np.random.default_rng(3)
    for n, e in ((1, 3), (5, 0), (5, 1), (7, 30), (20, 50), (50, 40)):
        src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
        g = Graph.from_edges(src, dst, n)
        assert count_duplicate_edges(g.indptr, g.indices) == brute_duplicates(src, dst), (n, e)
        s = Graph.from_edges(src, dst, n, symmetrize=True)   # the reverses are added once: input repeats stay
        assert count_duplicate_edges(s.indptr, s.indices) == brute_duplicates(src, dst)


def test_duplicate_edges_are_counted_in_one_warning(capsys, tmp_path, caplog):
    path = tmp_path / "dup.tsv"
    path.write_text("0 1\n1 2\n0 1\n2 0\n0 1\n1 0\n")              # 0 1 three times; 1 0 is another edge
    code, err = partition(capsys, "--input", path, out=tmp_path / "o1")
    warnings = [line for line in err.splitlines() if "duplicate edges" in line]
    assert code == EXIT_OK and len(warnings) == 1, err
    assert warnings[0] == (f"[gnn-dist] warning: {path}: 2 duplicate edges (a src -> dst pair that occurs again) "
                           f"are kept as separate edges, so each copy counts in the aggregation and the degrees; "
                           f"pass remove_duplicates=True (CLI: --remove-duplicates) to keep one of each")
    assert load_partition_meta(tmp_path / "o1").num_edges == 6          # kept: today's treatment
    code, err = partition(capsys, "--input", path, "--remove-duplicates", out=tmp_path / "o2")
    assert code == EXIT_OK and "duplicate edges (a src" not in err and "duplicates_removed 2" in err
    code, err = partition(capsys, "--input", path, "--symmetrize", out=tmp_path / "o3")
    assert code == EXIT_OK and f"{path}: 2 duplicate edges" in err
    clean = tmp_path / "clean.tsv"
    clean.write_text("0 1\n1 0\n1 2\n")
    code, err = partition(capsys, "--input", clean, out=tmp_path / "o4")
    assert code == EXIT_OK and "duplicate edges" not in err
    # the other readers that keep duplicates: .npz/.npy arrays, an npy-dir
    np.savez(tmp_path / "g.npz", src=[0, 0, 1], dst=[1, 1, 0])
    np.save(tmp_path / "e.npy", np.array([[0, 0, 1], [1, 1, 0]]))
    caplog.set_level(logging.WARNING, logger="partitioners")
    for name in ("g.npz", "e.npy"):
        caplog.clear()
        read_graph(tmp_path / name)
        assert [r.getMessage() for r in caplog.records if "duplicate edges" in r.getMessage()] == [
            f"{tmp_path / name}: 1 duplicate edges (a src -> dst pair that occurs again) are kept as separate "
            f"edges, so each copy counts in the aggregation and the degrees; pass remove_duplicates=True "
            f"(CLI: --remove-duplicates) to keep one of each"]
    assert run_cli(capsys, "convert", "--input", path, "--out", tmp_path / "dup-npy", "--no-progress")[0] == EXIT_OK
    code, err = partition(capsys, "--input", tmp_path / "dup-npy", out=tmp_path / "o5")
    assert code == EXIT_OK and f"{tmp_path / 'dup-npy'}: 2 duplicate edges" in err
