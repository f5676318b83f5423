"""Typed inputs of ``gnn-dist partition --input``: the OGB heterogeneous layout, knowledge-graph
triples and the typed npy-dir; ``--add-reverse`` and ``--target-type``; the PyG and DGL adapters.

Each reader's folder is compared with the folder of the same HeteroGraph built in Python and
partitioned by ``partition_graph`` (same method and seed): every part file's checksum is equal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from corpus.corpus_utils import error_lines, run_cli
from partitioners.api import partition_graph
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE
from partitioners.errors import GraphError
from partitioners.format import load_original_names
from partitioners.hetero import HeteroGraph
from partitioners.hetero.readers import read_hetero
from partitioners.hetero.triples import read_triples
from partitioners.io import infer_format
from typed_inputs import write_ogb_folder, write_triples, write_typed_npy_dir


def _graph(seed: int = 0) -> HeteroGraph:
    rng = np.random.default_rng(seed)
    return HeteroGraph(
        {"paper": 40, "author": 25, "field": 6},
        {("author", "writes", "paper"): (rng.integers(0, 25, 90), rng.integers(0, 40, 90)),
         ("paper", "cites", "paper"): (rng.integers(0, 40, 120), rng.integers(0, 40, 120)),
         ("paper", "has_topic", "field"): (np.arange(40), rng.integers(0, 6, 40))},
        features={"paper": rng.standard_normal((40, 3)).astype(np.float32)},
        labels={"paper": rng.integers(0, 3, 40)},
        masks={"paper": {"train": np.arange(40) < 24, "val": (np.arange(40) >= 24) & (np.arange(40) < 32),
                         "test": np.arange(40) >= 32}})


def _partition(capsys, *flags) -> tuple[int, str]:
    code, _, err = run_cli(capsys, "partition", *flags, "--parts", 2, "--method", "random", "--no-progress")
    return code, err


def _part_files(folder: Path) -> list[dict]:
    meta = json.loads((folder / "partition.json").read_text())
    return [{name: rec["sha256"] for name, rec in part["files"].items()} for part in meta["parts"]]


def _assert_same_folder(folder: Path, g: HeteroGraph, tmp_path: Path) -> None:
    """``folder`` holds what partitioning ``g`` in Python writes: types, relations, every part file."""
    ref = tmp_path / "python-built"
    partition_graph(g, 2, "random", ref)
    got, want = (json.loads((f / "partition.json").read_text()) for f in (folder, ref))
    for key in ("node_types", "relations", "target_type", "num_classes", "part_type_counts"):
        assert got["hetero"][key] == want["hetero"][key], key
    assert _part_files(folder) == _part_files(ref)


# ---------------------------------------------------------------------------------- readers
def test_ogb_hetero_folder_round_trips_through_the_cli(capsys, tmp_path) -> None:
    g = _graph()
    write_ogb_folder(tmp_path / "mini", g)
    assert infer_format(tmp_path / "mini") == "ogb-hetero"
    code, err = _partition(capsys, "--input", tmp_path / "mini", "--out", tmp_path / "o")
    assert code == EXIT_OK, err
    expected = HeteroGraph(g.num_nodes_dict, dict(sorted(g.edges.items())), features=g.features, labels=g.labels,
                           masks=g.masks)  # OGB's relations come in the sorted order of their folders
    _assert_same_folder(tmp_path / "o", expected, tmp_path)


def test_add_reverse_doubles_the_relations(capsys, tmp_path) -> None:
    write_ogb_folder(tmp_path / "mini", _graph())
    code, err = _partition(capsys, "--input", tmp_path / "mini", "--add-reverse", "--out", tmp_path / "o")
    assert code == EXIT_OK, err
    meta = json.loads((tmp_path / "o" / "partition.json").read_text())
    rels = [tuple(r) for r in meta["hetero"]["relations"]]
    assert len(rels) == 6 and ("paper", "rev_writes", "author") in rels and meta["add_reverse"] is True


def test_typed_npy_dir_round_trips_through_the_cli(capsys, tmp_path) -> None:
    g = _graph(1)
    write_typed_npy_dir(tmp_path / "typed", g)
    assert infer_format(tmp_path / "typed") == "typed-npy-dir"
    code, err = _partition(capsys, "--input", tmp_path / "typed", "--out", tmp_path / "o")
    assert code == EXIT_OK, err
    expected = HeteroGraph(g.num_nodes_dict, dict(sorted(g.edges.items())), features=g.features,
                           labels=g.labels, masks=g.masks, num_classes=g.num_classes)
    _assert_same_folder(tmp_path / "o", expected, tmp_path)


def test_triples_round_trip_with_names_and_renamed_relations(capsys, tmp_path) -> None:
    triples = [("alice", "knows", "bob"), ("bob", "knows", "carol"), ("carol", "/people/likes", "alice"),
               ("dave", "/people/likes", "alice"), ("erin", "knows", "dave")]
    path = write_triples(tmp_path / "kg.tsv", triples)
    assert infer_format(path) == "triples"
    code, err = _partition(capsys, "--input", path, "--out", tmp_path / "o")
    assert code == EXIT_OK, err
    names = ["alice", "bob", "carol", "dave", "erin"]   # sorted: node i is the i-th name
    ids = {n: i for i, n in enumerate(names)}
    edges = {}
    for rel in ("/people/likes", "knows"):            # relations in sorted order of the input's names
        pairs = [(ids[h], ids[t]) for h, r, t in triples if r == rel]
        edges[("entity", rel.strip("/").replace("/", "_"), "entity")] = tuple(np.array(p) for p in zip(*pairs))
    expected = HeteroGraph({"entity": 5}, edges, type_names={"entity": np.array(names)},
                           relation_names={"people_likes": "/people/likes"})
    _assert_same_folder(tmp_path / "o", expected, tmp_path)
    assert load_original_names(tmp_path / "o").tolist() == names
    meta = json.loads((tmp_path / "o" / "partition.json").read_text())
    assert meta["relation_names"] == {"people_likes": "/people/likes"}


def test_typed_triples_take_their_types_from_the_names(tmp_path) -> None:
    path = write_triples(tmp_path / "kg.triples", [("author:ann", "writes", "paper:2"), ("paper:2", "cites", "paper:10"),
                                                   ("author:bo", "writes", "paper:10")])
    g = read_triples(path)
    assert g.num_nodes_dict == {"author": 2, "paper": 2}
    assert g.relations == [("paper", "cites", "paper"), ("author", "writes", "paper")]
    # paper:10 < paper:2 as text: local ids follow the sorted names
    assert g.type_names["paper"].tolist() == ["paper:10", "paper:2"]
    assert [a.tolist() for a in g.edges[("author", "writes", "paper")]] == [[0, 1], [1, 0]]
    mixed = write_triples(tmp_path / "mixed.triples", [("author:ann", "writes", "Q42")])
    assert read_triples(mixed).node_types == ["entity"]


def test_a_tsv_edge_list_stays_an_edge_list(tmp_path) -> None:
    weighted = tmp_path / "w.tsv"
    weighted.write_text("src\tdst\tw\nalice\tbob\t0.5\n")
    plain = tmp_path / "p.tsv"
    plain.write_text("0\t1\t2\n")
    assert infer_format(weighted) == infer_format(plain) == "edgelist"


def test_target_type_chooses_among_labelled_types(tmp_path) -> None:
    g = _graph()
    two = HeteroGraph(g.num_nodes_dict, g.edges, labels={"paper": g.labels["paper"], "author": np.arange(25) % 2})
    write_typed_npy_dir(tmp_path / "typed", two)
    assert read_hetero(tmp_path / "typed").target_type is None
    r = read_hetero(tmp_path / "typed", target_type="author", add_reverse=True)
    assert r.target_type == "author" and r.num_classes == 2 and len(r.relations) == 6


# ---------------------------------------------------------------------------- bad inputs: one line
def _one_line(err: str, code: int, *words: str) -> str:
    lines = error_lines(err)
    assert code == EXIT_USAGE and len(lines) == 1, err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def test_a_relation_naming_an_unknown_type(capsys, tmp_path) -> None:
    write_typed_npy_dir(tmp_path / "typed", _graph())
    bad = tmp_path / "typed" / "author__writes__venue"
    bad.mkdir()
    np.save(bad / "src.npy", np.zeros(2, np.int64))
    np.save(bad / "dst.npy", np.zeros(2, np.int64))
    code, err = _partition(capsys, "--input", tmp_path / "typed", "--out", tmp_path / "o")
    _one_line(err, code, str(bad), "'venue'", "nodes.json")


def test_a_feature_file_of_the_wrong_row_count(capsys, tmp_path) -> None:
    write_typed_npy_dir(tmp_path / "typed", _graph())
    feats = tmp_path / "typed" / "paper" / "features.npy"
    np.save(feats, np.zeros((39, 3), np.float32))
    code, err = _partition(capsys, "--input", tmp_path / "typed", "--out", tmp_path / "o")
    _one_line(err, code, str(feats), "node type 'paper' has 40 nodes")


def test_a_count_larger_than_the_files_hold(capsys, tmp_path) -> None:
    write_typed_npy_dir(tmp_path / "typed", _graph())
    doc = json.loads((tmp_path / "typed" / "nodes.json").read_text())
    doc["num_nodes"]["field"] = 10**12
    (tmp_path / "typed" / "nodes.json").write_text(json.dumps(doc))
    code, err = _partition(capsys, "--input", tmp_path / "typed", "--out", tmp_path / "o")
    _one_line(err, code, "nodes.json", "num_nodes['field']", "give its count as")


def test_a_target_type_without_labels(capsys, tmp_path) -> None:
    write_ogb_folder(tmp_path / "mini", _graph())
    code, err = _partition(capsys, "--input", tmp_path / "mini", "--target-type", "author", "--out", tmp_path / "o")
    _one_line(err, code, "--target-type author", "'author' has no labels", "paper")
    code, err = _partition(capsys, "--dataset", "mag-tiny", "--target-type", "venue", "--out", tmp_path / "o")
    _one_line(err, code, "--target-type venue", "not a node type")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text, line, words", [
    ("a\tr\tb\nb\tr\nc\tr\ta\n", 2, "expected 3 fields, found 2"),
    ("a\tr\tb\n\n# c\nb\t\tc\n", 4, "the relation (field 2) is empty"),
])
def test_a_malformed_triples_line(capsys, tmp_path, text, line, words) -> None:
    path = tmp_path / "kg.triples"
    path.write_text(text)
    code, err = _partition(capsys, "--input", path, "--out", tmp_path / "o")
    _one_line(err, code, f"{path}, line {line}", words)


def test_a_relation_joining_two_type_pairs(tmp_path) -> None:
    path = write_triples(tmp_path / "kg.triples", [("a:x", "r", "b:y"), ("b:y", "r", "a:x")])
    with pytest.raises(GraphError, match=r"relation 'r' joins a -> b and b -> a") as info:
        read_triples(path)
    assert str(path) in str(info.value)


def test_flags_that_do_not_fit_the_input_kind(capsys, tmp_path) -> None:
    edges = tmp_path / "e.tsv"
    edges.write_text("0\t1\n1\t2\n")
    code, err = _partition(capsys, "--input", edges, "--add-reverse", "--out", tmp_path / "o")
    _one_line(err, code, "--add-reverse applies to typed inputs", "edgelist", "--symmetrize")
    code, err = _partition(capsys, "--input", edges, "--target-type", "paper", "--out", tmp_path / "o")
    _one_line(err, code, "--target-type applies to typed inputs")
    write_ogb_folder(tmp_path / "mini", _graph())
    code, err = _partition(capsys, "--input", tmp_path / "mini", "--symmetrize", "--out", tmp_path / "o")
    _one_line(err, code, "--symmetrize applies to homogeneous inputs", "ogb-hetero")
    code, err = _partition(capsys, "--dataset", "mag-tiny", "--add-reverse", "--out", tmp_path / "o")
    _one_line(err, code, "--add-reverse", "has its reverse relations already")


# ---------------------------------------------------------------------------------- adapters
def test_from_pyg_matches_the_graph_built_in_python() -> None:
    pytest.importorskip("torch_geometric")
    import torch
    from torch_geometric.data import HeteroData

    g = _graph()
    data = HeteroData()
    for t, n in g.num_nodes_dict.items():
        data[t].num_nodes = n
    data["paper"].x = torch.from_numpy(g.features["paper"])
    data["paper"].y = torch.from_numpy(g.labels["paper"])
    for k, m in g.masks["paper"].items():
        data["paper"][f"{k}_mask"] = torch.from_numpy(m)
    for rel, (s, d) in g.edges.items():
        data[rel].edge_index = torch.from_numpy(np.stack([s, d]))
    h = HeteroGraph.from_pyg(data)
    assert h.node_types == g.node_types and h.relations == g.relations and h.target_type == "paper"
    for rel in g.relations:
        assert all(np.array_equal(a, b) for a, b in zip(h.edges[rel], g.edges[rel]))
    assert np.array_equal(h.features["paper"], g.features["paper"])
    assert all(np.array_equal(h.masks["paper"][k], g.masks["paper"][k]) for k in g.masks["paper"])


class _FakeDGL:
    """The slice of DGL's heterograph API that ``from_dgl`` reads. DGL itself is not installed
    here: this stands in for ``dgl.heterograph(...)`` with node data set."""

    class _Nodes(dict):
        def __getitem__(self, t):
            return type("NodeView", (), {"data": dict.__getitem__(self, t)})()

    def __init__(self, g: HeteroGraph) -> None:
        self.ntypes = g.node_types
        self.canonical_etypes = g.relations
        self._g = g
        self.nodes = self._Nodes({t: {} for t in g.node_types})
        data = dict.__getitem__(self.nodes, "paper")
        data.update(feat=g.features["paper"], label=g.labels["paper"][:, None],
                    **{f"{k}_mask": m for k, m in g.masks["paper"].items()})

    def num_nodes(self, t: str) -> int:
        return self._g.num_nodes_dict[t]

    def edges(self, etype):
        return self._g.edges[etype]


def test_from_dgl_reads_a_heterograph_through_its_api() -> None:
    g = _graph()
    h = HeteroGraph.from_dgl(_FakeDGL(g))
    assert h.num_nodes_dict == g.num_nodes_dict and h.relations == g.relations
    assert np.array_equal(h.labels["paper"], g.labels["paper"]) and h.target_type == "paper"
    with pytest.raises(TypeError, match=re.escape("expected a DGL heterograph")):
        HeteroGraph.from_dgl(object())
