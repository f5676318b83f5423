"""FeatureStore against direct indexing of the concatenated rows: every storage, budget, order,
dtype and segment layout; the counters, access counting and re-ranking; the errors."""

from __future__ import annotations

import gc
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnn_dist.cache import STORAGES, FeatureStore, RowInfo

ROWS = (23, 9)  # inner rows, halo rows
S = sum(ROWS)
F = 5
DEVICES = ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]  # as PyG's withCUDA: only what is here


def make_segments(layout: str, dtype: str, tmp_path: Path, rows: tuple[int, ...] = ROWS, seed: int = 0):
    """``(segments, reference [S, F] CPU tensor)``.

    Layouts: ``numpy`` (one array), ``memmap+tensor`` (an ``np.memmap`` of a saved ``.npy``,
    then a torch tensor), ``tensor+tensor``. ``bfloat16`` rows are torch tensors only.
    """
    gen = torch.Generator().manual_seed(seed)
    ref = torch.randn((sum(rows), F), generator=gen).to(getattr(torch, dtype))
    parts = list(torch.split(ref, list(rows)))
    if layout == "tensor+tensor" or dtype == "bfloat16":
        return [p.clone() for p in parts], ref
    if layout == "numpy":
        return [ref.numpy().copy()], ref
    path = tmp_path / "features.npy"
    np.save(path, parts[0].numpy())
    inner = np.load(path, mmap_mode="r")
    assert isinstance(inner, np.memmap)
    return [inner, parts[1].clone()] + [p.clone() for p in parts[2:]], ref


def make_order(kind: str, num_cached: int, seed: int = 1) -> np.ndarray | None:
    """``identity`` (None), ``shuffled_prefix`` (rows [0, C) first, each half shuffled: still a
    prefix), ``random`` (a random permutation: a slot map) or ``reversed``."""
    rng = np.random.default_rng(seed)
    if kind == "identity":
        return None
    if kind == "shuffled_prefix":
        c = min(num_cached, S)
        return np.concatenate([rng.permutation(c), c + rng.permutation(S - c)])
    if kind == "random":
        return rng.permutation(S)
    return np.arange(S)[::-1].copy()


def budget_rows(budget: str) -> tuple[int | None, int]:
    """``(budget_bytes in rows, expected C)`` for a named budget (row_bytes applied by the caller)."""
    return {"zero": (0, 0), "partial": (11, 11), "all": (S, S), "over": (3 * S, S), "none": (None, S)}[budget]


def expected_cached(order: np.ndarray | None, num_cached: int) -> torch.Tensor:
    """``[S]`` bool: rows the device tier should hold."""
    top = np.arange(S) if order is None else order
    mask = torch.zeros(S, dtype=torch.bool)
    mask[torch.from_numpy(top[:num_cached].copy())] = True
    return mask


def check_store(store: FeatureStore, ref: torch.Tensor, cached: torch.Tensor, device: str, seed: int = 2) -> None:
    """gather and gather_range equal indexing ``ref``; hits count exactly the cached rows."""
    gen = torch.Generator().manual_seed(seed)
    requests = [
        torch.randint(0, S, (40,), generator=gen),  # repeats, unsorted
        torch.arange(S),
        torch.arange(S).flip(0),
        torch.tensor([S - 1, 0, S - 1, 0], dtype=torch.int32),
        torch.empty(0, dtype=torch.int64),
    ]
    for ids in requests:
        store.reset_stats()
        out = store.gather(ids.to(device))
        assert out.dtype == ref.dtype and out.device.type == torch.device(device).type
        assert out.shape == (ids.shape[0], F)
        torch.testing.assert_close(out.cpu(), ref[ids.long()], rtol=0, atol=0)
        hits = int(cached[ids.long()].sum())
        assert (store.hits, store.misses) == (hits, ids.shape[0] - hits)
        assert store.h2d_bytes == (ids.shape[0] - hits) * store.row_bytes
    c = store.cached_rows
    for start, stop in [(0, S), (0, c), (max(c - 2, 0), min(c + 3, S)), (c, S), (3, 3), (S, S), (ROWS[0] - 1, S)]:
        store.reset_stats()
        out = store.gather_range(start, stop)
        assert out.dtype == ref.dtype and out.shape == (stop - start, F)
        torch.testing.assert_close(out.cpu(), ref[start:stop], rtol=0, atol=0)
        hits = int(cached[start:stop].sum())
        assert (store.hits, store.misses) == (hits, stop - start - hits)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("order_kind", ["identity", "shuffled_prefix", "random", "reversed"])
@pytest.mark.parametrize("budget", ["zero", "partial", "all", "over", "none"])
@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("layout", ["numpy", "memmap+tensor"])
def test_gather_equals_indexing(layout, storage, budget, order_kind, device, tmp_path) -> None:
    segments, ref = make_segments(layout, "float32", tmp_path)
    budget_in_rows, num_cached = budget_rows(budget)
    row_bytes = F * 4
    order = make_order(order_kind, num_cached)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # storage="device" warns that the budget is ignored
        store = FeatureStore(segments, device=device, storage=storage, order=order,
                             budget_bytes=None if budget_in_rows is None else budget_in_rows * row_bytes + 3)
    if storage == "device":
        num_cached, order = S, None
    assert store.cached_rows == num_cached and store.cached_bytes == num_cached * row_bytes
    assert store.prefix_cached == bool(expected_cached(order, num_cached)[:num_cached].all())
    check_store(store, ref, expected_cached(order, num_cached), device)


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_dtypes_are_kept(dtype, storage, tmp_path) -> None:
    segments, ref = make_segments("memmap+tensor", dtype, tmp_path, rows=(10, 7, 15))
    itemsize = ref.element_size()
    order = make_order("random", 9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = FeatureStore(segments, storage=storage, order=order, budget_bytes=9 * F * itemsize)
    assert store.dtype == ref.dtype and store.row_bytes == F * itemsize
    cached = expected_cached(None, S) if storage == "device" else expected_cached(order, 9)
    check_store(store, ref, cached, "cpu")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(0, 6), min_size=1, max_size=4),
    data=st.data(),
)
def test_random_layouts(sizes, data) -> None:
    total = sum(sizes)
    ref = torch.arange(total * 3, dtype=torch.float32).reshape(total, 3)
    chunks = torch.split(ref, sizes)
    segments = [c.numpy().copy() if k % 2 else c.clone() for k, c in enumerate(chunks)]
    storage = data.draw(st.sampled_from(["host", "mmap"]))
    order = np.array(data.draw(st.permutations(range(total))), dtype=np.int64)
    num_cached = data.draw(st.integers(0, total))
    store = FeatureStore(segments, storage=storage, order=order, budget_bytes=num_cached * 12)
    ids = torch.tensor(data.draw(st.lists(st.integers(0, max(total - 1, 0)), max_size=20 if total else 0)),
                       dtype=torch.int64)
    assert torch.equal(store.gather(ids), ref[ids])
    start = data.draw(st.integers(0, total))
    stop = data.draw(st.integers(start, total))
    assert torch.equal(store.gather_range(start, stop), ref[start:stop])
    cached = set(order[:num_cached].tolist())
    assert store.hits == sum(int(i) in cached for i in ids) + sum(i in cached for i in range(start, stop))


def test_counters_for_a_prefix_cache() -> None:
    ref = torch.randn(S, F)
    store = FeatureStore([ref.numpy()], budget_bytes=7 * F * 4, storage="mmap")
    assert math_isnan(store.hit_rate)
    store.gather(torch.arange(S))
    assert (store.hits, store.misses, store.h2d_bytes) == (7, S - 7, (S - 7) * F * 4)
    assert store.hit_rate == pytest.approx(7 / S)
    store.gather(torch.tensor([0, 0, 6, 7]))
    assert (store.hits, store.misses) == (10, S - 7 + 1)
    stats = store.stats()
    assert stats == {
        "hits": 10, "misses": S - 6, "hit_rate": 10 / (S + 4), "h2d_bytes": (S - 6) * F * 4,
        "cached_rows": 7, "cached_bytes": 7 * F * 4, "num_rows": S, "dim": F, "dtype": "float32",
        "row_bytes": F * 4, "storage": "mmap", "device": "cpu", "prefix_cached": True,
    }
    store.reset_stats()
    assert (store.hits, store.misses, store.h2d_bytes) == (0, 0, 0) and math_isnan(store.hit_rate)


def math_isnan(value: float) -> bool:
    return value != value


def test_device_storage_all_hits_and_budget_warning() -> None:
    ref = torch.randn(S, F)
    with pytest.warns(UserWarning, match=r"budget_bytes=0 is ignored with storage='device'"):
        store = FeatureStore([ref], storage="device", budget_bytes=0, order=np.arange(S)[::-1].copy())
    assert store.cached_rows == S and store.budget_bytes is None
    store.gather(torch.randint(0, S, (50,)))
    store.gather_range(0, S)
    assert (store.hits, store.misses, store.h2d_bytes) == (50 + S, 0, 0)


@pytest.mark.parametrize("storage", ["host", "mmap"])
def test_budget_zero_all_misses(storage) -> None:
    ref = torch.randn(S, F, dtype=torch.float64)
    store = FeatureStore([ref], storage=storage, budget_bytes=F * 8 - 1)
    assert store.cached_rows == 0 and store.cached_bytes == 0
    assert torch.equal(store.gather(torch.tensor([3, 1, 3])), ref[[3, 1, 3]])
    assert torch.equal(store.gather_range(2, 9), ref[2:9])
    assert (store.hits, store.misses, store.h2d_bytes) == (0, 10, 10 * F * 8)


def test_mmap_reads_the_file_in_place(tmp_path) -> None:
    ref = np.random.default_rng(0).standard_normal((S, F)).astype(np.float16)
    np.save(tmp_path / "features.npy", ref)
    inner = np.load(tmp_path / "features.npy", mmap_mode="r")
    store = FeatureStore([inner], storage="mmap", budget_bytes=0)
    held = store._host.segments[0]
    assert held is inner and isinstance(held, np.memmap)  # the memmap itself, not a copy
    ids = torch.tensor([S - 1, 4, 4, 0])
    out = store.gather(ids)
    assert out.dtype == torch.float16
    np.testing.assert_array_equal(out.numpy(), ref[ids.numpy()])
    np.testing.assert_array_equal(store.gather_range(5, S).numpy(), ref[5:])
    # "host" storage copies the rows into memory instead
    host = FeatureStore([inner], storage="host", budget_bytes=0)
    assert not isinstance(host._host.segments[0], np.memmap)


def test_full_budget_host_storage_keeps_no_host_copy() -> None:
    ref = torch.randn(S, F)
    store = FeatureStore([ref.numpy()], storage="host")
    assert store._host is None and store.cached_rows == S
    assert torch.equal(store.gather(torch.tensor([5, 2])), ref[[5, 2]])


@pytest.mark.parametrize("storage", STORAGES)
def test_results_are_new_tensors_except_cached_ranges(storage) -> None:
    ref = torch.randn(S, F)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = FeatureStore([ref.clone()], storage=storage, budget_bytes=10 * F * 4)
    for out in (store.gather(torch.arange(S)), store.gather(torch.tensor([0, 1])), store.gather_range(5, 15)
                if storage != "device" else store.gather(torch.tensor([S - 1]))):
        out.zero_()  # writing to a result never changes the store
    assert torch.equal(store.gather(torch.arange(S)), ref)
    assert torch.equal(store.gather_range(0, S), ref)
    assert store.gather_range(0, 5)._is_view()  # inside the device tier: a view, read-only by contract


def test_access_counts_and_rerank() -> None:
    ref = torch.randn(S, F)
    store = FeatureStore([ref.numpy()], budget_bytes=3 * F * 4, count_accesses=True, storage="mmap")
    assert store.counting
    store.gather(torch.tensor([20, 20, 30, 5]))  # a row requested twice in one call counts twice
    store.gather(torch.tensor([30, 30, 12, 31]))
    store.gather_range(30, 32)
    expected = np.zeros(S, np.int64)
    np.add.at(expected, [20, 20, 30, 5, 30, 30, 12, 31, 30, 31], 1)
    np.testing.assert_array_equal(store.access_counts, expected)
    # counts: 30 -> 4, 20 -> 2, 31 -> 2, then 5 and 12 (1 each); ties keep the current order (ids)
    store.rerank()
    assert not store.counting and not store.prefix_cached and store.cached_rows == 3
    np.testing.assert_array_equal(store.order[:5], [30, 20, 31, 5, 12])
    store.reset_stats()
    store.gather(torch.arange(S))
    assert (store.hits, store.misses) == (3, S - 3)
    hits = [i for i in range(S) if _is_hit(store, i)]
    assert hits == [20, 30, 31]
    np.testing.assert_array_equal(store.access_counts, expected)  # no longer counting
    check_store(store, ref, expected_cached(store.order, 3), "cpu")


def _is_hit(store: FeatureStore, row: int) -> bool:
    before = store.hits
    store.gather(torch.tensor([row]))
    return store.hits == before + 1


def test_rerank_with_an_order_and_start_counting() -> None:
    ref = torch.randn(S, F)
    store = FeatureStore([ref], budget_bytes=4 * F * 4)
    assert store.access_counts is None and not store.counting
    with pytest.raises(ValueError, match=r"rerank\(\) without an order ranks by access counts: build the "
                                         r"store with count_accesses=True"):
        store.rerank()
    order = np.arange(S)[::-1].copy()
    store.rerank(torch.from_numpy(order))
    check_store(store, ref, expected_cached(order, 4), "cpu")
    store.start_counting()
    store.gather(torch.tensor([1, 1]))
    assert store.access_counts[1] == 2 and store.access_counts.sum() == 2
    store.rerank(np.arange(S))  # back to a prefix
    assert store.prefix_cached and not store.counting
    check_store(store, ref, expected_cached(None, 4), "cpu")


def test_from_policy() -> None:
    inner, halo = torch.randn(6, F), torch.randn(3, F)
    ref = torch.cat([inner, halo])
    info = RowInfo(num_inner=6, num_halo=3, fan_out=np.array([0, 0, 0, 0, 5, 0]),
                   local_reads=np.array([1, 1, 1, 1, 1, 1, 1, 9, 1]))
    degree = FeatureStore.from_policy([inner.numpy(), halo], "degree", info, budget="50%", storage="mmap")
    assert degree.cached_rows == 4 and degree.prefix_cached
    halo_store = FeatureStore.from_policy([inner, halo], "halo", info, budget=2 * F * 4)
    np.testing.assert_array_equal(halo_store.order[:2], [4, 0])
    check_store_small(halo_store, ref)
    none = FeatureStore.from_policy([inner, halo], "none", info, budget=None)
    assert none.cached_rows == 0
    freq = FeatureStore.from_policy([inner, halo], "frequency", info, budget=1.0)
    assert freq.counting and freq.cached_rows == 9
    with pytest.raises(ValueError, match=r"info describes 10 rows \(num_inner=7 \+ num_halo=3\), the segments hold 9"):
        FeatureStore.from_policy([inner, halo], "degree", RowInfo(num_inner=7, num_halo=3))
    with pytest.raises(ValueError, match=r"unknown cache policy 'lfu'"):
        FeatureStore.from_policy([inner, halo], "lfu", info)


def check_store_small(store: FeatureStore, ref: torch.Tensor) -> None:
    ids = torch.tensor([8, 0, 4, 4, 7])
    assert torch.equal(store.gather(ids), ref[ids])
    assert torch.equal(store.gather_range(1, 9), ref[1:9])


def test_repr() -> None:
    store = FeatureStore([np.zeros((100, 8), np.float16)], budget_bytes=1024, storage="mmap")
    assert repr(store) == ("FeatureStore(rows=100, dim=8, dtype=float16, storage='mmap', device='cpu', "
                           "cached=64 rows / 1.00 KiB)")


@pytest.mark.parametrize(
    ("segments", "kwargs", "match"),
    [
        ([], {}, r"segments must hold at least one \[rows, F\] array"),
        ([np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32)], {},
         r"segments\[1\] has 4 features per row, segments\[0\] has 3"),
        ([np.zeros((2, 3), np.float32), torch.zeros(2, 3, dtype=torch.float16)], {},
         r"segments\[1\] has dtype torch.float16, segments\[0\] has torch.float32: .* never converts"),
        ([np.zeros((2, 3)), [1, 2]], {}, r"segments\[1\] is a list; expected a numpy array"),
        ([np.zeros(3)], {}, r"segments\[0\] has shape \(3,\); expected \[rows, F\]"),
        ([np.zeros((2, 3), dtype=">f4")], {}, r"segments\[0\] has dtype >f4, which torch cannot hold"),
        ([np.zeros((2, 3))], {"storage": "disk"}, r"storage='disk' is not one of device, host, mmap"),
        ([np.zeros((2, 3))], {"budget_bytes": -1}, r"budget_bytes must be an int >= 0 or None, got -1"),
        ([np.zeros((2, 3))], {"budget_bytes": "4GB"}, r"got '4GB' \(parse a '4GB'-style size with"),
        ([np.zeros((3, 3))], {"order": np.array([0, 1])}, r"order must be a 1-D integer permutation of \[0, 3\)"),
        ([np.zeros((3, 3))], {"order": np.array([0, 1, 1])}, r"every row id exactly once"),
        ([np.zeros((3, 3))], {"order": np.array([0.0, 1, 2])}, r"dtype float64"),
    ],
)
def test_constructor_errors(segments, kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        FeatureStore(segments, **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error")
def test_pin_memory_needs_cuda() -> None:
    with pytest.raises(ValueError, match=r"pin_memory=True needs CUDA"):
        FeatureStore([np.zeros((2, 3))], pin_memory=True)


def test_gather_errors() -> None:
    store = FeatureStore([np.zeros((S, F), np.float32)], budget_bytes=0)
    with pytest.raises(ValueError, match=rf"row id {S} is out of range: the store holds {S} rows"):
        store.gather(torch.tensor([0, S, 1]))
    with pytest.raises(ValueError, match=r"row id -1 is out of range"):
        store.gather(np.array([-1]))
    with pytest.raises(ValueError, match=r"ids must be a 1-D integer tensor, got shape \(2, 1\)"):
        store.gather(torch.zeros(2, 1, dtype=torch.long))
    with pytest.raises(ValueError, match=r"dtype torch.float32"):
        store.gather(torch.zeros(2))
    with pytest.raises(ValueError, match=r"dtype torch.bool"):
        store.gather(torch.zeros(2, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"got a list"):
        store.gather([1, 2])
    with pytest.raises(ValueError, match=rf"gather_range\(3, {S + 1}\): need 0 <= start <= stop <= {S}"):
        store.gather_range(3, S + 1)
    with pytest.raises(ValueError, match=r"gather_range\(4, 3\)"):
        store.gather_range(4, 3)
    with pytest.raises(ValueError, match=r"gather_range: start must be an int, got 1.0"):
        store.gather_range(1.0, 3)
    assert (store.hits, store.misses) == (0, 0)


def test_host_tier_is_pinned_in_place_and_unpinned_with_the_store(monkeypatch) -> None:
    """cudaHostRegister (not the power-of-two caching allocator) for the host tier; unregistered
    after a synchronisation when the store is collected. A fake cudart stands in for CUDA."""
    calls = []

    class FakeCudart:
        @staticmethod
        def cudaHostRegister(ptr: int, num_bytes: int, flags: int) -> int:
            calls.append(("register", ptr, num_bytes, flags))
            return 0

        @staticmethod
        def cudaHostUnregister(ptr: int) -> int:
            calls.append(("unregister", ptr))
            return 0

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "cudart", lambda: FakeCudart)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(("synchronize", device)))
    ref = torch.randn(S, F)
    store = FeatureStore([ref.numpy()], storage="host", budget_bytes=5 * F * 4, pin_memory=True)
    host = store._host.segments[0]
    assert calls == [("register", host.data_ptr(), S * F * 4, 0)]
    assert torch.equal(store.gather_range(0, S), ref)
    del store
    gc.collect()
    assert calls[1:] == [("synchronize", None), ("unregister", host.data_ptr())]
