"""A typed partition folder as the input of ``gnn-dist partition`` (issue 37): read back by original
ids it is the typed graph it was cut from (per-type node data, each relation's edges, the target
type's masks), and its re-cut at P=3 equals, file for file, a direct P=3 cut of the original input
with the same method and seed (reverses added once, an edge split on relations carried, node and
relation names kept), with the same graph fingerprint and only ``repartitioned_from`` added to
``partition.json``. The flags that would change the typed graph are one line, exit code 2; a typed
folder with edge weights is refused in one line; the memory estimate counts the typed write arrays."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE, main
from outofcore_checks import folder_bytes, meta_without_timings, scratch_left, shrink_chunks
from partitioners import partition_graph
from partitioners.errors import GraphError
from partitioners.format import load_partition_meta
from partitioners.hetero import HeteroGraph
from partitioners.hetero.readers import read_hetero
from partitioners.io.partition_input import input_size, read_partition_input
from typed_inputs import write_triples, write_typed_npy_dir

pytestmark = pytest.mark.usefixtures("clean_registry")


def _graph() -> HeteroGraph:
    """Three types, repeated edges, float64 features on one type (float32 in the folder) and
    float32 on another, labels and two masks on the target type."""
    rng = np.random.default_rng(1)
    p, a, f = 40, 25, 6
    return HeteroGraph(
        {"paper": p, "author": a, "field": f},
        {("author", "writes", "paper"): (rng.integers(0, a, 90), rng.integers(0, p, 90)),
         ("paper", "cites", "paper"): (rng.integers(0, p, 120), rng.integers(0, p, 120)),
         ("paper", "has_topic", "field"): (np.arange(p), rng.integers(0, f, p))},
        features={"paper": rng.standard_normal((p, 3)), "author": rng.standard_normal((a, 2)).astype(np.float32)},
        labels={"paper": rng.integers(0, 3, p).astype(np.int32)},
        masks={"paper": {"train": np.arange(p) < p // 2, "val": np.arange(p) >= p - 5}})


def _triples(path: Path) -> Path:
    """Typed names (``author:a3``) and a relation renamed on the way (``/cites``)."""
    rng = np.random.default_rng(3)
    authors, papers = [f"author:a{i}" for i in range(20)], [f"paper:p{i}" for i in range(30)]
    rows = [(authors[rng.integers(20)], "writes", papers[rng.integers(30)]) for _ in range(60)]
    rows += [(papers[rng.integers(30)], "/cites", papers[rng.integers(30)]) for _ in range(70)]
    return write_triples(path, rows)


def _edges(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    pairs = np.stack([np.asarray(src, np.int64), np.asarray(dst, np.int64)])
    return pairs[:, np.lexsort(pairs[::-1])]


def test_the_graph_read_back_is_the_typed_graph_that_was_cut(tmp_path, monkeypatch):
    shrink_chunks(monkeypatch)
    monkeypatch.setattr("partitioners.io.partition_input._EDGE_CHUNK", 7)   # chunks across relations
    write_typed_npy_dir(tmp_path / "typed", _graph())
    g = read_hetero(tmp_path / "typed", "typed-npy-dir", add_reverse=True)
    partition_graph(g, 2, "metis", tmp_path / "p2", seed=1)
    back, extra = read_partition_input(tmp_path / "p2", scratch_dir=tmp_path)
    assert back.relations == g.relations and back.num_nodes_dict == g.num_nodes_dict
    for rel in g.relations:   # each relation's edges by local ids, duplicates kept
        assert np.array_equal(_edges(*back.edges[rel]), _edges(*g.edges[rel])), rel
    for field in ("features", "labels"):
        mine, theirs = getattr(back, field), getattr(g, field)
        assert mine.keys() == theirs.keys()
        for t in theirs:
            assert mine[t].dtype == theirs[t].dtype and np.array_equal(mine[t], theirs[t]), (field, t)
    assert back.target_type == "paper" and back.num_classes == g.num_classes
    assert {k: np.asarray(m).tolist() for k, m in back.masks["paper"].items()} == \
        {k: m.tolist() for k, m in g.masks["paper"].items()}
    meta = load_partition_meta(tmp_path / "p2")
    assert extra["repartitioned_from"] == {"folder": str(tmp_path / "p2"), "num_parts": 2, "method": "metis",
                                           "graph_fingerprint": meta.graph_fingerprint,
                                           "graph_fingerprint_scheme": 2}
    size = input_size(tmp_path / "p2")
    assert (size.num_nodes, size.num_edges, size.feature_bytes, size.num_relations, size.typed_criteria) == \
        (71, 500, 12, 6, 4)
    del back
    assert scratch_left(tmp_path) == []


def _npy_dir_input(root: Path) -> tuple[str, list[str]]:
    write_typed_npy_dir(root / "typed", _graph())
    return str(root / "typed"), ["--add-reverse"]


def _triples_input(root: Path) -> tuple[str, list[str]]:
    return str(_triples(root / "kg.triples")), ["--add-reverse", "--edge-split", "0.8,0.1,0.1"]


@pytest.mark.parametrize("make_input, method", [(_npy_dir_input, "ldg"), (_triples_input, "random")])
def test_a_recut_equals_a_direct_cut_of_the_input(tmp_path, make_input, method):
    source, flags = make_input(tmp_path)
    common = ["--method", method, "--seed", "5", "--no-progress"]
    for parts in (2, 3):
        assert main(["-q", "partition", "--input", source, "--parts", str(parts), "--out", str(tmp_path / f"p{parts}"),
                     *common, *flags]) == EXIT_OK
    assert main(["-q", "partition", "--input", str(tmp_path / "p2"), "--parts", "3", "--out", str(tmp_path / "r3"),
                 *common]) == EXIT_OK
    direct, recut = folder_bytes(tmp_path / "p3"), folder_bytes(tmp_path / "r3")
    assert direct == recut and any(k.endswith("features-paper.npy") or k.endswith("link_val_rel.npy") for k in direct)
    want, got = meta_without_timings(tmp_path / "p3"), meta_without_timings(tmp_path / "r3")
    assert got.pop("repartitioned_from")["folder"] == str(tmp_path / "p2")
    assert got == want and got["add_reverse"] is True and got["hetero"]["node_types"]
    assert got["graph_fingerprint"] == load_partition_meta(tmp_path / "p2").graph_fingerprint
    assert main(["-q", "inspect", "--verify", str(tmp_path / "r3")]) == EXIT_OK
    assert scratch_left(tmp_path) == []


@pytest.mark.parametrize("flags, says", [
    (["--add-reverse"], "--add-reverse: --input {} is a partition folder, re-cut with the graph"),
    (["--target-type", "author"], "--target-type: --input {} is a partition folder"),
    (["--normalize-features", "row"], "--normalize-features applies to homogeneous inputs; {} is a typed "
                                      "partition folder"),
])
def test_flags_that_would_change_the_typed_graph_are_refused(tmp_path, capsys, flags, says):
    write_typed_npy_dir(tmp_path / "typed", _graph())
    partition_graph(read_hetero(tmp_path / "typed", "typed-npy-dir"), 2, "random", tmp_path / "p2")
    capsys.readouterr()   # the cut's log lines (logging set up by an earlier main)
    code = main(["partition", "--input", str(tmp_path / "p2"), "--parts", "3", "--out", str(tmp_path / "x"), *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USAGE and len(err) == 1 and says.format(tmp_path / "p2") in err[0], err
    assert not (tmp_path / "x").exists()


def test_a_weighted_typed_folder_is_one_line(tmp_path, capsys):
    g = _graph()
    rel = g.relations[0]
    weighted = g._replace(edge_weights={rel: np.full(g.edges[rel][0].size, 0.5, np.float32)})
    partition_graph(weighted, 2, "random", tmp_path / "p2")
    with pytest.raises(GraphError, match="a typed partition folder with edge weights cannot be re-cut"):
        input_size(tmp_path / "p2")
    capsys.readouterr()
    code = main(["partition", "--input", str(tmp_path / "p2"), "--parts", "3", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USAGE and len(err) == 1 and "edge weights cannot be re-cut" in err[0], err


def test_the_estimate_counts_the_typed_write_arrays(tmp_path):
    """A part's in_degree_rel, edge types and per-type node data are held whole while written."""
    from partitioners.format.writer_memory import typed_part_memory, write_memory

    write_typed_npy_dir(tmp_path / "typed", _graph())
    partition_graph(read_hetero(tmp_path / "typed", "typed-npy-dir"), 2, "random", tmp_path / "p2")
    size = input_size(tmp_path / "p2")
    plain = dataclasses.replace(size, num_relations=0)
    n_p, e_p = -(-2 * 71 // 3), -(-2 * 250 // 3)
    grew = write_memory(size, 3) - write_memory(plain, 3)
    assert grew == typed_part_memory(size, n_p, 71, e_p) > (16 * 3 + 12) * n_p + 32 * e_p


def test_a_tampered_typed_part_is_one_line(tmp_path, capsys):
    """The parts' checksums are verified before any edge is split by relation."""
    write_typed_npy_dir(tmp_path / "typed", _graph())
    partition_graph(read_hetero(tmp_path / "typed", "typed-npy-dir"), 2, "random", tmp_path / "p2")
    target = tmp_path / "p2" / "part-00001" / "edge_type.npy"
    raw = bytearray(target.read_bytes())
    raw[-1] ^= 1   # another relation id for the last edge
    target.write_bytes(bytes(raw))
    code = main(["partition", "--input", str(tmp_path / "p2"), "--parts", "3", "--out", str(tmp_path / "x"),
                 "--no-progress"])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if "error" in line.lower()]
    assert code != EXIT_OK and len(err) == 1 and "edge_type.npy" in err[0], err
    assert not (tmp_path / "x").exists() and scratch_left(tmp_path) == []
