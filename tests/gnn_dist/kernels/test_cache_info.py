"""Cache sizes from sysfs / sysconf / fallback, and the block sizes derived from them."""

from __future__ import annotations

import numpy as np
import pytest

from gnn_dist.kernels import cache_info
from gnn_dist.kernels.cache_info import CacheSizes, parse_size, read_sysfs_caches
from kernel_cases import patch_caches


def test_parse_size():
    assert parse_size("48K") == 48 << 10
    assert parse_size("32768K\n") == 32 << 20
    assert parse_size("2M") == 2 << 20
    assert parse_size("1024") == 1024
    with pytest.raises(ValueError, match=r"not a cache size: 'big'"):
        parse_size("big")


def _fake_cache(root, index, level, kind, size):
    d = root / f"index{index}"
    d.mkdir()
    (d / "level").write_text(f"{level}\n")
    (d / "type").write_text(f"{kind}\n")
    (d / "size").write_text(f"{size}\n")


def test_read_sysfs(tmp_path):
    _fake_cache(tmp_path, 0, 1, "Data", "48K")
    _fake_cache(tmp_path, 1, 1, "Instruction", "32K")
    _fake_cache(tmp_path, 2, 2, "Unified", "1024K")
    _fake_cache(tmp_path, 3, 3, "Unified", "32768K")
    assert read_sysfs_caches(tmp_path) == {1: 48 << 10, 2: 1 << 20, 3: 32 << 20}
    assert read_sysfs_caches(tmp_path / "missing") == {}


def test_fallback_when_nothing_readable(monkeypatch):
    monkeypatch.setattr(cache_info, "read_sysfs_caches", lambda root=None: {})
    monkeypatch.setattr(cache_info, "_sysconf", lambda name: 0)
    cache_info.cache_sizes.cache_clear()
    try:
        sizes = cache_info.cache_sizes()
        assert sizes == CacheSizes(l2_bytes=cache_info.FALLBACK_L2_BYTES, l3_bytes=cache_info.FALLBACK_L3_BYTES,
                                   source="fallback")
    finally:
        cache_info.cache_sizes.cache_clear()
    assert cache_info.cache_sizes().l3_bytes >= cache_info.cache_sizes().l2_bytes > 0


def test_block_sizes_follow_the_cache(monkeypatch):
    numba_cpu = pytest.importorskip("gnn_dist.kernels.numba_cpu")
    patch_caches(monkeypatch, l2_bytes=1 << 20, l3_bytes=16 << 20)
    # 10^5 even rows of 512 B: L2_FRACTION of 1 MiB holds 1024 of them -> 98 groups
    even = np.arange(0, 10**6 + 1, 10)
    assert len(numba_cpu.row_groups(even, 512, num_threads=2)) - 1 == -(-10**5 // int((1 << 20) * numba_cpu.L2_FRACTION // 512))
    # row groups: contiguous, cover all rows, balanced by entries + rows
    degrees = np.array([1000] + [1] * 999)
    indptr = np.concatenate([[0], np.cumsum(degrees)])
    groups = numba_cpu.row_groups(indptr, 512, num_threads=2)
    assert groups[0] == 0 and groups[-1] == 1000 and bool((np.diff(groups) > 0).all())
    assert groups[1] <= 2     # the heavy first row gets a group (almost) of its own
    assert numba_cpu.row_groups(np.zeros(1, dtype=np.int64), 512, 2).tolist() == [0]
