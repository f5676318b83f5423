"""``--input-format planetoid``: the Planetoid files as published (``ind.NAME.*``, pickles of
numpy/scipy objects, Python 3 protocol 2 and Python 2 style), the standard split, CiteSeer's
missing test ids, and the restricted unpickler that refuses anything but the data it needs."""

from __future__ import annotations

import collections
import json
import os
import pickle
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from corpus.corpus_utils import error_lines, run_cli
from partitioners import GraphError, load_part, load_partition_meta, verify_partition
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE
from partitioners.io import read_graph, read_planetoid
from partitioners.io.safe_pickle import UnsafePickleError, restricted_load
from py2_pickle import py2_dumps

NUM_CLASSES, DIM, PER_CLASS = 3, 6, 4
NUM_ALL = 520          # allx rows: 12 training rows (y), then the 500 validation rows, then 8 more
TEST_IDS = np.array([525, 520, 529, 523, 521, 527, 524, 526, 522])   # 528 is missing (CiteSeer-like)


# ------------------------------------------------------------------ writing files as published
def dump(obj, path: Path, style: str) -> None:
    if style == "py2":
        path.write_bytes(py2_dumps(obj))
    else:
        with open(path, "wb") as f:
            pickle.dump(obj, f, protocol=0 if style == "py3-protocol0" else 2)


def dataset(seed: int = 0) -> dict:
    """The arrays of a small Planetoid-layout set (530 nodes, node 528 missing from the test set)."""
    rng = np.random.default_rng(seed)
    n = int(TEST_IDS.max()) + 1
    x = (rng.random((n, DIM)) < 0.3).astype(np.float32)
    labels = rng.integers(0, NUM_CLASSES, n)
    labels[:NUM_CLASSES * PER_CLASS] = np.repeat(np.arange(NUM_CLASSES), PER_CLASS)
    onehot = np.eye(NUM_CLASSES, dtype=np.float32)[labels]
    src = rng.integers(0, n, 1500)
    dst = rng.integers(0, n, 1500)
    graph = collections.defaultdict(list)
    for u, v in zip(src.tolist(), dst.tolist()):
        graph[u].append(v)
    graph[3].append(3)                    # a self-loop and a repeated edge, as the real files have
    graph[4] += [5, 5]
    return {"x": x, "onehot": onehot, "labels": labels, "graph": graph, "n": n}


def write_planetoid(folder: Path, name: str = "toy", style: str = "py3", seed: int = 0) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    d = dataset(seed)
    x, onehot = d["x"], d["onehot"]
    num_train = NUM_CLASSES * PER_CLASS
    files = {"x": sp.csr_matrix(x[:num_train]), "allx": sp.csr_matrix(x[:NUM_ALL]),
             "tx": sp.csr_matrix(x[TEST_IDS]), "y": onehot[:num_train], "ally": onehot[:NUM_ALL],
             "ty": onehot[TEST_IDS], "graph": d["graph"]}
    for suffix, obj in files.items():
        dump(obj, folder / f"ind.{name}.{suffix}", style)
    (folder / f"ind.{name}.test.index").write_text("".join(f"{i}\n" for i in TEST_IDS))
    return d


def expected_edges(graph: dict) -> set[tuple[int, int]]:
    edges = {(u, v) for u, vs in graph.items() for v in vs if u != v}
    return edges | {(v, u) for u, v in edges}


# ------------------------------------------------------------------------------------ reading
@pytest.mark.parametrize("style", ["py3", "py2", "py3-protocol0"])
def test_the_published_layout_reads_as_the_usual_loaders_build_it(tmp_path, style):
    d = write_planetoid(tmp_path / "toy", style=style)
    written = (tmp_path / "toy" / "ind.toy.allx").read_bytes()
    expected_names = {"py2": [b"cnumpy.core.multiarray\n_reconstruct\n", b"cscipy.sparse.csr\ncsr_matrix\n"],
                      "py3": [b"_codecs", b"numpy._core.multiarray", b"scipy.sparse._csr"],
                      "py3-protocol0": [b"copy_reg\n_reconstructor", b"__builtin__\nobject"]}[style]
    assert all(name in written for name in expected_names)          # each style names what it should
    assert (b"_codecs" in written) == (style != "py2")              # py2: raw bytes as py2 str opcodes
    g = read_planetoid(tmp_path / "toy")
    n = d["n"]
    assert g.num_nodes == n == 530 and g.name == "toy" and g.num_classes == NUM_CLASSES
    missing = 528
    expected_x = d["x"].copy()
    expected_x[missing] = 0                          # not in test.index: zero features, label 0
    expected_y = d["labels"].copy()
    expected_y[missing] = 0
    np.testing.assert_array_equal(g.x, expected_x)   # tx row k is node test.index[k]
    np.testing.assert_array_equal(g.y, expected_y)
    num_train = NUM_CLASSES * PER_CLASS
    assert np.flatnonzero(g.train_mask).tolist() == list(range(num_train))
    assert np.flatnonzero(g.val_mask).tolist() == list(range(num_train, num_train + 500))
    assert np.flatnonzero(g.test_mask).tolist() == sorted(TEST_IDS.tolist())
    assert not (g.train_mask[missing] or g.val_mask[missing] or g.test_mask[missing])
    src, dst = g.edges()
    stored = list(zip(src.tolist(), dst.tolist()))
    assert len(stored) == len(set(stored))           # repeated edges removed, self-loops removed
    assert set(stored) == expected_edges(d["graph"])
    assert g.is_symmetric()


def test_a_folder_with_raw_and_several_sets(tmp_path):
    write_planetoid(tmp_path / "Cora" / "raw", name="cora")
    assert read_graph(tmp_path / "Cora").name == "cora"            # PyG's layout, format inferred
    write_planetoid(tmp_path / "two", name="cora")
    write_planetoid(tmp_path / "two", name="citeseer", seed=1)
    with pytest.raises(GraphError, match=r"holds the Planetoid sets \['citeseer', 'cora'\]; choose one "
                                         r"with planetoid_name= \(CLI: --planetoid-name\)"):
        read_planetoid(tmp_path / "two")
    assert read_planetoid(tmp_path / "two", planetoid_name="CiteSeer").name == "citeseer"
    with pytest.raises(GraphError, match=r"no Planetoid set 'pubmed' \(no ind\.pubmed\.graph\); the folder "
                                         r"holds \['citeseer', 'cora'\]"):
        read_planetoid(tmp_path / "two", planetoid_name="pubmed")
    (tmp_path / "two" / "ind.cora.ty").unlink()
    with pytest.raises(GraphError, match=r"ind\.cora\.ty: missing"):
        read_planetoid(tmp_path / "two", planetoid_name="cora")


def test_the_cli_writes_a_trainable_folder_with_the_standard_split(capsys, tmp_path, clean_registry):
    write_planetoid(tmp_path / "toy", style="py2")
    out = tmp_path / "parts"
    code, stdout, err = run_cli(capsys, "partition", "--input", tmp_path / "toy", "--input-format",
                                "planetoid", "--parts", "2", "--balance", "nodes,train", "--out", out,
                                "--no-progress", "--json")
    assert code == EXIT_OK, err
    assert "cannot be trained" not in err
    meta = load_partition_meta(out)
    assert (meta.feature_dim, meta.num_classes, meta.label_kind) == (DIM, NUM_CLASSES, "class")
    assert sum(pm.num_train for pm in meta.parts) == NUM_CLASSES * PER_CLASS
    assert meta.split == {"kind": "planetoid", "counts": {"train": 12, "val": 500, "test": 9}}
    assert json.loads(stdout)["split"] == meta.split
    assert verify_partition(out) == []
    # --split, node-data flags and --relabel do not apply: the set has its own
    for flags, pattern in ((["--split", "0.5,0.2,0.2"], r"--split: .* has its own train mask; drop --split"),
                           (["--features", tmp_path / "f.npy"], r"--features .*f\.npy: the input already has features"),
                           (["--relabel"], r"--relabel applies to edge lists and \.npy edge arrays, not to "
                                           r"--input-format planetoid"),
                           (["--weighted"], r"--weighted applies to edge lists")):
        np.save(tmp_path / "f.npy", np.zeros((530, 2), np.float32))
        code, _, err = run_cli(capsys, "partition", "--input", tmp_path / "toy", "--parts", "2",
                               "--out", tmp_path / "x", "--no-progress", *flags)
        lines = error_lines(err)
        assert code == EXIT_USAGE and len(lines) == 1 and re.search(pattern, lines[0]), err
    code, _, err = run_cli(capsys, "partition", "--input", tmp_path / "toy" / "ind.toy.x", "--parts", "2",
                           "--planetoid-name", "toy", "--out", tmp_path / "x", "--no-progress",
                           "--input-format", "edgelist")
    assert code == EXIT_USAGE and "--planetoid-name applies to --input-format planetoid" in err


# ------------------------------------------------------------------------- refusing pickles
class _RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_runs_code_is_refused_and_nothing_runs(capsys, tmp_path, clean_registry):
    write_planetoid(tmp_path / "toy")
    marker = tmp_path / "PWNED"
    with open(tmp_path / "toy" / "ind.toy.tx", "wb") as f:   # the attack hidden inside a dict
        pickle.dump({"data": [1, 2, _RunsCode(marker)]}, f, protocol=2)
    with pytest.raises(GraphError, match=r"ind\.toy\.tx: refused to unpickle (posix|nt)\.system: only numpy "
                                         r"arrays, scipy sparse matrices and dicts of lists are allowed"):
        read_planetoid(tmp_path / "toy")
    assert not marker.exists()
    code, _, err = run_cli(capsys, "partition", "--input", tmp_path / "toy", "--parts", "2",
                           "--out", tmp_path / "x", "--no-progress")
    lines = error_lines(err)
    assert code == EXIT_USAGE and len(lines) == 1 and "refused to unpickle" in lines[0], err
    assert not marker.exists() and not (tmp_path / "x").exists()


@pytest.mark.parametrize("payload, refused", [
    (b"cnot_a_real_module_zz\nanything\n)R.", "not_a_real_module_zz.anything"),    # never imported
    (b"cbuiltins\neval\n(V1+1\ntR.", "builtins.eval"),
    (b"c__builtin__\ngetattr\n.", "__builtin__.getattr"),
    (b"csubprocess\nPopen\n.", "subprocess.Popen"),
    (b"cnumpy\nload\n.", "numpy.load"),
])
def test_the_unpickler_resolves_only_its_allow_list(tmp_path, payload, refused):
    path = tmp_path / "evil.pkl"
    path.write_bytes(payload)
    with pytest.raises(UnsafePickleError, match=rf"evil\.pkl: refused to unpickle {refused.replace('.', '[.]')}"):
        restricted_load(path)
    assert "not_a_real_module_zz" not in sys.modules


def test_allowed_callables_refuse_arguments_outside_the_data_they_build(tmp_path):
    path = tmp_path / "codec.pkl"   # _codecs.encode with another codec than latin-1
    path.write_bytes(b"c_codecs\nencode\n(Vabc\nVrot13\ntR.")
    with pytest.raises(UnsafePickleError, match=r"_codecs\.encode with encoding 'rot13'"):
        restricted_load(path)
    path.write_bytes(b"ccopy_reg\n_reconstructor\n(c__builtin__\nlist\nc__builtin__\nobject\nNtR.")
    with pytest.raises(UnsafePickleError, match=r"copyreg\._reconstructor\(builtins\.list, builtins\.object, None\)"):
        restricted_load(path)
    bad = sp.csr_matrix(np.eye(3, dtype=np.float32))
    bad.indices = bad.indices.copy()
    bad.indices[1] = 7                      # an index outside the matrix: rebuilt and refused
    (tmp_path / "toy").mkdir()
    write_planetoid(tmp_path / "toy")
    with open(tmp_path / "toy" / "ind.toy.x", "wb") as f:
        pickle.dump(bad, f, protocol=2)
    with pytest.raises(GraphError, match=r"ind\.toy\.x"):
        read_planetoid(tmp_path / "toy")


def test_load_partition_sees_the_planetoid_data(tmp_path, capsys, clean_registry):
    """The folder is what the trainer needs: the runtime loads it with features, labels, masks."""
    gnn_dist = pytest.importorskip("gnn_dist")
    write_planetoid(tmp_path / "toy")
    out = tmp_path / "p1"
    assert run_cli(capsys, "partition", "--input", tmp_path / "toy", "--parts", "1", "--method", "random",
                   "--out", out, "--no-progress")[0] == EXIT_OK
    part = gnn_dist.load_partition(out)
    assert (part.feature_dim, part.num_classes, part.global_num_train) == (DIM, NUM_CLASSES, 12)
    assert int(part.val_mask.sum()) == 500 and int(part.test_mask.sum()) == 9
    order = part.original_ids.numpy()
    expected = write_planetoid(tmp_path / "again")["labels"]
    expected[528] = 0
    np.testing.assert_array_equal(part.y.numpy(), expected[order])
    np.testing.assert_array_equal(load_part(out, 0).labels, expected[order])
