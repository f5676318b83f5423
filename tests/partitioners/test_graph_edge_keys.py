"""Edge features from named edge attributes: ``Graph.from_networkx(edge_attr_key=...)`` and
``Graph.from_dgl(edge_attr_key=...)`` (the latter through a stand-in: DGL is not installed)."""

from __future__ import annotations

import numpy as np
import pytest

from partitioners import Graph
from partitioners.errors import GraphError

nx = pytest.importorskip("networkx")


def _rows_by_edge(g: Graph) -> dict[tuple[int, int], list[float]]:
    src, dst = g.edges()
    return {(s, d): row for s, d, row in zip(src.tolist(), dst.tolist(), g.edge_attr.tolist())}


def test_directed_keys_are_laid_side_by_side_in_edge_order():
    d = nx.DiGraph()
    d.add_nodes_from(["a", "b", "c", "d"])
    for i, (u, v) in enumerate([("c", "a"), ("a", "b"), ("d", "c"), ("b", "d"), ("a", "d")]):
        d.add_edge(u, v, w=float(i), pos=(10.0 + i, -i), other="ignored")
    g = Graph.from_networkx(d, edge_attr_key=("w", "pos"))
    assert g.edge_attr.dtype == np.float32 and g.edge_feature_dim == 3
    ids = {v: i for i, v in enumerate(d.nodes)}
    want = {(ids[u], ids[v]): [data["w"], *data["pos"]] for u, v, data in d.edges(data=True)}
    assert _rows_by_edge(g) == want
    assert _rows_by_edge(Graph.from_networkx(d, edge_attr_key="w")) == {k: [r[0]] for k, r in want.items()}


def test_undirected_both_directions_carry_the_edges_row():
    u = nx.Graph()
    u.add_edge(0, 1, f=[1.0, 2.0])
    u.add_edge(1, 2, f=[3.0, 4.0])
    u.add_edge(2, 2, f=[5.0, 6.0])  # a self-loop, stored once
    g = Graph.from_networkx(u, edge_attr_key="f", weight_key="f2")
    assert _rows_by_edge(g) == {(0, 1): [1.0, 2.0], (1, 0): [1.0, 2.0], (1, 2): [3.0, 4.0],
                                (2, 1): [3.0, 4.0], (2, 2): [5.0, 6.0]}
    assert g.num_edges == 5


def _one_edge(**data) -> "nx.DiGraph":
    d = nx.DiGraph()
    d.add_edge(0, 1, f=1.0, v=[1.0, 2.0])
    d.add_edge(1, 2, **data)
    return d


@pytest.mark.parametrize("data, keys, message", [
    ({"v": [1.0, 2.0]}, "f", r"edge \(1, 2\) has no attribute 'f'; edge_attr_key='f' needs it on every edge"),
    ({"f": 1.0, "v": [1.0]}, ("f", "v"), r"edge \(1, 2\): attribute 'v' has 1 values, but the first edge's has 2"),
    ({"f": "red"}, "f", r"edge \(1, 2\): attribute 'f' = 'red' is not a number or a sequence of numbers"),
    ({"f": float("nan")}, "f", r"edge_attr\[1, 0\] = nan is not finite"),
    ({"f": 1.0}, 3, r"edge_attr_key must be an edge attribute name or a list of names, got 3"),
])
def test_bad_edge_attributes_are_one_line(data, keys, message):
    with pytest.raises(GraphError, match=message):
        Graph.from_networkx(_one_edge(**data), edge_attr_key=keys)


def test_a_key_and_an_array_together_are_refused():
    with pytest.raises(GraphError, match=r"pass edge_attr_key .* or edge_attr .*, not both"):
        Graph.from_networkx(_one_edge(f=2.0), edge_attr_key="f", edge_attr=np.zeros((2, 1)))


def test_dgl_edata_in_edge_id_order():
    torch = pytest.importorskip("torch")

    class FakeDGL:  # the DGLGraph calls from_dgl makes
        ndata: dict = {}
        edata = {"h": torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 1.0]])}

        def edges(self):
            return torch.tensor([2, 0, 1]), torch.tensor([0, 1, 2])

        def num_nodes(self):
            return 3

    g = Graph.from_dgl(FakeDGL(), edge_attr_key="h")
    assert _rows_by_edge(g) == {(2, 0): [1.0, 0.0], (0, 1): [2.0, 0.0], (1, 2): [3.0, 1.0]}
    with pytest.raises(GraphError, match=r"the DGL graph has no edata 'w' \(edge_attr_key\); its edge fields: \['h'\]"):
        Graph.from_dgl(FakeDGL(), edge_attr_key="w")
