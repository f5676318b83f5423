"""Link prediction on relations with DistMult (issue 34): P = 2 and 3 ranks train what one rank
trains (every epoch's loss and metrics, the shared weights, the decoder's diagonals, every
learnable row and every output embedding) with R-GCN, learnable rows, dropout and Adam; the
corruptions are of the right node type and do not depend on the partition; the metrics equal a
direct numpy computation; a homogeneous folder trains DistMult as one relation.

The typed graph: ``user`` (featured), ``item`` and ``tag`` (featureless: learnable rows),
relations ``buys`` (user -> item), ``follows`` (user -> user), ``tagged`` (item -> tag) with
their reverses and repeated edges; the split holds out triples of ``buys`` and ``follows``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mp_utils import run_ranks

EPOCHS = 3
SPLITS = ("train", "val", "test")
KEYS = [f"{s}_{m}" for s in SPLITS for m in ("mrr", "hits@3", "auc")]


def make_graph():
    from partitioners.hetero import HeteroGraph
    from partitioners.hetero.link_split import typed_edge_split

    rng = np.random.default_rng(5)
    n = {"user": 40, "item": 30, "tag": 6}
    buys = (rng.integers(0, 40, 160), rng.integers(0, 30, 160))
    buys = (np.r_[buys[0], buys[0][:5]], np.r_[buys[1], buys[1][:5]])   # repeated edges
    g = HeteroGraph(n, {("user", "buys", "item"): buys,
                        ("user", "follows", "user"): (rng.integers(0, 40, 90), rng.integers(0, 40, 90)),
                        ("item", "tagged", "tag"): (rng.integers(0, 30, 50), rng.integers(0, 6, 50))},
                    features={"user": rng.standard_normal((40, 4)).astype(np.float32)}).add_reverse()
    return typed_edge_split(g, (0.7, 0.15, 0.15), seed=2, relations=["buys", "follows"])


def write(num_parts: int, out) -> str:
    from partitioners.api import partition_graph

    partition_graph(make_graph(), num_parts, "random", out, seed=num_parts)
    return str(out)


def _trainer(part, dropout: float = 0.3):
    import gnn_dist
    from gnn_dist.config import ModelConfig
    from gnn_dist.models import build_model
    from gnn_dist.hetero.part import TypedPart  # noqa: F401  (the part's typed side)

    torch.manual_seed(0)
    model = build_model(ModelConfig(model="rgcn", hidden=8, layers=2, dropout=dropout, seed=3, embedding_dim=6),
                        in_dim=part.feature_dim, out_dim=8, typed=part.typed)
    return gnn_dist.Trainer(model, part, lr=0.03, log_every=0, task="link", decoder="distmult",
                            eval_negatives=6, hits_k=3)


def train_distmult(rank: int, world_size: int, path: str) -> dict:
    import gnn_dist
    from gnn_dist.hetero import is_per_rank

    part = gnn_dist.load_partition(path)
    trainer = _trainer(part)
    hist = trainer.fit(EPOCHS)
    model = trainer.model
    emb = model.embedding
    rows = {(int(t), int(i)): emb.weights[k][j].detach().clone()
            for k, t in enumerate(emb.types) for j, i in enumerate(emb.ids(k).tolist())}
    model.eval()
    with torch.no_grad():
        out = model(part, trainer._model_input())
    ids = part.original_ids[:part.num_inner].tolist()
    return {"loss": [h["train_loss"] for h in hist], "metrics": [[h[k] for k in KEYS] for h in hist],
            "params": {k: v.detach().clone() for k, v in model.named_parameters() if not is_per_rank(v)},
            "rows": rows, "out": {i: out[j].clone() for j, i in enumerate(ids)}}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    return run_ranks(train_distmult, 1, write(1, tmp_path_factory.mktemp("dm") / "p1"), timeout=240)[0]


@pytest.mark.parametrize("num_parts", [2, 3])
def test_p_ranks_train_what_one_rank_trains(reference, tmp_path, num_parts):
    results = run_ranks(train_distmult, num_parts, write(num_parts, tmp_path / "parts"), timeout=240)
    got = results[0]
    for other in results[1:]:
        assert other["metrics"] == got["metrics"] and other["loss"] == got["loss"]
    np.testing.assert_allclose(got["loss"], reference["loss"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["metrics"], reference["metrics"], rtol=1e-5, atol=1e-6)
    assert "link_decoder.weight" in reference["params"]   # the diagonals: shared, all-reduced weights
    for key, value in reference["params"].items():
        torch.testing.assert_close(got["params"][key], value, rtol=1e-5, atol=1e-5, msg=lambda m, k=key: f"{k}: {m}")
    rows, out = {}, {}
    for r in results:
        assert not set(rows) & set(r["rows"]), "a learnable row held by two ranks"
        rows.update(r["rows"])
        out.update(r["out"])
    assert rows.keys() == reference["rows"].keys() and out.keys() == reference["out"].keys()
    for key, value in reference["rows"].items():
        torch.testing.assert_close(rows[key], value, rtol=1e-5, atol=1e-5, msg=lambda m, k=key: f"row {k}: {m}")
    for key, value in reference["out"].items():
        torch.testing.assert_close(out[key], value, rtol=1e-5, atol=1e-5, msg=lambda m, k=key: f"node {k}: {m}")


def test_the_diagonals_learn(reference):
    """Guards the comparison: the diagonals move from their ones, one row per relation."""
    w = reference["params"]["link_decoder.weight"]
    assert w.shape == (6, 8)   # 3 relations and their reverses, the embedding width
    assert (w - 1).abs().max() > 1e-3
    assert reference["loss"][-1] < reference["loss"][0]


def corruption_draws(rank: int, world_size: int, path: str) -> dict:
    """This rank's triples (original ids) with their training corruption (epoch 4) and their
    validation corruptions, as (anchor, corrupted) original ids."""
    import gnn_dist
    from gnn_dist.link import LinkEdges

    edges = LinkEdges.from_partition(gnn_dist.load_partition(path))
    back = np.argsort(edges.node_map)   # new global id -> original id

    def triples(h, t, r):
        return [(int(a), int(c), int(b)) for a, b, c in zip(back[h.numpy()], back[t.numpy()], r.numpy())]

    train = edges.train_pairs(0, 4)
    pos, (tails, heads) = edges.eval_pairs(edges.sample("val", 1.0, 0), "val", 0, 5)
    assert torch.equal(tails[0], pos[0]) and torch.equal(heads[0], pos[1])   # the anchors: the ends kept
    return {"train": dict(zip(triples(*train[0]), zip(back[train[1][0].numpy()].tolist(),
                                                       back[train[1][1].numpy()].tolist()))),
            "val": dict(zip(triples(*pos), zip(back[tails[1].numpy()].tolist(), back[heads[1].numpy()].tolist())))}


def test_corruptions_are_of_the_end_type_and_partition_free(tmp_path):
    g = make_graph()
    rels = g.relations
    off = dict(zip(g.node_types, g.type_offsets[:-1].tolist()))

    def span(t):
        return off[t], off[t] + g.num_nodes_dict[t]

    drawn = {}
    for p in (1, 3):
        drawn[p] = {"train": {}, "val": {}}
        for r in run_ranks(corruption_draws, p, write(p, tmp_path / f"p{p}"), timeout=240):
            for k in drawn[p]:
                drawn[p][k].update(r[k])
    assert drawn[1] == drawn[3]   # every triple's corruptions, the same whatever the parts
    sides = set()
    for (h, r, t), (anchor, bad) in drawn[1]["train"].items():
        assert anchor in (h, t)
        side = 1 if anchor == t and anchor != h else 0   # a head corruption keeps the tail
        lo, hi = span(rels[r][0] if side else rels[r][2])
        assert lo <= bad < hi, "a corruption of the wrong type"
        sides.add(side)
    assert sides == {0, 1}   # heads and tails are both corrupted
    for (h, r, t), (tails, heads) in drawn[1]["val"].items():
        assert all(span(rels[r][2])[0] <= x < span(rels[r][2])[1] for x in tails)
        assert all(span(rels[r][0])[0] <= x < span(rels[r][0])[1] for x in heads)


def test_metrics_against_a_direct_computation(tmp_path):
    import gnn_dist
    from gnn_dist.link.negatives import EVAL_STEP, typed_corruptions

    part = gnn_dist.load_partition(write(1, tmp_path / "p1"))
    trainer = _trainer(part, dropout=0.0)
    with torch.no_grad():
        trainer.model.link_decoder.weight.uniform_(-1, 2)   # diagonals other than ones
    got = trainer.evaluate()
    trainer.model.eval()
    edges = trainer.task.edges
    with torch.no_grad():
        h = trainer.model(part, trainer._model_input()).double().numpy()   # one part: row = new global id
    w = trainer.model.link_decoder.weight.detach().double().numpy()
    g = make_graph()
    tid = {t: i for i, t in enumerate(g.node_types)}
    ends = np.array([[[g.type_offsets[tid[d]], g.num_nodes_dict[d]], [g.type_offsets[tid[s]], g.num_nodes_dict[s]]]
                     for s, _, d in g.relations])
    nm = np.asarray(edges.node_map)
    for split in ("val", "test"):
        o, rel = edges.original[split].numpy(), edges.triples.relations[split].numpy()
        head, tail = nm[o[0]], nm[o[1]]
        score = lambda a, b, r: np.float32((h[a] * w[r] * h[b]).sum(-1))   # noqa: E731  (as the task: float32)
        pos = score(head, tail, rel)
        ranks = []
        for side, anchor in ((0, head), (1, tail)):
            span = ends[rel, side]
            neg = nm[typed_corruptions(trainer.task.seed, EVAL_STEP[split], o[0], o[1], rel, np.full(rel.size, side), span[:, 0],
                                       span[:, 1], 6)]
            s = np.float32((h[anchor][:, None] * w[rel][:, None] * h[neg]).sum(-1))
            ranks.append(1 + (s > pos[:, None]).sum(1) + 0.5 * (s == pos[:, None]).sum(1))
        rank = np.concatenate(ranks)
        assert rank.size == 2 * rel.size > 0
        assert got[f"{split}_mrr"] == pytest.approx((1 / rank).mean(), rel=1e-9)
        assert got[f"{split}_hits@3"] == pytest.approx((rank <= 3).mean(), rel=1e-9)


def test_distmult_on_a_homogeneous_folder_is_one_relation(tmp_path):
    """One diagonal ``[1, D]``: the homogeneous pairs scored as relation 0."""
    import gnn_dist
    from gnn_dist.config import ModelConfig
    from gnn_dist.models import build_model
    from partitioners import Graph
    from partitioners.format.writer import write_partition
    from partitioners.io.edge_split import with_edge_split

    rng = np.random.default_rng(0)
    g = Graph.from_edges(rng.integers(0, 50, 300), rng.integers(0, 50, 300), 50, symmetrize=True,
                         features=rng.standard_normal((50, 4)).astype(np.float32), remove_self_loops=True,
                         remove_duplicates=True)
    g, record = with_edge_split(g, (0.8, 0.1, 0.1), seed=0)
    write_partition(g, np.zeros(50, np.int32), 1, tmp_path / "h", method="test", method_params={}, seed=0,
                    extra_meta={"edge_split": record})
    part = gnn_dist.load_partition(str(tmp_path / "h"))
    torch.manual_seed(0)
    model = build_model(ModelConfig(model="gcn", hidden=8, layers=2, dropout=0.0, seed=1), in_dim=4, out_dim=8)
    trainer = gnn_dist.Trainer(model, part, lr=0.05, log_every=0, task="link", decoder="distmult", eval_negatives=4)
    hist = trainer.fit(2)
    w = trainer.model.link_decoder.weight
    assert w.shape == (1, 8) and (w - 1).abs().max() > 1e-4
    assert hist[-1]["train_loss"] < hist[0]["train_loss"] + 1.0 and np.isfinite(hist[-1]["val_mrr"])
