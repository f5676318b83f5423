"""The compiled loops of the partitioner (numba) against the straightforward computation on
random small inputs: the streaming methods' batch loop, the CSR build's row sort, the writer's
per-edge and per-row passes, and the isolated-node count."""

from __future__ import annotations

import numpy as np
import pytest

from partitioners import Graph
from partitioners.api import warn_sparse_ids
from partitioners.format._kernels import count_part_edges, gather_row_counts
from partitioners.graph_csr import build_csr
from partitioners.methods import streaming
from partitioners.methods._stream_kernels import water_fill
from partitioners.outofcore._kernels import SHORT_ROW, insertion_sort
from partitioners.outofcore.csr_build import build_csr_on_disk
from partitioners.outofcore.scratch import Scratch


def _random_graph(rng: np.random.Generator, local: bool) -> Graph:
    n = int(rng.integers(2, 300))
    e = int(rng.integers(0, 8 * n))
    src = rng.integers(0, n, e)
    # local: sources near their destination, so batches hold chains of in-batch neighbours
    dst = np.clip(src + rng.integers(-3, 4, e), 0, n - 1) if local else rng.integers(0, n, e)
    return Graph.from_edges(src, dst, n)


@pytest.mark.parametrize("kind", ["ldg", "fennel"])
def test_the_compiled_stream_equals_the_numpy_one(kind):
    rng = np.random.default_rng(0)
    for t in range(150):
        g = _random_graph(rng, local=t % 2 == 1)
        args = dict(kind=kind, seed=t, balance=("nodes",), imbalance=float(rng.choice([0.0, 0.03, 0.5])),
                    chunk_nodes=int(rng.integers(1, 120)), batch_nodes=int(rng.integers(1, 64)),
                    progress=False)
        parts = int(rng.integers(1, min(g.num_nodes, 9) + 1))
        got = streaming._stream(g, parts, compiled=True, **args)
        assert np.array_equal(got, streaming._stream(g, parts, compiled=False, **args)), (t, args)


def test_the_compiled_stream_leaves_overfull_batches_to_numpy(monkeypatch):
    """A batch that overfills a part is settled by the numpy code (the kernel stops before it)."""
    settled = []
    decide = streaming._decide_batch
    monkeypatch.setattr(streaming, "_decide_batch", lambda *a: settled.append(a[2]) or decide(*a))
    g = Graph.from_edges(np.arange(99), np.arange(1, 100), 100)  # a path
    got = streaming._stream(g, 4, kind="fennel", seed=0, balance=("nodes",), imbalance=0.0,
                            chunk_nodes=100, batch_nodes=40, progress=False)
    assert settled and len(settled) < 3
    want = streaming._stream(g, 4, kind="fennel", seed=0, balance=("nodes",), imbalance=0.0,
                             chunk_nodes=100, batch_nodes=40, progress=False, compiled=False)
    assert np.array_equal(got, want) and np.bincount(got).tolist() == [25] * 4


def test_only_equal_weights_and_a_square_root_exponent_are_compiled():
    g = Graph.from_edges(np.array([0, 1]), np.array([1, 2]), 3)
    assert streaming._stream_weights(g, 2, ("nodes",), 0.03, None)[3] is None
    for kind, gamma, compiled in (("ldg", 2.0, True), ("fennel", 1.5, True), ("fennel", 2.0, False)):
        st = streaming._State(kind=kind, part=np.zeros(0, np.int32), load_CP=np.zeros((1, 2)),
                              mean_C=np.ones(1), bound_CP=np.ones((1, 2)), w_CN=None, left_k_C=None,
                              reserve=False, c_nodes=-1, nodes_per_part=1.0, npp_P=np.ones(2),
                              alpha=1.0, gamma=gamma)
        assert st.compiled is compiled


def test_water_fill_equals_the_numpy_one():
    rng = np.random.default_rng(1)
    for _ in range(300):
        p = int(rng.integers(1, 9))
        level = rng.integers(0, 5, p) + rng.choice([0.0, 0.5, 0.25], p)
        parts = np.sort(rng.choice(16, p, replace=False))
        k = int(rng.integers(1, 40))
        assert np.array_equal(water_fill(level, k, parts), streaming._water_fill(level, k, parts))


def test_insertion_sort_is_a_stable_sort():
    rng = np.random.default_rng(2)
    for _ in range(200):
        k = int(rng.integers(0, SHORT_ROW + 1))
        keys = rng.integers(0, 6, k).astype(np.int32)
        payload = rng.random(k).astype(np.float32)
        out, out_w = np.empty(k, np.int32), np.empty(k, np.float32)
        insertion_sort(keys, payload, True, out, out_w)
        order = np.argsort(keys, kind="stable")
        assert np.array_equal(out, keys[order]) and np.array_equal(out_w, payload[order])


@pytest.mark.parametrize("seed", range(3))
def test_the_disk_build_with_int32_counters_and_long_rows_equals_build_csr(tmp_path, seed):
    """Rows longer than the insertion sort's (a hub), counters in memory (``max_entries``)."""
    rng = np.random.default_rng(seed)
    n, e = 50, 900
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    dst[: 3 * SHORT_ROW] = 7  # row 7 holds more than SHORT_ROW entries
    w = rng.integers(0, 3, e).astype(np.float32) if seed % 2 else None
    for sym, loops, dup in ((False, False, False), (True, True, True), (True, False, False)):
        ref = build_csr(src, dst, n, None if w is None else w.copy(), symmetrize=sym,
                        remove_self_loops=loops, remove_duplicates=dup)
        with Scratch(tmp_path) as scratch:
            got = build_csr_on_disk(lambda: iter([(src[:400], dst[:400], None if w is None else w[:400]),
                                                  (src[400:], dst[400:], None if w is None else w[400:])]),
                                    n, scratch, weighted=w is not None, symmetrize=sym,
                                    remove_self_loops=loops, remove_duplicates=dup, max_entries=2 * e)
            assert np.array_equal(ref[0], got.indptr) and np.array_equal(ref[1], got.indices)
            if w is not None:
                assert np.array_equal(ref[2], got.edge_weight)
            assert list(ref[3].items()) == list(got.report.items())


def test_the_writers_passes_equal_numpy():
    rng = np.random.default_rng(3)
    for _ in range(20):
        g = _random_graph(rng, local=False)
        n, parts = g.num_nodes, 3
        assignment = rng.integers(0, parts, n).astype(np.int8)
        counts = np.zeros((n, 3), np.int32)
        mark = np.zeros(n, bool)
        cuts, halos = 0, []
        for q in range(parts):
            cuts += count_part_edges(g.indptr, g.indices, np.flatnonzero(assignment == q), assignment, q,
                                     counts, mark)
            halos.append(np.flatnonzero(mark))
            mark[:] = False
        src, dst = g.indices, np.repeat(np.arange(n), np.diff(g.indptr))
        local = assignment[src] == assignment[dst]
        assert cuts == int((~local).sum())
        assert np.array_equal(counts[:, 0], np.bincount(src[local], minlength=n))
        assert np.array_equal(counts[:, 1], np.bincount(src, minlength=n))
        assert np.array_equal(counts[:, 2], np.bincount(src[src == dst], minlength=n))
        for q in range(parts):
            assert np.array_equal(halos[q], np.unique(src[(assignment[dst] == q) & ~local]))
        rows = rng.permutation(n)[: n // 2]
        local_of = np.full(n, -1, np.int32)
        outs = [np.empty(rows.size, np.int32) for _ in range(3)]
        gather_row_counts(g.indptr, rows, counts, local_of, *outs)
        assert np.array_equal(outs[0], np.diff(g.indptr)[rows])
        assert np.array_equal(outs[1], counts[rows, 1]) and np.array_equal(outs[2], counts[rows, 2])
        assert np.array_equal(local_of[rows], np.arange(rows.size)) and (np.delete(local_of, rows) == -1).all()


def test_the_isolated_node_count_equals_the_degrees():
    rng = np.random.default_rng(4)
    for _ in range(30):
        n = int(rng.integers(1, 200))
        e = int(rng.integers(0, n))
        g = Graph.from_edges(rng.integers(0, n, e), rng.integers(0, n, e), n)
        assert warn_sparse_ids(g) == int(np.count_nonzero((g.in_degree() == 0) & (g.out_degree() == 0)))
