"""Typed (heterogeneous) graphs in the partitioner: HeteroGraph, its union graph, the mag-* catalog
entries, per-type balanced partitioning and the typed folder (format 1.3) with its checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from partitioners import Graph
from partitioners.api import partition_graph
from partitioners.catalog import dataset_info, load_dataset
from partitioners.errors import GraphError
from partitioners.format import load_partition_meta, verify_partition
from partitioners.format.npyio import load_array
from partitioners.hetero import HeteroGraph
from partitioners.hetero.partition import assign_typed, type_balance
from partitioners.hetero.synthetic import MAG_RELATIONS, MAG_TYPES, mag_graph
from typed_inputs import write_ogb_folder


def _small() -> HeteroGraph:
    return HeteroGraph({"a": 3, "b": 2},
                       {("a", "likes", "b"): ([0, 1, 2, 2], [1, 0, 0, 1]), ("a", "knows", "a"): ([0, 1], [1, 2])},
                       features={"a": np.ones((3, 4), np.float32)}, labels={"a": [0, 1, 1]},
                       masks={"a": {"train": [True, False, True]}})


# ------------------------------------------------------------------------------ the typed graph
def test_union_graph_holds_each_relation_edges_once_with_its_type() -> None:
    g = mag_graph(1000, 6000, 4, 16, seed=1)
    u = g.to_union()
    off = g.type_offsets
    tid = {t: i for i, t in enumerate(g.node_types)}
    assert u.type_offsets.tolist() == off.tolist() and u.graph.num_nodes == g.num_nodes
    assert np.array_equal(u.node_type, np.repeat(np.arange(4), np.diff(off)))
    dst = np.repeat(np.arange(u.graph.num_nodes), np.diff(u.graph.indptr))
    src = np.asarray(u.graph.indices, np.int64)
    assert u.graph.num_edges == g.num_edges == u.edge_type.size
    for r, (rel, (s, d)) in enumerate(g.edges.items()):
        sel = u.edge_type == r
        got = sorted(zip((src[sel] - off[tid[rel[0]]]).tolist(), (dst[sel] - off[tid[rel[2]]]).tolist()))
        assert got == sorted(zip(s.tolist(), d.tolist())), rel
        assert np.array_equal(u.in_degree_rel[:, r], np.bincount(dst[sel], minlength=g.num_nodes))
    # target-type masks in the union graph, False elsewhere
    assert u.graph.train_mask[:off[1]].sum() == g.masks["paper"]["train"].sum()
    assert not u.graph.train_mask[off[1]:].any()


def test_add_reverse_and_the_mag_shape() -> None:
    g = mag_graph(1000, 6000, 4, 16, seed=0, reverse=False)
    assert g.node_types == list(MAG_TYPES) and g.relations == list(MAG_RELATIONS)
    r = g.add_reverse()
    assert len(r.relations) == 8 and ("paper", "rev_writes", "author") in r.relations
    s, d = g.edges[("author", "writes", "paper")]
    rs, rd = r.edges[("paper", "rev_writes", "author")]
    assert np.array_equal(s, rd) and np.array_equal(d, rs)
    assert list(r.features) == ["paper"] and list(r.labels) == ["paper"] and r.target_type == "paper"


def test_mag_catalog_entries_are_seeded_and_have_a_planted_signal() -> None:
    a, b = load_dataset("mag-tiny"), load_dataset("mag-tiny")
    assert isinstance(a, HeteroGraph) and a.num_nodes == dataset_info("mag-tiny").num_nodes
    for rel in a.relations:
        assert all(np.array_equal(x, y) for x, y in zip(a.edges[rel], b.edges[rel]))
    assert np.array_equal(a.features["paper"], b.features["paper"])
    assert not np.array_equal(load_dataset("mag-tiny", seed=1).labels["paper"], a.labels["paper"])
    # papers cite papers of their own class far more often than chance (1/4)
    y = a.labels["paper"]
    s, d = a.edges[("paper", "cites", "paper")]
    assert np.mean(y[s] == y[d]) > 0.6
    info = dataset_info("mag-small")
    assert info.family == "mag" and 5_000 <= info.num_nodes <= 20_000


def test_homogeneous_graph_is_the_one_type_case() -> None:
    g = Graph.from_edges([0, 1, 2], [1, 2, 0], 3, features=np.eye(3, dtype=np.float32), labels=[0, 1, 0])
    h = HeteroGraph.from_graph(g)
    u = h.to_union()
    assert np.array_equal(u.graph.indptr, g.indptr) and np.array_equal(u.graph.indices, g.indices)
    assert not u.edge_type.any() and not u.node_type.any()


@pytest.mark.parametrize("make, words", [
    (lambda: HeteroGraph({"a": 2}, {("a", "r", "zz"): ([0], [0])}), "relation ('a', 'r', 'zz') names unknown destination type 'zz'"),
    (lambda: HeteroGraph({"a": 2}, {("a", "r", "a"): ([0, 5], [0, 1])}), "relation ('a', 'r', 'a'): src has id 5 out of range [0, 2)"),
    (lambda: HeteroGraph({"a": 2, "b": 3}, {("a", "r", "b"): ([0], [0])}, features={"b": np.ones((2, 4))}),
     "node type 'b': features have shape (2, 4) but the type has 3 nodes"),
    (lambda: HeteroGraph({"a": 2}, {("a", "r", "a"): ([0], [1])}, labels={"a": [0, 1]}, target_type="b"),
     "target_type names node type 'b'"),
    (lambda: HeteroGraph({"a": 2, "b": 1}, {("a", "r", "b"): ([0], [0])}, labels={"a": [0, 1]}, target_type="b"),
     "target type 'b' has no labels"),
    (lambda: HeteroGraph({"a": 2, "b": 1}, {("a", "r", "a"): ([0], [1]), ("a", "r", "b"): ([0], [0])}),
     "the name 'r' is used by another relation"),
    (lambda: HeteroGraph({"a": 0}, {}), "node type 'a': count must be a positive integer"),
    (lambda: HeteroGraph({"a": 2}, {("a", "r", "a"): ([0], [1])}, labels={"a": [0, 1, 1]}),
     "node type 'a': labels have shape (3,) but the type has 2 nodes"),
])
def test_bad_typed_inputs_are_one_line(make, words) -> None:
    with pytest.raises(GraphError) as info:
        make()
    msg = str(info.value)
    assert "\n" not in msg and words in msg, msg


# ------------------------------------------------------------------------------- partitioning
@pytest.mark.parametrize("num_parts", [2, 3, 4])
def test_metis_balances_every_type_and_the_training_nodes(num_parts: int) -> None:
    g = mag_graph(8000, 50_000, 8, 8, seed=0)
    u = g.to_union()
    a = assign_typed(g, u, num_parts, "metis", seed=0)
    bal = type_balance(u, a, num_parts, g.node_types)
    assert set(bal) == {"type:paper", "type:author", "type:institution", "type:field", "train"}
    counts = np.diff(g.type_offsets)
    for (name, ratio), n in zip(bal.items(), [*counts, u.graph.train_mask.sum()]):
        mean = n / num_parts
        assert ratio * mean <= max(1.03 * mean, np.ceil(mean)) + 1e-9, (name, ratio)


def test_streaming_methods_work_on_the_union_graph() -> None:
    g = load_dataset("mag-tiny")
    u = g.to_union()
    for method in ("ldg", "fennel", "random"):
        a = assign_typed(g, u, 3, method, seed=0)
        assert a.shape == (g.num_nodes,) and set(np.unique(a)) == {0, 1, 2}
        assert max(type_balance(u, a, 3, g.node_types).values()) <= 1.1


# ------------------------------------------------------------------------------------ folder
@pytest.fixture(scope="module")
def typed_folder(tmp_path_factory) -> tuple[Path, HeteroGraph]:
    g = load_dataset("mag-tiny")
    out = tmp_path_factory.mktemp("hetero") / "mag"
    report = partition_graph(g, 3, "metis", out, refine=True)
    assert report["num_nodes"] == g.num_nodes and "type_balance" in report
    return out, g


def _part_arrays(root: Path, p: int) -> dict[str, np.ndarray]:
    meta = load_partition_meta(root)
    return {name: np.asarray(load_array(root, entry, mmap=False, check_hash=True)) for name, entry in meta.parts[p].files.items()}


def test_typed_folder_files_match_a_direct_computation(typed_folder) -> None:
    root, g = typed_folder
    meta = load_partition_meta(root)
    assert meta.minor_version == 3 and meta.hetero is not None
    assert [t["name"] for t in meta.hetero["node_types"]] == g.node_types
    assert [tuple(r) for r in meta.hetero["relations"]] == g.relations
    u = g.to_union()
    off = g.type_offsets
    tid = {t: i for i, t in enumerate(g.node_types)}
    per_rel = {r: set() for r in range(len(g.relations))}
    for p, pm in enumerate(meta.parts):
        a = _part_arrays(root, p)
        orig = a["original_ids.npy"]
        assert np.array_equal(a["node_type.npy"], u.node_type[orig])
        ni = pm.num_inner
        assert np.array_equal(a["in_degree_rel.npy"], u.in_degree_rel[orig[:ni]])
        assert np.bincount(a["node_type.npy"][:ni], minlength=4).tolist() == meta.hetero["part_type_counts"][p]
        row = np.repeat(np.arange(ni), np.diff(a["indptr.npy"]))
        for e, r in enumerate(a["edge_type.npy"].tolist()):
            per_rel[r].add((int(orig[a["indices.npy"][e]]), int(orig[row[e]])))
        papers = orig[:ni][a["node_type.npy"][:ni] == 0]
        assert np.array_equal(a["features-paper.npy"], g.features["paper"][papers])
        assert np.array_equal(a["labels-paper.npy"], g.labels["paper"][papers])
    for r, (rel, (s, d)) in enumerate(g.edges.items()):
        want = set(zip((s + off[tid[rel[0]]]).tolist(), (d + off[tid[rel[2]]]).tolist()))
        assert per_rel[r] == want, rel


def test_typed_folder_verifies_and_a_corrupt_edge_type_is_caught(typed_folder, tmp_path) -> None:
    import hashlib
    import shutil

    root, _ = typed_folder
    assert verify_partition(root) == []
    bad = tmp_path / "bad"
    shutil.copytree(root, bad)
    f = bad / "part-00001" / "edge_type.npy"
    arr = np.load(f)
    # one cites edge relabelled rev_cites: same source and destination types, so only the
    # per-relation in-degrees can tell
    e = int(np.flatnonzero(arr == 1)[0])
    arr[e] = 5
    np.save(f, arr)
    meta = json.loads((bad / "partition.json").read_text())
    entry = meta["parts"][1]["files"]["edge_type.npy"]
    entry["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
    entry["size"] = f.stat().st_size
    (bad / "partition.json").write_text(json.dumps(meta, indent=1) + "\n")
    problems = verify_partition(bad)
    assert problems and any("in_degree_rel" in p or "edge_type" in p for p in problems), problems
    # a relation joining the wrong types is named as such
    arr[e] = 0   # author-writes-paper on a paper -> paper edge
    np.save(f, arr)
    entry["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
    (bad / "partition.json").write_text(json.dumps(meta, indent=1) + "\n")
    problems = verify_partition(bad)
    assert any("edge_type.npy" in p and "joins a 'paper' row" in p for p in problems), problems


def test_a_typed_section_needs_its_minor_version(typed_folder, tmp_path) -> None:
    import shutil

    from partitioners.errors import PartitionFormatError

    root, _ = typed_folder
    bad = tmp_path / "old"
    shutil.copytree(root, bad)
    meta = json.loads((bad / "partition.json").read_text())
    meta["minor_version"] = 2
    (bad / "partition.json").write_text(json.dumps(meta))
    with pytest.raises(PartitionFormatError, match="field hetero needs minor_version >= 3"):
        load_partition_meta(bad)


def test_cli_partitions_mag_tiny_and_inspect_verifies(tmp_path) -> None:
    from gnn_dist_cli.command import main

    out = tmp_path / "mag"
    assert main(["partition", "--dataset", "mag-tiny", "--parts", "2", "--out", str(out), "--no-progress"]) == 0
    assert load_partition_meta(out).hetero is not None
    assert main(["inspect", str(out), "--verify"]) == 0


# ------------------------------------------------------------------------- OGB heterogeneous reader
def test_ogb_hetero_reader_reads_the_mag_layout(tmp_path) -> None:
    from partitioners.hetero.ogb import read_ogb_hetero

    g = mag_graph(400, 2000, 4, 6, seed=3, reverse=False)
    write_ogb_folder(tmp_path / "ogbn_mini", g)
    r = read_ogb_hetero(tmp_path / "ogbn_mini", add_reverse=True)
    assert r.node_types == g.node_types and r.target_type == "paper" and len(r.relations) == 8
    for rel in g.relations:
        assert all(np.array_equal(a, b) for a, b in zip(r.edges[rel], g.edges[rel])), rel
    assert np.allclose(r.features["paper"], g.features["paper"], rtol=1e-6)
    assert np.array_equal(r.labels["paper"], g.labels["paper"])
    for key in ("train", "val", "test"):
        assert np.array_equal(r.masks["paper"][key], g.masks["paper"][key])
    out = tmp_path / "parts"
    partition_graph(r, 2, "metis", out)
    assert verify_partition(out) == []


def test_ogb_hetero_reader_names_the_bad_file(tmp_path) -> None:
    import gzip

    from partitioners.hetero.ogb import read_ogb_hetero

    g = mag_graph(400, 2000, 4, 6, seed=3, reverse=False)
    root = tmp_path / "ogb"
    write_ogb_folder(root, g)
    feat = root / "raw" / "node-feat" / "paper" / "node-feat.csv.gz"
    with gzip.open(feat, "wt") as f:
        f.write("1,2,3,4,5,6\n")
    with pytest.raises(GraphError) as info:
        read_ogb_hetero(root)
    assert "\n" not in str(info.value) and str(feat) in str(info.value) and "node type 'paper'" in str(info.value)
    write_ogb_folder(root, g)
    bad = root / "raw" / "relations" / "author___writes___venue"
    bad.mkdir()
    with gzip.open(bad / "edge.csv.gz", "wt") as f:
        f.write("0,0\n")
    with pytest.raises(GraphError, match=r"author___writes___venue/edge.csv.gz: relation .* names type 'venue'"):
        read_ogb_hetero(root)


def test_one_part_and_refined_streaming_folders_verify(tmp_path) -> None:
    g = _small()
    partition_graph(g, 1, "metis", tmp_path / "one")
    assert verify_partition(tmp_path / "one") == []
    m = load_dataset("mag-tiny")
    report = partition_graph(m, 2, "fennel", tmp_path / "fennel", refine=True)
    assert verify_partition(tmp_path / "fennel") == []
    assert max(report["type_balance"].values()) <= 1.1
