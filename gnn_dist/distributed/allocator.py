"""glibc malloc tuning for a training rank: fixed mmap and trim thresholds instead of dynamic ones.

Call :func:`tune_allocator` once, early in a rank's life (``gnn_dist.train.main`` does, right
after the process group and the rank's logging start, before the partition is loaded). It changes process-wide settings of the C allocator and nothing
else; results do not change, only how much freed memory the process keeps and what page faults
cost.

Why. glibc starts with ``M_MMAP_THRESHOLD`` = 128 KiB and raises it, up to 32 MiB, each time an
mmapped block is freed (the *dynamic* threshold; the trim threshold follows at twice it). After
the first training step every block under 32 MiB comes from the heap, and a heap keeps what is
freed: a rank's ``[rows, width]`` temporaries (activations, gradients, halo send/receive
buffers) then stay resident and fragment the heap, and the peak grows from epoch to epoch.
Fixing the mmap threshold at :data:`DEFAULT_MMAP_THRESHOLD` (8 MiB) and the trim threshold at
twice it hands blocks that scale with the partition back to the OS when they are freed. The
blocks of 4 MiB and just above (the hash dropout's fixed-size chunk temporaries,
``gnn_dist.nn.dropout``, ``2**19`` elements x 8 B, allocated many times per step) stay on the
heap: mmapping them (a threshold of 4 MiB or less) cost a P=4 rank 2.5-3x its CPU time per
epoch for no more memory saved. The trim threshold is twice the mmap threshold (glibc's own rule
for its dynamic thresholds): a call after start-up finds it wherever the dynamic rule left it.

The cost of an mmapped block is page faults: it is fresh zeroed pages each time it is allocated,
4 KiB at a time. torch's CPU allocator can ask for 2 MiB pages instead: with
``THP_MEM_ALLOC_ENABLE=1`` in its environment (read once, at the process's first CPU tensor) it
aligns blocks of 2 MiB and more to 2 MiB and asks for huge pages (``madvise(MADV_HUGEPAGE)``),
which the kernel honours when its transparent huge page mode (:data:`THP_MODE_PATH`) is
``always`` or ``madvise``. A fresh block then costs one fault per 2 MiB. So the
tuning is applied by default only where torch's huge pages are on, and the launchers
(``gnn-dist train``, ``launch/*.sh``, ``launch/slurm.sbatch``, ``scripts/main.sh``) set
``THP_MEM_ALLOC_ENABLE=1`` for the ranks unless the user set it.

Measured (sbm-medium, 2-layer GCN, hidden 128, METIS, gloo, one torch thread, glibc 2.36,
kernel THP mode ``madvise``, 2-core machine shared with other jobs; the variants interleaved,
a run = ``benchmarks/train.py``'s one-rank peak-RSS job, then P=2, then P=4; data RSS = peak
RSS - RSS after imports, budget = ``1.1 x (single-rank data RSS / P + halo share)``; CPU =
seconds per epoch summed over ranks):

================================  ===========  ===========  ===============  ===============
variant (runs)                    P=2 data     P=4 data     P=2 CPU s/epoch  P=4 CPU s/epoch
                                  vs budget    vs budget    (all ranks)      (all ranks)
================================  ===========  ===========  ===============  ===============
glibc's defaults (7)              1.02-1.06x   1.46-1.52x   0.93 (0.90-0.95) 0.66 (0.59-0.71)
huge pages only (3)               1.08-1.12x   1.30-1.35x   0.63 (0.55-0.64) 0.60 (0.59-0.60)
tuning only (3)                   1.00-1.02x   1.25-1.26x   1.06 (0.99-1.15) 1.29 (1.18-1.31)
huge pages + tuning (7)           0.99-1.02x   1.24-1.26x   0.53 (0.50-0.61) 0.66 (0.60-0.68)
================================  ===========  ===========  ===============  ===============

(CPU: median over runs, range in brackets.) The tuning alone saves the memory but costs P=2
+15% and P=4 +97% CPU time in page faults; huge pages alone make faults cheap but keep more
freed memory; together they save the memory at glibc's default CPU time or less (P=2 -43%,
P=4 the same within noise). Counting from a *warm* baseline (after the numba kernels and the
first optimizer, ~270 MiB of fixed per-process cost that the budget divides by P), huge pages +
tuning is 0.87-0.90x (P=2) and 0.88-0.91x (P=4) of the budget, glibc's defaults 0.92-0.97x and
1.18-1.27x. Other thresholds, with glibc's 4 KiB pages (earlier runs, P=4 rank's CPU time per
epoch): fixed 128 KiB 0.57 s, 4 MiB 0.49 s, 8 MiB 0.28-0.35 s, 16 MiB 0.39 s, dynamic 0.19 s.

Environment:

- ``GNN_DIST_MALLOC_TUNING``: ``1`` tunes, ``0`` leaves glibc's defaults (also
  ``true``/``false``, ``on``/``off``, ``yes``/``no``); unset, the tuning is applied when torch's
  huge-page allocations are on for this process (``THP_MEM_ALLOC_ENABLE=1`` and the kernel's THP
  mode ``always`` or ``madvise``; see :func:`torch_huge_pages`). Any other value is a
  :class:`~.errors.DistributedConfigError` that names the variable. What was decided and why is
  logged once (info).
- The user's own settings win, one parameter at a time: ``MALLOC_MMAP_THRESHOLD_`` or
  ``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=...`` keeps this module's hands off the mmap
  threshold, ``MALLOC_TRIM_THRESHOLD_`` / ``glibc.malloc.trim_threshold`` off the trim threshold.

Elsewhere (macOS, musl, Windows: no ``mallopt`` or no ``gnu_get_libc_version`` in the C
library) :func:`tune_allocator` does nothing and says so.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..environ import launch_variables
from .errors import DistributedConfigError

__all__ = ["ENV_VAR", "THP_ENV_VAR", "THP_MODE_PATH", "DEFAULT_MMAP_THRESHOLD", "AllocatorTuning",
           "kernel_thp_mode", "torch_huge_pages", "tune_allocator"]

logger = logging.getLogger(__name__)

ENV_VAR = "GNN_DIST_MALLOC_TUNING"
"""``1`` applies the tuning, ``0`` does not; unset, it follows :func:`torch_huge_pages`."""

THP_ENV_VAR = "THP_MEM_ALLOC_ENABLE"
"""torch's switch for huge-page CPU allocations; torch accepts exactly ``0`` and ``1`` (it warns
about and ignores any other value)."""

THP_MODE_PATH = "/sys/kernel/mm/transparent_hugepage/enabled"
"""Linux's transparent huge page mode: ``always [madvise] never``, the bracketed one in force."""

DEFAULT_MMAP_THRESHOLD = 8 << 20
"""Blocks of at least this many bytes are mmapped (and unmapped when freed); see the module
docstring for the measurements behind the value."""

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
"""glibc ``mallopt`` parameter numbers (``malloc.h``)."""

_TRUE = ("1", "true", "on", "yes")
_FALSE = ("0", "false", "off", "no")
_HUGE_PAGE_MODES = ("always", "madvise")
"""Kernel THP modes in which torch's ``madvise(MADV_HUGEPAGE)`` gets huge pages."""

_logged: set[str] = set()
"""Decisions already logged by this process (each is logged once)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Parameter:
    name: str
    """``mallopt`` parameter name, as in ``malloc.h``."""
    number: int
    """Its ``mallopt`` number."""
    env: str
    """The ``MALLOC_*_`` variable through which a user sets it."""
    tunable: str
    """Its ``GLIBC_TUNABLES`` name."""


_PARAMETERS = (
    _Parameter(name="M_MMAP_THRESHOLD", number=_M_MMAP_THRESHOLD, env="MALLOC_MMAP_THRESHOLD_",
               tunable="glibc.malloc.mmap_threshold"),
    _Parameter(name="M_TRIM_THRESHOLD", number=_M_TRIM_THRESHOLD, env="MALLOC_TRIM_THRESHOLD_",
               tunable="glibc.malloc.trim_threshold"),
)


@dataclass(frozen=True, kw_only=True, slots=True)
class AllocatorTuning:
    """What :func:`tune_allocator` did."""

    reason: str = ""
    """Why the tuning was attempted or not (e.g. ``"GNN_DIST_MALLOC_TUNING=0"``)."""
    applied: dict[str, int] = field(default_factory=dict)
    """``mallopt`` parameter name -> the value set (``mallopt`` returned 1)."""
    kept: dict[str, str] = field(default_factory=dict)
    """Parameter name -> the user's setting left in place (e.g. ``"MALLOC_MMAP_THRESHOLD_=131072"``)."""
    failed: dict[str, int] = field(default_factory=dict)
    """Parameter name -> the value ``mallopt`` refused (returned 0)."""
    skipped: str | None = None
    """Why nothing was attempted (turned off, torch's huge pages off, not glibc), else ``None``."""


def kernel_thp_mode(path: str | os.PathLike[str] = THP_MODE_PATH) -> str | None:
    """The kernel's transparent huge page mode (``"always"``, ``"madvise"``, ``"never"``): the
    bracketed word of ``path``; ``None`` when the file is missing or unreadable (no THP)."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    found = re.search(r"\[(\w+)\]", text)
    return found.group(1) if found else None


def torch_huge_pages(environ: Mapping[str, str] | None = None,
                     thp_mode_path: str | os.PathLike[str] = THP_MODE_PATH) -> tuple[bool, str]:
    """Whether torch's CPU allocator gets huge pages in a process with ``environ``, and why.

    On when ``THP_MEM_ALLOC_ENABLE`` is ``1`` (torch's own test: exactly ``0`` or ``1``) and the
    kernel's THP mode (read from ``thp_mode_path``) is ``always`` or ``madvise``.
    """
    environ = launch_variables() if environ is None else environ
    value = environ.get(THP_ENV_VAR)
    mode = kernel_thp_mode(thp_mode_path)
    if value != "1":
        why = "unset" if value is None else f"{value!r}, not 1"
        return False, f"{THP_ENV_VAR} is {why}"
    if mode is None:
        return False, f"{THP_ENV_VAR}=1 but no kernel THP mode ({os.fspath(thp_mode_path)} unreadable)"
    if mode not in _HUGE_PAGE_MODES:
        return False, f"{THP_ENV_VAR}=1 but the kernel's THP mode is {mode}"
    return True, f"{THP_ENV_VAR}=1, kernel THP mode {mode}"


def _decide(environ: Mapping[str, str], thp_mode_path: str | os.PathLike[str]) -> tuple[bool, str]:
    """``(tune?, why)`` from ``GNN_DIST_MALLOC_TUNING``, else from :func:`torch_huge_pages`."""
    raw = environ.get(ENV_VAR)
    if raw is None:
        on, why = torch_huge_pages(environ, thp_mode_path)
        return on, (f"{ENV_VAR} unset; torch's huge-page CPU allocations are {'on' if on else 'off'} ({why})"
                    + ("" if on else ": without them the tuning's page faults cost CPU time"))
    value = raw.strip().lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE, f"{ENV_VAR}={raw}"
    raise DistributedConfigError(
        f"environment variable {ENV_VAR}={raw!r} is not understood; set it to 1 (tune glibc's malloc "
        f"thresholds), 0 (leave glibc's defaults) or unset it (tune when torch's huge-page allocations "
        f"are on: {THP_ENV_VAR}=1 and a kernel THP mode of always or madvise)", variable=ENV_VAR)


def _user_setting(param: _Parameter, environ: Mapping[str, str]) -> str | None:
    """The user's own setting of ``param`` (``MALLOC_*_`` or ``GLIBC_TUNABLES``), else ``None``."""
    if param.env in environ:
        return f"{param.env}={environ[param.env]}"
    for item in environ.get("GLIBC_TUNABLES", "").split(":"):
        if item.split("=", 1)[0].strip() == param.tunable:
            return f"GLIBC_TUNABLES={item}"
    return None


def _glibc() -> Any | None:
    """This process's C library when it is glibc with ``mallopt``, else ``None``."""
    try:
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):  # Windows: no dlopen(NULL)
        return None
    if not (hasattr(libc, "mallopt") and hasattr(libc, "gnu_get_libc_version")):
        return None
    return libc


def _log_once(message: str) -> None:
    if message not in _logged:
        _logged.add(message)
        logger.debug(message)


def tune_allocator(environ: Mapping[str, str] | None = None, *, libc: Any | None = None,
                   mmap_threshold: int = DEFAULT_MMAP_THRESHOLD,
                   thp_mode_path: str | os.PathLike[str] = THP_MODE_PATH) -> AllocatorTuning:
    """Fix glibc's mmap threshold at ``mmap_threshold`` and its trim threshold at twice it, when
    ``GNN_DIST_MALLOC_TUNING`` says so (unset: when torch's huge-page allocations are on).

    Args:
        environ: the environment to read (default: the process's, through :mod:`gnn_dist.environ`).
        libc: the C library to call (default: this process's, when it is glibc); tests pass a
            stand-in.
        mmap_threshold: bytes from which a block is mmapped (default:
            :data:`DEFAULT_MMAP_THRESHOLD`).
        thp_mode_path: the kernel's THP mode file (default: :data:`THP_MODE_PATH`); tests pass
            their own.

    Returns:
        Why, what was set, what the user's settings kept, and why nothing was done if so.

    Raises:
        DistributedConfigError: ``GNN_DIST_MALLOC_TUNING`` is set to neither on nor off (names it).
    """
    environ = launch_variables() if environ is None else environ
    on, reason = _decide(environ, thp_mode_path)
    if not on:
        _log_once(f"allocator tuning off: {reason}")
        return AllocatorTuning(reason=reason, skipped=reason)
    libc = _glibc() if libc is None else libc
    if libc is None or not hasattr(libc, "mallopt") or not hasattr(libc, "gnu_get_libc_version"):
        _log_once(f"allocator tuning skipped ({reason}): the C library is not glibc "
                  f"(no mallopt/gnu_get_libc_version)")
        return AllocatorTuning(reason=reason, skipped="not glibc")
    values = {"M_MMAP_THRESHOLD": mmap_threshold, "M_TRIM_THRESHOLD": 2 * mmap_threshold}
    applied: dict[str, int] = {}
    kept: dict[str, str] = {}
    failed: dict[str, int] = {}
    for param in _PARAMETERS:
        user = _user_setting(param, environ)
        if user is not None:
            kept[param.name] = user
            continue
        value = values[param.name]
        if libc.mallopt(ctypes.c_int(param.number), ctypes.c_int(value)) == 1:
            applied[param.name] = value
        else:
            failed[param.name] = value
    if failed:
        logger.warning("mallopt refused %s; glibc's defaults stay for them",
                       ", ".join(f"{k}={v}" for k, v in failed.items()))
    _log_once(f"allocator tuning on ({reason}): set {applied or 'nothing'}"
              + (f", kept the user's {kept}" if kept else ""))
    return AllocatorTuning(reason=reason, applied=applied, kept=kept, failed=failed)
