"""Tests of the dataset catalog (partitioners.catalog)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from partitioners.catalog import DatasetInfo, dataset_info, list_datasets, load_dataset

SIZES = ("tiny", "small", "medium", "large")
FAST = [f"{fam}-{size}" for fam in ("sbm", "rmat") for size in ("tiny", "small")]


def test_catalog_lists_both_families_at_four_sizes() -> None:
    infos = list_datasets()
    sized = [f"{fam}-{s}" for fam in ("sbm", "rmat") for s in SIZES]
    assert [d.name for d in infos][:len(sized)] == sized and "sbm-regression" in [d.name for d in infos]
    for d in infos:
        assert isinstance(d, DatasetInfo)
        assert d.family == d.name.split("-")[0]
        assert dataset_info(d.name) is d
        assert d.description and d.feature_dim > 0 and d.num_classes >= (1 if d.label_kind == "regression" else 2)
    infos = [d for d in infos if d.label_kind == "class"]   # the sized entries
    # advertised size ranges
    by_size = {s: [d for d in infos if d.name.endswith(s)] for s in SIZES}
    assert all(d.num_nodes <= 1_000 for d in by_size["tiny"])
    assert all(5_000 <= d.num_nodes <= 20_000 for d in by_size["small"])
    assert all(150_000 <= d.num_nodes <= 300_000 and 3e6 <= d.num_edges <= 5e6 for d in by_size["medium"])
    assert all(1.5e6 <= d.num_nodes <= 3e6 and 3e7 <= d.num_edges <= 5e7 for d in by_size["large"])


def test_catalog_entries_are_frozen_and_json_ready() -> None:
    d = dataset_info("sbm-small")
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.num_nodes = 5  # type: ignore[misc]
    row = json.loads(json.dumps(dataclasses.asdict(d)))
    assert row["name"] == "sbm-small" and row["params"]["num_nodes"] == d.num_nodes


@pytest.mark.parametrize("name", FAST)
def test_load_matches_its_entry(name: str) -> None:
    info = dataset_info(name)
    g = load_dataset(name)
    assert g.name == name
    assert g.num_nodes == info.num_nodes
    assert abs(g.num_edges - info.num_edges) <= 0.01 * info.num_edges  # rounded seed-0 count
    assert g.feature_dim == info.feature_dim and g.x.dtype == np.float32
    assert g.num_classes == info.num_classes
    assert g.y.min() >= 0 and g.y.max() < info.num_classes
    a = g.to_scipy()
    assert (a != a.T).nnz == 0 and a.diagonal().sum() == 0
    masks = (g.train_mask, g.val_mask, g.test_mask)
    assert all(m.any() for m in masks)
    assert int(sum(m.astype(np.int64) for m in masks).max()) == 1
    other = load_dataset(name, seed=1)  # another seed: a few percent off the advertised count
    assert abs(other.num_edges - info.num_edges) <= 0.1 * info.num_edges


def test_load_is_deterministic_per_seed() -> None:
    a, b, c = load_dataset("sbm-tiny", seed=3), load_dataset("sbm-tiny", seed=3), load_dataset("sbm-tiny", seed=4)
    for name in ("indptr", "indices", "x", "y", "train_mask"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
    assert a.indices.tobytes() != c.indices.tobytes()
    r1, r2 = load_dataset("rmat-tiny", seed=3), load_dataset("rmat-tiny", seed=3)
    assert r1.indices.tobytes() == r2.indices.tobytes() and r1.x.tobytes() == r2.x.tobytes()


def test_sbm_entries_are_homophilous_local_and_rmat_skewed() -> None:
    from partitioners.synthetic import sbm_communities

    for name in ("sbm-tiny", "sbm-small"):
        info = dataset_info(name)
        g = load_dataset(name)
        src, dst = g.edges()
        assert (g.y[src] == g.y[dst]).mean() > 0.45, name  # chance: 1 / K = 0.25, 0.125
        community = sbm_communities(info.num_nodes, info.num_classes,
                                    community_size=info.params["community_size"], seed=0)
        assert community.max() + 1 >= 4, name  # at least one community per part at P = 4
        assert (community[src] == community[dst]).mean() > 0.9, name
    for name in ("rmat-tiny", "rmat-small"):
        deg = load_dataset(name).in_degree()
        assert deg.max() > 10 * deg.mean(), name


def test_large_entries_are_parameterised_to_their_advertised_size() -> None:
    """Checked from the parameters without generating (the README has the measurements)."""
    for d in list_datasets():
        p = d.params
        assert p["num_nodes"] == d.num_nodes and p["feature_dim"] == d.feature_dim
        assert (p.get("target_dim") or p.get("multilabel_dim") or p["num_classes"]) == d.num_classes
        if d.family == "sbm":  # stored edges: under avg_degree * N (repeats in communities)
            assert 0.8 * p["avg_degree"] * d.num_nodes <= d.num_edges <= p["avg_degree"] * d.num_nodes
        else:  # each draw gives at most two stored edges
            assert d.num_edges <= 2 * p["num_edges"]


@pytest.mark.parametrize("bad", ["sbm-huge", "", "SBM-TINY", None])
def test_unknown_name_lists_the_valid_ones(bad: object) -> None:
    with pytest.raises(ValueError, match=r"unknown dataset .*; choose one of: sbm-tiny, sbm-small, .*rmat-large"):
        dataset_info(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown dataset"):
        load_dataset(bad)  # type: ignore[arg-type]


def test_bad_seed_is_named() -> None:
    with pytest.raises(ValueError, match=r"seed must be a non-negative integer, got -2"):
        load_dataset("rmat-tiny", seed=-2)


def test_catalog_does_not_import_torch() -> None:
    code = ("import sys, partitioners.catalog, partitioners.synthetic; "
            "bad = [m for m in sys.modules if m == 'torch' or m.startswith('torch.')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_catalog_multilabel_graph_plants_a_graph_signal() -> None:
    """``sbm-multilabel``: sbm-tiny's graph and features, 8 labels at 10-40% each, which a 2-hop
    aggregate predicts much better than a node's own features."""
    info = dataset_info("sbm-multilabel")
    g = load_dataset("sbm-multilabel")
    assert (info.label_kind, info.num_classes) == ("multilabel", 8)
    assert dataclasses.replace(info, num_classes=3).sizes().label_bytes == 3      # uint8 per label
    assert g.label_kind == "multilabel" and g.y.dtype == np.uint8 and g.y.shape == (info.num_nodes, 8)
    np.testing.assert_allclose(g.y.mean(0), np.linspace(0.1, 0.4, 8), atol=0.005)
    assert load_dataset("sbm-multilabel").y.tobytes() == g.y.tobytes()
    assert load_dataset("sbm-multilabel", seed=1).y.tobytes() != g.y.tobytes()
    tiny = load_dataset("sbm-tiny")
    assert np.array_equal(tiny.indices, g.indices) and np.array_equal(tiny.x, g.x)

    def test_f1(features: np.ndarray) -> float:   # least squares on the training rows, micro-F1 at 0.5 on the test rows
        x = np.c_[features, np.ones(g.num_nodes)]
        w = np.linalg.lstsq(x[g.train_mask], g.y[g.train_mask].astype(np.float64), rcond=None)[0]
        pred, true = x[g.test_mask] @ w > 0.5, g.y[g.test_mask] == 1
        tp = (pred & true).sum()
        return float(2 * tp / (2 * tp + (pred != true).sum()))

    a = g.to_scipy()
    inv = 1.0 / (g.in_degree() + 1.0)
    h = g.x.astype(np.float64)
    for _ in range(2):
        h = (h + a @ h) * inv[:, None]
    assert test_f1(h) > 0.8 and test_f1(g.x) < 0.5   # measured 0.85 and 0.47
