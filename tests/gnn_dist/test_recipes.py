"""The papers' recipes: input dropout, attention dropout, the activation, GAT's output heads, and
model selection (``select="best-val"``, ``patience``).

Each option changes training (none is a no-op); with input and attention dropout on, 2 ranks
train what one rank trains (losses, accuracies, the selected epoch, the early stop and the final
weights, to 1e-5) under ``sync`` and ``overlap``, with the features on the device, chunked from
disk, or exchanged every step; ``best-val`` ends with the best epoch's weights (an evaluation
after ``fit`` gives that epoch's recorded accuracies, and its weights are those a run stopped
there has), a later ``fit`` trains on from the last epoch's; the patience stops at the epoch the
validation history says; a resume keeps the best state and the patience count.
"""

from __future__ import annotations

import logging
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch

from partitioners import Graph
from partitioners.format.writer import write_partition
from mp_utils import run_ranks
from train_helpers import make_graph

pytestmark = pytest.mark.usefixtures("one_thread")   # tests/conftest.py

DOC = Path(__file__).resolve().parents[2] / "docs" / "recipes.md"
EPOCHS = 14
P_EPOCHS = 8
GAT = {"model": "gat", "hidden_dim": 8, "num_layers": 2, "heads": 2, "dropout": 0.0}
RECIPE = {"input_dropout": 0.5, "attn_dropout": 0.5, "activation": "elu", "out_heads": 2}


def write(graph: Graph, num_parts: int, out: Path) -> str:
    assignment = np.random.default_rng(num_parts).integers(0, num_parts, graph.num_nodes).astype(np.int32)
    write_partition(graph, assignment, num_parts, out, method="test", method_params={}, seed=0)
    return str(out)


def make_model(part, *, model: str = "gat", seed: int = 3, **kwargs):
    from gnn_dist.models import build_model

    torch.manual_seed(0)
    return build_model(model, in_dim=part.feature_dim, out_dim=part.num_classes, seed=seed, **kwargs)


def train(part, model_kwargs: dict, epochs: int = EPOCHS, **fields):
    """``(trainer, history)`` of a fresh model trained ``epochs`` epochs."""
    import gnn_dist

    trainer = gnn_dist.Trainer(make_model(part, **model_kwargs), part, **{"lr": 0.05, "log_every": 0, **fields})
    return trainer, trainer.fit(epochs)


def weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def losses(history) -> list[float]:
    return [r["train_loss"] for r in history]


def accs(rec) -> tuple[float, float, float]:
    return rec["train_acc"], rec["val_acc"], rec["test_acc"]


def expected_stop(history, patience: int) -> int:
    """The number of epochs a run with ``patience`` trains, from a run's validation history."""
    best, since = None, 0
    for i, rec in enumerate(history):
        if rec["val_acc"] is None:
            continue
        if best is None or rec["val_acc"] > best:
            best, since = rec["val_acc"], 0
        else:
            since += 1
            if since >= patience:
                return i + 1
    return len(history)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return make_graph(80, seed=1)


@pytest.fixture(scope="module")
def part1(graph, tmp_path_factory):
    import gnn_dist

    return gnn_dist.load_partition(write(graph, 1, tmp_path_factory.mktemp("p1") / "parts"))


# ----------------------------------------------------------------------------- no option is a no-op
def test_each_option_changes_training(part1):
    base = losses(train(part1, GAT, epochs=3)[1])
    changed = {"input_dropout": {"input_dropout": 0.5}, "attn_dropout": {"attn_dropout": 0.5},
               "out_heads": {"out_heads": 2},
               **{f"activation={a}": {"activation": a} for a in ("elu", "gelu", "leaky_relu")}}
    for name, option in changed.items():
        got = losses(train(part1, {**GAT, **option}, epochs=3)[1])
        assert got[0] != base[0] or got[1:] != base[1:], f"{name} does not change training"
    relu = losses(train(part1, {**GAT, "activation": "relu"}, epochs=3)[1])
    assert relu == base, "relu is the default"
    gcn = {"model": "gcn", "hidden_dim": 8, "num_layers": 2}
    assert losses(train(part1, {**gcn, "input_dropout": 0.5}, epochs=3)[1]) != losses(train(part1, gcn, epochs=3)[1])


def test_the_model_config_builds_the_recipe(part1):
    from gnn_dist.config import ModelConfig
    from gnn_dist.models import build_model

    config = ModelConfig(model="gat", hidden=8, heads=2, out_heads=3, input_dropout=0.6, attn_dropout=0.4,
                         activation="gelu")
    model = build_model(config, in_dim=part1.feature_dim, out_dim=part1.num_classes)
    assert (model.input_dropout, model.activation) == (0.6, "gelu")
    assert [(c.heads, c.concat, c.dropout) for c in model.convs] == [(2, True, 0.4), (3, False, 0.4)]
    assert model.convs[1].lin.weight.shape[0] == 3 * part1.num_classes   # averaged heads: out_dim wide


def test_input_dropout_hashes_sparse_features_at_their_nonzeros_to_the_same_bits():
    from gnn_dist.nn import INPUT_LAYER, Block, DropoutKey, RowDropout, hash_dropout

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(300, 200, generator=gen) * (torch.rand(300, 200, generator=gen) < 0.02)
    x[0, :3] = -0.0
    ids = torch.randperm(1000, generator=gen)[:300]
    block = Block.from_graph(torch.arange(301) * 0, torch.zeros(0, dtype=torch.long), original_ids=ids)
    for step in (0, torch.tensor(5)):
        drop = RowDropout(0.6, DropoutKey(7, step, INPUT_LAYER))
        dense = hash_dropout(x, 0.6, seed=7, step=step, layer=INPUT_LAYER, row_ids=ids)
        got = drop(block, x)
        assert torch.equal(got, dense) and torch.equal(got.signbit(), dense.signbit())
        assert 0 < int((got != 0).sum()) < int((x != 0).sum()), "some nonzeros dropped, some kept"
    dense_x = torch.randn(30, 8, generator=gen)   # mostly nonzero: the dense path
    drop = RowDropout(0.5, DropoutKey(7, 1, INPUT_LAYER))
    assert torch.equal(drop(block, dense_x), hash_dropout(dense_x, 0.5, seed=7, step=1, layer=INPUT_LAYER,
                                                          row_ids=ids[:30]))


def test_input_dropout_with_the_precomputed_first_layer_drops_the_aggregate(part1):
    """With ``precompute_first_layer`` on, the input dropout still trains (it drops the cached
    aggregate, tests/gnn_dist/cache/test_precomputed_input_dropout.py), differently from no dropout."""
    kwargs = {"model": "gcn", "hidden_dim": 8, "num_layers": 2}
    _, dropped = train(part1, {**kwargs, "input_dropout": 0.5}, epochs=3, precompute_first_layer=True)
    _, plain = train(part1, kwargs, epochs=3, precompute_first_layer=True)
    assert losses(dropped)[0] != losses(plain)[0]


# ----------------------------------------------------------------------------- P ranks = one rank
CONFIGS = {
    "gat-sync": ({**GAT, **RECIPE}, {"select": "best-val", "patience": 2}),
    "gat-overlap-mmap-chunked": ({**GAT, **RECIPE}, {"pipeline": "overlap", "feature_storage": "mmap",
                                                     "feature_cache_budget": "50%", "first_layer_chunk_rows": 100,
                                                     "select": "best-val"}),
    "gcn-overlap-no-static-halo": ({"model": "gcn", "hidden_dim": 8, "num_layers": 2, "input_dropout": 0.5,
                                    "activation": "gelu"}, {"pipeline": "overlap", "static_halo": False,
                                                            "feature_storage": "host", "select": "best-val"}),
}


def train_recipes(rank: int, world_size: int, path: str) -> dict:
    """Every configuration of :data:`CONFIGS` on this rank's part; each rank returns its results."""
    import gnn_dist
    from gnn_dist.nn import INPUT_LAYER, DropoutKey, RowDropout

    part = gnn_dist.load_partition(path)
    out: dict = {}
    for name, (model_kwargs, fields) in CONFIGS.items():
        trainer, hist = train(part, model_kwargs, epochs=P_EPOCHS, **fields)
        best = trainer.selection.best
        out[name] = {"loss": losses(hist), "acc": [accs(r) for r in hist], "epochs": len(hist),
                     "best": None if best is None else best["epoch"], "final": trainer.evaluate(),
                     "params": weights(trainer.model)}
    # the input dropout of a tensor (inner rows, before the exchange) and of source rows (after
    # it): the masks of a row, by original id, on any rank
    ids = part.block.src_original_ids
    drop = RowDropout(0.5, DropoutKey(3, torch.tensor(4), INPUT_LAYER))
    inner = drop(part.block, part.x)
    source = drop(part.block, part.exchange(part.x))
    assert torch.equal(source[:part.num_inner], inner) and torch.equal(part.exchange(inner), source)
    out["input_masks"] = {int(i): row for i, row in zip(ids[:part.num_inner].tolist(), (inner != 0).tolist())}
    return out


def test_two_ranks_train_what_one_rank_trains(graph, part1, tmp_path):
    ref = train_recipes(0, 1, str(part1.path))
    assert ref["gat-sync"]["epochs"] < P_EPOCHS, "the patience stops this run early"
    for name in CONFIGS:
        assert ref[name]["best"] != ref[name]["epochs"] - 1, f"{name}: best-val restores another epoch than the last"
    results = run_ranks(train_recipes, 2, write(graph, 2, tmp_path / "parts"), timeout=120)
    for other in results[1:]:
        for name in CONFIGS:
            assert other[name]["epochs"] == results[0][name]["epochs"], f"{name}: the ranks stop alike"
            assert other[name]["best"] == results[0][name]["best"], f"{name}: the ranks select alike"
            for k, v in results[0][name]["params"].items():
                assert torch.equal(other[name]["params"][k], v), f"{name}.{k}: the ranks' weights differ"
    got = results[0]
    for name in CONFIGS:
        assert (got[name]["epochs"], got[name]["best"]) == (ref[name]["epochs"], ref[name]["best"]), name
        np.testing.assert_allclose(got[name]["loss"], ref[name]["loss"], rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(np.array(got[name]["acc"], float), np.array(ref[name]["acc"], float), atol=1e-9,
                                   err_msg=name)
        assert got[name]["final"] == pytest.approx(ref[name]["final"], abs=1e-9), name
        for k, v in ref[name]["params"].items():
            torch.testing.assert_close(got[name]["params"][k], v, rtol=1e-5, atol=1e-5, msg=lambda m: f"{name}.{k}: {m}")
    masks = {**results[0]["input_masks"], **results[1]["input_masks"]}
    assert masks == ref["input_masks"], "a node's input-dropout mask does not depend on its rank"


# ----------------------------------------------------------------------------- model selection
def test_best_val_ends_with_the_best_epochs_weights(part1):
    model_kwargs = {**GAT, **RECIPE}
    trainer, hist = train(part1, model_kwargs, select="best-val")
    vals = [r["val_acc"] for r in hist]
    best = vals.index(max(vals))
    assert best != len(hist) - 1, "the test needs a best epoch before the last"
    assert trainer.selection.best == {"epoch": best, **dict(zip(("train_acc", "val_acc", "test_acc"),
                                                                 accs(hist[best])))}
    assert accs(trainer.evaluate()) == accs(hist[best])
    stopped_there, _ = train(part1, model_kwargs, epochs=best + 1)
    for k, v in weights(stopped_there.model).items():
        assert torch.equal(trainer.model.state_dict()[k], v), f"{k}: not the best epoch's weights"
    # a later fit trains on from the last epoch's weights, as one longer fit would
    more = trainer.fit(3)
    straight, hist_straight = train(part1, model_kwargs, epochs=EPOCHS + 3, select="best-val")
    assert losses(hist + more) == losses(hist_straight)
    assert trainer.selection.best == straight.selection.best
    last, hist_last = train(part1, model_kwargs, select="last")
    assert losses(hist_last) == losses(hist) and accs(last.evaluate()) == accs(hist[-1]) != accs(hist[best])


def test_patience_stops_at_the_epoch_the_validation_history_says(part1):
    model_kwargs = {**GAT, **RECIPE}
    _, full = train(part1, model_kwargs, epochs=30)
    for patience, eval_every in ((2, 1), (4, 1), (2, 2)):
        _, every_k = train(part1, model_kwargs, epochs=30, eval_every=eval_every)
        want = expected_stop(every_k, patience)
        assert want < 30, f"patience {patience}: the test needs a run that stops early"
        trainer, hist = train(part1, model_kwargs, epochs=30, patience=patience, eval_every=eval_every)
        assert len(hist) == want and trainer.epoch == want
        assert losses(hist) == losses(full[:want])
        assert trainer.selection.stopped and trainer.fit(5) == [] and trainer.epoch == want


def test_model_selection_needs_validation_nodes(graph, tmp_path):
    import gnn_dist

    no_val = Graph.from_edges(*graph.edges(), graph.num_nodes, features=graph.x, labels=graph.y,
                              train_mask=graph.train_mask, test_mask=~graph.train_mask, num_classes=3)
    part = gnn_dist.load_partition(write(no_val, 1, tmp_path / "parts"))
    assert train(part, GAT, epochs=2)[0].selection.best is None   # select last: NaN validation is fine
    with pytest.raises(ValueError, match=r"select='best-val' needs validation nodes, but the partition's val_mask "
                                         r"is empty"):
        train(part, GAT, epochs=2, select="best-val")


# ----------------------------------------------------------------------------- checkpoints
def test_resume_keeps_the_best_state_and_the_patience_count(part1, tmp_path, caplog):
    import gnn_dist
    from gnn_dist.checkpoints import checkpoint_path, latest_checkpoint, load_checkpoint

    model_kwargs = {**GAT, **RECIPE}
    options = {"select": "best-val", "patience": 5, "checkpoint_every": 2}
    straight, hist = train(part1, model_kwargs, epochs=40, checkpoint_dir=str(tmp_path / "a"), **options)
    stop, best = len(hist), straight.selection.best["epoch"]
    assert stop < 40 and stop - best == 6, "stopped early, 5 evaluations after the best"
    final = weights(straight.model)
    saved = load_checkpoint(latest_checkpoint(tmp_path / "a"))
    assert saved["epoch"] == stop and saved["selection"]["best"] == straight.selection.best
    assert saved["selection"]["since_best"] == 5
    assert all(torch.equal(saved["selection"]["weights"][k], v) for k, v in final.items()), "the best weights"
    assert not torch.equal(saved["model"]["convs.0.lin.weight"], final["convs.0.lin.weight"]), \
        "the checkpoint's weights are the last epoch's, to train on from"
    # resume after the best epoch and before the stop: the same stop, the same selected weights
    middle = best + 2 + best % 2   # a checkpoint epoch after the best one
    assert middle < stop
    resumed = gnn_dist.Trainer(make_model(part1, **model_kwargs), part1, lr=0.05, log_every=0,
                               checkpoint_dir=str(tmp_path / "b"), **options)
    assert resumed.resume(checkpoint_path(tmp_path / "a", middle))
    assert resumed.selection.best == {k: hist[best][k] for k in ("epoch", "train_acc", "val_acc", "test_acc")}
    rest = resumed.fit(40 - middle)
    assert losses(rest) == losses(hist[middle:]) and resumed.epoch == stop
    assert all(torch.equal(resumed.model.state_dict()[k], v) for k, v in final.items())
    # resuming the stopped run trains nothing and ends with the same weights
    again = gnn_dist.Trainer(make_model(part1, **model_kwargs), part1, lr=0.05, log_every=0,
                             checkpoint_dir=str(tmp_path / "a"), **options)
    assert again.resume() and again.fit(40 - stop) == []
    assert all(torch.equal(again.model.state_dict()[k], v) for k, v in final.items())
    # a checkpoint written with select=last has no best weights: best-val starts afresh, and says so
    plain, _ = train(part1, model_kwargs, epochs=4, checkpoint_dir=str(tmp_path / "c"))
    switched = gnn_dist.Trainer(make_model(part1, **model_kwargs), part1, lr=0.05, log_every=0,
                                checkpoint_dir=str(tmp_path / "c"), select="best-val")
    with caplog.at_level(logging.WARNING, logger="gnn_dist.checkpoints.manager"):
        assert switched.resume()
    assert "written with select='last' and holds no best-val weights" in caplog.text
    assert switched.selection.best is None and switched.fit(1)[0]["epoch"] == 4 and switched.selection.best["epoch"] == 4


def test_the_final_line_names_the_selected_epoch(part1, tmp_path, caplog):
    import json

    from gnn_dist.train import main

    metrics = tmp_path / "m.jsonl"
    argv = ["--data", str(part1.path), "--model", "gat", "--hidden", "8", "--heads", "2", "--out-heads", "2",
            "--input-dropout", "0.5", "--attn-dropout", "0.5", "--activation", "elu", "--dropout", "0",
            "--lr", "0.05", "--epochs", "30", "--select", "best-val", "--patience", "3", "--seed", "3",
            "--log-every", "0", "--metrics", str(metrics)]
    with caplog.at_level(logging.INFO, logger="gnn_dist.train"):
        assert main(argv) == 0
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("final: "))
    final = json.loads(line[len("final: "):])
    records = [r for r in map(json.loads, metrics.read_text().splitlines()) if "epoch" in r]
    vals = [r["val_acc"] for r in records]
    best = vals.index(max(vals))
    assert final["selected_epoch"] == best and final["stopped_early"] is True and final["epochs"] == len(records) < 30
    assert final["test_acc"] == round(records[best]["test_acc"], 4) and final["val_acc"] == round(max(vals), 4)
    config = json.loads(metrics.read_text().splitlines()[0])["config"]
    assert config["model"]["activation"] == "elu" and config["trainer"]["selection"] == {"select": "best-val",
                                                                                         "patience": 3}


# ----------------------------------------------------------------------------- docs/recipes.md
def doc_train_commands() -> list[list[str]]:
    """The ``gnn_dist.train`` arguments of every ``gnn-dist train`` line of docs/recipes.md."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("gnn-dist train "):
                commands.append(shlex.split(line)[2:])
    return commands


def with_value(argv: list[str], flag: str, value: str) -> list[str]:
    i = argv.index(flag)
    return [*argv[:i + 1], value, *argv[i + 2:]]


def test_the_recipes_in_the_docs_run_and_the_toml_is_the_gat_line(part1, tmp_path):
    from gnn_dist.config_cli import parse_run_config
    from gnn_dist.train import main

    commands = doc_train_commands()
    assert [c[c.index("--model") + 1] for c in commands] == ["gcn", "gat"]
    for argv in commands:
        argv = with_value(with_value(argv, "--data", str(part1.path)), "--epochs", "3")
        assert main([*argv, "--log-every", "0"]) == 0, " ".join(argv)
    toml = tmp_path / "gat.toml"
    toml.write_text(re.findall(r"```toml\n(.*?)```", DOC.read_text(), re.S)[0])
    from_file, _ = parse_run_config(["--config", str(toml), "--data", "parts/cora-2"])
    from_flags, _ = parse_run_config(commands[1])
    assert from_file == from_flags
