"""Regression targets as labels (issue 20): float ``[N]`` / ``[N, D]`` labels are label_kind
``regression``, stored float32 ``[n, D]`` with ``num_classes = D``; the in-memory and npy-dir
paths write the same files, verify checks the values are finite, bad targets are one line; the
catalog's ``sbm-regression`` plants a signal a 2-hop aggregate explains and the raw features do
not."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from partitioners import Graph
from partitioners.catalog import dataset_info, load_dataset
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE, main
from partitioners.errors import GraphError
from partitioners.format import load_partition_meta, npyio, verify_partition
from partitioners.format.writer import write_partition
from partitioners.graph_checks import check_labels


def _edges(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, 6 * n), rng.integers(0, n, 6 * n)


@pytest.mark.parametrize("y, kind, shape, dtype", [
    (np.array([0.5, 1.25, -2.0]), "regression", (3, 1), np.float32),          # real floats: targets [N, 1]
    (np.array([[0.5, 1.0], [2.0, 3.0], [1.0, 0.25]], np.float16), "regression", (3, 2), np.float32),
    (np.array([0.0, 2.0, 1.0]), "class", (3,), np.int64),                      # whole floats: class ids
    (np.array([[0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]), "multilabel", (3, 2), np.uint8),   # 0/1 floats
    (np.array([0, 2, 1], np.int32), "class", (3,), np.int64),
])
def test_the_label_kind_is_inferred_from_the_values(y, kind, shape, dtype):
    g = Graph.from_edges([0, 1], [1, 2], 3, labels=y)
    assert g.label_kind == kind and g.y.shape == shape and g.y.dtype == dtype
    assert g.num_classes == (shape[1] if kind == "regression" else g.num_classes)
    assert g.multilabel == (kind == "multilabel")
    if kind == "regression":
        np.testing.assert_array_equal(g.y, y.astype(np.float32).reshape(3, -1))


def test_label_kind_regression_keeps_whole_valued_targets():
    y = np.array([0.0, 2.0, 1.0])
    g = Graph.from_edges([0, 1], [1, 2], 3, labels=y, label_kind="regression")
    assert g.label_kind == "regression" and g.y.dtype == np.float32 and g.y.shape == (3, 1) and g.num_classes == 1


@pytest.mark.parametrize("y, num_classes, message", [
    (np.array([0.5, np.nan, 1.0]), None, r"labels\[1\] = nan is not finite \(NaN or inf\); regression targets must be finite"),
    (np.array([[0.5, 1.0], [np.inf, 0.5], [1.5, 2.5]]), None, r"labels\[1, 0\] = inf is not finite"),
    (np.array([[0.5, 1.5], [1.5, 0.5], [2.5, 0.25]]), 3, r"num_classes=3 but the regression targets have 2 columns"),
    (np.zeros((3, 2, 2)), None, r"regression targets must be \[num_nodes\] or \[num_nodes, D\]"),
])
def test_bad_targets_name_the_value_and_the_fix(y, num_classes, message):
    with pytest.raises(GraphError, match=message):
        check_labels(y, 3, num_classes, "regression" if y.ndim == 3 else None)


def test_targets_with_the_wrong_row_count_are_refused():
    with pytest.raises(GraphError, match=r"labels has 4 rows but the graph has 3 nodes"):
        Graph.from_edges([0, 1], [1, 2], 3, labels=np.full(4, 0.5))


def _regression_arrays(n: int = 200, d: int = 3, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    src, dst = _edges(n, seed)
    return {"src": src, "dst": dst, "features": rng.standard_normal((n, 5)).astype(np.float32),
            "labels": rng.standard_normal((n, d)),            # float64 input: stored float32
            "train_mask": rng.random(n) < 0.5}


def _label_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("labels.npy"))}


def test_in_memory_and_npy_dir_partitions_write_the_same_targets(tmp_path):
    arrays = _regression_arrays()
    (tmp_path / "g").mkdir()
    for name, a in arrays.items():
        np.save(tmp_path / "g" / f"{name}.npy", a)
    np.savez(tmp_path / "g.npz", **arrays)
    outs = {}
    for source in ("g", "g.npz"):
        out = tmp_path / f"out-{source}"
        assert main(["-q", "partition", "--input", str(tmp_path / source), "--parts", "3", "--method", "random",
                     "--out", str(out), "--no-progress"]) == EXIT_OK
        outs[source] = out
    files = _label_files(outs["g"])
    assert len(files) == 3 and files == _label_files(outs["g.npz"])
    meta = load_partition_meta(outs["g"])
    assert (meta.label_kind, meta.num_classes) == ("regression", 3)
    got = np.zeros((200, 3), np.float32)
    node_map = np.load(outs["g"] / "node_map.npy")
    for p in range(3):
        ids = np.load(outs["g"] / f"part-{p:05d}" / "original_ids.npy")[:meta.parts[p].num_inner]
        y = np.load(outs["g"] / f"part-{p:05d}" / "labels.npy")
        assert y.dtype == np.float32 and y.shape == (meta.parts[p].num_inner, 3)
        got[ids] = y
    np.testing.assert_array_equal(got, arrays["labels"].astype(np.float32))
    assert node_map.shape == (200,)
    assert verify_partition(outs["g"]) == []
    assert main(["-q", "inspect", "--verify", str(outs["g"])]) == EXIT_OK


def test_npy_dir_graph_json_names_whole_valued_targets(tmp_path):
    d = tmp_path / "g"
    d.mkdir()
    src, dst = _edges(30)
    np.save(d / "src.npy", src)
    np.save(d / "dst.npy", dst)
    np.save(d / "labels.npy", np.arange(30, dtype=np.float64) % 4)   # whole numbers: class ids by default
    out = tmp_path / "class"
    assert main(["-q", "partition", "--input", str(d), "--parts", "1", "--out", str(out), "--no-progress"]) == EXIT_OK
    assert load_partition_meta(out).label_kind == "class"
    (d / "graph.json").write_text(json.dumps({"label_kind": "regression"}))
    out = tmp_path / "regression"
    assert main(["-q", "partition", "--input", str(d), "--parts", "1", "--out", str(out), "--no-progress"]) == EXIT_OK
    meta = load_partition_meta(out)
    assert (meta.label_kind, meta.num_classes) == ("regression", 1)


@pytest.mark.parametrize("labels, graph_json, message", [
    (np.array([0.5, np.nan, 1.5, 2.5]), None, r"labels\[1\] = nan is not finite"),
    (np.array([0.5, 1.5, 2.5]), None, r"labels\.npy: has 3 rows but the graph has 4 nodes"),
    (np.array([0.5, 1.5, 2.5, 3.5]), {"label_kind": "ordinal"}, r"'label_kind' must be one of class, multilabel, regression"),
])
def test_bad_npy_dir_targets_get_one_line_and_exit_2(tmp_path, capsys, labels, graph_json, message):
    d = tmp_path / "g"
    d.mkdir()
    np.save(d / "src.npy", np.array([0, 1, 2]))
    np.save(d / "dst.npy", np.array([1, 2, 3]))
    np.save(d / "labels.npy", labels)
    (d / "graph.json").write_text(json.dumps({"num_nodes": 4, **(graph_json or {})}))
    code = main(["partition", "--input", str(d), "--parts", "2", "--method", "random",
                 "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error" in line]
    assert code == EXIT_USAGE and len(lines) == 1 and "Traceback" not in err, err
    assert re.search(message, lines[0]), lines[0]
    assert not (tmp_path / "out").exists()


def test_verify_finds_a_non_finite_target(tmp_path):
    arrays = _regression_arrays(60, 2)
    g = Graph.from_edges(arrays["src"], arrays["dst"], 60, features=arrays["features"], labels=arrays["labels"])
    out = tmp_path / "parts"
    write_partition(g, np.zeros(60, np.int32), 1, out, method="test", method_params={}, seed=0)
    assert main(["-q", "inspect", "--verify", str(out)]) == EXIT_OK
    path = out / "part-00000" / "labels.npy"
    y = np.load(path)
    y[7, 1] = np.nan
    np.save(path, y)   # same size, other bytes: re-checksummed, so only the values are wrong
    meta = json.loads((out / "partition.json").read_text())
    meta["parts"][0]["files"]["labels.npy"]["sha256"] = npyio.sha256_file(path)
    (out / "partition.json").write_text(json.dumps(meta))
    problems = verify_partition(out)
    assert any("regression targets must be finite (a NaN or inf at row 7)" in p for p in problems), problems


def test_the_catalog_regression_graph_plants_a_graph_signal():
    info = dataset_info("sbm-regression")
    g = load_dataset("sbm-regression")
    assert (info.label_kind, info.num_classes) == ("regression", 4)
    assert g.label_kind == "regression" and g.y.dtype == np.float32 and g.y.shape == (info.num_nodes, 4)
    assert g.num_nodes == info.num_nodes and abs(g.num_edges - info.num_edges) <= 0.01 * info.num_edges
    assert np.isfinite(g.y).all() and np.allclose(g.y.std(0), 1.0, atol=0.05)
    assert load_dataset("sbm-regression").y.tobytes() == g.y.tobytes()          # the same seed, the same bytes
    assert load_dataset("sbm-regression", seed=1).y.tobytes() != g.y.tobytes()
    tiny = load_dataset("sbm-tiny")
    assert np.array_equal(tiny.indices, g.indices) and np.array_equal(tiny.x, g.x)

    def test_r2(features: np.ndarray) -> float:   # least squares on the training rows, R^2 on the test rows
        x = np.c_[features, np.ones(g.num_nodes)]
        w = np.linalg.lstsq(x[g.train_mask], g.y[g.train_mask], rcond=None)[0]
        e, t = x[g.test_mask] @ w - g.y[g.test_mask], g.y[g.test_mask]
        return float(np.mean(1 - (e ** 2).sum(0) / ((t - t.mean(0)) ** 2).sum(0)))

    a = g.to_scipy()
    inv = 1.0 / (g.in_degree() + 1.0)
    h = g.x.astype(np.float64)
    for _ in range(2):
        h = (h + a @ h) * inv[:, None]
    assert test_r2(h) > 0.95 and test_r2(g.x) < 0.5
