"""The Triton kernels compile for the GPUs they serve, without a GPU.

The interpreter (the ``triton`` backend of the other kernel tests) checks what the kernels
compute, not that Triton's compiler accepts them: it does not type loop-carried values,
constexpr branches or pointer arithmetic as the compiler does. :mod:`triton_compile_check`
compiles every launch specialisation to a cubin for sm_90 and sm_80, in a subprocess (this one
imported Triton under the interpreter).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gnn_dist.kernels import triton_available

pytestmark = pytest.mark.skipif(not triton_available(), reason="triton is not importable")

EXPECTED_CASES = 4 * 4 + 12 + 2 * 3 + 2 * 2
"""Per kernel: 3 dtypes + sm80; the fp32 flag combinations (12 + 2 + 2 + 2); width-1 tiles of the
two kernels with a feature tile (spmm, sddmm) in fp32 and fp16."""


def test_every_specialisation_compiles():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("triton_compile_check.py"))],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    failed = [f"{c['id']}:\n{c['error']}" for c in report["cases"] if not c["ok"]]
    assert not failed, f"Triton {report['triton']} could not compile:\n" + "\n".join(failed)
    assert len(report["cases"]) == EXPECTED_CASES
