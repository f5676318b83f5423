"""``--save-model`` and ``gnn-dist predict``: a trained model file predicts on any number of parts.

- A 3-layer GCN trained in-process on one part (``gnn_dist.train.main``) writes a model file
  that ``torch.load(weights_only=True)`` reads, whose header holds every ``ModelConfig`` option.
- Predictions on 1 part and on 2 parts (``run_ranks``, the ``predict`` function) are equal to
  1e-5 and equal a one-device run of the model on the whole graph (``FullGraph``); their
  accuracy on each mask is the training run's final evaluation; the embeddings are the last
  hidden layer's output (the hidden width) or layer K's.
- A tampered, foreign, pickled or missing model file, one that does not fit the folder, and a
  bad ``--save-model``/``--out`` path are refused with one line.
- ``gnn-dist predict`` builds the agent command of ``gnn-dist train`` for ``gnn_dist.predict``,
  and (one subprocess job) runs it end to end on the 2-part folder.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gnn_dist_cli import command as cli
from partitioners.format.writer import write_partition
from train_helpers import ErrorLines, make_graph

from gnn_dist.config import ModelConfig
from gnn_dist.model_file import ModelFileError, load_model_file, save_model_file
from gnn_dist.predict import check_prediction, predict
from mp_utils import run_ranks

pytestmark = pytest.mark.filterwarnings("ignore:Unable to enable fault handler:UserWarning")
REPO = Path(__file__).resolve().parents[2]
NUM_NODES = 90
HIDDEN = 8
LAYERS = 3
EPOCHS = 6


@pytest.fixture(scope="module")
def graph():
    return make_graph(NUM_NODES, seed=1)


@pytest.fixture(scope="module")
def run(graph, tmp_path_factory) -> dict:
    """The folders, the training run (in-process, one part) and its model file."""
    root = tmp_path_factory.mktemp("predict")
    p1, p2 = str(root / "p1"), str(root / "p2")
    write_partition(graph, np.zeros(graph.num_nodes, np.int32), 1, p1, method="test", method_params={}, seed=0)
    assignment = np.random.default_rng(2).integers(0, 2, graph.num_nodes).astype(np.int32)
    write_partition(graph, assignment, 2, p2, method="test", method_params={}, seed=0)
    model, metrics = str(root / "model.pt"), root / "metrics.jsonl"
    from gnn_dist.train import main

    assert main(["--data", p1, "--epochs", str(EPOCHS), "--hidden", str(HIDDEN), "--layers", str(LAYERS),
                 "--dropout", "0.3", "--lr", "0.05", "--seed", "4", "--log-every", "0", "--metrics", str(metrics),
                 "--save-model", model]) == 0
    last = json.loads(metrics.read_text().splitlines()[-1])
    return {"root": root, "p1": p1, "p2": p2, "model": model, "final": last}


def predict_ranks(rank: int, world_size: int, data: str, model: str) -> dict | None:
    """On each rank: the default embeddings, then layer 0's; rank 0 returns both."""
    default = predict(data, model, embeddings=True)
    first = predict(data, model, embeddings=True, layer=0)
    return None if default is None else {"default": default.arrays(), "layer0": first.arrays()}


@pytest.fixture(scope="module")
def predictions(run) -> dict:
    one = {"default": predict(run["p1"], run["model"], embeddings=True).arrays(),
           "layer0": predict(run["p1"], run["model"], embeddings=True, layer=0).arrays()}
    two = run_ranks(predict_ranks, 2, run["p2"], run["model"], timeout=120)
    assert two[1] is None, "only rank 0 gets the predictions"
    return {1: one, 2: two[0]}


def test_two_parts_predict_what_one_part_and_the_whole_graph_predict(graph, run, predictions):
    one, two = predictions[1]["default"], predictions[2]["default"]
    np.testing.assert_array_equal(one["node_ids"], np.arange(NUM_NODES))
    np.testing.assert_array_equal(two["node_ids"], one["node_ids"])
    for key in ("probabilities", "embeddings"):
        np.testing.assert_allclose(two[key], one[key], rtol=1e-5, atol=1e-5, err_msg=key)
    np.testing.assert_array_equal(two["predicted"], one["predicted"])
    np.testing.assert_allclose(one["probabilities"].sum(1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(one["predicted"], one["probabilities"].argmax(1))

    # The model on the whole graph on one device, rows in original id order (no partition at all).
    from gnn_dist.nn import Block
    from gnn_dist.nn.part import FullGraph

    model = load_model_file(run["model"]).build()
    hidden = []
    model.convs[LAYERS - 2].register_forward_hook(lambda m, i, out: hidden.append(out))
    with torch.no_grad():
        logits = model(FullGraph(Block.from_graph(graph.indptr, graph.indices)), torch.from_numpy(graph.x))
    np.testing.assert_allclose(one["probabilities"], torch.softmax(logits, -1).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(one["embeddings"], torch.relu(hidden[0]).numpy(), rtol=1e-5, atol=1e-6)


def test_prediction_accuracy_is_the_training_runs_evaluation(graph, run, predictions):
    final = run["final"]
    assert final["epoch"] == EPOCHS - 1 and final["val_acc"] is not None
    header = load_model_file(run["model"]).header
    for p in (1, 2):
        predicted = predictions[p]["default"]["predicted"]
        for name, mask in (("train", graph.train_mask), ("val", graph.val_mask), ("test", graph.test_mask)):
            acc = float((predicted[mask] == graph.y[mask]).sum()) / int(mask.sum())
            assert acc == pytest.approx(final[f"{name}_acc"], abs=1e-12), (p, name)
            assert acc == pytest.approx(header["training"]["final"][f"{name}_acc"], abs=1e-12), (p, name)
    assert header["training"]["epochs"] == EPOCHS


def test_embeddings_are_the_hidden_layers_output(predictions):
    for p in (1, 2):
        default, first = predictions[p]["default"], predictions[p]["layer0"]
        assert default["embeddings"].shape == (NUM_NODES, HIDDEN) and int(default["embedding_layer"]) == LAYERS - 2
        assert first["embeddings"].shape == (NUM_NODES, HIDDEN) and int(first["embedding_layer"]) == 0
        assert (default["embeddings"] >= 0).all() and default["embeddings"].any()   # after the ReLU
        assert not np.allclose(default["embeddings"], first["embeddings"])
        np.testing.assert_array_equal(first["probabilities"], default["probabilities"])
    np.testing.assert_allclose(predictions[2]["layer0"]["embeddings"], predictions[1]["layer0"]["embeddings"],
                               rtol=1e-5, atol=1e-5)


def test_the_model_file_loads_with_weights_only_and_records_every_model_option(run):
    raw = torch.load(run["model"], weights_only=True)
    assert raw["format"] == "gnn-dist-model" and raw["version"] == 1
    header = json.loads(raw["header"])
    assert header["model"] == dataclasses.asdict(ModelConfig(model="gcn", hidden=HIDDEN, layers=LAYERS, dropout=0.3,
                                                             seed=4))
    assert set(header["model"]) == {f.name for f in dataclasses.fields(ModelConfig)}
    assert (header["in_dim"], header["num_classes"], header["label_kind"]) == (5, 3, "class")
    assert header["training"]["run_config"]["save_model"] == run["model"]
    assert set(raw["state_dict"]) == set(header["tensors"]) and "convs.0.lin.weight" in raw["state_dict"]
    assert not list(Path(run["model"]).parent.glob(".model.pt.*.tmp")), "the temp file was renamed away"


class Payload:
    """A class a pickled file would construct (weights_only loading must refuse it)."""

    ran = False

    def __reduce__(self):
        return (Payload._run, ())

    @staticmethod
    def _run():
        Payload.ran = True
        return Payload


def test_a_tampered_foreign_or_missing_model_file_is_refused(run, tmp_path):
    raw = torch.load(run["model"], weights_only=True)
    cases = {}
    weights = {**raw, "state_dict": {**raw["state_dict"]}}
    weights["state_dict"]["convs.0.lin.weight"] = weights["state_dict"]["convs.0.lin.weight"] + 1e-3
    cases["weights"] = weights
    header = json.loads(raw["header"])
    header["model"]["hidden"] = HIDDEN + 1
    cases["header"] = {**raw, "header": json.dumps(header, sort_keys=True)}
    cases["version"] = {**raw, "version": 2}
    for name, payload in cases.items():
        torch.save(payload, tmp_path / f"{name}.pt")
    flipped = bytearray(Path(run["model"]).read_bytes())
    stored = raw["state_dict"]["convs.0.lin.weight"].numpy().tobytes()   # kept uncompressed in the archive
    at = bytes(flipped).find(stored)
    assert at >= 0
    flipped[at + len(stored) // 2] ^= 0xFF   # a byte of a weight, not of the archive's padding
    (tmp_path / "flipped.pt").write_bytes(bytes(flipped))
    torch.save({"format": "gnn-dist-model", "version": 1, "header": Payload()}, tmp_path / "pickled.pt")
    expected = {"weights": "sha256 of its contents", "header": "sha256 of its contents",
                "version": "model file version 2", "flipped": "not a readable model file|sha256 of its contents",
                "pickled": "not a readable model file",
                "missing": "no such model file"}
    for name, message in expected.items():
        with pytest.raises(ModelFileError, match=message) as exc:
            load_model_file(tmp_path / f"{name}.pt")
        assert str(exc.value).startswith(str(tmp_path / f"{name}.pt")) and "\n" not in str(exc.value)
    assert not Payload.ran, "loading ran code from the file"


def test_a_model_that_does_not_fit_the_folder_or_a_bad_path_is_refused(run, graph, tmp_path, capsys):
    from gnn_dist.distributed.local_run import _validate
    from gnn_dist.predict import main as predict_main

    other = make_graph(40, seed=3)
    narrow = dataclasses.replace(other, x=other.x[:, :4].copy())   # 4 features, not the model's 5
    write_partition(narrow, np.zeros(40, np.int32), 1, tmp_path / "narrow", method="test", method_params={}, seed=0)
    out = str(tmp_path / "preds.npz")
    with pytest.raises(ModelFileError, match=r"in_dim=5 features per node but .*narrow has feature_dim=4"):
        check_prediction(tmp_path / "narrow", run["model"], out)
    with pytest.raises(ValueError, match=r"--out .*: the folder .*nowhere does not exist"):
        check_prediction(run["p1"], run["model"], str(tmp_path / "nowhere" / "p.npz"))
    with pytest.raises(ValueError, match=r"--layer 3: the model of .* has layers 0 to 2"):
        check_prediction(run["p1"], run["model"], out, embeddings=True, layer=3)

    # the agent's --validate dispatches to gnn_dist.predict: one line, exit 2, nothing started
    capsys.readouterr()
    assert _validate(["--nproc-per-node=1", "-m", "gnn_dist.predict", "--data", str(tmp_path / "narrow"),
                      "--model-file", run["model"], "--out", out]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gnn_dist.predict: error: ") and "feature_dim=4" in err[0]
    # inside the ranks (here one process): one line, exit 2, no output file
    with ErrorLines("gnn_dist.train") as errors:
        code = predict_main(["--data", str(tmp_path / "narrow"), "--model-file", run["model"], "--out", out])
    assert code == 2 and len(errors.lines) == 1 and "feature_dim=4" in errors.lines[0] and not os.path.exists(out)
    # --save-model into a missing folder stops the run before it trains
    from gnn_dist.train import main as train_main

    with ErrorLines("gnn_dist.train") as errors:
        code = train_main(["--data", run["p1"], "--epochs", "1000000", "--hidden", "4", "--log-every", "0",
                           "--save-model", str(tmp_path / "nowhere" / "m.pt")])
    assert code == 2 and len(errors.lines) == 1 and "--save-model" in errors.lines[0] and "nowhere" in errors.lines[0]
    from gnn_dist.config_cli import parse_run_config
    from gnn_dist.validate import check_run

    with pytest.raises(ValueError, match=r"--save-model .*nowhere.* does not exist"):   # what gnn-dist train runs first
        check_run(parse_run_config(["--data", run["p1"], "--save-model", str(tmp_path / "nowhere" / "m.pt")])[0])
    # save_model_file refuses weights its ModelConfig does not describe
    model = load_model_file(run["model"]).build()
    with pytest.raises(ModelFileError, match="not those of the model"):
        save_model_file(tmp_path / "m.pt", model, ModelConfig(hidden=HIDDEN * 2, layers=LAYERS), _Meta(5, 3))
    assert not (tmp_path / "m.pt").exists()


def test_a_folder_without_labels_is_predicted(graph, run, predictions, tmp_path):
    unlabelled = dataclasses.replace(graph, y=None, num_classes=0, train_mask=None, val_mask=None, test_mask=None)
    write_partition(unlabelled, np.zeros(NUM_NODES, np.int32), 1, tmp_path / "u", method="test", method_params={},
                    seed=0)
    check_prediction(tmp_path / "u", run["model"], str(tmp_path / "p.npz"))
    got = predict(tmp_path / "u", run["model"])
    assert got.embeddings is None and "embeddings" not in got.arrays()
    np.testing.assert_allclose(got.probabilities, predictions[1]["default"]["probabilities"], rtol=1e-6, atol=1e-7)


def test_a_multilabel_model_predicts_labels_as_training_evaluates_them(tmp_path):
    from gnn_dist.train import main

    base = make_graph(60, seed=5)
    graph = dataclasses.replace(base, y=(base.x[:, :3] > 0).astype(np.uint8), num_classes=3)
    data, model, metrics = str(tmp_path / "p1"), str(tmp_path / "m.pt"), tmp_path / "metrics.jsonl"
    write_partition(graph, np.zeros(60, np.int32), 1, data, method="test", method_params={}, seed=0)
    assert main(["--data", data, "--epochs", "4", "--hidden", "8", "--lr", "0.05", "--log-every", "0",
                 "--metrics", str(metrics), "--save-model", model]) == 0
    final = json.loads(metrics.read_text().splitlines()[-1])
    got = predict(data, model)
    assert load_model_file(model).label_kind == "multilabel"
    assert got.predicted.dtype == np.uint8 and got.predicted.shape == got.probabilities.shape == (60, 3)
    np.testing.assert_array_equal(got.predicted, (got.probabilities > 0.5).astype(np.uint8))
    for name, mask in (("train", graph.train_mask), ("val", graph.val_mask)):
        pred, true = got.predicted[mask].astype(float), graph.y[mask].astype(float)
        tp = (pred * true).sum()
        micro_f1 = 2 * tp / (2 * tp + (pred * (1 - true)).sum() + ((1 - pred) * true).sum())
        assert micro_f1 == pytest.approx(final[f"{name}_acc"], abs=1e-12), name


@dataclasses.dataclass
class _Meta:
    feature_dim: int
    num_classes: int
    label_kind: str = "class"


def test_predict_main_writes_the_npz_in_process(run, predictions, tmp_path):
    from gnn_dist.predict import main as predict_main

    out = tmp_path / "preds.npz"
    assert predict_main(["--data", run["p1"], "--model-file", run["model"], "--out", str(out), "--embeddings"]) == 0
    with np.load(out) as got:
        assert sorted(got.files) == sorted(predictions[1]["default"])
        for key, value in predictions[1]["default"].items():
            np.testing.assert_array_equal(got[key], value, err_msg=key)


def test_gnn_dist_predict_launches_the_train_agent_for_gnn_dist_predict(run, monkeypatch, tmp_path):
    from gnn_dist_cli import launch

    calls = []
    monkeypatch.setattr(launch, "run_torchrun", lambda cmd, env, verbose=False: calls.append(cmd) or 0)
    rest = ["--model-file", run["model"], "--out", str(tmp_path / "p.npz"), "--embeddings"]
    assert cli.main(["predict", "--data", run["p2"], *rest]) == 0
    (cmd,) = calls
    assert cmd == cli.train_command(run["p2"], 2, rest, watch_pid=os.getpid(), entry="gnn_dist.predict")
    assert cmd[cmd.index("--") - 1] == "--summarize" and "--validate" in cmd[:cmd.index("--")]
    assert cmd[cmd.index("-m", cmd.index("--")):][:2] == ["-m", "gnn_dist.predict"]
    assert "--nproc-per-node=2" in cmd and "--rdzv-id=gnn-dist-predict" in cmd


def test_gnn_dist_predict_end_to_end_on_two_ranks(run, predictions, tmp_path):
    """The one subprocess job: ``gnn-dist predict`` on the 2-part folder, through torchrun."""
    out = tmp_path / "preds.npz"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GNN_DIST_AGENT_PID"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "gnn_dist_cli", "predict", "--data", run["p2"], "--model-file",
                           run["model"], "--out", str(out), "--embeddings"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(out) as got:
        for key, value in predictions[2]["default"].items():
            np.testing.assert_array_equal(got[key], value, err_msg=key)


def _toml(path: Path, **values) -> str:
    """A ``--config`` file of ``values`` (strings, ints and bools) at ``path``."""
    path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items()))
    return str(path)


def test_predict_config_file_gives_the_flags_and_the_flags_override_it(run, predictions, tmp_path):
    from gnn_dist.predict import main as predict_main

    config = _toml(tmp_path / "predict.toml", data=run["p1"], model_file=run["model"], out=str(tmp_path / "a.npz"),
                   embeddings=True, verify=False)
    assert predict_main(["--config", config]) == 0
    assert predict_main(["--config", config, "--out", str(tmp_path / "b.npz"), "--layer", "0"]) == 0
    for name, key in (("a.npz", "default"), ("b.npz", "layer0")):
        with np.load(tmp_path / name) as got:
            assert sorted(got.files) == sorted(predictions[1][key])
            for field, value in predictions[1][key].items():
                np.testing.assert_array_equal(got[field], value, err_msg=f"{name}: {field}")


@pytest.mark.parametrize("values, message", [
    ({"data": "d", "model": "m.pt"}, r"predict.toml: model is not a prediction flag; the keys are backend, data, "),
    ({"data": "d", "layer": "1"}, r"predict.toml: layer = '1': expected an integer \(the flag --layer K\)"),
    ({"data": "d", "embeddings": "yes"}, r"predict.toml: embeddings = 'yes': expected true or false"),
    ({"data": "d", "verify": 0}, r"predict.toml: verify = 0: expected true or false \(the flag --no-verify\)"),
    ({"data": "d", "backend": "mpi"}, r"predict.toml: backend = 'mpi': expected one of 'nccl', 'gloo'"),
    ({"data": "d", "timeout": True}, r"predict.toml: timeout = True: expected a number"),
    ({"data": "d", "out": "p.npz"}, r"^gnn_dist.predict: error: --model-file required \(give the flag, or "
                                    r"model_file in --config\)$"),
])
def test_a_bad_predict_config_is_one_line_naming_the_key(tmp_path, values, message):
    from gnn_dist.predict import UsageError as PredictUsage, _parse

    with pytest.raises(PredictUsage, match=message):
        _parse(["--config", _toml(tmp_path / "predict.toml", **values)])


def test_gnn_dist_predict_takes_the_folder_from_the_config_file(run, monkeypatch, tmp_path, capsys):
    from gnn_dist_cli import launch

    calls = []
    monkeypatch.setattr(launch, "run_torchrun", lambda cmd, env, verbose=False: calls.append(cmd) or 0)
    config = _toml(tmp_path / "predict.toml", data=run["p2"], model_file=run["model"], out=str(tmp_path / "p.npz"))
    assert cli.main(["predict", "--config", config]) == 0
    (cmd,) = calls   # two ranks, the folder's parts; the file goes on to the ranks
    assert cmd == cli.train_command(run["p2"], 2, ["--config", config], watch_pid=os.getpid(), entry="gnn_dist.predict")
    assert cli.main(["predict", "--config", _toml(tmp_path / "no-data.toml", out="p.npz")]) == 2
    assert "gnn-dist predict: --data is required (the partition folder; or data in --config)" in capsys.readouterr().err
    assert len(calls) == 1
