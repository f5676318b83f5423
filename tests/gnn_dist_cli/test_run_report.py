"""``gnn-dist report``: a training run's report (HTML with inline SVG, or PNG) from its metrics file.

Metrics files are written by hand here (one comes from a real, tiny in-process training run);
every figure of the summary is computed again from the records the test wrote. The CLI is
called in-process (:func:`gnn_dist_cli.command.main`), except once in a fresh interpreter to show
the report path never imports torch.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from corpus.corpus_utils import registry_and_logging_kept
from partitioners.api import partition_graph
from gnn_dist_cli.command import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from gnn_dist_cli.run_report import RENDERERS, read_metrics
from gnn_dist_cli.run_report.metrics_file import EPOCH_FIELDS
from gnn_dist_cli.run_report.svg import nice_ticks, tick_label
from gnn_dist_cli.run_report.task import METRIC_WORDS, metric_fields
from train_helpers import REPO, make_graph

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SECTIONS = ("header", "summary", "loss", "accuracy", "time", "bytes", "config")

CONFIG = {"data": {"data": "parts/x", "verify": True},
          "model": {"model": "sage", "hidden": 16, "layers": 3, "heads": None},
          "trainer": {"schedule": {"pipeline": "overlap", "halo_dtype": "bf16", "boundary_sample_rate": 1.0},
                      "optim": {"optimizer": "adam", "lr": 0.01}},
          "epochs": 6}


def epoch(e: int, *, evaluated: bool, val: float = 0.5, **over) -> dict:
    """An epoch record as ``gnn_dist.train`` writes it (numbers depend on ``e``)."""
    rec = {"epoch": e, "train_loss": 2.0 - 0.1 * e, "halo_bytes": 1000 * (e + 1), "allreduce_bytes": 400,
           "compute_time_s": 0.02 + 0.001 * e, "comm_time_s": 0.008, "exposed_comm_s": 0.005,
           "bytes_per_layer": [0, 600 * (e + 1), 400 * (e + 1)], "staleness": 0, "feature_hit_rate": 1.0,
           "epoch_time_s": 0.025 + 0.001 * e + (1.5 if e == 0 else 0.0), "wait_cpu_s": 0.002 * e}
    rec["comm_bytes"] = rec["halo_bytes"] + rec["allreduce_bytes"]
    if evaluated:
        rec.update(train_acc=0.6 + 0.01 * e, val_acc=val, test_acc=0.4 + 0.02 * e, eval_time_s=0.003)
    else:
        rec.update(train_acc=None, val_acc=None, test_acc=None)
    rec.update(over)
    return rec


# Evaluated at 1, 3, 5; the best validation accuracy (0.7) is reached at epoch 3 and again at 5:
# the first one counts, as gnn_dist.selection picks it.
EPOCHS = [epoch(0, evaluated=False), epoch(1, evaluated=True, val=0.55), epoch(2, evaluated=False),
          epoch(3, evaluated=True, val=0.7), epoch(4, evaluated=False), epoch(5, evaluated=True, val=0.7)]


def write_metrics(path: Path, records: list[dict], *, config: dict | None = CONFIG, tail: str = "") -> Path:
    lines = ([json.dumps({"config": config})] if config is not None else []) + [json.dumps(r) for r in records]
    path.write_text("".join(line + "\n" for line in lines) + tail)
    return path


@pytest.fixture(autouse=True)
def kept_logging():
    with registry_and_logging_kept():
        yield


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "parts"
    partition_graph(make_graph(60), 2, "random", out, seed=0)
    return out


def report(capsys, *argv) -> tuple[int, str]:
    code = main(["report", *map(str, argv)])
    return code, capsys.readouterr().err


def summary(html: str) -> dict[str, float | None]:
    rows = re.findall(r'<tr data-key="([a-z0-9_]+)"><th>[^<]*</th><td(?: data-value="([^"]+)")?>', html)
    return {k: (float(v) if v else None) for k, v in rows}


def section(html: str, key: str) -> str:
    m = re.search(rf'<(section|header) id="{key}">(.*?)</\1>', html, re.S)
    assert m, f"no section {key}"
    return m.group(2)


def close(a: float | None, b: float) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)


# ----------------------------------------------------------------------------------- the page
def test_html_has_every_section_and_the_summary_is_right(capsys, tmp_path, parts):
    metrics = write_metrics(tmp_path / "m.jsonl", EPOCHS)
    out = tmp_path / "r.html"
    code, err = report(capsys, metrics, "--partition", parts, "--out", out)
    assert code == EXIT_OK, err
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    for key in (*SECTIONS, "partition"):
        section(html, key)
    # self-contained: no script, no resource to fetch
    assert "<script" not in html.lower() and not re.search(r"\b(src|href)=", html)
    assert set(re.findall(r"https?://[^\s\"']+", html)) == {"http://www.w3.org/2000/svg"}
    assert html.count("<svg") == 7  # loss, accuracy, time, bytes x2, partition x2

    header = section(html, "header")
    for text in ("sage", "<dd>3</dd>", "<dd>16</dd>", "overlap", "halo_dtype bf16", "<dd>2</dd>", "6 requested"):
        assert text in header, text

    got = summary(html)
    times = [r["epoch_time_s"] for r in EPOCHS]
    rest = sum(times[1:]) / (len(times) - 1)
    num_edges = json.loads((parts / "partition.json").read_text())["num_edges"]
    assert got["epochs"] == len(EPOCHS)
    assert close(got["first_epoch_time_s"], times[0])
    assert close(got["mean_epoch_time_s"], sum(times) / len(times))
    assert close(got["mean_epoch_time_after_first_s"], rest)
    assert got["num_edges"] == num_edges
    assert close(got["edges_per_s"], num_edges / rest)
    assert got["best_val_epoch"] == 3 and got["best_val_acc"] == 0.7
    assert close(got["best_test_acc"], EPOCHS[3]["test_acc"])
    for split in ("train", "val", "test"):
        assert close(got[f"final_{split}_acc"], EPOCHS[5][f"{split}_acc"])
    assert close(got["final_train_loss"], EPOCHS[5]["train_loss"])
    assert got["total_comm_bytes"] == sum(r["halo_bytes"] + r["allreduce_bytes"] for r in EPOCHS)
    assert got["total_halo_bytes"] == sum(r["halo_bytes"] for r in EPOCHS)
    assert got["total_allreduce_bytes"] == 400 * len(EPOCHS)
    assert close(got["mean_eval_time_s"], 0.003)
    assert close(got["total_wait_cpu_s"], sum(r["wait_cpu_s"] for r in EPOCHS))

    # the first epoch (1.5 s of "compilation") is cut so the others stay readable
    assert "(cut)" in section(html, "time") and "epoch 0 (" in section(html, "time")
    # per-part figures straight from partition.json
    meta = json.loads((parts / "partition.json").read_text())
    part = section(html, "partition")
    for pm in meta["parts"]:
        row = (f"<tr><td>{pm['part_id']}</td><td>{pm['num_inner']:,}</td><td>{pm['num_halo']:,}</td>"
               f"<td>{pm['num_local_edges']:,}</td>")
        assert row in part
    assert f"<td>{meta['quality']['edge_cut']:,}</td>" in part
    assert "wrote" in err and "warning" not in err


def test_bytes_per_layer_is_the_mean_per_epoch(tmp_path):
    from gnn_dist_cli.run_report import build_report

    rep = build_report(read_metrics(write_metrics(tmp_path / "m.jsonl", EPOCHS)))
    bars = next(c for s in rep.sections if s.key == "bytes" for c in s.charts if c.x_label == "layer")
    unit = {"B": 1, "KiB": 2**10, "MiB": 2**20}[bars.y_label]
    means = [sum(r["bytes_per_layer"][i] for r in EPOCHS) / len(EPOCHS) for i in range(3)]
    assert [v * unit for v in bars.series[0].ys] == pytest.approx(means)


def test_strings_from_the_file_are_escaped(capsys, tmp_path):
    hostile = '<script>alert(1)</script>'
    config = {"model": {"model": hostile, "layers": '"><img src=x onerror=alert(2)>', "hidden": "a&b"},
              "trainer": {"schedule": {"pipeline": "</dd><b>x</b>"}}, "epochs": "<i>"}
    metrics = write_metrics(tmp_path / "run<b>&.jsonl", EPOCHS[:2], config=config)
    out = tmp_path / "r.html"
    code, err = report(capsys, metrics, "--out", out)
    assert code == EXIT_OK, err
    html = out.read_text(encoding="utf-8")
    assert "<script" not in html and "<img" not in html and "<b>" not in html and "<i>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section(html, "header")
    assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in section(html, "header")
    assert "a&amp;b" in html and "run&lt;b&gt;&amp;.jsonl" in html


def test_missing_fields_are_reported_not_fatal(capsys, tmp_path):
    """An older file: no config record, no bytes per layer, no split of the time, no accuracy."""
    old = [{"epoch": e, "train_loss": 1.0 / (e + 1), "epoch_time_s": 0.1 * (e + 1), "comm_bytes": 100}
           for e in range(3)]
    metrics = write_metrics(tmp_path / "old.jsonl", old, config=None)
    out = tmp_path / "r.html"
    code, err = report(capsys, metrics, "--out", out)
    assert code == EXIT_OK, err
    html = out.read_text()
    for key in SECTIONS:
        section(html, key)
    assert "no config record" in err and "bytes_per_layer (3 of 3)" in err
    assert "not recorded" in section(html, "header")
    assert "no per-layer bytes recorded" in section(html, "bytes")
    assert "no evaluated epoch" in section(html, "accuracy")
    assert "epoch (not split)" in section(html, "time")
    got = summary(html)
    assert got["best_val_epoch"] is None and got["edges_per_s"] is None  # no partition, no edge count
    assert close(got["mean_epoch_time_after_first_s"], (0.2 + 0.3) / 2)
    assert got["total_comm_bytes"] == 300


def test_a_truncated_last_line_is_skipped_with_a_warning(capsys, tmp_path):
    metrics = write_metrics(tmp_path / "m.jsonl", EPOCHS[:3], tail='{"epoch": 3, "train_loss": 1.7, "halo_')
    out = tmp_path / "r.html"
    code, err = report(capsys, metrics, "--out", out)
    assert code == EXIT_OK, err
    assert f"{metrics} line 5: skipped a truncated last line" in err
    assert summary(out.read_text())["epochs"] == 3


BAD_FILES = {
    "empty": ("", "no epoch records"),
    "config only": (json.dumps({"config": CONFIG}) + "\n", "no epoch records"),
    "bad JSON inside": (json.dumps(EPOCHS[0]) + "\n{oops\n" + json.dumps(EPOCHS[1]) + "\n", "line 2: not valid JSON"),
    "bad JSON last, complete line": (json.dumps(EPOCHS[0]) + "\n{oops\n", "line 2: not valid JSON"),
    "not an object": (json.dumps(EPOCHS[0]) + "\n[1, 2]\n", "line 2: expected a JSON object, got list"),
    "wrong type": (json.dumps(epoch(0, evaluated=False, train_loss="low")) + "\n",
                   "line 1: field 'train_loss' must be a number or null, got \"low\""),
    "negative time": (json.dumps(epoch(0, evaluated=False, epoch_time_s=-1)) + "\n", "line 1: field 'epoch_time_s'"),
    "bad epoch": (json.dumps({"epoch": "zero"}) + "\n", "line 1: field 'epoch' must be an integer"),
    "epochs repeat": (json.dumps(EPOCHS[1]) + "\n" + json.dumps(EPOCHS[0]) + "\n", "line 2: epoch 0 follows epoch 1"),
    "late config": (json.dumps(EPOCHS[0]) + "\n" + json.dumps({"config": {}}) + "\n", "line 2: a config record"),
    "not UTF-8": (b"\xff\xfe\n", "line 1: not UTF-8"),
}


@pytest.mark.parametrize("name", BAD_FILES)
def test_a_bad_metrics_file_is_one_line_and_exit_2(capsys, tmp_path, name):
    text, expected = BAD_FILES[name]
    metrics = tmp_path / "m.jsonl"
    (metrics.write_bytes if isinstance(text, bytes) else metrics.write_text)(text)
    code, err = report(capsys, metrics, "--out", tmp_path / "r.html")
    assert code == EXIT_USAGE
    assert err.count("\n") == 1 and err.startswith("[gnn-dist] error: ") and str(metrics) in err, err
    assert expected in err
    assert list(tmp_path.iterdir()) == [metrics]


@pytest.mark.parametrize("case", ["missing file", "folder", "pdf", "no extension", "no out folder", "out is a folder"])
def test_bad_paths_are_one_line_and_exit_2(capsys, tmp_path, case):
    metrics = write_metrics(tmp_path / "m.jsonl", EPOCHS[:2])
    out = tmp_path / "r.html"
    if case == "missing file":
        metrics, expected = tmp_path / "nope.jsonl", "no such metrics file"
    elif case == "folder":
        metrics, expected = tmp_path, "is a folder"
    elif case == "pdf":
        out, expected = tmp_path / "r.pdf", "unknown report type '.pdf'; end the name in .html or .png"
    elif case == "no extension":
        out, expected = tmp_path / "report", "unknown report type '(no extension)'"
    elif case == "no out folder":
        out, expected = tmp_path / "sub" / "r.html", "does not exist"
    else:
        (tmp_path / "d.html").mkdir()
        out, expected = tmp_path / "d.html", "is a folder"
    code, err = report(capsys, metrics, "--out", out)
    assert code == EXIT_USAGE and err.count("\n") == 1 and expected in err, err
    assert not out.is_file()


def test_a_bad_partition_folder_fails_the_work(capsys, tmp_path):
    metrics = write_metrics(tmp_path / "m.jsonl", EPOCHS[:2])
    code, err = report(capsys, metrics, "--partition", tmp_path / "none", "--out", tmp_path / "r.html")
    assert code == EXIT_FAILED and "no such partition folder" in err and err.count("\n") == 1


def test_the_report_replaces_the_file_atomically(capsys, tmp_path, monkeypatch):
    metrics = write_metrics(tmp_path / "m.jsonl", EPOCHS)
    out = tmp_path / "r.html"
    out.write_text("old report")

    def fail(*_):
        raise OSError(28, "No space left on device")

    import gnn_dist_cli.run_report.output as output

    monkeypatch.setattr(output.os, "replace", fail)
    code, err = report(capsys, metrics, "--out", out)
    assert code == EXIT_FAILED and "No space left" in err
    assert out.read_text() == "old report" and sorted(p.name for p in tmp_path.iterdir()) == ["m.jsonl", "r.html"]
    monkeypatch.undo()
    assert report(capsys, metrics, "--out", out)[0] == EXIT_OK
    assert out.read_text().startswith("<!DOCTYPE html>")


# ----------------------------------------------------------------------------------- PNG
def test_png_is_a_png(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    from PIL import Image  # matplotlib needs Pillow

    config = dict(CONFIG, model={"model": r"$\frac{1}{$ x_1^2", "layers": 2, "hidden": 8})  # no math text
    metrics = write_metrics(tmp_path / "m.jsonl", EPOCHS[:3], config=config)
    out = tmp_path / "r.png"
    code, err = report(capsys, metrics, "--out", out)
    assert code == EXIT_OK, err
    assert out.read_bytes()[:8] == PNG_MAGIC
    with Image.open(out) as image:
        image.verify()
        assert image.format == "PNG" and image.width >= 1000 and image.height > image.width


def test_png_without_matplotlib_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    metrics = write_metrics(tmp_path / "m.jsonl", EPOCHS)
    code, err = report(capsys, metrics, "--out", tmp_path / "r.png")
    assert code == EXIT_USAGE and err.count("\n") == 1, err
    assert "matplotlib" in err and "pip install 'gnn-dist[report]'" in err and "--out report.html" in err
    assert not (tmp_path / "r.png").exists()
    assert report(capsys, metrics, "--out", tmp_path / "r.html")[0] == EXIT_OK  # HTML needs nothing


def test_renderers_by_extension():
    assert set(RENDERERS) == {".html", ".png"}


_value = st.one_of(st.none(), st.floats(0, 1e12), st.integers(0, 2**53))
_record = st.fixed_dictionaries({}, optional={
    name: (st.one_of(st.none(), st.lists(st.integers(0, 2**40), max_size=4)) if name == "bytes_per_layer"
           else _value) for name in [*EPOCH_FIELDS, *metric_fields(METRIC_WORDS)]})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(records=[{"train_loss": 2.225073858507e-311}], name="", config=None)   # a subnormal: found by this test
@given(records=st.lists(_record, min_size=1, max_size=6), name=st.text(max_size=12),
       config=st.one_of(st.none(), st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)))
def test_any_file_the_reader_accepts_renders(tmp_path, records, name, config):
    """Whatever fields an epoch record has or lacks, the page is drawn, and strings stay text."""
    from gnn_dist_cli.run_report import build_report
    from gnn_dist_cli.run_report.html import render_html

    config = {"model": {"model": "<script>" + name}, **(config or {})}
    path = write_metrics(tmp_path / "fuzz.jsonl", [{"epoch": 2 * e, **r} for e, r in enumerate(records)],
                         config=config)
    html = render_html(build_report(read_metrics(path))).decode("utf-8")
    assert "<script" not in html and summary(html)["epochs"] == len(records)


# ----------------------------------------------------------------------------------- axes
@pytest.mark.parametrize("lo,hi,integer", [(0, 1, False), (1.9, 2.1, False), (0, 1776.3, False), (3, 3, True),
                                           (0, 7e-4, False), (-5, 12, True), (2.5, 2.5, False), (0, 3.5e7, False)])
def test_nice_ticks_cover_the_range_in_round_steps(lo, hi, integer):
    ticks = nice_ticks(lo, hi, 5, integer=integer)
    steps = {round(b - a, 12) for a, b in zip(ticks, ticks[1:])}
    assert ticks[0] <= lo and ticks[-1] >= hi and len(steps) == 1 and 2 <= len(ticks) <= 12
    step = steps.pop()
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m) for m in (1, 2, 2.5, 5)) and (not integer or step.is_integer())
    labels = [tick_label(v, step) for v in ticks]
    assert len(set(labels)) == len(labels)  # enough decimals to tell them apart


# ----------------------------------------------------------------------------------- real runs
def test_report_of_a_real_training_run(capsys, tmp_path):
    """P=1, in-process: the file gnn_dist.train writes reads back, and the figures are its own."""
    pytest.importorskip("torch")
    from gnn_dist.train import main as train_main

    data = tmp_path / "p1"
    partition_graph(make_graph(60), 1, "random", data, seed=0)
    metrics = tmp_path / "m.jsonl"
    assert train_main(["--data", str(data), "--epochs", "3", "--hidden", "4", "--log-every", "0",
                       "--eval-every", "1", "--kernels", "torch", "--metrics", str(metrics)]) == 0
    out = tmp_path / "r.html"
    code, err = report(capsys, metrics, "--partition", data, "--out", out)
    assert code == EXIT_OK, err
    html = out.read_text()
    records = [r for r in map(json.loads, metrics.read_text().splitlines()) if "epoch" in r]
    got = summary(html)
    assert got["epochs"] == 3
    assert close(got["mean_epoch_time_s"], sum(r["epoch_time_s"] for r in records) / 3)
    assert close(got["final_val_acc"], records[-1]["val_acc"])
    assert "<dd>gcn</dd>" in section(html, "header") and "<dd>1</dd>" in section(html, "header")
    assert "warning" not in err  # gnn_dist.train's records have every field the report reads


def test_report_runs_without_torch(tmp_path):
    metrics = write_metrics(tmp_path / "m.jsonl", EPOCHS)
    code = ("import sys; from gnn_dist_cli.command import main; rc = main(['report', sys.argv[1], '--out', "
            "sys.argv[2]]); bad = sorted(m for m in sys.modules if m.split('.')[0] == 'torch'); "
            "print(bad); sys.exit(rc or bool(bad))")
    proc = subprocess.run([sys.executable, "-c", code, str(metrics), str(tmp_path / "r.html")], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


def test_final_means_the_weights_the_run_ends_with(capsys, tmp_path):
    """With --select best-val the run ends with the best validation epoch's weights, and its
    ``final:`` line evaluates them: the report's "final" scores are that epoch's, not the last
    one's; the header names the recipe (weight decay, dropout, selection, patience)."""
    best_val = {**CONFIG, "model": {**CONFIG["model"], "dropout": 0.5, "input_dropout": 0.0},
                "trainer": {**CONFIG["trainer"], "optim": {"optimizer": "adam", "lr": 0.01, "weight_decay": 0.0005},
                            "selection": {"select": "best-val", "patience": 20}}}
    records = [epoch(1, evaluated=True, val=0.55), epoch(3, evaluated=True, val=0.7), epoch(5, evaluated=True, val=0.6)]
    for config, final_epoch in ((CONFIG, 5), (best_val, 3)):
        path = write_metrics(tmp_path / "m.jsonl", records, config=config)
        code, _ = report(capsys, path, "--out", tmp_path / "r.html")
        html = (tmp_path / "r.html").read_text()
        assert code == EXIT_OK and close(summary(html)["final_test_acc"], 0.4 + 0.02 * final_epoch), config
        assert f"final test accuracy (epoch {final_epoch})" in html
    header = section(html, "header")
    assert "weight decay 0.0005" in header and "best-val weights, patience 20" in header and "0.5 (input 0.0)" in header


def test_a_resize_record_is_read_and_listed_not_ignored(capsys, tmp_path):
    """An elastic job's ``{"event": "resize", ...}`` record (gnn_dist/trainer.py) sits between
    epoch records with the epoch it went on from; the reader keeps it apart from the epochs, warns
    about nothing, and the summary lists it."""
    resize = {"event": "resize", "epoch": 2, "from_world_size": 4, "to_world_size": 2}
    path = write_metrics(tmp_path / "m.jsonl", [epoch(0, evaluated=True), epoch(1, evaluated=False), resize,
                                                epoch(2, evaluated=False), epoch(3, evaluated=True)])
    run = read_metrics(path)
    assert [e["epoch"] for e in run.epochs] == [0, 1, 2, 3] and not run.warnings
    assert run.resizes == ({"epoch": 2, "from_world_size": 4, "to_world_size": 2},)
    code, err = report(capsys, path, "--out", tmp_path / "r.html")
    assert code == EXIT_OK, err
    assert "from epoch 2: 4 -&gt; 2 ranks" in (tmp_path / "r.html").read_text()
