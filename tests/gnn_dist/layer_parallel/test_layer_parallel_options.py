"""Bad layer-parallel settings are one line naming the field and the fix (no process needed)."""

from __future__ import annotations

import pytest

from gnn_dist.config import ConfigError, ModelConfig, ParallelConfig, RunConfig, TrainerConfig
from gnn_dist.layer_parallel import stage_layout
from gnn_dist.layer_parallel.options import model_error, staged_models
from gnn_dist.layer_parallel.staged import (StagedBasicGNN, StagedResidualGNN, _check_parameters, adapter_of,
                                            register_adapter, staged_model)


def layer(**kw):
    return ParallelConfig(parallel="layer", **kw)


def test_stages_must_divide_the_layers():
    with pytest.raises(ConfigError, match=r"stages: 2 stages do not divide the model's 3 layers"):
        RunConfig(model=ModelConfig(layers=3), trainer=TrainerConfig(parallel=layer(stages=2)))
    RunConfig(model=ModelConfig(layers=4), trainer=TrainerConfig(parallel=layer(stages=2)))


def test_graph_mode_takes_no_stages():
    with pytest.raises(ConfigError, match=r"stages: 2 applies to parallel layer or hybrid only"):
        ParallelConfig(stages=2)
    with pytest.raises(ConfigError, match=r"chunks"):
        ParallelConfig(parallel="graph", chunks=0)


@pytest.mark.parametrize("fields, name", [({"pipeline": "stale"}, "pipeline"), ({"recompute": "layers"}, "recompute"),
                                          ({"precision": "bf16"}, "precision"), ({"halo_dtype": "bf16"}, "halo_dtype")])
def test_graph_parallel_options_are_refused(fields, name):
    with pytest.raises(ConfigError, match=rf"^{name}: .* is not supported with parallel='layer'"):
        TrainerConfig.from_fields(parallel="layer", stages=2, **fields)


def test_smoothing_needs_chunks():
    with pytest.raises(ConfigError, match=r"history_smoothing: 0.5 smooths .* chunks = 1"):
        TrainerConfig.from_fields(parallel="layer", stages=2, history_smoothing=0.5)
    TrainerConfig.from_fields(parallel="layer", stages=2, chunks=4, history_smoothing=0.5)


def test_a_model_without_an_adapter_is_refused():
    field, message = model_error(layer(stages=2), "custom", 4)
    assert field == "model" and "no stage adapter" in message and "gcnii" in message and "resgcn" in message


def test_a_jk_mode_without_a_cut_is_refused():
    with pytest.raises(ConfigError, match=r"^jk: 'cat' is not cut into stages for the 'resgcn' model \(its dropout "
                                          r".*use --jk last or max, or train with --parallel graph"):
        RunConfig(model=ModelConfig(model="resgcn", layers=4, jk="cat"), trainer=TrainerConfig(parallel=layer(stages=2)))
    RunConfig(model=ModelConfig(model="gcn", layers=4, jk="cat"), trainer=TrainerConfig(parallel=layer(stages=2)))


def _model(name, **kw):
    from gnn_dist.models import build_model

    return build_model(name, in_dim=5, hidden_dim=8, out_dim=3, num_layers=4, **kw)


@pytest.mark.parametrize("name", sorted(staged_models()))
def test_the_config_check_knows_each_adapters_jk_modes(name):
    from gnn_dist.models import MODELS

    adapter = adapter_of(MODELS[name])
    assert adapter.jk_modes == staged_models()[name]
    for jk in adapter.jk_modes:   # the adapter takes each, and its pieces hold every parameter once
        staged_model(_model(name, jk=jk), None, None)
    if "cat" not in adapter.jk_modes:   # the config refuses what the adapter does not cut, naming its modes
        assert model_error(ParallelConfig(parallel="layer", stages=2), name, 4, "cat")[0] == "jk"


def test_the_built_in_models_with_an_adapter():
    assert set(staged_models()) == {"gcn", "sage", "gat", "gin", "gcnii", "resgcn", "ressage"}
    assert staged_models()["gcnii"] == ("last",) and staged_models()["resgcn"] == ("last", "max")


def test_the_adapter_refuses_what_it_does_not_cut():
    from gnn_dist.models import GCN

    with pytest.raises(ValueError, match=r"ResGCN: jk='cat' is not cut into stages \(StagedResidualGNN takes jk "
                                         r"last, max"):
        staged_model(_model("resgcn", jk="cat"), None, None)

    class MyGCN(GCN):   # a subclass may change forward: it registers its own adapter
        pass

    model = MyGCN(5, 8, 3, 4)
    with pytest.raises(ValueError, match=r"MyGCN has no stage adapter .* if it keeps GCN's forward, "
                                         r"register_adapter\(MyGCN\)\(StagedBasicGNN\)"):
        staged_model(model, None, None)
    with pytest.raises(ValueError, match=r"register_adapter: MyGCN is not a registered model; register it first"):
        register_adapter(MyGCN)(StagedBasicGNN)
    from gnn_dist.models import MODEL_SPECS, register_model

    try:
        register_model("my-gcn-staged")(MyGCN)
        assert model_error(ParallelConfig(parallel="layer", stages=2), "my-gcn-staged", 4)[0] == "model"
        register_adapter(MyGCN)(StagedBasicGNN)
        assert isinstance(staged_model(model, None, None), StagedBasicGNN)
        assert model_error(ParallelConfig(parallel="layer", stages=2), "my-gcn-staged", 4) is None
    finally:
        del MODEL_SPECS["my-gcn-staged"]


def test_an_adapter_must_hold_every_parameter_once():
    class Forgetful(StagedResidualGNN):
        def head_parameters(self):
            return list(self.model.lin.parameters())   # forgets the closing norm

    with pytest.raises(ValueError, match=r"Forgetful: parameter 'layers.0.norm.weight' of ResGCN is in 0 of"):
        _check_parameters(Forgetful(_model("resgcn"), None, None))


@pytest.mark.parametrize("mode, stages, world, parts, layers, match", [
    ("layer", 2, 3, 1, 4, r"2 stages do not divide the 3 ranks"),
    ("layer", 2, 2, 2, 4, r"1-part folder, but it has 2 parts: partition with --parts 1"),
    ("layer", 2, 4, 1, 4, r"2 rank\(s\) per stage, but the folder has 1 parts: launch 2 ranks"),
    ("hybrid", 2, 4, 4, 4, r"launch 8 ranks"),
    ("hybrid", 2, 4, 2, 3, r"do not divide the model's 3 layers"),
])
def test_the_layout_must_fit_the_ranks_and_the_folder(mode, stages, world, parts, layers, match):
    with pytest.raises(ConfigError, match=match):
        stage_layout(mode, stages, world, 0, parts, layers)


def test_the_layout_maps_ranks_to_stages_and_parts():
    lay = stage_layout("hybrid", 2, 4, 3, 2, 4)
    assert (lay.stage, lay.graph_rank, list(lay.layers), lay.rank_of(0)) == (1, 1, [2, 3], 1)
    assert lay.last and not lay.first
