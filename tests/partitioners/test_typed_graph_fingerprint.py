"""A typed folder's graph fingerprint (scheme 2) covers the typed graph: one edge's relation, one
row of a type's features or one label changes it; another cut, a re-cut of the folder and the
out-of-core writer keep it. Older typed folders (scheme 1) still verify, and a new typed folder
records the scheme-1 digest such an older cut of its graph recorded (``scheme_1_graph_fingerprint``,
checked by ``--verify``), by which ``--repartition-on-resize`` verifies a cut of an older folder.
In-process, tiny graphs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from gnn_dist_cli.command import EXIT_OK, main
from partitioners import partition_graph
from partitioners.errors import PartitionFormatError
from partitioners.format import load_partition_meta, verify_partition
from partitioners.format.graph_digest import SCHEME_1_FIELD, SCHEME_FIELD, TYPED_SCHEME, GraphDigest
from partitioners.hetero import HeteroGraph
from typed_inputs import write_typed_npy_dir

_P, _A = 30, 12


def _parts(change: str = "") -> dict:
    """Two relations between papers (so an edge can change relation alone), features on two
    types, labels and a split on the target type; ``change`` alters one value."""
    rng = np.random.default_rng(3)
    cites = (rng.integers(0, _P, 50), rng.integers(0, _P, 50))
    extends = (rng.integers(0, _P, 20), rng.integers(0, _P, 20))
    if change == "relation":   # the first `cites` edge becomes an `extends` edge
        extends = (np.append(extends[0], cites[0][0]), np.append(extends[1], cites[1][0]))
        cites = (cites[0][1:], cites[1][1:])
    x_author = rng.standard_normal((_A, 3)).astype(np.float32)
    x_paper = rng.standard_normal((_P, 2)).astype(np.float32)
    y = rng.integers(0, 3, _P)
    if change == "feature":
        x_author[4, 1] += 0.5
    if change == "label":
        y[7] = (y[7] + 1) % 3
    return dict(num_nodes={"paper": _P, "author": _A},
                edges={("author", "writes", "paper"): (rng.integers(0, _A, 40), rng.integers(0, _P, 40)),
                       ("paper", "cites", "paper"): cites, ("paper", "extends", "paper"): extends},
                features={"paper": x_paper, "author": x_author}, labels={"paper": y},
                masks={"paper": {"train": np.arange(_P) < 20}})


def _graph(change: str = "") -> HeteroGraph:
    p = _parts(change)
    return HeteroGraph(p.pop("num_nodes"), p.pop("edges"), **p)


def _fingerprints(out: Path, graph: HeteroGraph | None = None, parts: int = 2,
                  method: str = "random") -> tuple[str, str]:
    """The folder's graph fingerprint (scheme 2) and its scheme-1 digest, both checked by --verify."""
    if graph is not None:
        partition_graph(graph, parts, method, out, seed=1)
    meta = load_partition_meta(out)
    assert meta.graph_fingerprint_scheme == TYPED_SCHEME and meta.raw[SCHEME_FIELD] == TYPED_SCHEME
    assert verify_partition(out) == []   # --verify recomputes both, relations and per-type rows included
    assert meta.raw[SCHEME_1_FIELD] == meta.scheme_1_graph_fingerprint != meta.graph_fingerprint
    return str(meta.graph_fingerprint), str(meta.scheme_1_graph_fingerprint)


def _fingerprint(out: Path, graph: HeteroGraph | None = None, parts: int = 2, method: str = "random") -> str:
    return _fingerprints(out, graph, parts, method)[0]


def test_one_relation_feature_row_or_label_changes_the_fingerprint(tmp_path):
    base, base_1 = _fingerprints(tmp_path / "base", _graph())
    prints = {change: _fingerprints(tmp_path / change, _graph(change)) for change in ("relation", "feature", "label")}
    assert base not in (p[0] for p in prints.values()) and len({p[0] for p in prints.values()}) == 3, prints
    # scheme 1, what older typed folders recorded, covers neither relations nor per-type data
    assert {p[1] for p in prints.values()} == {base_1}


def test_another_cut_a_recut_and_the_out_of_core_writer_keep_it(tmp_path):
    want = _fingerprint(tmp_path / "p2", _graph())
    assert _fingerprint(tmp_path / "p3", _graph(), parts=3) == want
    assert main(["-q", "partition", "--input", str(tmp_path / "p2"), "--parts", "3", "--method", "random",
                 "--out", str(tmp_path / "r3"), "--no-progress"]) == EXIT_OK
    assert _fingerprint(tmp_path / "r3") == want
    assert load_partition_meta(tmp_path / "r3").raw["repartitioned_from"][SCHEME_FIELD] == TYPED_SCHEME
    write_typed_npy_dir(tmp_path / "typed", _graph())
    assert main(["-q", "partition", "--input", str(tmp_path / "typed"), "--parts", "2", "--method", "random",
                 "--out", str(tmp_path / "disk"), "--no-progress"]) == EXIT_OK
    assert _fingerprint(tmp_path / "disk") == want


def _edit_meta(folder: Path, **fields) -> None:
    path = folder / "partition.json"
    raw = json.loads(path.read_text())
    for key, value in fields.items():
        if value is None:
            raw.pop(key)
        else:
            raw[key] = value
    path.write_text(json.dumps(raw))


def _as_scheme_1(folder: Path, monkeypatch) -> str:
    """Make ``folder`` a typed folder as written before scheme 2: no field, and the digest without
    relations and per-type rows (the one ``--verify`` recomputes for it); returns that digest."""
    _edit_meta(folder, **{SCHEME_FIELD: None, SCHEME_1_FIELD: None})
    assert load_partition_meta(folder).graph_fingerprint_scheme == 1
    computed: list[str] = []
    hexdigest = GraphDigest.hexdigest
    with monkeypatch.context() as m:
        m.setattr(GraphDigest, "hexdigest", lambda self, header: computed.append(hexdigest(self, header))
                  or computed[-1])
        assert len(verify_partition(folder)) == 1   # the scheme-2 value, recomputed as scheme 1
    _edit_meta(folder, graph_fingerprint=computed[-1])
    return computed[-1]


def test_a_scheme_1_typed_folder_is_checked_the_old_way(tmp_path, monkeypatch):
    partition_graph(_graph(), 2, "random", tmp_path / "p2", seed=1)
    new = load_partition_meta(tmp_path / "p2").graph_fingerprint
    assert _as_scheme_1(tmp_path / "p2", monkeypatch) != new
    assert verify_partition(tmp_path / "p2") == []


def test_a_new_typed_folder_records_what_an_older_cut_of_its_graph_recorded(tmp_path, monkeypatch, capsys):
    """The scheme-1 digest a new cut records is the fingerprint of an older (scheme-1) cut of the
    same graph, for any number of parts, method and the out-of-core writer; inspect shows both."""
    partition_graph(_graph(), 2, "random", tmp_path / "old", seed=1)
    old = _as_scheme_1(tmp_path / "old", monkeypatch)
    new, scheme_1 = _fingerprints(tmp_path / "p3", _graph(), parts=3, method="ldg")
    assert scheme_1 == old
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "p3")]) == EXIT_OK and main(["inspect", str(tmp_path / "old")]) == EXIT_OK
    shown = capsys.readouterr().err
    assert f"graph fingerprint: {new} (scheme 2;" in shown and f"graph fingerprint by scheme 1: {old}" in shown
    assert f"graph fingerprint: {old} (scheme 1;" in shown and shown.count("by scheme 1:") == 1
    write_typed_npy_dir(tmp_path / "typed", _graph())
    assert main(["-q", "partition", "--input", str(tmp_path / "typed"), "--parts", "2", "--method", "random",
                 "--out", str(tmp_path / "disk"), "--no-progress"]) == EXIT_OK
    assert _fingerprints(tmp_path / "disk")[1] == old
    assert main(["-q", "partition", "--input", str(tmp_path / "old"), "--parts", "3", "--method", "random",
                 "--out", str(tmp_path / "recut"), "--no-progress"]) == EXIT_OK   # a re-cut of the old folder
    assert _fingerprints(tmp_path / "recut")[1] == old


def test_a_wrong_scheme_1_digest_is_found_and_misplaced_one_refused(tmp_path):
    partition_graph(_graph(), 2, "random", tmp_path / "p2", seed=1)
    _edit_meta(tmp_path / "p2", **{SCHEME_1_FIELD: "0" * 64})
    problems = verify_partition(tmp_path / "p2")
    assert len(problems) == 1 and f"field {SCHEME_1_FIELD} = 0000000000000000... is not the digest" in problems[0]
    _edit_meta(tmp_path / "p2", **{SCHEME_FIELD: None})   # a scheme-1 folder has no scheme-1 digest beside it
    with pytest.raises(PartitionFormatError, match=f"field {SCHEME_1_FIELD} is only recorded beside a "
                                                   f"graph_fingerprint of scheme {TYPED_SCHEME}"):
        load_partition_meta(tmp_path / "p2")
    _edit_meta(tmp_path / "p2", **{SCHEME_FIELD: TYPED_SCHEME, SCHEME_1_FIELD: "x"})
    with pytest.raises(PartitionFormatError, match=f"field {SCHEME_1_FIELD} = 'x': expected 64 lowercase hex"):
        load_partition_meta(tmp_path / "p2")


def test_a_resize_cut_of_a_scheme_1_typed_folder_is_verified_by_scheme_1(tmp_path, monkeypatch, caplog):
    from gnn_dist.resize_cut import ResizeCut

    partition_graph(_graph(), 2, "random", tmp_path / "p2", seed=1)
    old = _as_scheme_1(tmp_path / "p2", monkeypatch)
    cut = ResizeCut(tmp_path / "p2", tmp_path / "ckpt" / "partitions" / "p3", 3, "random")
    with caplog.at_level(logging.INFO, logger="gnn_dist"):
        assert cut.make(0, 5) == str(cut.target)
        meta = load_partition_meta(cut.target)
        assert meta.graph_fingerprint_scheme == TYPED_SCHEME and meta.graph_fingerprint != old
        assert meta.scheme_1_graph_fingerprint == meta.raw["repartitioned_from"]["graph_fingerprint"] == old
        assert "is of scheme 1" not in caplog.text
        assert cut.make(0, 5) == str(cut.target)
        assert f"reusing {cut.target}" in caplog.text
        _edit_meta(cut.target, **{SCHEME_1_FIELD: None})   # a cut by a gnn-dist before the field: by its record
        assert cut.make(0, 5) == str(cut.target)
        assert "is of scheme 1" in caplog.text and "--resume-any-partition" in caplog.text
    _edit_meta(tmp_path / "p2", graph_fingerprint="0" * 64)   # another source: the cut is not reused
    with pytest.raises(ValueError, match=r"is not a 3-part cut of .*cut from graph fingerprint"):
        cut.make(0, 5)
    _edit_meta(cut.target, **{SCHEME_1_FIELD: old})
    with pytest.raises(ValueError, match=r"is not a 3-part cut of .*graph fingerprint by scheme 1 "
                                         f"{old[:16]}\\.\\.\\., not 0000000000000000"):
        cut.make(0, 5)


@pytest.mark.parametrize("value", [1, 3, "2", True])
def test_a_bad_scheme_is_one_line_naming_the_field(tmp_path, value):
    partition_graph(_graph(), 2, "random", tmp_path / "p2", seed=1)
    _edit_meta(tmp_path / "p2", **{SCHEME_FIELD: value})
    with pytest.raises(PartitionFormatError, match=f"field {SCHEME_FIELD} = .*expected {TYPED_SCHEME} in a typed"):
        load_partition_meta(tmp_path / "p2")
