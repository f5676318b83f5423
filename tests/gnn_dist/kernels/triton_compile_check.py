"""Compile every specialisation of the Triton kernels ahead of time, without a GPU; prints JSON.

Run as a script in a process where ``TRITON_INTERPRET`` is unset: Triton decides at import
whether its own library functions (``tl.sum``, ``tl.max``...) are compiled or interpreted, so a
process that imported Triton under the interpreter cannot compile (``test_triton_compile.py``
runs this in a subprocess). Every combination of the constexpr flags in float32, the full
combination in every input dtype, and the smallest feature tiles (width 1) are compiled to a
cubin for Hopper (sm_90: the H100/H200), and the full float32 ones for Ampere (sm_80: the A100),
with Triton's compiler and ``ptxas``, which run on the CPU. Launches pick ``BLOCK_F``/``BLOCK_W``
as powers of two from 1 to 128: the two ends are compiled.

Output: ``{"triton": version, "cases": [{"id", "ok", "error"}]}``.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import traceback
from typing import Any, Iterator

INDEX_ARGS = {"indptr", "indices", "eids"}
INT_ARGS = {"num_feat", "width", "heads"}


def cases() -> Iterator[tuple[str, Any, str, dict[str, Any], int]]:
    """(id, kernel, pointer dtype, constexprs, arch) for every specialisation a launch can ask for."""
    import triton.language as tl

    from gnn_dist.kernels import triton_gpu as tg

    acc = {"fp32": tl.float32, "fp16": tl.float32, "bf16": tl.float32, "fp64": tl.float64}
    tiles = {"BLOCK_E": tg.BLOCK_E}
    spmm = [dict(HAS_VALUES=v != "none", MULTI_HEAD=v == "heads", HAS_EIDS=e, HAS_SCALES=s,
                 BLOCK_F=tg.MAX_BLOCK_F, **tiles)
            for v, e, s in itertools.product(["none", "edge", "heads"], [False, True], [False, True])]
    sddmm = [dict(HAS_EIDS=e, BLOCK_W=tg.MAX_BLOCK_F, **tiles) for e in (False, True)]
    softmax = [dict(HAS_SELF=h, **tiles) for h in (False, True)]
    for kernel, flags in [(tg._spmm_kernel, spmm), (tg._sddmm_kernel, sddmm), (tg._edge_softmax_kernel, softmax),
                          (tg._edge_softmax_backward_kernel, softmax)]:
        name = kernel.fn.__name__.strip("_")
        for i, f in enumerate(flags):
            yield f"{name}-fp32-{i}-sm90", kernel, "fp32", {**f, "ACC": acc["fp32"]}, 90
        for dtype in ("fp16", "bf16", "fp64"):
            yield f"{name}-{dtype}-sm90", kernel, dtype, {**flags[-1], "ACC": acc[dtype]}, 90
        yield f"{name}-fp32-sm80", kernel, "fp32", {**flags[-1], "ACC": acc["fp32"]}, 80
        # the smallest tiles a launch can pick (width 1: one feature per head or row)
        small = {k: (1 if k in ("BLOCK_F", "BLOCK_W") else v) for k, v in flags[-1].items()}
        if small != flags[-1]:
            for dtype in ("fp32", "fp16"):
                yield f"{name}-{dtype}-width1-sm90", kernel, dtype, {**small, "ACC": acc[dtype]}, 90


def compile_case(kernel: Any, dtype: str, constexprs: dict[str, Any], arch: int) -> bytes:
    """The cubin of ``kernel`` for pointer type ``dtype`` (index arrays int64, sizes int32)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {}
    for p in kernel.params:
        if p.is_constexpr:
            signature[p.name] = "constexpr"
        elif p.name in INT_ARGS:
            signature[p.name] = "i32"
        else:
            signature[p.name] = "*i64" if p.name in INDEX_ARGS else f"*{dtype}"
    missing = {p.name for p in kernel.params if p.is_constexpr} - set(constexprs)
    if missing:
        raise KeyError(f"no value given for the constexpr parameters {sorted(missing)}")
    compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constexprs),
                              target=GPUTarget("cuda", arch, 32))
    cubin = compiled.asm["cubin"]
    if cubin[:4] != b"\x7fELF":
        raise ValueError("the compiled kernel is not an ELF cubin")
    return cubin


def main() -> int:
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("run with TRITON_INTERPRET unset: the interpreter's Triton cannot compile", file=sys.stderr)
        return 2
    import triton

    results = []
    for case_id, kernel, dtype, constexprs, arch in cases():
        try:
            compile_case(kernel, dtype, constexprs, arch)
            results.append({"id": case_id, "ok": True, "error": None})
        except Exception:  # noqa: BLE001 (every failure is reported with its case)
            results.append({"id": case_id, "ok": False, "error": traceback.format_exc(limit=3)[-2000:]})
    print(json.dumps({"triton": triton.__version__, "cases": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
