"""Layer and hybrid parallelism with one chunk (no historical rows) train exactly what one device
trains: per-epoch losses, accuracies and the final (synced) weights, dropout on, for GCN and
GCNII, the deep residual models and jumping knowledge (``name/jk``: the carried partial logits of
``cat``, the carried maximum of ``max``); with several chunks they train (the loss falls) and are
deterministic."""

from __future__ import annotations

import pytest
import torch

from lp_utils import assert_same, make_graph, train_graph, train_layer, write
from mp_utils import run_ranks


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    graph = make_graph()
    return {p: write(graph, p, tmp_path_factory.mktemp(f"p{p}") / "parts") for p in (1, 2)}


CARRIED = ["resgcn", "ressage", "gcn/cat", "sage/max", "ressage/max"]
"""The deep residual models and jumping knowledge (at dropout 0.5)."""


@pytest.fixture(scope="module")
def reference(folders):
    ref = {(name, d): train_graph(0, 1, folders[1], name, d) for name in ("gcn", "gcnii") for d in (0.0, 0.5)}
    return ref | {(name, 0.5): train_graph(0, 1, folders[1], name, 0.5) for name in CARRIED}


@pytest.mark.parametrize("name", ["gcn", "gcnii", "sage", "gat", "gin", "gin/cat", "gat/max", *CARRIED])
def test_one_stage_one_rank_equals_the_trainer(folders, name):
    ref = train_graph(0, 1, folders[1], name, 0.5)
    assert_same(train_layer(0, 1, folders[1], name, 0.5, "layer", 1), ref, name)


@pytest.mark.parametrize("name", ["gcn", "gcnii"])
def test_two_stages_equal_one_device(folders, reference, name):
    for dropout in (0.0, 0.5):
        results = run_ranks(train_layer, 2, folders[1], name, dropout, "layer", 2, timeout=240)
        for r in results:
            assert_same(r, reference[(name, dropout)], f"{name} dropout {dropout} rank")


@pytest.mark.parametrize("name", CARRIED)
def test_two_stages_of_residual_and_jumping_knowledge_models_equal_one_device(folders, reference, name):
    for r in run_ranks(train_layer, 2, folders[1], name, 0.5, "layer", 2, timeout=240):
        assert_same(r, reference[(name, 0.5)], f"{name} rank")


@pytest.mark.parametrize("name", ["gcn", "gcnii", "ressage", "gcn/cat"])
def test_hybrid_two_stages_of_two_parts_equal_one_device(folders, reference, name):
    results = run_ranks(train_layer, 4, folders[2], name, 0.5, "hybrid", 2, timeout=300)
    for r in results:
        assert_same(r, reference[(name, 0.5)], f"{name} hybrid")


def test_chunks_train_and_are_deterministic(folders, reference):
    runs = [run_ranks(train_layer, 4, folders[2], "gcnii", 0.0, "hybrid", 2, 3, 8, {"history_smoothing": 0.5},
                      timeout=300) for _ in range(2)]
    first, again = runs[0][0], runs[1][0]
    assert first["loss"] == again["loss"]
    for k, v in first["params"].items():
        assert torch.equal(again["params"][k], v), k
    loss = first["loss"]
    assert loss[-1] < loss[1] < loss[0], loss
    assert [r["chunks"] for r in first["records"]] == [1] + [3] * 7   # the first step has no history yet
    assert loss[1:] != train_layer_losses_one_chunk(folders)[1:]   # history changes the steps after the first


def train_layer_losses_one_chunk(folders):
    return run_ranks(train_layer, 4, folders[2], "gcnii", 0.0, "hybrid", 2, 1, 8, timeout=300)[0]["loss"]


@pytest.mark.parametrize("name", ["gcn/cat", "ressage/max"])
def test_chunked_carry_does_not_depend_on_the_stages(folders, name):
    """With K > 1 chunks the rows a layer reads (this epoch's or historical) depend on K alone:
    two stages, whose carry crosses the boundary chunk by chunk, train what one stage trains."""
    one = train_layer(0, 1, folders[1], name, 0.5, "layer", 1, 3, 4)
    assert [r["chunks"] for r in one["records"]] == [1, 3, 3, 3]
    for r in run_ranks(train_layer, 2, folders[1], name, 0.5, "layer", 2, 3, 4, timeout=240):
        assert_same(r, one, f"{name} chunks 3")


def test_graph_chunks_do_not_depend_on_the_stages_and_change_the_historical_rows(folders):
    """``--chunk-by graph``: the chunks are a METIS partition of the part's rows, the same on every
    stage, so two stages train what one stage trains; they differ from the hashed chunks."""
    graph = {"chunk_by": "graph"}
    one = train_layer(0, 1, folders[1], "gcnii", 0.5, "layer", 1, 3, 4, graph)
    assert [r["chunks"] for r in one["records"]] == [1, 3, 3, 3]
    for r in run_ranks(train_layer, 2, folders[1], "gcnii", 0.5, "layer", 2, 3, 4, graph, timeout=240):
        assert_same(r, one, "gcnii graph chunks")
    hashed = train_layer(0, 1, folders[1], "gcnii", 0.5, "layer", 1, 3, 4)
    assert one["loss"][0] == hashed["loss"][0] and one["loss"][1:] != hashed["loss"][1:]


def test_hybrid_graph_chunks_train(folders):
    """Hybrid with ``--chunk-by graph``: each part partitions its own rows, halo rows take their
    owner's chunk (a fetch in the stage's graph group); the run trains."""
    loss = run_ranks(train_layer, 4, folders[2], "gcnii", 0.0, "hybrid", 2, 3, 6, {"chunk_by": "graph"},
                     timeout=300)[0]["loss"]
    assert loss[-1] < loss[1] < loss[0], loss
