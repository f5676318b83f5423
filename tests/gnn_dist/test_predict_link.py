"""``gnn-dist predict`` with a link model (issue 20): ``--pairs`` of original ids scored exactly.

- ``gnn_dist.train --task link --save-model`` writes a model file whose header records the task
  and its decoder (``task_options``) and whose weights hold the decoder's (MLP); the file
  rebuilds the model with its ``link_decoder``.
- Scores of pairs (dot and MLP decoders) on 2 ranks (``run_ranks``, small chunks) equal one
  part's to 1e-5 and the decoder applied to the model's embeddings on the whole graph on one
  device (``FullGraph``); the pairs keep the file's order (repeats, reversed pairs, a
  self-pair); a text file (comments, a header, commas, gzip), an ``[E, 2]`` and a ``[2, E]``
  ``.npy`` give the same scores.
- Without ``--pairs`` a link model writes ``node_ids`` and its output rows as ``embeddings``
  (``--embeddings --layer K``: layer K's, with ``embedding_layer``).
- A file of the header before ``task_options`` (a dot model) still predicts.
- Each bad input (a missing, unparsable, misshapen, float or pickled pairs file, an id that is not
  a node, ``--pairs`` for a node model or with ``--embeddings``) is one line and exit code 2.
"""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest
import torch

from partitioners.format.writer import write_partition
from partitioners.io.edge_split import with_edge_split
from train_helpers import ErrorLines, make_graph

from gnn_dist.model_file import MODEL_VERSION, _digest, load_model_file
from gnn_dist.predict import check_prediction, predict
from mp_utils import run_ranks

pytestmark = pytest.mark.filterwarnings("ignore:Unable to enable fault handler:UserWarning")
NUM_NODES = 80
HIDDEN = 8
CHUNK = 7
DECODERS = ("dot", "mlp")


@pytest.fixture(scope="module")
def graph():
    g, record = with_edge_split(make_graph(NUM_NODES, seed=7), (0.8, 0.1, 0.1), seed=1)
    return g, record


@pytest.fixture(scope="module")
def run(graph, tmp_path_factory) -> dict:
    """The folders (1 and 2 parts), a link model per decoder (trained in-process on one part),
    a node model, and the pairs (original ids, an odd order) as an ``[E, 2]`` ``.npy``."""
    from gnn_dist.train import main

    g, record = graph
    root = tmp_path_factory.mktemp("predict-link")
    p1, p2 = str(root / "p1"), str(root / "p2")
    write_partition(g, np.zeros(NUM_NODES, np.int32), 1, p1, method="test", method_params={}, seed=0,
                    extra_meta={"edge_split": record})
    assignment = np.random.default_rng(3).integers(0, 2, NUM_NODES).astype(np.int32)
    write_partition(g, assignment, 2, p2, method="test", method_params={}, seed=0, extra_meta={"edge_split": record})
    common = ["--data", p1, "--epochs", "2", "--hidden", str(HIDDEN), "--lr", "0.05", "--log-every", "0"]
    models = {}
    for decoder, model in zip(DECODERS, ("gcn", "sage")):
        models[decoder] = str(root / f"{decoder}.pt")
        assert main([*common, "--model", model, "--task", "link", "--decoder", decoder, "--eval-negatives", "3",
                     "--save-model", models[decoder]]) == 0
    node_model = str(root / "node.pt")
    assert main([*common, "--epochs", "1", "--save-model", node_model]) == 0
    rng = np.random.default_rng(5)
    pairs = rng.integers(0, NUM_NODES, (40, 2))
    pairs = np.concatenate([pairs, pairs[:3, ::-1], pairs[:2], [[4, 4], [NUM_NODES - 1, 0]]])
    np.save(root / "pairs.npy", pairs)
    return {"root": root, "p1": p1, "p2": p2, "models": models, "node_model": node_model, "pairs": pairs,
            "npy": str(root / "pairs.npy")}


def predict_on_ranks(rank: int, world_size: int, data: str, models: dict, pairs: str) -> dict | None:
    """Every decoder's scores of ``pairs`` (in chunks of CHUNK) and embeddings; rank 0 returns them."""
    out = {}
    for decoder, model in models.items():
        scores = predict(data, model, pairs=pairs, chunk=CHUNK)
        nodes = predict(data, model)
        out[decoder] = None if scores is None else {"scores": scores.arrays(), "nodes": nodes.arrays()}
    return out if rank == 0 else None


@pytest.fixture(scope="module")
def predictions(run) -> dict:
    one = predict_on_ranks(0, 1, run["p1"], run["models"], run["npy"])
    two = run_ranks(predict_on_ranks, 2, run["p2"], run["models"], run["npy"], timeout=120)
    assert two[1] is None
    return {1: one, 2: two[0]}


def _whole_graph(graph, model_file: str) -> tuple[torch.nn.Module, torch.Tensor]:
    """The model of ``model_file`` and its output rows on the whole graph on one device, by original id."""
    from gnn_dist.nn import Block
    from gnn_dist.nn.part import FullGraph

    g, _ = graph
    model = load_model_file(model_file).build()
    with torch.no_grad():
        return model, model(FullGraph(Block.from_graph(g.indptr, g.indices)), torch.from_numpy(g.x))


def test_the_model_file_records_the_task_and_rebuilds_the_decoder(run):
    from gnn_dist.tasks import LinkPrediction

    for decoder, path in run["models"].items():
        mf = load_model_file(path)
        assert mf.header["task"] == "link" and mf.header["task_options"] == {"decoder": decoder}
        assert isinstance(mf.task, LinkPrediction) and mf.task.decoder_name == decoder and not mf.is_node_model
        assert any(k.startswith("link_decoder.") for k in mf.state_dict) == (decoder == "mlp")
        model = mf.build()
        assert type(model.link_decoder).__name__ == {"dot": "DotDecoder", "mlp": "MLPDecoder"}[decoder]
    assert "task_options" not in load_model_file(run["node_model"]).header   # a node task has none


def test_pair_scores_do_not_depend_on_the_parts_and_are_the_decoders_of_the_embeddings(graph, run, predictions):
    pairs = run["pairs"]
    for decoder in DECODERS:
        one, two = predictions[1][decoder]["scores"], predictions[2][decoder]["scores"]
        assert sorted(one) == ["dst", "probabilities", "scores", "src"]
        for got in (one, two):
            np.testing.assert_array_equal(got["src"], pairs[:, 0])   # the file's order, repeats kept
            np.testing.assert_array_equal(got["dst"], pairs[:, 1])
            assert got["scores"].dtype == got["probabilities"].dtype == np.float32
        np.testing.assert_allclose(two["scores"], one["scores"], rtol=1e-5, atol=1e-5, err_msg=decoder)
        model, h = _whole_graph(graph, run["models"][decoder])
        with torch.no_grad():
            direct = model.link_decoder(h[pairs[:, 0]], h[pairs[:, 1]])
        np.testing.assert_allclose(one["scores"], direct.numpy(), rtol=1e-5, atol=1e-5, err_msg=decoder)
        np.testing.assert_allclose(one["probabilities"], torch.sigmoid(direct).numpy(), rtol=1e-5, atol=1e-6)
        n = len(pairs) - 7   # the reversed pairs score as their originals (both decoders are symmetric)
        np.testing.assert_allclose(one["scores"][n:n + 3], one["scores"][:3], rtol=1e-5, atol=1e-6)
        assert np.unique(one["scores"]).size > len(pairs) // 2, "the pairs are scored, not a constant"


def test_without_pairs_a_link_model_writes_its_embeddings(graph, run, predictions):
    for decoder in DECODERS:
        one, two = predictions[1][decoder]["nodes"], predictions[2][decoder]["nodes"]
        assert sorted(one) == ["embeddings", "node_ids"]
        np.testing.assert_array_equal(one["node_ids"], np.arange(NUM_NODES))
        np.testing.assert_array_equal(two["node_ids"], one["node_ids"])
        np.testing.assert_allclose(two["embeddings"], one["embeddings"], rtol=1e-5, atol=1e-5)
        _, h = _whole_graph(graph, run["models"][decoder])
        np.testing.assert_allclose(one["embeddings"], h.numpy(), rtol=1e-5, atol=1e-5)
    first = predict(run["p1"], run["models"]["dot"], embeddings=True, layer=0)
    assert int(first.arrays()["embedding_layer"]) == 0 and first.embeddings.shape == (NUM_NODES, HIDDEN)
    assert not np.allclose(first.embeddings, predictions[1]["dot"]["nodes"]["embeddings"])


def test_text_files_and_both_npy_layouts_give_the_same_scores(run, predictions, tmp_path):
    from gnn_dist.predict import main as predict_main

    pairs, want = run["pairs"], predictions[1]["mlp"]["scores"]
    lines = "# source,destination\nsrc,dst\n" + "".join(f"{u},{v}  # a pair\n" for u, v in pairs)
    (tmp_path / "pairs.csv").write_text(lines)
    with gzip.open(tmp_path / "pairs.tsv.gz", "wt") as f:
        f.write("".join(f"{u}\t{v}\n" for u, v in pairs))
    np.save(tmp_path / "columns.npy", pairs.T.astype(np.int32))
    for name in ("pairs.csv", "pairs.tsv.gz", "columns.npy"):
        out = tmp_path / f"{name}.npz"
        assert predict_main(["--data", run["p1"], "--model-file", run["models"]["mlp"], "--out", str(out),
                             "--pairs", str(tmp_path / name)]) == 0
        with np.load(out) as got:
            np.testing.assert_array_equal(got["src"], want["src"], err_msg=name)
            np.testing.assert_array_equal(got["dst"], want["dst"], err_msg=name)
            for key in ("scores", "probabilities"):   # other chunks: the MLP's matmuls round alike to 1e-6
                np.testing.assert_allclose(got[key], want[key], rtol=1e-6, atol=1e-7, err_msg=f"{name}: {key}")
    assert not list(tmp_path.glob(".*.tmp")), "the temp files were renamed away"


def test_a_model_file_written_before_task_options_still_predicts(run, predictions, tmp_path):
    raw = torch.load(run["models"]["dot"], weights_only=True)
    header = json.loads(raw["header"])
    del header["task_options"]
    text = json.dumps(header, sort_keys=True)
    state = raw["state_dict"]
    old = tmp_path / "old.pt"
    torch.save({**raw, "header": text, "sha256": _digest(MODEL_VERSION, text, state, sorted(state))}, old)
    assert load_model_file(old).task.decoder_name == "dot"
    got = predict(run["p1"], old, pairs=run["npy"], chunk=CHUNK)
    np.testing.assert_array_equal(got.scores, predictions[1]["dot"]["scores"]["scores"])


def test_each_bad_input_is_one_line_and_exit_code_2(run, tmp_path, capsys):
    from gnn_dist.predict import main as predict_main
    from test_predict import Payload   # a class whose unpickling would run code

    t = tmp_path
    (t / "unparsable.txt").write_text("0 1\n2 two\n")
    (t / "outside.txt").write_text(f"# pairs\n0 1\n3 {NUM_NODES}\n")
    (t / "three.txt").write_text("0 1 2\n")
    np.save(t / "square.npy", np.zeros((3, 3), np.int64))
    np.save(t / "floats.npy", np.zeros((4, 2)))
    np.save(t / "negative.npy", np.array([[0, 1], [2, -3]]))
    np.save(t / "pickled.npy", np.array([Payload(), 1], dtype=object), allow_pickle=True)
    link, out = run["models"]["dot"], str(t / "out.npz")
    cases = {
        "missing.txt": (link, [], "--pairs {f}: no such file"),
        "unparsable.txt": (link, [], "--pairs {f}, line 2: field 2 ('two') is not an integer"),
        "outside.txt": (link, [], f"--pairs {{f}}, line 3: destination id {NUM_NODES} is out of range"),
        "three.txt": (link, [], "--pairs {f}, line 1: a line of 3 fields; a pairs file has 2"),
        "square.npy": (link, [], "--pairs {f}: an array of shape [3, 3]"),
        "floats.npy": (link, [], "dtype float64; expected integer original node ids"),
        "negative.npy": (link, [], "--pairs {f}: pair 1 (0-based) has id -3, which is not a node of the graph"),
        "pickled.npy": (link, [], "--pairs {f}: not a plain .npy array"),
        "node model": (run["node_model"], [], "the model of {m} has task classification, which predicts nodes"),
        "embeddings": (link, ["--embeddings"], "--embeddings applies without --pairs"),
    }
    for name, (model, extra, message) in cases.items():
        f = t / (name if "." in name else "outside.txt")
        want = message.format(f=f, m=model)
        code = predict_main(["--validate", "--data", run["p1"], "--model-file", model, "--out", out,
                             "--pairs", str(f), *extra])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith("gnn_dist.predict: error: "), (name, err)
        assert want in err[0], (name, err[0])
    assert not Payload.ran, "reading the pairs ran code from the file"
    with pytest.raises(ValueError, match=f"destination id {NUM_NODES} is out of range"):
        check_prediction(run["p1"], link, out, pairs=t / "outside.txt")
    # inside the ranks (here one process): one line, exit 2, no output file
    with ErrorLines("gnn_dist.train") as errors:
        code = predict_main(["--data", run["p1"], "--model-file", link, "--out", out,
                             "--pairs", str(t / "negative.npy")])
    assert code == 2 and len(errors.lines) == 1 and "has id -3" in errors.lines[0] and not os.path.exists(out)
