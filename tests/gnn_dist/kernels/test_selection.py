"""Backend choice: resolved once (GNN_DIST_KERNELS the default), held by blocks, the fallback when numba or triton is missing,
the choice per device, the logged choice, the numba cache fallback, and the thread count."""

from __future__ import annotations

import logging

import pytest
import torch

import gnn_dist.kernels as kernels
from gnn_dist.kernels import KernelBackendError, Kernels, get_backend, resolve_kernels
from kernel_cases import random_block


def _missing(monkeypatch, optional, package: str) -> None:
    monkeypatch.setattr(optional, "backend", None)
    monkeypatch.setattr(optional, "error", f"ModuleNotFoundError: No module named '{package}'")
    monkeypatch.setattr(kernels, "_logged", set())


@pytest.fixture
def no_numba(monkeypatch):
    """numba as if it could not be imported."""
    _missing(monkeypatch, kernels._NUMBA, "numba")


def test_env_var_is_the_default_read_once(monkeypatch):
    monkeypatch.setattr(kernels, "_default", [])
    monkeypatch.setenv("GNN_DIST_KERNELS", "torch")
    assert kernels.default_kernels().name == "torch"
    monkeypatch.setenv("GNN_DIST_KERNELS", "numba")
    assert kernels.default_kernels().name == "torch", "resolved once per process, not per aggregation"
    monkeypatch.setattr(kernels, "_default", [])
    monkeypatch.setenv("GNN_DIST_KERNELS", "cuda-magic")
    with pytest.raises(KernelBackendError, match=r"GNN_DIST_KERNELS='cuda-magic': kernel backend 'cuda-magic' is "
                                                 r"unknown; use one of auto, torch, numba, triton"):
        kernels.default_kernels()
    monkeypatch.setattr(kernels, "_default", [])
    monkeypatch.delenv("GNN_DIST_KERNELS")
    assert kernels.default_kernels().name == "auto"
    with pytest.raises(KernelBackendError, match=r"kernel backend 'fast' is unknown"):
        get_backend("fast")


def test_blocks_hold_their_kernels():
    b = random_block(0)
    x = torch.randn(b.num_src, 3, dtype=torch.float64)
    torch_block = b.with_kernels("torch")
    assert torch_block.backend_for(x).name == "torch" and torch_block.kernels == Kernels("torch")
    sub, _ = torch_block.sub_block(torch.arange(3))
    assert sub.kernels == Kernels("torch"), "derived blocks keep the choice"
    assert torch_block.to("cpu").kernels == Kernels("torch")
    assert b.kernels is None and b.backend_for(x).name == kernels.default_kernels().for_tensor(x).name


def test_fallback_without_numba(no_numba, monkeypatch, caplog):
    with caplog.at_level(logging.INFO, logger="gnn_dist.kernels"):
        assert get_backend("auto").name == "torch"
        assert get_backend("auto").name == "torch"
    msgs = [r.getMessage() for r in caplog.records if "aggregation kernels" in r.getMessage()]
    assert len(msgs) == 1 and "numba unavailable: ModuleNotFoundError" in msgs[0]   # logged once
    with pytest.raises(KernelBackendError, match=r"kernels=numba \(--kernels or GNN_DIST_KERNELS\) but numba cannot "
                                                 r"be imported \(ModuleNotFoundError.*use kernels=auto"):
        Kernels("numba")
    b = random_block(0).with_kernels("auto")   # the layers' spmm still works through the fallback
    from gnn_dist.nn.sparse import spmm
    x = torch.randn(b.num_src, 3, dtype=torch.float64)
    expect = torch.zeros(b.num_dst, 3, dtype=torch.float64).index_add(0, b.dst_index, x[b.indices])
    torch.testing.assert_close(spmm(b, x), expect)


def test_triton_per_device(monkeypatch, caplog):
    """``triton`` on CPU tensors: only under Triton's interpreter (the kernels conftest turns it
    on), else the CPU ``auto`` choice, logged once (CUDA tensors: the test below)."""
    triton_gpu = pytest.importorskip("gnn_dist.kernels.triton_gpu")
    assert triton_gpu.INTERPRETED
    choice = Kernels("triton")
    assert choice.for_tensor(torch.zeros(1)).name == "triton"
    monkeypatch.setattr(triton_gpu.TritonBackend, "interpreted", False)
    with caplog.at_level(logging.INFO, logger="gnn_dist.kernels"):
        monkeypatch.setattr(kernels, "_logged", set())
        assert choice.for_tensor(torch.zeros(1)).name == get_backend("auto").name
    assert "Triton kernels take CUDA tensors" in caplog.text
    assert Kernels("auto").for_tensor(torch.zeros(1, device="meta")).name == "torch"


class _OnCuda:
    """What :meth:`Kernels.for_tensor` reads of a tensor (its device and dtype), as if on a GPU."""

    device = torch.device("cuda", 0)
    dtype = torch.float32


def test_cuda_tensors_take_cusparse_unless_triton():
    for name, expected in (("auto", "torch"), ("torch", "torch"), ("numba", "torch")):
        if name == "numba" and not kernels.numba_available():
            continue
        assert Kernels(name).for_tensor(_OnCuda()).name == expected, name
    if kernels.triton_available():
        assert Kernels("triton").for_tensor(_OnCuda()).name == "triton"


def test_triton_missing(monkeypatch):
    _missing(monkeypatch, kernels._TRITON, "triton")
    assert not kernels.triton_available()
    with pytest.raises(KernelBackendError, match=r"kernels=triton \(--kernels or GNN_DIST_KERNELS\) but triton cannot "
                                                 r"be imported \(ModuleNotFoundError: No module named 'triton'\); "
                                                 r"install triton"):
        resolve_kernels("triton")


def test_non_float_dtypes_use_torch():
    pytest.importorskip("numba")
    choice = Kernels("numba")
    assert choice.for_tensor(torch.zeros(1, dtype=torch.float32)).name == "numba"
    assert choice.for_tensor(torch.zeros(1, dtype=torch.bfloat16)).name == "torch"


def test_jit_without_cache_location(monkeypatch, caplog):
    """A read-only install with no writable cache folder still compiles (without a disk cache)."""
    njit_mod = pytest.importorskip("gnn_dist.kernels.njit")
    real = njit_mod.numba.njit
    calls = []

    def njit(*args, **options):
        if args:   # numba's own modules, imported lazily while compiling, decorate with njit(fn)
            return real(*args, **options)
        calls.append(options["cache"])
        if options["cache"]:
            raise RuntimeError("cannot cache function 'f': no locator available for file 'x.py'")
        return real(**options)

    monkeypatch.setattr(njit_mod.numba, "njit", njit)
    with caplog.at_level(logging.WARNING, logger="gnn_dist.kernels.njit"):
        f = njit_mod.cached_njit()(lambda a: a + 1)
    assert f(1) == 2 and calls == [True, False]
    assert "compiled without an on-disk cache" in caplog.text and "NUMBA_CACHE_DIR" in caplog.text


def test_threads_follow_torch():
    numba_cpu = pytest.importorskip("gnn_dist.kernels.numba_cpu")
    import numba
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert numba_cpu._num_threads() == 1 and numba.get_num_threads() == 1
        torch.set_num_threads(10_000)
        assert numba_cpu._num_threads() == numba.config.NUMBA_NUM_THREADS
    finally:
        torch.set_num_threads(before)
        numba_cpu._num_threads()
