"""``examples/custom_pyg_model.py`` trains exactly on P ranks, and the docs match the code.

- The example's model (PyG ``GraphConv`` on the block, hash dropout keyed by original ids) on
  P=2 gloo ranks gives the per-epoch losses, accuracies and final weights of one rank, with
  dropout on; once with the training rows split over both ranks, once with a rank that holds
  no training rows.
- The script's ``main(argv)`` runs in-process on a 1-part folder and trains what the model
  class trains.
- PyG layers (``GraphConv``, ``SAGEConv``, ``GATConv``, ``GATv2Conv``) on the blocks of a split
  graph equal the layer on the whole graph (the claim ``docs/custom_models.md`` makes).
- Every ``gnn_dist.*``/``partitioners.*`` name in ``docs/{api,concepts,custom_models}.md``
  exists, every signature in ``docs/api.md`` has the code's parameters, ``docs/api.md`` covers
  the ``__all__`` of the public modules, and the model code shown in ``docs/custom_models.md``
  is the example's.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

from partitioners import Graph
from partitioners.format.writer import write_partition
from mp_utils import run_ranks

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "custom_pyg_model.py"
DOCS = ROOT / "docs"

NUM_NODES = 100
EPOCHS = 4
HIDDEN = 8
LAYERS = 3
LR = 0.05
SEED = 3


def load_example(name: str = "custom_pyg_model") -> ModuleType:
    """The example script ``examples/NAME.py`` as a module (it is not in a package)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def make_graph(seed: int = 0) -> Graph:
    """A random graph with isolated nodes, self-loops and a duplicate edge."""
    rng = np.random.default_rng(seed)
    n = NUM_NODES
    src = np.concatenate([rng.integers(0, n - 8, 500), [4, 4, 9]])  # the last 8 nodes are isolated
    dst = np.concatenate([rng.integers(0, n - 8, 500), [4, 9, 4]])
    src, dst = np.concatenate([src, [9]]), np.concatenate([dst, [4]])
    train = np.zeros(n, bool)
    train[rng.choice(n, 30, replace=False)] = True
    val = ~train & (rng.random(n) < 0.5)
    return Graph.from_edges(src, dst, n, features=rng.standard_normal((n, 5)).astype(np.float32),
                            labels=rng.integers(0, 3, n), train_mask=train, val_mask=val,
                            test_mask=~train & ~val, num_classes=3)


def write(graph: Graph, assignment: np.ndarray, num_parts: int, out: Path) -> str:
    write_partition(graph, assignment, num_parts, out, method="test", method_params={}, seed=0)
    return str(out)


def train_custom(rank: int, world_size: int, paths: list[str], dropout: float) -> list[dict[str, Any]]:
    """Train the example's model on this rank's part of each folder in ``paths``."""
    import gnn_dist

    model_cls = load_example().PyGGraphConvNet
    out = []
    for path in paths:
        part = gnn_dist.load_partition(path)
        torch.manual_seed(SEED)  # as the script does with --seed
        model = model_cls(part.feature_dim, HIDDEN, part.num_classes, LAYERS, dropout=dropout, seed=SEED)
        trainer = gnn_dist.Trainer(model, part, lr=LR, log_every=0)
        hist = trainer.fit(EPOCHS)
        out.append({"loss": [h["train_loss"] for h in hist],
                    "acc": [(h["train_acc"], h["val_acc"], h["test_acc"]) for h in hist],
                    "halo_bytes": sum(h["halo_bytes"] for h in hist),
                    "params": {k: v.detach().clone() for k, v in model.state_dict().items()}})
    return out


@pytest.fixture(scope="module")
def graph() -> Graph:
    return make_graph()


@pytest.fixture(scope="module")
def one_part(graph, tmp_path_factory) -> str:
    return write(graph, np.zeros(graph.num_nodes, np.int32), 1, tmp_path_factory.mktemp("p1") / "parts")


@pytest.fixture(scope="module")
def reference(one_part) -> dict[float, dict[str, Any]]:
    return {dropout: train_custom(0, 1, [one_part], dropout)[0] for dropout in (0.0, 0.5)}


def test_two_ranks_train_what_one_rank_trains(graph, reference, tmp_path):
    rng = np.random.default_rng(1)
    mixed = rng.integers(0, 2, graph.num_nodes).astype(np.int32)
    no_train_on_1 = (~graph.train_mask & (rng.random(graph.num_nodes) < 0.5)).astype(np.int32)
    assert np.bincount(mixed[graph.train_mask], minlength=2).min() > 0, "training rows on both ranks"
    assert not graph.train_mask[no_train_on_1 == 1].any() and (no_train_on_1 == 1).any()
    paths = [write(graph, mixed, 2, tmp_path / "mixed"), write(graph, no_train_on_1, 2, tmp_path / "notrain")]

    results = run_ranks(train_custom, 2, paths, 0.5, timeout=120)

    ref = reference[0.5]
    for case, got in zip(("mixed", "rank 1 without training rows"), results[0]):
        assert got["halo_bytes"] > 0, f"{case}: no halo exchange happened"
        np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, atol=1e-6, err_msg=case)
        np.testing.assert_allclose(np.array(got["acc"], float), np.array(ref["acc"], float), atol=1e-9,
                                   err_msg=case)
        assert got["params"].keys() == ref["params"].keys()
        for key, value in ref["params"].items():
            torch.testing.assert_close(got["params"][key], value, rtol=1e-5, atol=1e-5,
                                       msg=lambda m, k=key, c=case: f"{c}: {k}: {m}")
    for mine, theirs in zip(results[0], results[1]):  # both ranks hold the same weights
        for key, value in mine["params"].items():
            assert torch.equal(theirs["params"][key], value), f"rank weights differ: {key}"


def test_dropout_is_on_and_changes_training(reference):
    """Guards the comparison above against a dropout that does nothing."""
    assert reference[0.0]["loss"][1:] != reference[0.5]["loss"][1:]
    assert int(reference[0.5]["params"]["step"]) == EPOCHS  # one dropout step per training epoch


def test_script_main_runs_in_process(one_part, reference):
    history = load_example().main(["--data", one_part, "--epochs", str(EPOCHS), "--hidden", str(HIDDEN),
                                   "--layers", str(LAYERS), "--dropout", "0.5", "--lr", str(LR),
                                   "--seed", str(SEED), "--log-every", "0"])
    assert [h["epoch"] for h in history] == list(range(EPOCHS))
    ref = reference[0.5]  # same weights seed, dropout seed and hyperparameters as these flags
    np.testing.assert_allclose([h["train_loss"] for h in history], ref["loss"], rtol=1e-6)
    assert [(h["train_acc"], h["val_acc"], h["test_acc"]) for h in history] == ref["acc"]


def test_train_save_predict_example_runs_in_process(tmp_path):
    """``examples/train_save_predict.py`` on one part in this process, a few epochs: its model
    file predicts every node, and the accuracy from the predictions is the training run's."""
    got = load_example("train_save_predict").main(["--out", str(tmp_path), "--epochs", "3", "--hidden", "8",
                                                   "--predict-parts", "1"])
    assert got["test_acc"] == pytest.approx(got["training_test_acc"], abs=1e-12)
    assert got["embeddings_shape"] == (1000, 8)   # sbm-tiny's nodes, the hidden width
    assert np.load(tmp_path / "embeddings.npy").shape == (1000, 8) and got["model"].is_file()


@pytest.mark.parametrize("layer", ["GraphConv", "SAGEConv", "GATConv", "GATv2Conv"])
def test_pyg_layer_on_blocks_equals_whole_graph(graph, layer):
    """The claim of docs/custom_models.md: a PyG layer given (sources, destinations) on a block."""
    from torch_geometric import nn as pyg_nn

    from gnn_dist.nn import Block

    torch.manual_seed(0)
    kwargs = {"heads": 2} if layer.startswith("GAT") else {"aggr": "mean"} if layer == "GraphConv" else {}
    conv = getattr(pyg_nn, layer)(5, 4, **kwargs)
    x = torch.from_numpy(graph.x)
    whole = Block.from_graph(graph.indptr, graph.indices)
    expected = conv(x, whole.edge_index)
    takes_size = "size" in inspect.signature(conv.forward).parameters  # GATv2Conv's reads the pair
    order = torch.randperm(graph.num_nodes)
    for dst_nodes in (order[:37], order[37:]):
        block = Block.from_graph(graph.indptr, graph.indices, dst_nodes)
        x_src = x[block.src_original_ids]  # what part.exchange returns: inner rows, then halo rows
        size = {"size": (block.num_src, block.num_dst)} if takes_size else {}
        out = conv((x_src, x_src[:block.num_dst]), block.edge_index, **size)
        torch.testing.assert_close(out, expected[dst_nodes], rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- the docs

DOC_FILES = ("api.md", "concepts.md", "custom_models.md")
API_MODULES = ("gnn_dist", "gnn_dist.partition", "gnn_dist.trainer", "gnn_dist.models", "gnn_dist.nn",
               "gnn_dist.distributed", "gnn_dist.checkpoints", "gnn_dist.pipeline", "gnn_dist.cache",
               "gnn_dist.model_file", "gnn_dist.predict", "partitioners", "partitioners.io",
               "partitioners.synthetic", "partitioners.catalog", "partitioners.methods",
               "partitioners.quality", "partitioners.format", "gnn_dist_cli.command", "gnn_dist_cli.run_report")
"""Modules whose ``__all__`` docs/api.md must cover."""
_DOTTED = re.compile(r"\b(?:gnn_dist_cli|gnn_dist|partitioners)(?:\.\w+)+")
_FENCE = re.compile(r"```.*?```", re.S)
_SPAN = re.compile(r"`([^`\n]+)`")
_FIELD = object()
"""What :func:`resolve` returns for a dataclass field (they have no class attribute)."""


def resolve(dotted: str) -> Any:
    """The object ``dotted`` names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        module_name = ".".join(parts[:i])
        try:
            obj: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_name.startswith(exc.name):
                continue  # not a module: an attribute of a shorter prefix
            raise
        for attr in parts[i:]:
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
            elif inspect.isclass(obj) and attr in getattr(obj, "__dataclass_fields__", {}):
                obj = _FIELD
            else:
                raise AssertionError(f"{dotted}: {getattr(obj, '__name__', obj)!r} has no attribute {attr!r}")
        return obj
    raise AssertionError(f"{dotted}: no importable module prefix")


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes."""
    items, depth, quote, cur = [], 0, "", ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        items.append(cur.strip())
    return items


def documented_params(span: str) -> list[tuple[str, str, bool]] | None:
    """``(name, kind, has_default)`` of a documented signature ``name(params) ...``; None if none."""
    start = span.find("(")
    if start < 0 or not _DOTTED.fullmatch(span[:start]):
        return None
    depth = 0
    for end in range(start, len(span)):
        depth += {"(": 1, ")": -1}.get(span[end], 0)
        if depth == 0:
            break
    params, kind = [], "positional"
    for item in _split_top(span[start + 1:end]):
        if item == "*":
            kind = "keyword"
        elif item.startswith("**"):
            params.append((item[2:], "var_keyword", False))
        elif item.startswith("*"):
            params.append((item[1:], "var_positional", False))
            kind = "keyword"
        else:
            name, eq, _ = item.partition("=")
            params.append((name.strip(), kind, bool(eq)))
    return params


def code_params(obj: Any) -> list[tuple[str, str, bool]]:
    P = inspect.Parameter
    kinds = {P.POSITIONAL_ONLY: "positional", P.POSITIONAL_OR_KEYWORD: "positional", P.KEYWORD_ONLY: "keyword",
             P.VAR_POSITIONAL: "var_positional", P.VAR_KEYWORD: "var_keyword"}
    params = list(inspect.signature(obj).parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    return [(p.name, kinds[p.kind], p.default is not inspect.Parameter.empty) for p in params]


def doc_text(name: str) -> str:
    path = DOCS / name
    assert path.is_file(), f"{path} is missing"
    return path.read_text()


@pytest.mark.parametrize("doc", DOC_FILES)
def test_every_name_in_the_docs_exists(doc):
    names = sorted(set(_DOTTED.findall(doc_text(doc))))
    assert len(names) >= 5, f"docs/{doc} names almost nothing: the check would be empty"
    for name in names:
        resolve(name)


def test_api_signatures_match_the_code():
    spans = _SPAN.findall(_FENCE.sub("", doc_text("api.md")))
    checked = 0
    for span in spans:
        params = documented_params(span)
        if params is None:
            continue
        name = span[:span.find("(")]
        obj = resolve(name)
        assert code_params(obj) == params, (
            f"docs/api.md documents {span!r}, but the code has {name}{inspect.signature(obj)} "
            f"(names, keyword-only or not, and which have defaults must agree)")
        checked += 1
    assert checked >= 80, f"only {checked} signatures found in docs/api.md"


def test_api_doc_covers_every_public_name():
    names = set(_DOTTED.findall(doc_text("api.md")))
    objects = [resolve(n) for n in names]
    missing = []
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        for attr in module.__all__:
            dotted = f"{module_name}.{attr}"
            obj = getattr(module, attr)
            if any(n == dotted or n.startswith(dotted + ".") for n in names):
                continue
            if not isinstance(obj, (int, float, str)) and any(obj is o for o in objects):
                continue  # re-exported: documented under another module's name
            missing.append(dotted)
    assert not missing, f"docs/api.md does not document {missing}"


def test_the_model_in_custom_models_md_is_the_examples():
    text = doc_text("custom_models.md")
    marker = "<!-- example: examples/custom_pyg_model.py -->"
    assert marker in text
    block = text.split(marker, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    example = [line.rstrip() for line in EXAMPLE.read_text().splitlines()]
    pos = 0
    for line in (ln.rstrip() for ln in block.splitlines() if ln.strip()):
        assert line in example[pos:], \
            f"docs/custom_models.md shows {line!r}, which the example does not have (in this order)"
        pos = example.index(line, pos) + 1
