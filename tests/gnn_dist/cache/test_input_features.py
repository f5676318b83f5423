"""The first layer through the feature store: every storage, budget, policy, chunking and the
precomputed first layer train exactly what the plain per-epoch exchange trains; with the static
halo cache layer 0 sends no bytes after the start."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from partitioners import Graph
from partitioners.format.writer import write_partition
from mp_utils import run_ranks
from train_helpers import make_graph

EPOCHS = 3
BASE = {"static_halo": False}
"""The reference: layer 0 exchanges its halo rows every step, features all on the device."""
CONFIGS = {
    "static": {},
    "host_all": {"feature_storage": "host"},
    "host_part_chunked": {"feature_storage": "host", "feature_cache_budget": 0.3, "first_layer_chunk_rows": 25},
    "mmap_none_chunked": {"feature_storage": "mmap", "feature_cache_budget": 0, "first_layer_chunk_rows": 12},
    "mmap_auto": {"feature_storage": "mmap", "feature_cache_budget": "40%"},
    "frequency": {"feature_storage": "host", "feature_cache_budget": 0.25, "feature_cache_policy": "frequency",
                  "first_layer_chunk_rows": 20},
    "halo_policy": {"feature_storage": "host", "feature_cache_budget": 0.5, "feature_cache_policy": "halo",
                    "first_layer_chunk_rows": 30},
    "overlap_no_static": {"pipeline": "overlap", "static_halo": False},
    "overlap_chunked": {"pipeline": "overlap", "feature_storage": "mmap", "feature_cache_budget": 0.3,
                        "first_layer_chunk_rows": 25},
    "stale_free_halo": {"pipeline": "stale", "feature_storage": "host", "feature_cache_budget": 0.5,
                        "first_layer_chunk_rows": 30},
    "precompute": {"precompute_first_layer": True},
    "precompute_chunked": {"precompute_first_layer": True, "feature_storage": "mmap", "feature_cache_budget": 0,
                           "first_layer_chunk_rows": 16},
}
MODELS = ("gcn", "sage", "gat", "gin")
PRECOMPUTABLE = ("gcn", "sage", "gin")


def build(name: str, part):
    from gnn_dist.models import build_model

    torch.manual_seed(0)
    kwargs = {"heads": 2, "attn_dropout": 0.3} if name == "gat" else {}
    return build_model(name, in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=2,
                       dropout=0.5, seed=3, **kwargs)


def train_configs(rank: int, world_size: int, path: str, configs: dict) -> dict:
    """Train every model under every config; returns losses, weights, per-layer bytes, store stats."""
    import gnn_dist

    part = gnn_dist.load_partition(path)
    out: dict = {}
    for cname, cfg in configs.items():
        for name in MODELS:
            if cfg.get("precompute_first_layer") and name not in PRECOMPUTABLE:
                continue
            model = build(name, part)
            trainer = gnn_dist.Trainer(model, part, lr=0.05, log_every=0, **cfg)
            hist = trainer.fit(EPOCHS)
            store = trainer.inputs.store
            out[(cname, name)] = {
                "loss": [h["train_loss"] for h in hist], "test_acc": [h["test_acc"] for h in hist],
                "bytes": [h["bytes_per_layer"] for h in hist],
                "params": {k: v.detach().clone() for k, v in model.state_dict().items()},
                "hits": [h["feature_hits"] for h in hist], "misses": [h["feature_misses"] for h in hist],
                "h2d": [h["feature_h2d_bytes"] for h in hist], "cached_rows": store.cached_rows,
                "num_rows": store.num_rows, "row_bytes": store.row_bytes,
                "static_halo_bytes": trainer.inputs.static_halo_bytes,
            }
    return out


def assert_same(got: dict, ref: dict, what: str) -> None:
    np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, atol=1e-6, err_msg=what)
    assert got["test_acc"] == pytest.approx(ref["test_acc"], abs=1e-9), what
    for key, value in ref["params"].items():
        torch.testing.assert_close(got["params"][key], value, rtol=1e-5, atol=1e-5,
                                   msg=lambda m, k=key: f"{what} {k}: {m}")


@pytest.fixture(scope="module")
def parts2(tmp_path_factory) -> str:
    graph = make_graph(num_nodes=90, seed=4)
    a = np.random.default_rng(1).integers(0, 2, graph.num_nodes).astype(np.int32)
    out = tmp_path_factory.mktemp("cache2") / "parts"
    write_partition(graph, a, 2, out, method="test", method_params={}, seed=0)
    return str(out)


@pytest.fixture(scope="module")
def results2(parts2) -> list:
    return run_ranks(train_configs, 2, parts2, {"base": BASE, **CONFIGS}, timeout=280)


@pytest.mark.parametrize("config", sorted(set(CONFIGS) - {"stale_free_halo"}))
def test_every_config_trains_exactly_like_the_plain_exchange(results2, config):
    for rank_results in results2:
        for name in MODELS:
            if (config, name) in rank_results:
                assert_same(rank_results[(config, name)], rank_results[("base", name)], f"{config}/{name}")


def test_stale_with_the_cache_has_exact_first_layer_inputs(results2):
    """``stale`` uses last epoch's rows in layers >= 1 only: the first step is synchronous, so its
    loss equals the exact one, and layer 0 (static halo rows through the store) sends nothing."""
    for rank_results in results2:
        for name in MODELS:
            got, ref = rank_results[("stale_free_halo", name)], rank_results[("base", name)]
            assert got["loss"][0] == pytest.approx(ref["loss"][0], rel=1e-6), name
            assert all(b[0] == 0 and b[1] > 0 for b in got["bytes"]), name


def test_static_halo_sends_no_layer0_bytes_after_the_start(results2):
    for rank, res in enumerate(results2):
        for name in MODELS:
            base, static = res[("base", name)], res[("static", name)]
            assert all(b[0] > 0 for b in base["bytes"]), f"rank {rank} {name}: the reference exchanges layer 0"
            assert all(b[0] == 0 for b in static["bytes"]), f"rank {rank} {name}: layer 0 bytes {static['bytes']}"
            # later layers are unchanged, so per-epoch bytes drop by exactly the layer-0 share
            assert [b[1:] for b in static["bytes"]] == [b[1:] for b in base["bytes"]]


def test_store_counters_follow_the_storage(results2):
    for res in results2:
        allrows = res[("host_all", "gcn")]
        assert allrows["cached_rows"] == allrows["num_rows"]
        assert allrows["misses"] == [0] * EPOCHS and allrows["h2d"] == [0] * EPOCHS
        assert allrows["hits"][0] >= allrows["num_rows"]
        none = res[("mmap_none_chunked", "gcn")]
        assert none["cached_rows"] == 0 and none["hits"] == [0] * EPOCHS
        assert all(m > 0 and h == m * none["row_bytes"] for m, h in zip(none["misses"], none["h2d"]))
        part = res[("host_part_chunked", "gcn")]
        assert 0 < part["cached_rows"] < part["num_rows"]
        assert all(h > 0 and m > 0 for h, m in zip(part["hits"], part["misses"]))
        assert all(h2d == m * part["row_bytes"] for m, h2d in zip(part["misses"], part["h2d"]))


def test_static_halo_bytes_are_the_halo_input_rows(results2, parts2):
    from partitioners import load_partition_meta

    meta = load_partition_meta(parts2)
    for rank, res in enumerate(results2):
        got = res[("static", "gcn")]
        sent_rows = sum(p.num_halo for q, p in enumerate(meta.parts) if q != rank)  # two parts: the peer's halo
        assert got["static_halo_bytes"] == sent_rows * got["row_bytes"]


# ------------------------------------------------------------------ one process, P = 1

@pytest.fixture(scope="module")
def one_part(tmp_path_factory):
    import gnn_dist

    graph = make_graph(num_nodes=70, seed=9)
    out = tmp_path_factory.mktemp("cache1") / "parts"
    write_partition(graph, np.zeros(graph.num_nodes, np.int32), 1, out, method="test", method_params={}, seed=0)
    return gnn_dist.load_partition(out)


@pytest.mark.parametrize("name", MODELS)
def test_layer_on_row_subsets_and_chunks_equals_the_whole_layer(one_part, name):
    from gnn_dist.cache import InputFeatures

    model = build(name, one_part).train()
    conv = model.convs[0]
    from gnn_dist.nn import DropoutKey

    key = DropoutKey(3, torch.tensor(2), 0) if getattr(conv, "uses_dropout_key", False) else None
    whole = InputFeatures(one_part)
    chunked = InputFeatures(one_part, storage="mmap", cache_budget=0.2, first_layer_chunk_rows=9)
    ref = conv(one_part.block, one_part.x, **({"dropout_key": key} if key is not None else {}))
    torch.testing.assert_close(whole.layer(conv, one_part, dropout_key=key), ref)
    out = chunked.layer(conv, one_part, dropout_key=key)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    rows = torch.randperm(one_part.num_inner, generator=torch.Generator().manual_seed(0))[:23]
    for inputs in (whole, chunked):
        torch.testing.assert_close(inputs.layer(conv, one_part, dropout_key=key, rows=rows), ref[rows],
                                   rtol=1e-5, atol=1e-6)
    # the chunked layer's backward (recomputed chunks) gives the whole layer's weight gradients,
    # also when the step of the dropout key advances in place before backward (as the models do)
    grads = []
    for inputs in (whole, chunked):
        conv.zero_grad()
        step = torch.tensor(2)
        k = None if key is None else DropoutKey(3, step, 0)
        loss = (inputs.layer(conv, one_part, dropout_key=k) ** 2).sum()
        step += 1
        loss.backward()
        grads.append([p.grad.clone() for p in conv.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_chunks_fetch_only_their_sources(one_part):
    from gnn_dist.cache import InputFeatures

    inputs = InputFeatures(one_part, storage="host", cache_budget=0, first_layer_chunk_rows=10)
    conv = build("gcn", one_part).convs[0]
    with torch.no_grad():
        inputs.layer(conv, one_part)
    plan = inputs._plan(None)
    assert len(plan) > 1
    expected = sum(int(src_rows.numel()) for _, src_rows, _ in plan)
    assert inputs.store.misses == expected < len(plan) * one_part.block.num_src


@pytest.mark.parametrize("name, fixed", [("gcn", True), ("sage", True), ("gin", True)])
def test_precompute_keeps_the_updates_fixed_part_and_equals_the_plain_layer_bit_for_bit(one_part, name, fixed):
    """The precomputed first layer caches the part of the update that reads no trained parameter
    (GCN's self term, SAGE's mean, GIN's ``(1 + eps) x``) with the aggregate; its output equals
    the plain update of the cached aggregate bit for bit, and for the whole layer within float
    rounding. A learned eps, or a subclass that overrides ``update`` alone, keeps the plain update."""
    from gnn_dist.cache import InputFeatures
    from gnn_dist.nn import GINConv

    conv = build(name, one_part).convs[0]
    inputs = InputFeatures(one_part, precompute_first_layer=True)
    out = inputs.layer(conv, one_part)
    (key, (cached, x_inner, is_fixed)), = inputs._precomputed.items()
    assert is_fixed is fixed
    acc, _ = InputFeatures(one_part, precompute_first_layer=False)._aggregate_once(conv, torch.float32)
    ctx, _ = conv.begin(one_part.block, x_inner, raw=True)
    assert torch.equal(out, conv.update(acc, ctx))
    torch.testing.assert_close(out, conv(one_part.block, inputs.store.gather_range(0, inputs.store.num_rows)))

    class OwnUpdate(type(conv)):
        def update(self, acc, ctx):
            return super().update(acc, ctx) * 2

    mine = OwnUpdate.__new__(OwnUpdate)
    mine.__dict__.update(conv.__dict__)
    fresh = InputFeatures(one_part, precompute_first_layer=True)
    assert torch.equal(fresh.layer(mine, one_part), 2 * out)
    assert next(iter(fresh._precomputed.values()))[2] is False
    learned = GINConv(torch.nn.Linear(one_part.feature_dim, 4), train_eps=True)
    fresh.layer(learned, one_part)
    assert fresh._precomputed[(learned, torch.float32)][2] is False


def test_precompute_refuses_a_nonlinear_first_layer(one_part):
    from gnn_dist.cache import InputFeatures

    inputs = InputFeatures(one_part, precompute_first_layer=True)
    with pytest.raises(ValueError, match="precompute_first_layer needs a first layer whose aggregation is linear .*GATConv"):
        inputs.layer(build("gat", one_part).convs[0], one_part)


def test_auto_precomputes_a_linear_first_layer_only_where_it_can(one_part):
    """``"auto"`` (the default) precomputes a GCN/SAGE/GIN first layer that aggregates its raw
    rows with every row on the device; it runs the plain layer for one that maps first (a
    narrowing map: the cached aggregate would be memory the plain step does not hold), for GAT (no
    error), under input dropout (whose masks change every step), with chunks, without the static
    halo, and never with ``"off"``; ``"on"`` precomputes under input dropout too."""
    from gnn_dist.cache import InputFeatures
    from gnn_dist.nn import DropoutKey, GCNConv, GINConv, RowDropout
    from gnn_dist.nn.dropout import INPUT_LAYER

    f = one_part.feature_dim
    torch.manual_seed(0)
    gcn, gat = GCNConv(f, f), build("gat", one_part).convs[0].eval()
    narrow = [GCNConv(f, f // 4), GINConv(torch.nn.Linear(f, f // 2))]
    auto = InputFeatures(one_part)
    assert auto.precompute_mode == "auto" and auto.precompute
    plain = InputFeatures(one_part, precompute_first_layer="off")
    out = auto.layer(gcn, one_part)
    assert list(auto._precomputed) == [(gcn, torch.float32)]
    torch.testing.assert_close(out, plain.layer(gcn, one_part))
    assert not plain._precomputed
    for conv in (gat, *narrow):
        torch.testing.assert_close(auto.layer(conv, one_part), plain.layer(conv, one_part))
    assert list(auto._precomputed) == [(gcn, torch.float32)]

    fresh = InputFeatures(one_part)
    drop = RowDropout(0.5, DropoutKey(seed=1, step=0, layer=INPUT_LAYER))
    torch.testing.assert_close(fresh.layer(gcn, one_part, input_dropout=drop),
                               plain.layer(gcn, one_part, input_dropout=drop))
    assert not fresh._precomputed
    for kwargs in ({"first_layer_chunk_rows": 16}, {"static_halo": False},
                   {"storage": "host", "cache_budget": 0.5, "first_layer_chunk_rows": 0}):
        assert not InputFeatures(one_part, **kwargs).precompute
    on = InputFeatures(one_part, precompute_first_layer="on")   # "on" keeps precomputing (and drops the aggregate)
    on.layer(gcn, one_part, input_dropout=drop)
    assert list(on._precomputed) == [(gcn, torch.float32)]


@pytest.mark.parametrize("kwargs, match", [
    ({"storage": "disk"}, "feature_storage: 'disk' is not supported"),
    ({"cache_policy": "lru"}, "lru"),
    ({"precompute_first_layer": True, "static_halo": False}, "precompute_first_layer: needs static_halo"),
    ({"precompute_first_layer": "on", "static_halo": False}, "precompute_first_layer: needs static_halo"),
    ({"precompute_first_layer": "always"}, "precompute_first_layer: 'always' is not valid: expected one of auto, on"),
    ({"first_layer_chunk_rows": -1}, "first_layer_chunk_rows: -1 must be"),
    ({"cache_budget": "4XB"}, "4XB"),
])
def test_bad_options_name_the_option(one_part, kwargs, match):
    from gnn_dist.cache import InputFeatures

    with pytest.raises(ValueError, match=match):
        InputFeatures(one_part, **kwargs)


def test_fp16_features_stay_fp16_in_the_store_and_train_like_their_fp32_values(tmp_path):
    import gnn_dist

    g = make_graph(num_nodes=60, seed=2)
    x16 = g.x.astype(np.float16)
    parts = {}
    for dtype, x in (("fp16", x16), ("fp32", x16.astype(np.float32))):
        src, dst = g.edges()
        graph = Graph.from_edges(src, dst, g.num_nodes, features=x, labels=g.y, train_mask=g.train_mask,
                                 val_mask=g.val_mask, test_mask=g.test_mask, num_classes=3)
        write_partition(graph, np.zeros(g.num_nodes, np.int32), 1, tmp_path / dtype, method="test",
                        method_params={}, seed=0)
        part = gnn_dist.load_partition(tmp_path / dtype)
        trainer = gnn_dist.Trainer(build("gcn", part), part, lr=0.05, log_every=0, feature_storage="host",
                                   feature_cache_budget=0.5, first_layer_chunk_rows=15)
        parts[dtype] = (trainer.inputs.store, [h["train_loss"] for h in trainer.fit(EPOCHS)])
    store16, loss16 = parts["fp16"]
    store32, loss32 = parts["fp32"]
    assert store16.dtype == torch.float16 and store16.row_bytes * 2 == store32.row_bytes
    assert store16.h2d_bytes * 2 == store32.h2d_bytes > 0
    np.testing.assert_allclose(loss16, loss32, rtol=1e-6)
