"""Node regression (issue 20): the regression task's loss and metrics against a direct torch
computation, P ranks training exactly what one rank trains (dropout on, mse and mae), model
selection on the lowest validation error, predictions that are values, and ``--task``/``--loss``
mismatches refused in one line with exit code 2."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from partitioners import Graph
from partitioners.format.writer import write_partition
from partitioners.synthetic import regression_targets
from mp_utils import run_ranks
from train_helpers import make_graph

NUM_NODES = 120
TARGETS = 2
EPOCHS = 4
SPLITS = ("train", "val", "test")


def make_regression_graph(seed: int = 0) -> Graph:
    """A random graph with isolated nodes, self-loops and a duplicate edge, 6 features and 2
    real targets planted over it (the catalog's: a linear map of the 2-hop mean features)."""
    rng = np.random.default_rng(seed)
    n, active = NUM_NODES, NUM_NODES - 10
    src = np.concatenate([rng.integers(0, active, 700), [3, 3, 5, 5]])
    dst = np.concatenate([rng.integers(0, active, 700), [3, 3, 7, 7]])
    x = rng.standard_normal((n, 6)).astype(np.float32)
    bare = Graph.from_edges(src, dst, n)
    y = regression_targets(bare.indptr, bare.indices, x, TARGETS, seed)
    train = np.zeros(n, bool)
    train[rng.choice(n, 40, replace=False)] = True
    val = ~train & (rng.random(n) < 0.5)
    return Graph.from_edges(src, dst, n, features=x, labels=y, train_mask=train, val_mask=val, test_mask=~train & ~val)


def assignment(graph: Graph, num_parts: int) -> np.ndarray:
    """P=2: two mixed parts; P=3: part 0 holds no training node."""
    rng = np.random.default_rng(num_parts)
    if num_parts < 3:
        return rng.integers(0, num_parts, graph.num_nodes).astype(np.int32)
    a = rng.integers(1, num_parts, graph.num_nodes).astype(np.int32)
    a[np.flatnonzero(~graph.train_mask)[:15]] = 0
    return a


def write(graph: Graph, num_parts: int, out) -> str:
    write_partition(graph, assignment(graph, num_parts), num_parts, out, method="test", method_params={}, seed=0)
    return str(out)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return make_regression_graph()


@pytest.fixture(scope="module")
def p1(graph, tmp_path_factory) -> str:
    return write(graph, 1, tmp_path_factory.mktemp("reg") / "p1")


def _model(part, dropout: float = 0.5, model: str = "gcn"):
    from gnn_dist.models import build_model

    torch.manual_seed(0)
    return build_model(model, in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=2,
                       dropout=dropout, seed=7)


# ---------------------------------------------------------------- one device against torch
@pytest.mark.parametrize("loss", ["mse", "mae"])
def test_the_loss_and_metrics_are_torch_s(p1, graph, loss):
    import gnn_dist

    part = gnn_dist.load_partition(p1)
    assert part.meta.label_kind == "regression" and part.num_classes == TARGETS and part.y.dtype == torch.float32
    trainer = gnn_dist.Trainer(_model(part), part, lr=0.05, log_every=0, loss=loss)
    assert trainer.task.name == "regression" and trainer.task.loss == loss
    assert trainer.selection.key == f"val_{loss}" and trainer.task.lower_is_better
    trainer.fit(2)
    logits = torch.randn(part.num_inner, TARGETS, dtype=torch.float32, generator=torch.Generator().manual_seed(3))
    m = part.train_mask
    want = (F.mse_loss if loss == "mse" else F.l1_loss)(logits[m], part.y[m])   # the mean over rows and targets
    assert torch.allclose(trainer.task.train_loss(logits, part, 0), want, rtol=1e-6)
    got = trainer._eval_metrics(logits)
    assert set(got) == {f"{s}_{k}" for s in SPLITS for k in ("mse", "mae", "r2")}
    for split in SPLITS:
        mask = getattr(part, f"{split}_mask")
        pred, true = logits[mask].double(), part.y[mask].double()
        assert got[f"{split}_mse"] == pytest.approx(F.mse_loss(pred, true).item(), rel=1e-12)
        assert got[f"{split}_mae"] == pytest.approx(F.l1_loss(pred, true).item(), rel=1e-12)
        r2 = 1 - ((pred - true) ** 2).sum(0) / ((true - true.mean(0)) ** 2).sum(0)
        assert got[f"{split}_r2"] == pytest.approx(r2.mean().item(), rel=1e-10)
    # evaluate() is the model's forward, then _eval_metrics of its logits
    trainer.model.eval()
    with torch.no_grad():
        out = trainer.model(part, trainer._model_input())
    assert trainer.evaluate() == trainer._eval_metrics(out)


def test_training_lowers_the_error_and_the_epoch_line_shows_it(p1, caplog):
    import gnn_dist

    part = gnn_dist.load_partition(p1)
    trainer = gnn_dist.Trainer(_model(part, dropout=0.0), part, lr=0.05, log_every=5)
    with caplog.at_level("INFO", logger="gnn_dist.trainer"):
        hist = trainer.fit(30)
    assert hist[-1]["train_mse"] < 0.5 * hist[0]["train_mse"] and hist[-1]["train_r2"] > hist[0]["train_r2"]
    assert "train_acc" not in hist[-1]
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch")]
    assert lines and all(re.search(r"mse train \d\.\d{4}  val \d\.\d{4}  test \d\.\d{4}  \(mae val", ln) for ln in lines)
    summary = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("summary"))
    best = min(hist, key=lambda r: r["val_mse"])
    assert f"best val mse {best['val_mse']:.4f} at epoch {best['epoch']}" in summary


def test_epochs_without_evaluation_have_empty_regression_metrics(p1):
    import gnn_dist

    part = gnn_dist.load_partition(p1)
    hist = gnn_dist.Trainer(_model(part), part, lr=0.05, log_every=0, eval_every=2).fit(2)
    assert all(hist[0][f"{s}_{k}"] is None for s in SPLITS for k in ("mse", "mae", "r2"))
    assert all(isinstance(hist[1][f"{s}_{k}"], float) for s in SPLITS for k in ("mse", "mae", "r2"))


# ---------------------------------------------------------------- P ranks equal one rank
def train_regression(rank: int, world_size: int, path: str, loss: str) -> dict:
    import gnn_dist

    part = gnn_dist.load_partition(path)
    out = {}
    for model in ("gcn", "sage"):
        trainer = gnn_dist.Trainer(_model(part, dropout=0.5, model=model), part, lr=0.05, weight_decay=5e-4,
                                   log_every=0, loss=loss)
        hist = trainer.fit(EPOCHS)
        out[model] = {"loss": [h["train_loss"] for h in hist],
                      "metrics": [[h[f"{s}_{k}"] for s in SPLITS for k in ("mse", "mae", "r2")] for h in hist],
                      "params": {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}}
    return out


@pytest.fixture(scope="module")
def reference(p1) -> dict:
    return {loss: train_regression(0, 1, p1, loss) for loss in ("mse", "mae")}


@pytest.mark.parametrize("num_parts", [2, 3, 4])
def test_p_ranks_train_what_one_rank_trains(graph, reference, tmp_path, num_parts):
    path = write(graph, num_parts, tmp_path / "parts")
    for loss in ("mse", "mae"):
        results = run_ranks(train_regression, num_parts, path, loss, timeout=240)
        for other in results[1:]:
            assert other["gcn"]["metrics"] == results[0]["gcn"]["metrics"]   # every rank gets the same numbers
        for model, ref in reference[loss].items():
            got = results[0][model]
            np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, atol=1e-6, err_msg=f"{model} {loss}")
            np.testing.assert_allclose(got["metrics"], ref["metrics"], rtol=1e-5, atol=1e-6, err_msg=f"{model} {loss}")
            for key, value in ref["params"].items():
                torch.testing.assert_close(got["params"][key], value, rtol=1e-5, atol=1e-5)


def test_mae_and_mse_train_differently(reference):
    assert reference["mse"]["gcn"]["loss"][0] != reference["mae"]["gcn"]["loss"][0]


# ---------------------------------------------------------------- model selection
def test_best_val_keeps_the_lowest_validation_error(p1):
    import gnn_dist

    part = gnn_dist.load_partition(p1)
    trainer = gnn_dist.Trainer(_model(part), part, lr=0.3, log_every=0, select="best-val")
    hist = trainer.fit(25)
    vals = [h["val_mse"] for h in hist]
    best = int(np.argmin(vals))
    assert 0 < best < len(vals) - 1 and vals[best] < vals[-1], vals   # the lr makes the last epoch not the best
    assert trainer.selection.best == {k: hist[best][k] for k in ("epoch", "train_mse", "val_mse", "test_mse")}
    final = trainer.evaluate()
    assert final["val_mse"] == pytest.approx(vals[best], rel=1e-12) and final["test_mse"] == hist[best]["test_mse"]
    state = trainer.selection.state_dict()
    assert state["metric"] == "mse"


def test_patience_counts_evaluations_without_a_lower_error(p1):
    import gnn_dist

    part = gnn_dist.load_partition(p1)
    hist = gnn_dist.Trainer(_model(part), part, lr=0.3, log_every=0, patience=3).fit(60)
    vals = [h["val_mse"] for h in hist]
    best = int(np.argmin(vals))
    assert len(hist) == best + 4 < 60 and all(v >= vals[best] for v in vals[best + 1:])


def test_a_checkpoint_state_of_an_older_run_still_loads():
    """Selection states written before the metric was recorded watched the accuracy."""
    from gnn_dist.config import SelectionConfig
    from gnn_dist.selection import ModelSelection

    old = {"select": "last", "best": {"epoch": 3, "train_acc": 0.9, "val_acc": 0.8, "test_acc": 0.7},
           "since_best": 2, "weights": None}
    acc = ModelSelection(SelectionConfig(patience=5))
    assert acc.load_state_dict(old) is None and acc.best["val_acc"] == 0.8 and acc.since_best == 2
    mse = ModelSelection(SelectionConfig(patience=5), "mse", lower_is_better=True)
    assert mse.load_state_dict(old) == "the checkpoint's model selection watched val_acc, this run's watches val_mse"
    assert mse.best is None and mse.since_best == 0


# ---------------------------------------------------------------- train, save, predict
def test_predict_writes_the_predicted_values(p1, graph, tmp_path):
    from gnn_dist.model_file import load_model_file
    from gnn_dist.nn import Block
    from gnn_dist.nn.part import FullGraph
    from gnn_dist.predict import main as predict_main
    from gnn_dist.train import main

    model, out = str(tmp_path / "m.pt"), tmp_path / "preds.npz"
    metrics = tmp_path / "metrics.jsonl"
    assert main(["--data", p1, "--epochs", "5", "--hidden", "8", "--lr", "0.05", "--log-every", "0",
                 "--loss", "mae", "--metrics", str(metrics), "--save-model", model]) == 0
    mf = load_model_file(model)
    assert (mf.label_kind, mf.header["task"], mf.header["loss"], mf.out_dim) == ("regression", "regression", "mae", 2)
    assert (mf.task.name, mf.task.loss) == ("regression", "mae")
    assert predict_main(["--data", p1, "--model-file", model, "--out", str(out)]) == 0
    got = np.load(out)
    assert sorted(got.files) == ["node_ids", "predicted"]
    assert got["predicted"].dtype == np.float32 and got["predicted"].shape == (NUM_NODES, TARGETS)
    with torch.no_grad():   # the model on the whole graph, rows by original id
        values = mf.build()(FullGraph(Block.from_graph(graph.indptr, graph.indices)), torch.from_numpy(graph.x))
    np.testing.assert_allclose(got["predicted"], values.numpy(), rtol=1e-5, atol=1e-6)
    final = json.loads(metrics.read_text().splitlines()[-1])
    for split in SPLITS:
        mask = getattr(graph, f"{split}_mask")
        mae = np.abs(got["predicted"][mask].astype(np.float64) - graph.y[mask]).mean()
        assert mae == pytest.approx(final[f"{split}_mae"], rel=1e-5)


def test_a_model_file_without_a_task_is_its_label_kind_s():
    from gnn_dist.model_file import ModelFile

    for kind, name in (("class", "classification"), ("multilabel", "multilabel"), ("regression", "regression")):
        task = ModelFile(path=None, header={"label_kind": kind}, state_dict={}, sha256="").task
        assert task.name == name and task.loss == task.losses[0]


# ---------------------------------------------------------------- mismatches: one line, exit 2
@pytest.fixture(scope="module")
def class_folder(tmp_path_factory) -> str:
    g = make_graph()
    out = tmp_path_factory.mktemp("cls") / "p1"
    write_partition(g, np.zeros(g.num_nodes, np.int32), 1, out, method="test", method_params={}, seed=0)
    return str(out)


@pytest.mark.parametrize("which, flags, message", [
    ("reg", ["--task", "classification"], r"error: task: classification trains on class ids, but .*p1 has "
                                         r"label_kind 'regression' \(float regression targets\): use --task auto "
                                         r"\(here: regression\)"),
    ("cls", ["--task", "regression"], r"error: task: regression trains on float regression targets, but .*p1 has "
                                      r"label_kind 'class' \(class ids\): use --task auto \(here: classification\)"),
    ("cls", ["--loss", "mse"], r"error: loss: mse is not a loss of task classification, the task of .*p1's "
                               r"label_kind 'class' \(class ids\) \(its losses: ce\); mse trains task regression"),
    ("reg", ["--loss", "bce"], r"error: loss: bce is not a loss of task regression"),
    ("reg", ["--task", "multilabel", "--loss", "mae"], r"--loss: mae is not a loss of task multilabel"),
    ("reg", ["--task", "link"], r"error: task: link trains on an edge split \(gnn-dist partition --edge-split\), but "
                                r".*p1 has none: partition with gnn-dist partition \.\.\. --edge-split"),
    ("reg", ["--task", "edges"], r"--task: invalid choice: 'edges'"),
])
@pytest.mark.parametrize("validate", [False, True])
def test_a_task_or_loss_that_does_not_fit_is_one_line_and_exit_2(p1, class_folder, capsys, which, flags, message,
                                                                validate):
    from gnn_dist.train import main

    data = p1 if which == "reg" else class_folder
    code = main([*(["--validate"] if validate else []), "--data", data, "--epochs", "1", "--hidden", "4",
                 "--log-every", "0", *flags])
    text = capsys.readouterr().err
    err = [line for line in text.splitlines() if "error" in line]
    assert code == 2 and len(err) == 1 and re.search(message, err[0]) and "Traceback" not in text, text


def test_the_task_section_is_in_the_run_config_and_the_validate_line(p1, capsys):
    from gnn_dist.config import RunConfig, TaskConfig
    from gnn_dist.train import main

    assert RunConfig().to_dict()["trainer"]["task"] == {"task": "auto", "loss": "auto", "decoder": "dot",
                                                        "eval_negatives": 100, "hits_k": 10}
    assert TaskConfig(task="regression", loss="mae").resolve("regression").loss == "mae"
    assert main(["--validate", "--data", p1, "--loss", "mae"]) == 0
    assert "2 regression targets; model gcn, task regression (mae)" in capsys.readouterr().err
