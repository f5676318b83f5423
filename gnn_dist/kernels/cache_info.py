"""CPU cache sizes, read once, and the block sizes the CPU kernels derive from them.

Sources, in order: ``/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}`` (Linux),
``os.sysconf("SC_LEVEL{2,3}_CACHE_SIZE")`` (glibc), then a fixed fallback. Nothing here is tuned to
one machine: the kernels ask :func:`cache_sizes` and size their blocks as fractions of it.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CacheSizes", "cache_sizes", "parse_size", "read_sysfs_caches"]

log = logging.getLogger(__name__)

FALLBACK_L2_BYTES = 1 << 20
"""Used when the L2 size cannot be read (1 MiB: a common per-core L2)."""
FALLBACK_L3_BYTES = 8 << 20
"""Used when the last-level cache size cannot be read (8 MiB)."""
SYSFS_CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True, slots=True)
class CacheSizes:
    """Data cache sizes in bytes as seen by one core, and where they were read from."""

    l2_bytes: int
    """Per-core L2 (unified or data) cache."""
    l3_bytes: int
    """Last-level cache (the L2 when there is no L3)."""
    source: str
    """``"sysfs"``, ``"sysconf"`` or ``"fallback"``."""


def parse_size(text: str) -> int:
    """Bytes from a sysfs cache size such as ``"48K"``, ``"32768K"``, ``"2M"`` or ``"1024"``.

    Raises ``ValueError`` naming the text when it is not a size.
    """
    s = text.strip().upper()
    scale = 1
    if s.endswith("B"):
        s = s[:-1]
    if s and s[-1] in "KMG":
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[s[-1]]
        s = s[:-1]
    if not s.isdigit():
        raise ValueError(f"not a cache size: {text!r} (expected digits with an optional K/M/G suffix)")
    return int(s) * scale


def read_sysfs_caches(root: Path = SYSFS_CACHE_DIR) -> dict[int, int]:
    """``{level: bytes}`` of the data/unified caches under ``root`` (empty when unreadable)."""
    sizes: dict[int, int] = {}
    try:
        entries = sorted(root.glob("index*"))
    except OSError:
        return sizes
    for entry in entries:
        try:
            kind = (entry / "type").read_text().strip()
            if kind not in ("Data", "Unified"):
                continue
            level = int((entry / "level").read_text().strip())
            sizes[level] = max(sizes.get(level, 0), parse_size((entry / "size").read_text()))
        except (OSError, ValueError):
            continue
    return sizes


def _sysconf(name: str) -> int:
    try:
        value = os.sysconf(name)
    except (ValueError, OSError, AttributeError):
        return 0
    return int(value) if value and value > 0 else 0


@functools.cache
def cache_sizes() -> CacheSizes:
    """The L2 and last-level cache sizes of this machine (read once, then cached)."""
    sysfs = read_sysfs_caches()
    if sysfs.get(2):
        l2 = sysfs[2]
        result = CacheSizes(l2_bytes=l2, l3_bytes=sysfs.get(3, l2), source="sysfs")
    elif _sysconf("SC_LEVEL2_CACHE_SIZE"):
        l2 = _sysconf("SC_LEVEL2_CACHE_SIZE")
        result = CacheSizes(l2_bytes=l2, l3_bytes=_sysconf("SC_LEVEL3_CACHE_SIZE") or l2, source="sysconf")
    else:
        result = CacheSizes(l2_bytes=FALLBACK_L2_BYTES, l3_bytes=FALLBACK_L3_BYTES, source="fallback")
    log.debug("CPU caches: L2 %d KiB, L3 %d KiB (from %s)", result.l2_bytes >> 10, result.l3_bytes >> 10,
              result.source)
    return result
