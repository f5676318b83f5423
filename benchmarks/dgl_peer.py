"""DGL as a peer process: a script run by the DGL side environment's python
(``benchmarks/dgl_env.sh`` makes ``benchmarks/.dgl-venv``; DGL's PyPI builds stop at torch 2.2, so
it never shares gnn-dist's process), reading the graph from an ``.npz`` the benchmark writes,
printing a JSON header (``dgl``, ``torch`` versions, optionally ``units``), then answering each
unit name on stdin with its own wall time in seconds. Used by ``kernels.py`` and
``hetero_peers.py``; the peer scripts are theirs."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = ["DGL_PYTHON", "DglPeer", "dgl_peer_process"]

log = logging.getLogger(__name__)

DGL_PYTHON = Path(__file__).resolve().parent / ".dgl-venv" / "bin" / "python"
"""The DGL side environment's interpreter."""


class DglPeer:
    """DGL in its own environment and process, running one measured unit per :meth:`run`.

    ``versions`` holds DGL's and its torch's version; ``units`` the names it can run (when its
    header lists them)."""

    def __init__(self, proc: subprocess.Popen[str], header: dict[str, Any]) -> None:
        self.proc = proc
        self.versions = {k: header[k] for k in ("dgl", "torch")}
        self.units: list[str] = list(header.get("units", ["step"]))

    def run(self, unit: str = "step") -> float:
        """Run ``unit`` once in the peer; its own wall time in seconds."""
        stdin, stdout = self._pipes()
        stdin.write(unit + "\n")
        stdin.flush()
        reply = stdout.readline()
        if not reply:
            raise RuntimeError(f"the DGL peer exited while running {unit!r} (exit code {self.proc.poll()})")
        return float(reply)

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        return self.proc.stdin, self.proc.stdout


@contextmanager
def dgl_peer_process(script: str, write_graph: Callable[[Path], None], threads: int,
                     why: dict[str, str] | None = None) -> Iterator[DglPeer | None]:
    """The peer running ``script`` on the graph ``write_graph(path)`` writes, at ``threads``
    threads; None (logged, and in ``why["dgl"]``) when the DGL environment is missing or the peer
    fails to start. The process is ended when the block ends."""
    why = {} if why is None else why
    if not DGL_PYTHON.exists():
        why["dgl"] = f"no DGL environment at {DGL_PYTHON} (benchmarks/dgl_env.sh creates it)"
        log.warning("%s: DGL rows left out", why["dgl"])
        yield None
        return
    with tempfile.TemporaryDirectory() as tmp:
        path, code = Path(tmp) / "graph.npz", Path(tmp) / "dgl_peer.py"
        write_graph(path)
        code.write_text(script)
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        env.pop("PYTHONPATH", None)
        with tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen([str(DGL_PYTHON), str(code), str(path), str(threads)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=err, text=True, env=env)
            try:
                assert proc.stdout is not None
                header = proc.stdout.readline()
                if not header:
                    proc.wait()
                    err.seek(0)
                    why["dgl"] = f"the DGL peer failed to start (exit code {proc.returncode}): {err.read()[-1500:]}"
                    log.warning("%s", why["dgl"])
                    yield None
                    return
                yield DglPeer(proc, json.loads(header))
            finally:
                if proc.stdin is not None:
                    proc.stdin.close()
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
