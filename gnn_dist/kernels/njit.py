"""``numba.njit`` with the project's options: compiled on first use, cached on disk, no GIL."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numba

__all__ = ["cached_njit"]

log = logging.getLogger(__name__)


def cached_njit(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(cache=True, nogil=True, **options)``, falling back to no on-disk cache when
    numba finds no writable cache location (a read-only install without a usable home folder)."""
    def wrap(fn: Callable[..., Any]) -> Any:
        try:
            return numba.njit(cache=True, nogil=True, **options)(fn)
        except RuntimeError as err:  # "cannot cache function ...: no locator available"
            log.warning("numba kernel %s is compiled without an on-disk cache (%s); set NUMBA_CACHE_DIR "
                        "to a writable folder to keep compiled kernels between runs", fn.__name__, err)
            return numba.njit(cache=False, nogil=True, **options)(fn)
    return wrap
