"""A typed graph's edge split per relation (issue 34; partitioners/hetero/link_split.py,
partitioners/format/typed_split.py): held-out triples leave every part's message-passing edges
(their ``rev_`` reverses too), the folder (format 1.4) stores the triples with their relations
and ``inspect --verify`` finds a leak; bad requests are one line, exit code 2."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from partitioners.api import partition_graph
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE, main
from partitioners.errors import GraphError
from partitioners.format import load_part, load_partition_meta, verify_partition
from partitioners.hetero import HeteroGraph
from partitioners.hetero.link_split import typed_edge_split

SPLITS = ("train", "val", "test")


def _graph() -> HeteroGraph:
    rng = np.random.default_rng(1)
    buys = (rng.integers(0, 30, 150), rng.integers(0, 20, 150))
    buys = (np.r_[buys[0], buys[0][:8]], np.r_[buys[1], buys[1][:8]])   # repeated edges
    return HeteroGraph({"user": 30, "item": 20},
                       {("user", "buys", "item"): buys,
                        ("user", "follows", "user"): (rng.integers(0, 30, 80), rng.integers(0, 30, 80))},
                       edge_weights={("user", "buys", "item"): rng.random(158).astype(np.float32)}).add_reverse()


def _stored_triples(path) -> tuple[set, dict]:
    """Every part's message-passing edges as (src, relation, dst) original ids, and its split's triples."""
    meta = load_partition_meta(str(path))
    orig_of = np.argsort(np.load(path / "node_map.npy"))   # new global id -> original id
    edges, split = set(), {s: set() for s in SPLITS}
    for p in range(meta.num_parts):
        a = load_part(str(path), p)
        gids = orig_of[np.asarray(a.global_ids)]
        dst = np.repeat(gids[:a.num_inner], np.diff(np.asarray(a.indptr)))
        edges |= set(zip(gids[np.asarray(a.indices)].tolist(), np.asarray(a.typed["edge_type"]).tolist(), dst.tolist()))
        for s in SPLITS:
            (h, t), rel = orig_of[np.asarray(getattr(a, f"link_{s}"))], np.asarray(a.typed[f"link_{s}_rel"])
            split[s] |= set(zip(h.tolist(), rel.tolist(), t.tolist()))
    return edges, split


@pytest.mark.parametrize("num_parts", [1, 3])
def test_held_out_triples_leave_every_part(tmp_path, num_parts):
    g = typed_edge_split(_graph(), (0.6, 0.2, 0.2), seed=4)
    record = g.link_split.record
    assert record["relations"] == ["buys", "follows"]   # the rev_ reverses are not targets by default
    assert {k: sum(c[k] for c in record["relation_counts"].values()) for k in SPLITS} == record["counts"]
    out = tmp_path / "kg"
    partition_graph(g, num_parts, "random", str(out), seed=0)
    meta = json.loads((out / "partition.json").read_text())
    assert meta["minor_version"] == 4 and meta["edge_split"]["relation_counts"] == record["relation_counts"]
    assert verify_partition(str(out)) == []
    edges, split = _stored_triples(out)
    rels = [r[1] for r in g.relations]
    assert sum(len(v) for v in split.values()) == sum(record["counts"].values())
    assert split["train"] <= edges                      # training triples stay edges of their relation
    for s in ("val", "test"):
        assert split[s] and not split[s] & edges        # held-out triples are no edge of their relation
        rev = {(t, rels.index("rev_" + rels[r]), h) for h, r, t in split[s]}
        assert not rev & edges                          # nor, reversed, of its reverse
    assert not split["val"] & split["test"] and not split["train"] & split["val"]


def test_the_split_of_a_relation_depends_on_its_edges_only():
    a = typed_edge_split(_graph(), (0.6, 0.2, 0.2), seed=4).link_split
    b = typed_edge_split(_graph(), (0.6, 0.2, 0.2), seed=4, relations=["buys"]).link_split
    buys = 0   # relation id
    for s in SPLITS:
        mine = a.relations[s] == buys
        assert np.array_equal(a.pairs[s][:, mine], b.pairs[s])
    assert b.record["relations"] == ["buys"] and set(b.relations["val"].tolist()) == {buys}


def test_verify_finds_a_leak(tmp_path):
    from partitioners.format.typed_split import typed_link_cross_problems

    g = typed_edge_split(_graph(), (0.6, 0.2, 0.2), seed=4)
    out = tmp_path / "kg"
    partition_graph(g, 2, "random", str(out), seed=0)
    meta = load_partition_meta(str(out))
    parts = []
    for p in range(2):
        a = load_part(str(out), p)
        arrays = {f.name: getattr(a, f.name) for f in dataclasses.fields(a)}
        parts.append({f"{k}.npy": np.asarray(v) for k, v in {**arrays, **a.typed}.items() if isinstance(v, np.ndarray)})
    orig_of = np.argsort(np.load(out / "node_map.npy"))
    assert typed_link_cross_problems(out, meta, parts, orig_of) == []
    for p in range(2):   # a training triple passed off as a validation one: still an edge, a leak
        parts[p]["link_val.npy"], parts[p]["link_train.npy"] = parts[p]["link_train.npy"], parts[p]["link_val.npy"]
        parts[p]["link_val_rel.npy"], parts[p]["link_train_rel.npy"] = (parts[p]["link_train_rel.npy"],
                                                                        parts[p]["link_val_rel.npy"])
    problems = typed_link_cross_problems(out, meta, parts, orig_of)
    assert any("leaks" in m for m in problems) and any("training triple is not an edge" in m for m in problems)


def test_bad_relations_are_one_line():
    with pytest.raises(GraphError, match="--target-relation likes: the graph has no relation of that name"):
        typed_edge_split(_graph(), (0.6, 0.2, 0.2), seed=0, relations=["likes"])
    tiny = HeteroGraph({"a": 3}, {("a", "r", "a"): ([0, 1], [1, 2]), ("a", "s", "a"): ([0], [2])})
    with pytest.raises(GraphError, match="relation 's' has 1 edge pairs .* too few"):
        typed_edge_split(tiny, (0.6, 0.2, 0.2), seed=0)
    assert typed_edge_split(tiny, (0.6, 0.2, 0.2), seed=0, relations=["r"]).link_split.record["counts"]["val"] == 1


def test_cli(tmp_path, capsys):
    kg = tmp_path / "kg.tsv"
    rng = np.random.default_rng(0)
    lines = {f"e{h}\t{'/r/likes' if h % 2 else 'knows'}\te{t}" for h, t in rng.integers(0, 25, (150, 2)) if h != t}
    kg.write_text("\n".join(sorted(lines)) + "\n")
    base = ["partition", "--input", str(kg), "--parts", "2", "--no-progress", "--out"]
    assert main([*base, str(tmp_path / "a"), "--add-reverse", "--edge-split", "0.8,0.1,0.1",
                 "--target-relation", "/r/likes"]) == EXIT_OK   # the input's name of a renamed relation
    assert load_partition_meta(str(tmp_path / "a")).edge_split["relations"] == ["r_likes"]
    assert verify_partition(str(tmp_path / "a")) == []
    capsys.readouterr()
    for extra, message in ((["--target-relation", "knows"], "add --edge-split"),
                           (["--edge-split", "0.8,0.1,0.1", "--target-relation", "nope"],
                            "--target-relation nope: the graph has no relation of that name")):
        assert main([*base, str(tmp_path / "b"), *extra]) == EXIT_USAGE
        err = capsys.readouterr().err.strip().splitlines()
        assert message in err[-1] and len([line for line in err if "error" in line]) == 1
    edges = tmp_path / "g.txt"
    edges.write_text("0 1\n1 2\n2 3\n")
    assert main(["partition", "--input", str(edges), "--parts", "1", "--out", str(tmp_path / "c"),
                 "--edge-split", "0.5,0.2,0.2", "--target-relation", "x"]) == EXIT_USAGE
    assert "--target-relation applies to typed inputs" in capsys.readouterr().err


@pytest.mark.parametrize("edit,message", [
    (lambda m: m.update(minor_version=3), "needs minor_version >= 4"),
    (lambda m: m["edge_split"]["relation_counts"]["buys"].update(val=0), "summing to edge_split.counts.val"),
    (lambda m: m["edge_split"].update(relations=["buys", "likes"]), "must list distinct relation names"),
])
def test_the_reader_checks_the_typed_split_record(tmp_path, edit, message):
    from partitioners.errors import PartitionFormatError

    partition_graph(typed_edge_split(_graph(), (0.6, 0.2, 0.2), seed=4), 1, "random", str(tmp_path / "kg"), seed=0)
    path = tmp_path / "kg" / "partition.json"
    meta = json.loads(path.read_text())
    edit(meta)
    path.write_text(json.dumps(meta))
    with pytest.raises(PartitionFormatError, match=message):
        load_partition_meta(str(tmp_path / "kg"))
