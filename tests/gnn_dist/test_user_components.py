"""A user's own model and layer (``examples/custom_layer.py``: a protocol layer, ``register_model``
with its saved-tensor formula, ``register_adapter``) through the stock command line,
``gnn-dist train --import FILE.py``, as a user runs it:

- ``sync`` on 2 ranks with ``--save-model``; ``overlap`` on 2 ranks gives the same losses every
  epoch (1e-5); ``stale`` with ``--recompute layers`` trains (its first epoch is exact);
  ``--parallel layer --stages 2`` on a 1-part folder gives the 2-part sync run's losses (the run
  is exact whatever the cut), its data, import, model and epochs named by a ``--config`` file
  only (the ``import`` list loads as ``--import`` does, and ``data.data`` is enough for
  ``gnn-dist train``: one job for both); ``gnn-dist predict --import`` writes every node's
  prediction.
- ``--import`` errors (a missing file, a module that raises, an unknown model without it) are
  one line, exit code 2.
- A model registered without a formula is planned with the generic bound, with one warning; the
  bound is above the built-in layers' own formulas.

Each launch runs in its own session with a timeout; the whole process group is killed by pid in
a ``finally``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gnn_dist_cli import command as cli

pytestmark = pytest.mark.slow   # torchrun jobs; started first (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "custom_layer.py"
GNN_DIST = [sys.executable, "-m", "gnn_dist_cli"]
LAUNCH_TIMEOUT_S = 240
EPOCHS = 3
FLAGS = ["--import", str(EXAMPLE), "--model", "graphconv", "--hidden", "16", "--epochs", str(EPOCHS),
         "--seed", "1", "--timeout", "60"]


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return env


def run_gnn_dist(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """``gnn-dist ARGV`` in its own session; its process group is killed if it outlives the test."""
    proc = subprocess.Popen([*GNN_DIST, *argv], cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=LAUNCH_TIMEOUT_S)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        else:
            try:
                os.killpg(proc.pid, signal.SIGKILL)   # anything the launcher left behind in its group
            except ProcessLookupError:
                pass


def losses(metrics: Path) -> np.ndarray:
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    return np.array([r["train_loss"] for r in records if "train_loss" in r])


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("user_components")
    for parts in (1, 2):
        assert cli.main(["partition", "--dataset", "sbm-tiny", "--parts", str(parts), "--out",
                         str(root / f"tiny-{parts}"), "--no-progress"]) == 0
    return root


@pytest.fixture(scope="module")
def sync_run(folders) -> np.ndarray:
    r = run_gnn_dist("train", "--data", "tiny-2", *FLAGS, "--metrics", "sync.jsonl", "--save-model", "model.gdm",
                     cwd=folders)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "no saved-tensor formula" not in r.stderr   # the example registers its formula
    out = losses(folders / "sync.jsonl")
    assert out.shape == (EPOCHS,) and np.isfinite(out).all()
    return out


def test_overlap_trains_the_sync_runs_losses(folders, sync_run):
    r = run_gnn_dist("train", "--data", "tiny-2", *FLAGS, "--pipeline", "overlap", "--metrics", "overlap.jsonl",
                     cwd=folders)
    assert r.returncode == 0, r.stderr[-3000:]
    np.testing.assert_allclose(losses(folders / "overlap.jsonl"), sync_run, rtol=1e-5, atol=1e-6)


def test_stale_with_recomputation_trains(folders, sync_run):
    r = run_gnn_dist("train", "--data", "tiny-2", *FLAGS, "--pipeline", "stale", "--recompute", "layers",
                     "--metrics", "stale.jsonl", cwd=folders)
    assert r.returncode == 0, r.stderr[-3000:]
    got = losses(folders / "stale.jsonl")
    assert got.shape == (EPOCHS,) and np.isfinite(got).all()
    np.testing.assert_allclose(got[0], sync_run[0], rtol=1e-5)   # no stale rows yet: the exact step
    assert not np.allclose(got[1:], sync_run[1:], rtol=1e-7, atol=0)   # then last epoch's halo rows


def test_layer_parallel_stages_from_a_config_file_train_the_sync_runs_losses(folders, sync_run):
    """One job for two claims: ``--parallel layer --stages 2`` on the 1-part folder trains the
    2-part sync run's losses, and a ``--config`` file's ``import`` list and ``data.data`` (no
    ``--data``, no ``--import``) are all ``gnn-dist train`` needs: the model, its width and the
    epochs come from the file too, or the losses would differ."""
    (folders / "run.toml").write_text(f'import = ["{EXAMPLE}"]\nepochs = {EPOCHS}\n[data]\ndata = "tiny-1"\n'
                                      f'[model]\nmodel = "graphconv"\nhidden = 16\n')
    r = run_gnn_dist("train", "--config", "run.toml", "--seed", "1", "--timeout", "60", "--parallel", "layer",
                     "--stages", "2", "--metrics", "layer.jsonl", cwd=folders)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f'"epochs": {EPOCHS}' in r.stderr
    np.testing.assert_allclose(losses(folders / "layer.jsonl"), sync_run, rtol=1e-5, atol=1e-6)


def test_predict_loads_the_users_model(folders, sync_run):
    r = run_gnn_dist("predict", "--data", "tiny-2", "--import", str(EXAMPLE), "--model-file", "model.gdm",
                     "--out", "pred.npz", cwd=folders)
    assert r.returncode == 0, r.stderr[-3000:]
    with np.load(folders / "pred.npz") as z:
        assert z["node_ids"].shape == (1000,) and z["probabilities"].shape == (1000, 4)
    r = run_gnn_dist("predict", "--data", "tiny-2", "--model-file", "model.gdm", "--out", "pred2.npz", cwd=folders)
    assert r.returncode == 2 and "graphconv" in r.stderr and "--import" in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("argv, message", [
    (["--import", "missing.py"], r"--import missing.py: no such file"),
    (["--import", "no_such_module_xyz"], r"--import no_such_module_xyz: no such module"),
    (["--import", "boom.py"], r"--import boom.py: RuntimeError: boom \(.*boom.py:1\)"),
    ([], r"--model: invalid choice: 'graphconv'.*load your own model's file with --import"),
])
def test_import_errors_are_one_line(folders, argv, message, capsys):
    import re

    from gnn_dist.train import main

    (folders / "boom.py").write_text("raise RuntimeError('boom')\n")
    cwd = os.getcwd()
    os.chdir(folders)
    try:
        code = main([*argv, "--data", "tiny-1", "--model", "graphconv", "--validate"])
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and re.search(message, err), err


def test_a_model_without_a_formula_is_planned_with_the_generic_bound(caplog):
    from gnn_dist.memory_plan.layers import layer_shapes
    from gnn_dist.models import GCN, MODEL_SPECS, register_model, saved
    from gnn_dist.models.spec import _WARNED

    class Unplanned(GCN):
        pass

    register_model("unplanned-test")(Unplanned)
    try:
        spec = MODEL_SPECS["unplanned-test"]
        with caplog.at_level(logging.WARNING, logger="gnn_dist.models.spec"):
            assert spec.saved_formula() is saved.generic_saved
            assert spec.saved_formula() is saved.generic_saved
        assert [r.getMessage() for r in caplog.records].count(
            "memory plan: model 'unplanned-test' registers no saved-tensor formula (register_model(..., saved=...)); "
            "its layers are counted with a conservative generic one") == 1
    finally:
        del MODEL_SPECS["unplanned-test"]
        _WARNED.discard("unplanned-test")
    for name in ("gcn", "sage", "gin"):
        for w_in, w_out in ((128, 16), (16, 128), (64, 64)):
            for shape in layer_shapes(name, feature_dim=w_in, hidden=w_out, classes=4, layers=3, heads=None,
                                      out_heads=None, dropout=0.5):
                own, generic = MODEL_SPECS[name].saved(shape), saved.generic_saved(shape)
                assert generic.inner + generic.source >= own.inner + own.source, (name, shape)
