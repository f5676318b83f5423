"""Link prediction (issue 20): P ranks train and score exactly what one rank does (dropout on, dot
and MLP decoders), the hash negatives do not depend on the partition, the metrics against a
direct computation, and the task refused in one line where it cannot train."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from partitioners import Graph
from partitioners.format.writer import write_partition
from partitioners.io.edge_split import with_edge_split
from mp_utils import run_ranks

NUM_NODES = 90
EPOCHS = 3
SPLITS = ("train", "val", "test")


@pytest.fixture(scope="module")
def graph() -> tuple[Graph, dict]:
    """A random symmetric graph with 5 features, a few isolated nodes and an edge split."""
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, NUM_NODES - 5, 400), rng.integers(0, NUM_NODES - 5, 400)
    src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    x = rng.standard_normal((NUM_NODES, 5)).astype(np.float32)
    g = Graph.from_edges(src, dst, NUM_NODES, features=x, remove_duplicates=True, remove_self_loops=True)
    return with_edge_split(g, (0.8, 0.1, 0.1), seed=3)


def write(graph: tuple[Graph, dict], num_parts: int, out) -> str:
    g, record = graph
    a = np.random.default_rng(num_parts).integers(0, num_parts, g.num_nodes).astype(np.int32)
    write_partition(g, a, num_parts, out, method="test", method_params={}, seed=0, extra_meta={"edge_split": record})
    return str(out)


def _model(part, dropout: float = 0.5, model: str = "gcn"):
    from gnn_dist.models import build_model
    from gnn_dist.config import ModelConfig

    torch.manual_seed(0)   # the initial weights (rank 0's are broadcast)
    return build_model(ModelConfig(model=model, hidden=8, layers=2, dropout=dropout, seed=1),
                       in_dim=part.feature_dim, out_dim=8)


def train_link(rank: int, world_size: int, path: str) -> dict:
    import gnn_dist

    part = gnn_dist.load_partition(path)
    out = {}
    for model, decoder in (("gcn", "dot"), ("sage", "mlp")):
        trainer = gnn_dist.Trainer(_model(part, model=model), part, lr=0.02, log_every=0, task="link",
                                   decoder=decoder, eval_negatives=7, hits_k=3)
        hist = trainer.fit(EPOCHS)
        keys = [f"{s}_{m}" for s in SPLITS for m in ("mrr", "hits@3", "auc")]
        fetch = trainer.task._train_fetch   # the last step's endpoint rows: sent forward, gradients back
        out[model] = {"loss": [h["train_loss"] for h in hist], "metrics": [[h[k] for k in keys] for h in hist],
                      "params": {k: v.detach().clone() for k, v in trainer.model.state_dict().items()},
                      "fetch_bytes": (hist[-1]["fetch_bytes"], (fetch.rows_sent + fetch.rows_received) * 8 * 4),
                      "comm_bytes": hist[-1]["comm_bytes"] - hist[-1]["halo_bytes"] - hist[-1]["allreduce_bytes"]}
    return out


@pytest.fixture(scope="module")
def reference(graph, tmp_path_factory) -> dict:
    return train_link(0, 1, write(graph, 1, tmp_path_factory.mktemp("link") / "p1"))


@pytest.mark.parametrize("num_parts", [2, 3, 4])
def test_p_ranks_train_what_one_rank_trains(graph, reference, tmp_path, num_parts):
    results = run_ranks(train_link, num_parts, write(graph, num_parts, tmp_path / "parts"), timeout=240)
    for other in results[1:]:
        assert other["gcn"]["metrics"] == results[0]["gcn"]["metrics"]   # every rank reports the same numbers
    for got in results:   # the endpoint fetch's bytes are counted, in fetch_bytes and comm_bytes
        for model in ("gcn", "sage"):
            recorded, expected = got[model]["fetch_bytes"]
            assert recorded == expected > 0 and got[model]["comm_bytes"] == recorded
    assert reference["gcn"]["fetch_bytes"] == (0, 0)   # one rank fetches nothing
    for model, ref in reference.items():
        got = results[0][model]
        np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, atol=1e-6, err_msg=model)
        np.testing.assert_allclose(got["metrics"], ref["metrics"], rtol=1e-5, atol=1e-6, err_msg=model)
        assert any("link_decoder" in k for k in ref["params"]) == (model == "sage")   # mlp has weights
        for key, value in ref["params"].items():
            torch.testing.assert_close(got["params"][key], value, rtol=1e-5, atol=1e-5)
    assert reference["gcn"]["loss"][-1] < reference["gcn"]["loss"][0]


def test_negatives_are_keyed_by_original_ids_not_the_partition(graph, tmp_path):
    import gnn_dist
    from gnn_dist.link import LinkEdges

    part = gnn_dist.load_partition(write(graph, 1, tmp_path / "p1"))
    edges = LinkEdges.from_partition(part)
    o = edges.original["train"]
    assert torch.equal(o, torch.from_numpy(graph[0].link_pairs["train"]).sort(dim=1).values) or \
        set(map(tuple, o.T.tolist())) == set(map(tuple, graph[0].link_pairs["train"].T.tolist()))
    a, b = edges.negatives("train", 0, 5, 2), edges.negatives("train", 0, 6, 2)
    assert a.shape == (o.shape[1], 2) and not torch.equal(a, b)          # a new draw each step
    assert torch.equal(a, edges.negatives("train", 0, 5, 2))              # the same draw for the same step
    # the same original pair gets the same negative (as an original id) whatever part holds it
    from gnn_dist.link.negatives import negative_destinations
    first = negative_destinations(0, 5, o[0, :1].numpy(), o[1, :1].numpy(), NUM_NODES, 2)
    back = np.argsort(edges.node_map)                                     # new global id -> original id
    assert np.array_equal(back[a[:1].numpy()], first)


def test_pair_sample_is_a_keyed_share_of_the_pairs():
    from gnn_dist.link.negatives import pair_sample

    src, dst = np.arange(20_000), (np.arange(20_000) * 7919) % 20_011
    keep = pair_sample(4, src, dst, 0.1)
    assert abs(keep.mean() - 0.1) < 0.01                              # the share asked for
    assert np.array_equal(pair_sample(4, src[::-1], dst[::-1], 0.1), keep[::-1])   # keyed by the pair, not its place
    assert not np.array_equal(pair_sample(5, src, dst, 0.1), keep)     # another seed, another sample
    assert (pair_sample(4, src, dst, 0.2) >= keep).all()               # a larger share keeps the smaller one's pairs
    assert pair_sample(4, src, dst, 1.0).all() and not pair_sample(4, src, dst, 0.0).any()


def test_metrics_against_a_direct_computation(graph, tmp_path):
    import gnn_dist
    from gnn_dist.link.negatives import EVAL_STEP, pair_sample
    from gnn_dist.scoring import roc_auc

    part = gnn_dist.load_partition(write(graph, 1, tmp_path / "p1"))
    trainer = gnn_dist.Trainer(_model(part, dropout=0.0), part, log_every=0, task="link", eval_negatives=5, hits_k=2)
    got = trainer.evaluate()
    trainer.model.eval()
    edges = trainer.task.edges
    counts = edges.global_counts
    assert counts["train"] > 4 * counts["val"] > 0
    # the training split is scored on the pairs a hash of (seed, original ids) keeps, as many as val's on average
    o = edges.original["train"].numpy()
    sampled = torch.from_numpy(pair_sample(1, o[0], o[1], counts["val"] / counts["train"]))
    assert 0 < int(sampled.sum()) < counts["train"] // 2
    with torch.no_grad():
        h = trainer.model(part, trainer._model_input())   # one part: row = new global id
        for split in SPLITS:
            keep = sampled if split == "train" else slice(None)
            src, dst = edges.pairs[split][:, keep]
            neg = edges.negatives(split, 1, EVAL_STEP[split], 5)[keep]
            pos_s = (h[src] * h[dst]).sum(-1)
            neg_s = (h[src][:, None] * h[neg]).sum(-1)
            rank = 1 + (neg_s > pos_s[:, None]).sum(1) + 0.5 * (neg_s == pos_s[:, None]).sum(1)
            assert got[f"{split}_mrr"] == pytest.approx((1 / rank.double()).mean().item(), rel=1e-9)
            assert got[f"{split}_hits@2"] == pytest.approx((rank <= 2).double().mean().item(), rel=1e-9)
            labels = np.r_[np.ones(pos_s.numel()), np.zeros(neg_s.numel())]
            assert got[f"{split}_auc"] == pytest.approx(roc_auc(np.r_[pos_s.numpy(), neg_s.reshape(-1).numpy()], labels))
    # the training loss is the BCE of the positives and one negative each, over twice the count
    trainer.model.train()
    torch.manual_seed(0)
    logits = trainer.model(trainer.pipeline.begin_step(0), trainer._model_input())
    src, dst = trainer.task.edges.pairs["train"]
    neg = trainer.task.edges.negatives("train", 1, 0, 1)[:, 0]
    want = (F.softplus(-(logits[src] * logits[dst]).sum(-1)).sum() + F.softplus((logits[src] * logits[neg]).sum(-1)).sum()) \
        / (2 * src.numel())
    assert trainer.task.train_loss(logits, part, 0).item() == pytest.approx(want.item(), rel=1e-6)


def test_link_is_refused_in_one_line_where_it_cannot_train(graph, tmp_path, capsys):
    from gnn_dist.train import main

    g, _ = graph
    plain = tmp_path / "plain"
    labelled = Graph.from_edges(np.arange(10), (np.arange(10) + 1) % 10, 10,
                                features=np.ones((10, 2), np.float32), labels=np.arange(10) % 2,
                                train_mask=np.ones(10, bool))
    write_partition(labelled, np.zeros(10, np.int32), 1, plain, method="test", method_params={}, seed=0)
    split = write(graph, 1, tmp_path / "split")
    for data, flags, message in ((str(plain), ["--task", "link"], "has none: partition with gnn-dist partition ... --edge-split"),
                                 (split, ["--task", "link", "--parallel", "layer", "--stages", "2"],
                                  "link is not supported with parallel='layer'")):
        code = main(["--validate", "--data", data, "--epochs", "1", "--hidden", "4", "--log-every", "0", *flags])
        err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
        assert code == 2 and len(err) == 1 and message in err[0], err
