"""``gnn-dist report`` of a run whose task is not classification: the report charts the
metrics the run recorded (a regression's mse, mae and r2; a multi-label run's micro-F1 and
ROC-AUC) and picks the best epoch by the selection metric in its direction (lowest val_mse),
from the task the config record names or, in a file without one, from the epoch records'
fields. One metrics file comes from a real, tiny regression training run."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from corpus.corpus_utils import registry_and_logging_kept
from partitioners import Graph
from gnn_dist_cli.command import EXIT_OK, main
from partitioners.format.writer import write_partition
from gnn_dist_cli.run_report import build_report, read_metrics
from test_run_report import CONFIG, PNG_MAGIC, close, epoch, section, summary, write_metrics
from train_helpers import make_graph

SPLITS = ("train", "val", "test")
REGRESSION = {"task": "regression", "loss": "mse", "metrics": ["mse", "mae", "r2"], "select_metric": "mse",
              "lower_is_better": True}

# val_mse is lowest (0.4) at epoch 3 and again at 5 (the first counts); the highest val_mse (the
# best if higher were better) is epoch 1's, the lowest val_mae epoch 5's.
VAL = {1: (0.9, 0.5, 0.1), 3: (0.4, 0.45, 0.6), 5: (0.4, 0.3, 0.55)}


def reg_epoch(e: int) -> dict:
    """A regression epoch record as ``gnn_dist.train`` writes it: no accuracy, its errors and R²
    on the three masks (null when not evaluated)."""
    rec = epoch(e, evaluated=False)
    for split in SPLITS:
        del rec[f"{split}_acc"]
    for i, metric in enumerate(("mse", "mae", "r2")):
        for k, split in enumerate(SPLITS):
            rec[f"{split}_{metric}"] = (None if e not in VAL else VAL[e][i] if split == "val"
                                        else VAL[e][i] + 0.01 * (k + 1) + 0.001 * e)
    if e in VAL:
        rec["eval_time_s"] = 0.003
    return rec


EPOCHS = [reg_epoch(e) for e in range(6)]


@pytest.fixture(autouse=True)
def kept_logging():
    with registry_and_logging_kept():
        yield


def report(capsys, metrics, out) -> tuple[str, str]:
    code = main(["report", str(metrics), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == EXIT_OK, err
    return (out.read_text(encoding="utf-8") if out.suffix == ".html" else ""), err


@pytest.mark.parametrize("recorded", [True, False], ids=["task in the config record", "found from the fields"])
def test_a_regression_report_picks_the_lowest_validation_error(capsys, tmp_path, recorded):
    config = dict(CONFIG, task=REGRESSION) if recorded else CONFIG
    html, err = report(capsys, write_metrics(tmp_path / "m.jsonl", EPOCHS, config=config), tmp_path / "r.html")
    got = summary(html)
    assert got["best_val_epoch"] == 3 and got["best_val_mse"] == 0.4, got
    assert close(got["best_test_mse"], EPOCHS[3]["test_mse"])
    for metric in ("mse", "mae", "r2"):
        for split in SPLITS:
            assert close(got[f"final_{split}_{metric}"], EPOCHS[5][f"{split}_{metric}"]), (split, metric)
    assert not any("acc" in key for key in got), sorted(got)
    metrics = section(html, "metrics")
    assert "no evaluated epoch" not in metrics and "3 of 6 epochs evaluated" in metrics
    assert metrics.count("<svg") == 3 and "mean squared error" in metrics and "R²" in metrics
    assert "best validation epoch (by val_mse, lower is better)" in section(html, "summary")
    header = section(html, "header")
    assert ("regression, loss mse; best epoch by val_mse (lower is better)" in header if recorded
            else "mse, mae, r2 (found from the epoch records&#x27; fields); best epoch by val_mse" in header), header
    assert "warning" not in err and "train_acc" not in html, err   # no accuracy is missing: it is not a metric


def test_the_selection_metric_and_direction_come_from_the_config_record(tmp_path):
    """loss mae: the best epoch is the lowest val_mae's; a higher-is-better metric, the highest."""
    by_mae = dict(CONFIG, task=dict(REGRESSION, loss="mae", select_metric="mae"))
    rep = build_report(read_metrics(write_metrics(tmp_path / "mae.jsonl", EPOCHS, config=by_mae)))
    rows = {r.key: r.value for r in rep.summary}
    assert rows["best_val_epoch"] == 5 and rows["best_val_mae"] == 0.3 and "best_val_mse" not in rows
    by_r2 = dict(CONFIG, task=dict(REGRESSION, select_metric="r2", lower_is_better=False))
    rows = {r.key: r.value for r in build_report(read_metrics(write_metrics(tmp_path / "r2.jsonl", EPOCHS,
                                                                                 config=by_r2))).summary}
    assert rows["best_val_epoch"] == 3 and rows["best_val_r2"] == 0.6


@pytest.mark.parametrize("bad", ["regression", {"metrics": "mse"}, dict(REGRESSION, select_metric="acc"),
                                 dict(REGRESSION, lower_is_better="yes")])
def test_a_malformed_task_record_is_a_warning_and_the_fields_decide(capsys, tmp_path, bad):
    html, err = report(capsys, write_metrics(tmp_path / "m.jsonl", EPOCHS, config=dict(CONFIG, task=bad)),
                       tmp_path / "r.html")
    assert "config field 'task' is not what gnn_dist.train writes" in err and err.count("warning") == 1, err
    assert summary(html)["best_val_epoch"] == 3


def test_a_metric_field_of_the_wrong_type_is_one_line(capsys, tmp_path):
    bad = dict(EPOCHS[1], val_mse="low")
    metrics = write_metrics(tmp_path / "m.jsonl", [EPOCHS[0], bad], config=dict(CONFIG, task=REGRESSION))
    code = main(["report", str(metrics), "--out", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "line 3: field 'val_mse' must be a number or null" in err, err


def test_a_multilabel_report_charts_micro_f1_and_roc_auc(capsys, tmp_path):
    recs = [epoch(e, evaluated=e % 2 == 1, val=0.5 + 0.05 * e) for e in range(4)]
    for r in recs:
        if r["val_acc"] is not None:
            r.update(train_rocauc=0.8, val_rocauc=0.7 + 0.01 * r["epoch"], test_rocauc=0.65)
    task = {"task": "multilabel", "loss": "bce", "metrics": ["acc", "rocauc"], "select_metric": "acc",
            "lower_is_better": False}
    html, err = report(capsys, write_metrics(tmp_path / "m.jsonl", recs, config=dict(CONFIG, task=task)),
                       tmp_path / "r.html")
    got = summary(html)
    assert got["best_val_epoch"] == 3 and close(got["final_val_rocauc"], 0.73)
    charts = section(html, "accuracy")
    assert charts.count("<svg") == 2 and "micro-F1" in charts and "ROC-AUC" in charts
    assert "warning" not in err, err   # rocauc is absent from unevaluated epochs, as the trainer writes it


def test_a_regression_png_is_drawn(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "r.png"
    report(capsys, write_metrics(tmp_path / "m.jsonl", EPOCHS, config=dict(CONFIG, task=REGRESSION)), out)
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_report_of_a_real_regression_run(capsys, tmp_path):
    """P=1, in-process: the trainer records the task; the best epoch is the lowest val_mse."""
    pytest.importorskip("torch")
    from gnn_dist.train import main as train_main

    g = make_graph(60, seed=1)
    reg = Graph.from_edges(*g.edges(), g.num_nodes, features=g.x, labels=g.x[:, :2] * 2.0 + 0.5,
                           train_mask=g.train_mask, val_mask=g.val_mask, test_mask=g.test_mask)
    data = tmp_path / "reg"
    write_partition(reg, np.zeros(reg.num_nodes, np.int32), 1, data, method="test", method_params={}, seed=0)
    metrics = tmp_path / "m.jsonl"
    assert train_main(["--data", str(data), "--epochs", "5", "--hidden", "4", "--log-every", "0", "--lr", "0.05",
                       "--eval-every", "1", "--kernels", "torch", "--loss", "mae", "--metrics", str(metrics)]) == 0
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert lines[0]["config"]["task"] == {"task": "regression", "loss": "mae", "metrics": ["mse", "mae", "r2"],
                                          "select_metric": "mae", "lower_is_better": True}
    records = lines[1:]
    html, err = report(capsys, metrics, tmp_path / "r.html")
    got = summary(html)
    vals = [r["val_mae"] for r in records]
    assert got["best_val_epoch"] == vals.index(min(vals)) and close(got["best_val_mae"], min(vals))
    assert close(got["final_test_r2"], records[-1]["test_r2"])
    assert re.search(r"regression, loss mae; best epoch by val_mae", section(html, "header"))
    assert "warning" not in err, err
