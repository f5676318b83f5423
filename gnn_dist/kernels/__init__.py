"""Aggregation kernel backends: SpMM (and its transpose), SDDMM and edge softmax on a CSR.

Legend: ``R`` rows (outputs), ``C`` columns (inputs), ``E`` entries/edges, ``F`` features,
``H`` heads (``F = H * Fh``; head ``k`` owns feature columns ``[k Fh, (k + 1) Fh)``).

Every backend implements the same four raw (non-autograd) operations on a :class:`CSR`:

- ``spmm(csr, values [E, H] | None, x [C, F], row_scale [R] | None, col_scale [C] | None) -> [R, F]``
  (``out[r] = row_scale[r] sum_j values[eid_j] col_scale[col_j] x[col_j]``; the scales come
  together or not at all)
- ``sddmm(csr, a [R, F], b [C, F], heads, chunk_elements) -> [E, H]`` (edge order)
- ``edge_softmax(csr, score [E, H], self_score [R, H] | None) -> (alpha, alpha_self)``
- ``edge_softmax_backward(csr, alpha, alpha_self, grad, grad_self) -> (grad_score, grad_self_score)``

Backends, by name, and what each runs on CPU and on CUDA tensors:

- ``auto`` (default): CPU: numba when it imports (float32/64), else torch. CUDA: torch
  (cuSPARSE) until a GPU measurement chooses (``benchmarks/gpu_check.sh`` times both).
- ``torch``: torch.sparse CSR and gathers on both (:mod:`.torch_backend`).
- ``numba``: CPU: multi-threaded kernels with prefetched gathers (:mod:`.numba_cpu`). CUDA: torch.
- ``triton``: CUDA: fused Triton kernels (:mod:`.triton_gpu`). CPU: the ``auto`` choice, or
  the Triton kernels in Triton's interpreter when ``TRITON_INTERPRET=1`` (how they are tested).

A run resolves its choice once (:func:`resolve_kernels`: ``--kernels``, else
``GNN_DIST_KERNELS`` read by :mod:`gnn_dist.environ`, else ``auto``) into a :class:`Kernels`
object that the part's :class:`~gnn_dist.nn.Block` holds (and every block derived from it): no
aggregation reads the environment. :meth:`Kernels.for_tensor` picks the backend for a tensor's
device and dtype. Asking for ``numba`` or ``triton`` when it cannot be imported is an error at
resolution that says why; ``auto`` falls back to torch instead. Each choice is logged once. Half
and bfloat16 CPU tensors take torch (no numba kernel). Autograd lives in :mod:`gnn_dist.nn.sparse`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

import torch

from ..config.registry import register_choices
from .csr import CSR
from .torch_backend import TorchBackend

__all__ = ["CSR", "KernelBackend", "KernelBackendError", "ENV_VAR", "BACKEND_NAMES", "Kernels", "get_backend",
           "resolve_kernels", "default_kernels", "numba_available", "triton_available"]

log = logging.getLogger(__name__)

ENV_VAR = "GNN_DIST_KERNELS"
BACKEND_NAMES = ("auto", "torch", "numba", "triton")
register_choices("kernels", lambda: BACKEND_NAMES)   # --kernels (gnn_dist.config)


class KernelBackendError(ValueError):
    """A kernel backend was asked for by a bad name, or is not available here."""


class KernelBackend(Protocol):
    """What a kernel backend provides (shapes in the module docstring)."""

    name: str

    def spmm(self, csr: CSR, values: torch.Tensor | None, x: torch.Tensor, row_scale: torch.Tensor | None = None,
             col_scale: torch.Tensor | None = None) -> torch.Tensor: ...

    def sddmm(self, csr: CSR, a: torch.Tensor, b: torch.Tensor, heads: int,
              chunk_elements: int) -> torch.Tensor: ...

    def edge_softmax(self, csr: CSR, score: torch.Tensor,
                     self_score: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]: ...

    def edge_softmax_backward(self, csr: CSR, alpha: torch.Tensor, alpha_self: torch.Tensor | None,
                              grad: torch.Tensor, grad_self: torch.Tensor | None
                              ) -> tuple[torch.Tensor, torch.Tensor | None]: ...


_TORCH = TorchBackend()
_logged: set[tuple[str, str]] = set()


class _OptionalBackend:
    """A backend whose module needs an optional package: imported on first use, once; when the
    import fails, the reason is kept for the error or the log line."""

    def __init__(self, name: str, load: Callable[[], KernelBackend]) -> None:
        self.name = name
        self._load = load
        self._lock = threading.Lock()
        self.backend: KernelBackend | None = None
        self.error: str | None = None

    def get(self) -> KernelBackend | None:
        with self._lock:
            if self.backend is None and self.error is None:
                try:
                    self.backend = self._load()
                except ImportError as err:
                    self.error = f"{type(err).__name__}: {err}"
            return self.backend

    def require(self) -> KernelBackend:
        """The backend, or :class:`KernelBackendError` naming the import error."""
        backend = self.get()
        if backend is None:
            raise KernelBackendError(f"kernels={self.name} (--kernels or {ENV_VAR}) but {self.name} cannot be "
                                     f"imported ({self.error}); install {self.name} or use kernels=auto")
        return backend


def _numba_backend() -> KernelBackend:
    from .numba_cpu import NumbaBackend
    return NumbaBackend()


def _triton_backend() -> KernelBackend:
    from .triton_gpu import TritonBackend
    return TritonBackend()


_NUMBA = _OptionalBackend("numba", _numba_backend)
_TRITON = _OptionalBackend("triton", _triton_backend)


def numba_available() -> bool:
    """Whether the numba CPU kernels can be used in this process."""
    return _NUMBA.get() is not None


def triton_available() -> bool:
    """Whether the Triton kernels can be used in this process (on CUDA tensors, or on CPU tensors
    under Triton's interpreter)."""
    return _TRITON.get() is not None


def _log_once(requested: str, chosen: str, why: str) -> None:
    if (requested, chosen) not in _logged:
        _logged.add((requested, chosen))
        log.info("aggregation kernels: %s (kernels=%s; %s)", chosen, requested, why)


def _check_name(name: str) -> str:
    if name not in BACKEND_NAMES:
        raise KernelBackendError(f"kernel backend {name!r} is unknown; use one of {', '.join(BACKEND_NAMES)}")
    return name


def get_backend(name: str) -> KernelBackend:
    """The backend named ``name``; ``auto`` is the CPU choice (numba, else torch).

    Raises :class:`KernelBackendError` for an unknown name, or for ``"numba"``/``"triton"`` when
    that package cannot be imported (``"auto"`` falls back to torch instead, and logs why).
    """
    requested = _check_name(name)
    if requested == "torch":
        _log_once(requested, "torch", "forced")
        return _TORCH
    if requested == "triton":
        backend = _TRITON.require()
        _log_once(requested, "triton", "fused Triton kernels")
        return backend
    if requested == "numba":
        backend = _NUMBA.require()
        _log_once(requested, "numba", "source-blocked, prefetching CPU kernels")
        return backend
    backend, why = _auto_cpu()
    _log_once(requested, backend.name, why)
    return backend


def _auto_cpu() -> tuple[KernelBackend, str]:
    """``auto``'s CPU backend (numba, else torch) and why."""
    backend = _NUMBA.get()
    if backend is None:
        return _TORCH, f"numba unavailable: {_NUMBA.error}"
    return backend, "source-blocked, prefetching CPU kernels"


class Kernels:
    """A run's kernel choice, resolved once: ``name`` is checked (and ``numba``/``triton``
    imported) when it is made, :meth:`for_tensor` picks the backend per device and dtype."""

    __slots__ = ("name",)

    def __init__(self, name: str = "auto") -> None:
        self.name = _check_name(name)
        if name in ("numba", "triton"):
            (_NUMBA if name == "numba" else _TRITON).require()

    def for_tensor(self, t: torch.Tensor) -> KernelBackend:
        """The backend for tensors on ``t``'s device and of its dtype (see the module docstring)."""
        requested = self.name
        if t.device.type == "cuda":
            if requested == "triton":
                return get_backend("triton")
            why = {"auto": "auto's CUDA choice until a GPU measurement decides (benchmarks/gpu_check.sh)",
                   "numba": "numba runs CPU tensors only"}.get(requested, "forced")
            _log_once(requested, "torch (cuSPARSE) for CUDA tensors", why)
            return _TORCH
        if t.device.type != "cpu":
            return _TORCH
        if requested == "triton":
            triton_backend = _TRITON.require()
            if getattr(triton_backend, "interpreted", False):
                _log_once(requested, "triton", "fused Triton kernels, in Triton's interpreter")
                return triton_backend
            backend, why = _auto_cpu()
            _log_once(requested, f"{backend.name} for CPU tensors",
                      f"Triton kernels take CUDA tensors (CPU ones only under TRITON_INTERPRET=1); {why}")
        else:
            backend = get_backend(requested)
        if backend.name == "numba" and t.dtype not in (torch.float32, torch.float64):
            return _TORCH  # half/bfloat16: no numba kernel
        return backend

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Kernels) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"Kernels({self.name!r})"


def resolve_kernels(name: str | Kernels | None = None) -> Kernels:
    """The :class:`Kernels` for ``name`` (None: ``auto``; a :class:`Kernels` as it is)."""
    if isinstance(name, Kernels):
        return name
    return Kernels("auto" if name is None else name)


_default: list[Kernels] = []
_default_lock = threading.Lock()


def default_kernels() -> Kernels:
    """The choice of blocks built without one: ``GNN_DIST_KERNELS`` (read once, by
    :mod:`gnn_dist.environ`), else ``auto``.

    Raises:
        KernelBackendError: the variable names no backend, or one that cannot be imported.
    """
    with _default_lock:
        if not _default:
            from ..environ import kernels

            value = kernels()
            try:
                _default.append(resolve_kernels(value))
            except KernelBackendError as exc:
                raise KernelBackendError(f"{ENV_VAR}={value!r}: {exc}") from None
        return _default[0]
