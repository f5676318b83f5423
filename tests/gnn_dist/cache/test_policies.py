"""Cache policies and RowInfo: orders on a hand-written part, registry and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnn_dist.cache import (POLICIES, CachePolicy, FeatureStore, RowInfo, degree_order, get_policy, oracle_order,
                            register_policy)

# A part with 5 inner rows (stored by hotness) and 3 halo rows (local ids 5, 6, 7).
# Local edges' sources (CSR indices): row 6 is read 3 times, row 7 twice, row 5 once.
INDICES = np.array([1, 6, 0, 7, 6, 2, 5, 6, 7, 0, 3])
# Rows sent to peers, concatenated over peers: row 3 to three peers, row 1 to two, row 4 to one.
SEND_INDEX = np.array([1, 3, 3, 4, 1, 3])


def info() -> RowInfo:
    return RowInfo.from_graph(num_inner=5, num_halo=3, indices=INDICES, send_index=SEND_INDEX,
                              hotness=np.array([9, 7, 7, 4, 1]))


def test_row_info_from_graph() -> None:
    ri = info()
    assert ri.num_rows == 8
    np.testing.assert_array_equal(ri.local_reads, [2, 1, 1, 1, 0, 1, 3, 2])
    np.testing.assert_array_equal(ri.fan_out, [0, 2, 0, 3, 1])
    assert ri.hotness.dtype == np.int64 and ri.local_reads.dtype == np.int64
    # torch tensors are accepted too
    rt = RowInfo.from_graph(num_inner=5, num_halo=3, indices=torch.from_numpy(INDICES),
                            send_index=torch.from_numpy(SEND_INDEX).int())
    np.testing.assert_array_equal(rt.local_reads, ri.local_reads)
    np.testing.assert_array_equal(rt.fan_out, ri.fan_out)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_inner": -1, "num_halo": 0}, r"RowInfo.num_inner must be an int >= 0, got -1"),
        ({"num_inner": 2, "num_halo": 1.0}, r"RowInfo.num_halo must be an int >= 0, got 1.0"),
        ({"num_inner": 2, "num_halo": 1, "hotness": np.zeros(3)}, r"RowInfo.hotness must be a 1-D integer"),
        ({"num_inner": 2, "num_halo": 1, "fan_out": np.zeros(3, np.int64)},
         r"RowInfo.fan_out must have 2 entries, got 3"),
        ({"num_inner": 2, "num_halo": 1, "local_reads": np.zeros(2, np.int64)},
         r"RowInfo.local_reads must have 3 entries, got 2"),
        ({"num_inner": 2, "num_halo": 1, "local_reads": np.zeros((3, 1), np.int64)}, r"got shape \(3, 1\)"),
    ],
)
def test_row_info_errors(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        RowInfo(**kwargs)


def test_row_info_from_graph_range_errors() -> None:
    with pytest.raises(ValueError, match=r"indices must lie in \[0, 8\).*got values in \[0, 8\]"):
        RowInfo.from_graph(num_inner=5, num_halo=3, indices=np.array([0, 8]))
    with pytest.raises(ValueError, match=r"send_index must lie in \[0, 5\) \(num_inner\)"):
        RowInfo.from_graph(num_inner=5, num_halo=3, send_index=np.array([5]))


# A part as the partitioner writes it: hotness = local reads + fan-out, descending. Inner rows
# 0..4 are read [3, 1, 2, 0, 0] times by local edges and sent to [1, 2, 0, 1, 0] peers (hotness
# [4, 3, 2, 1, 0]); halo rows 5, 6, 7 are read [1, 3, 2] times.
PART_INDICES = np.array([6, 0, 7, 2, 0, 6, 5, 1, 2, 7, 6, 0])
PART_SEND_INDEX = np.array([0, 1, 1, 3])  # peer A reads rows 0 and 1, peer B rows 1 and 3


def part_info(**overrides) -> RowInfo:
    ri = RowInfo.from_graph(num_inner=5, num_halo=3, indices=PART_INDICES, send_index=PART_SEND_INDEX,
                            hotness=np.array([4, 3, 2, 1, 0]))
    for name, value in overrides.items():
        setattr(ri, name, value)
    return ri


def test_degree_ranks_inner_and_halo_rows_by_reads_per_epoch() -> None:
    ri = part_info()
    np.testing.assert_array_equal(ri.hotness, ri.local_reads[:5] + ri.fan_out)  # the format's hotness
    order = get_policy("degree").order(ri)
    assert order.dtype == np.int64
    # reads per epoch: inner = local reads + 1 (its own destination) = [4, 2, 3, 1, 1], halo = [1, 3, 2];
    # ties keep the stored order (inner rows first)
    np.testing.assert_array_equal(order, [0, 2, 6, 1, 7, 3, 4, 5])


def test_degree_reads_are_the_counts_of_a_pass_that_reads_each_edge_once() -> None:
    """One pass over the part's destinations, each reading itself and its in-edges' sources: the
    access counts are the reads, so degree's order is the oracle's."""
    ri = part_info()
    counts = np.bincount(np.concatenate([np.arange(5), PART_INDICES]), minlength=8)
    np.testing.assert_array_equal(degree_order(ri), oracle_order(counts))


def test_degree_without_reads_keeps_inner_rows_first() -> None:
    """Without hotness, fan-out or local reads the inner rows' reads are unknown: stored order, then
    halo rows by local reads (stored order without them)."""
    for missing in ("hotness", "fan_out"):
        np.testing.assert_array_equal(degree_order(part_info(**{missing: None})), [0, 1, 2, 3, 4, 6, 7, 5])
    np.testing.assert_array_equal(degree_order(RowInfo(num_inner=2, num_halo=2)), [0, 1, 2, 3])


def test_degree_keeps_the_prefix_when_inner_rows_are_the_hottest() -> None:
    """Halo rows read less than every inner row: the order is the stored one and the store's tier
    is the prefix [0, C)."""
    ri = RowInfo(num_inner=4, num_halo=2, hotness=np.array([6, 4, 2, 1]), fan_out=np.array([1, 0, 1, 0]),
                 local_reads=np.array([5, 4, 1, 1, 1, 1]))
    np.testing.assert_array_equal(degree_order(ri), np.arange(6))
    rows = torch.randn(6, 3)
    store = FeatureStore.from_policy([rows[:4], rows[4:]], "degree", ri, budget=3 * 3 * 4)
    assert store.prefix_cached and store.cached_rows == 3
    torch.testing.assert_close(store.gather(torch.arange(6)), rows)
    # a halo row read more than the third inner row moves into the tier: no prefix any more
    ri.local_reads = np.array([5, 4, 1, 1, 4, 1])
    np.testing.assert_array_equal(degree_order(ri), [0, 1, 4, 2, 3, 5])
    store = FeatureStore.from_policy([rows[:4], rows[4:]], "degree", ri, budget=3 * 3 * 4)
    assert not store.prefix_cached
    np.testing.assert_array_equal(np.sort(store.order[:store.cached_rows]), [0, 1, 4])
    torch.testing.assert_close(store.gather(torch.tensor([4, 5, 0, 2])), rows[[4, 5, 0, 2]])


def test_halo_ties_keep_stored_order() -> None:
    np.testing.assert_array_equal(get_policy("halo").order(info()), [3, 1, 4, 0, 2, 6, 7, 5])
    ties = RowInfo(num_inner=4, num_halo=0, fan_out=np.array([1, 2, 1, 2]))
    np.testing.assert_array_equal(get_policy("halo").order(ties), [1, 3, 0, 2])


def test_halo_needs_fan_out() -> None:
    with pytest.raises(ValueError, match=r"'halo' cache policy needs RowInfo.fan_out"):
        get_policy("halo").order(RowInfo(num_inner=2, num_halo=0))


def test_frequency_and_none() -> None:
    freq, none = get_policy("frequency"), get_policy("none")
    assert freq.counts_accesses and freq.uses_device_cache
    np.testing.assert_array_equal(freq.order(info()), degree_order(info()))
    assert not none.uses_device_cache and not none.counts_accesses
    assert not get_policy("degree").counts_accesses and not get_policy("halo").counts_accesses


@pytest.mark.parametrize("name", ["degree", "halo", "frequency", "none"])
def test_every_policy_orders_a_permutation(name: str) -> None:
    policy = get_policy(name)
    assert isinstance(policy, CachePolicy) and policy.name == name
    order = policy.order(info())
    np.testing.assert_array_equal(np.sort(order), np.arange(8))
    empty = RowInfo(num_inner=0, num_halo=0, fan_out=np.zeros(0, np.int64), local_reads=np.zeros(0, np.int64))
    assert policy.order(empty).shape == (0,)


def test_get_policy_error_lists_the_names() -> None:
    with pytest.raises(ValueError, match=r"unknown cache policy 'lru'; expected one of degree, halo, "
                                         r"frequency, none \(or add one with gnn_dist.cache.register_policy\)"):
        get_policy("lru")
    with pytest.raises(ValueError, match=r"unknown cache policy None"):
        get_policy(None)


class ReversePolicy:
    name = "reverse"
    counts_accesses = False
    uses_device_cache = True

    def order(self, info: RowInfo) -> np.ndarray:
        return np.arange(info.num_rows, dtype=np.int64)[::-1].copy()


def test_register_policy() -> None:
    try:
        register_policy("reverse", ReversePolicy)
        register_policy("reverse", ReversePolicy)  # the same class again is fine
        np.testing.assert_array_equal(get_policy("reverse").order(info()), np.arange(8)[::-1])
        assert "reverse" in str(pytest.raises(ValueError, get_policy, "nope").value)
        with pytest.raises(ValueError, match=r"cache policy 'degree' is already registered \(DegreePolicy\); "
                                             r"pass overwrite=True"):
            register_policy("degree", ReversePolicy)
        register_policy("reverse", type("Other", (ReversePolicy,), {}), overwrite=True)
        assert type(get_policy("reverse")).__name__ == "Other"
    finally:
        POLICIES.pop("reverse", None)
    assert "reverse" not in POLICIES


@pytest.mark.parametrize(
    ("name", "cls", "match"),
    [
        ("", ReversePolicy, r"a cache policy name must be a non-empty str, got ''"),
        ("x", ReversePolicy(), r"cache policy 'x': .* is not a class whose instances have name"),
        ("x", dict, r"cache policy 'x': <class 'dict'> is not a class"),
    ],
)
def test_register_policy_errors(name, cls, match) -> None:
    with pytest.raises(ValueError, match=match):
        register_policy(name, cls)
    assert "x" not in POLICIES


def test_oracle_order() -> None:
    np.testing.assert_array_equal(oracle_order(np.array([1, 5, 0, 5, 2])), [1, 3, 4, 0, 2])
    np.testing.assert_array_equal(oracle_order(torch.tensor([0, 0, 1], dtype=torch.int32)), [2, 0, 1])
    assert oracle_order(np.zeros(0, np.int64)).shape == (0,)
    with pytest.raises(ValueError, match=r"counts must be >= 0, got a minimum of -1"):
        oracle_order(np.array([1, -1]))
    with pytest.raises(ValueError, match=r"counts must be a 1-D integer array"):
        oracle_order(np.ones((2, 2), np.int64))
