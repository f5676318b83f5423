"""Out-of-core partitioning benchmark (issue 14): peak anonymous memory and throughput of
``gnn-dist partition`` on an npy-dir input read out of core, against the same graph read in
memory from an ``.npz``, and METIS against pymetis alone.

The input (``out_of_core_graph.py``): a generated graph with community structure, by default
4M nodes, 40M directed int64 edges, 64 float32 features, int64 labels (16 classes) and
train/val/test masks, 1.7 GB of arrays, written chunk by chunk as an npy-dir and, from it, as
one ``.npz`` (the **peer**: today's in-memory path). Both, and the symmetric adjacency for
pymetis alone, are made once per parameter set and kept under
``benchmarks/.cache/out_of_core/`` (git-ignored).

Every case is a **fresh child process**, the CLI as a user runs it::

    python -m gnn_dist_cli partition --input DIR --input-format npy-dir --scratch-dir S ...  # out of core
    python -m gnn_dist_cli partition --input g.npz --input-format npz ...                  # in memory

The parent samples the child's ``/proc/PID/status`` every 10 ms from a thread: the peak
``RssAnon`` (the measure of the targets: memory the process itself holds, not the page cache
its memory maps use), ``RssFile`` and ``VmRSS``; ``VmHWM`` (peak RSS, file pages included) is
the child's ``ru_maxrss`` from ``wait4``. Wall time is the whole command: interpreter start,
read, partition, write; edges per second = E / that. Cases run interleaved (``random``
out-of-core, ``random`` in-memory, ``ldg`` ...), ``--repeats`` rounds (medians reported).

*pymetis alone*: a child that imports numpy and pymetis, loads ``xadj``/``adjncy`` (the
undirected simple graph under the edges, pymetis's index dtype) and calls
``pymetis.part_graph(P, CSRAdjacency(xadj, adjncy), options=Options(seed=0, ufactor=30))``,
twice: arrays loaded (``np.load``) and memory-mapped (``mmap_mode="r"``). If pymetis used the
mapped arrays in place, the mapped run's RssAnon would be lower by about the arrays' bytes.

After each out-of-core case ``gnn-dist inspect --verify`` must pass, and for ``fennel`` one
short training run (``gnn-dist train``, one rank per part, 1 epoch, hidden 16) must exit 0.
While the npy-dir reader is not there (``partition --help`` does not name ``npy-dir``) the
out-of-core cases are reported as *not available* and the checks run on the in-memory
outputs instead, so the harness is exercised either way.

Usage (from the repository root)::

    python benchmarks/out_of_core.py            # 4M nodes, 40M edges, 64 features, P=4
    python benchmarks/out_of_core.py --quick    # 200k nodes, 2M edges, 16 features (~1 min)

Writes ``benchmarks/results/out_of_core_<hw>_<date>[_quick].json`` and ``.md``; partition
folders go under the cache folder and are deleted after their checks (``--keep`` keeps them).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent

import common  # noqa: E402
from out_of_core_graph import GraphCache, GraphSpec  # noqa: E402

log = logging.getLogger("benchmarks.out_of_core")

METHODS = ("random", "ldg", "fennel", "metis")
STREAMING = ("random", "ldg", "fennel")
PATHS = ("out-of-core", "in-memory")
TARGETS = {
    "streaming_anon_per_input_byte": 0.25,
    "metis_anon_vs_pymetis": 1.2,
    "streaming_edges_per_s": 2e6,
}
QUICK = {"nodes": 200_000, "edges": 2_000_000, "features": 16}
SAMPLE_INTERVAL_S = 0.01
MIN_ARRAY_BYTES_FOR_VERDICT = 16 << 20
"""Below this the pymetis arrays are within the noise of a peak and no copy verdict is given."""


@dataclass(kw_only=True, slots=True)
class BenchConfig:
    nodes: int = 4_000_000
    edges: int = 40_000_000
    features: int = 64
    parts: int = 4
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    paths: list[str] = field(default_factory=lambda: list(PATHS))
    """Which of the two paths run (both by default; the ratios between them need both)."""
    seed: int = 0
    repeats: int = 1
    """Rounds of every case, interleaved; medians are reported."""
    quick: bool = False
    train: bool = True
    """The training check after the ``train_method`` case."""
    train_method: str = "fennel"
    cache_dir: str = str(_HERE / ".cache" / "out_of_core")
    keep: bool = False
    timeout_s: float = 3600.0
    """Per child process."""

    def spec(self) -> GraphSpec:
        return GraphSpec(nodes=self.nodes, edges=self.edges, features=self.features, seed=self.seed)


# ----------------------------------------------------------------------------- measurement
_STATUS_FIELDS = {"RssAnon:": "rss_anon", "RssFile:": "rss_file", "VmRSS:": "vm_rss", "VmHWM:": "vm_hwm"}


def read_status(pid: int) -> dict[str, int]:
    """The memory fields of ``/proc/PID/status`` in bytes (empty once the process has exited)."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key = _STATUS_FIELDS.get(line.split(None, 1)[0] if line.strip() else "")
                if key:
                    out[key] = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


class _Sampler(threading.Thread):
    """Polls a process's memory fields until stopped; keeps the maximum of each."""

    def __init__(self, pid: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak: dict[str, int] = {}
        self.samples = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            status = read_status(self.pid)
            if status:
                self.samples += 1
                for k, v in status.items():
                    self.peak[k] = max(v, self.peak.get(k, 0))
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def run_measured(cmd: list[str], log_dir: Path, name: str, *, timeout_s: float,
                 interval: float = SAMPLE_INTERVAL_S) -> dict[str, Any]:
    """Run ``cmd`` as a fresh child with its memory sampled; stdout and stderr go to
    ``log_dir/name.{out,err}``. Returns ``rc``, ``wall_s``, the peaks (``peak_rss_anon_bytes``,
    ``peak_rss_file_bytes``, ``peak_vm_rss_bytes``; ``vm_hwm_bytes`` from ``wait4``), the
    number of samples, the load average at the start and the paths of the two logs."""
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH")) if p))
    load = list(os.getloadavg())
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=_ROOT)
        sampler = _Sampler(proc.pid, interval)
        sampler.start()
        deadline = t0 + timeout_s
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.perf_counter() > deadline and not timed_out:
                proc.kill()
                timed_out = True
            time.sleep(0.005)
        wall = time.perf_counter() - t0
        sampler.stop()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    peak = sampler.peak
    return {"rc": proc.returncode, "timed_out": timed_out, "wall_s": wall,
            "peak_rss_anon_bytes": peak.get("rss_anon"), "peak_rss_file_bytes": peak.get("rss_file"),
            "peak_vm_rss_bytes": peak.get("vm_rss"), "vm_hwm_bytes": int(usage.ru_maxrss) * 1024,
            "samples": sampler.samples, "load_average_1min": load[0],
            "stdout": str(out_path), "stderr": str(err_path)}


def _tail(path: str, n: int = 2000) -> str:
    try:
        return Path(path).read_text(errors="replace")[-n:]
    except OSError:
        return ""


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "gnn_dist_cli", *args]


def partition_capabilities(help_text: str) -> dict[str, bool]:
    """What ``gnn-dist partition --help`` offers of the out-of-core path: ``npy-dir`` (the
    reader, ``--input-format npy-dir``) and ``scratch-dir`` (``--scratch-dir DIR``)."""
    return {"npy-dir": "npy-dir" in help_text, "scratch-dir": "--scratch-dir" in help_text}


def measure_baseline(log_dir: Path, timeout_s: float) -> dict[str, Any]:
    """``partition --help`` as a measured child: the interpreter and the CLI's imports (the floor
    under every case; the methods and the out-of-core path import more when they run), and the
    help text that says which out-of-core flags exist (``capabilities``)."""
    r = run_measured(_cli("partition", "--help"), log_dir, "baseline", timeout_s=timeout_s)
    r["capabilities"] = partition_capabilities(_tail(r["stdout"], 1 << 20))
    log.info("baseline (partition --help): rc %d, peak RssAnon %s", r["rc"], common.fmt_bytes(r["peak_rss_anon_bytes"]))
    return r


# ----------------------------------------------------------------------------- children
PYMETIS_MODES = {
    "load": ("xadj.npy", "adjncy.npy", None),
    "mmap": ("xadj.npy", "adjncy.npy", "r"),
    "mmap-int32": ("xadj32.npy", "adjncy32.npy", "r"),
}
"""pymetis alone's inputs: the CSR in its index dtype loaded, memory-mapped, and (the control)
memory-mapped as int32, which pymetis must convert (copy) to its index dtype."""


def child_pymetis(adjacency: str, mode: str, parts: int, seed: int) -> dict[str, Any]:
    """pymetis alone, in this fresh process: load (or memory-map) the CSR, call ``part_graph``
    (with ``warn_on_copies=True``: pymetis's own word on whether it copied an input)."""
    import warnings

    import numpy as np
    import pymetis

    x_name, a_name, mmap = PYMETIS_MODES[mode]
    before = read_status(os.getpid())
    t0 = time.perf_counter()
    xadj = np.load(Path(adjacency) / x_name, mmap_mode=mmap)
    adjncy = np.load(Path(adjacency) / a_name, mmap_mode=mmap)
    load_s = time.perf_counter() - t0
    loaded = read_status(os.getpid())
    t1 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pymetis.part_graph(parts, pymetis.CSRAdjacency(xadj, adjncy),
                                    options=pymetis.Options(seed=seed, ufactor=30), warn_on_copies=True)
    call_s = time.perf_counter() - t1
    after = read_status(os.getpid())
    return {"load_s": load_s, "part_graph_s": call_s, "edge_cuts": int(result.edge_cuts),
            "array_bytes": int(xadj.nbytes + adjncy.nbytes), "dtype": str(xadj.dtype),
            "copy_warnings": sorted({str(w.message) for w in caught}),
            "rss_anon_after_imports": before.get("rss_anon"), "rss_anon_after_load": loaded.get("rss_anon"),
            "rss_anon_after_call": after.get("rss_anon")}


def child_prepare(cache_dir: str, spec: dict[str, Any], what: str, index_bytes: int = 8) -> dict[str, Any]:
    """Make one product of the graph cache in this fresh process (so its peak can be measured)."""
    import numpy as np

    cache = GraphCache(cache_dir, GraphSpec(**spec))
    if what == "adjacency":
        return cache.ensure_adjacency({8: np.int64, 4: np.int32}[index_bytes])
    return {"npy": cache.ensure_npy_dir, "npz": cache.ensure_npz}[what]()


def _child_main(argv: list[str]) -> int:
    kind, spec = argv[0], json.loads(argv[1])
    fn = {"pymetis": child_pymetis, "prepare": child_prepare}[kind]
    sys.stdout.write("RESULT " + json.dumps(fn(**spec)) + "\n")
    return 0


def _result_line(path: str) -> dict[str, Any] | None:
    lines = [ln for ln in _tail(path, 1 << 20).splitlines() if ln.startswith("RESULT ")]
    return json.loads(lines[-1][len("RESULT "):]) if lines else None


def _json_report(path: str) -> dict[str, Any] | None:
    """The ``--json`` quality report a partition child printed on stdout."""
    text = _tail(path, 1 << 22).strip()
    try:
        return json.loads(text)
    except ValueError:
        for line in reversed(text.splitlines()):
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    return None
    return None


# ----------------------------------------------------------------------------- cases
class Runner:
    """Runs the cases of one benchmark into ``work`` (under the cache folder)."""

    def __init__(self, cfg: BenchConfig, cache: GraphCache, capabilities: dict[str, bool]) -> None:
        self.cfg, self.cache = cfg, cache
        self.ooc, self.scratch = capabilities["npy-dir"], capabilities["scratch-dir"]
        self.work = run_dir(cache)
        self.logs = self.work / "logs"

    def partition(self, method: str, path: str, rnd: int) -> dict[str, Any]:
        cfg = self.cfg
        tag = f"{method}-{'ooc' if path == 'out-of-core' else 'mem'}-r{rnd}"
        out = self.work / f"parts-{tag}"
        shutil.rmtree(out, ignore_errors=True)
        args = ["partition", "--parts", str(cfg.parts), "--method", method, "--seed", str(cfg.seed),
                "--out", str(out), "--overwrite", "--no-progress", "--json"]
        scratch = None
        if path == "out-of-core":
            args += ["--input", str(self.cache.npy_dir), "--input-format", "npy-dir"]
            if self.scratch:
                scratch = self.work / f"scratch-{tag}"
                shutil.rmtree(scratch, ignore_errors=True)
                scratch.mkdir(parents=True)
                args += ["--scratch-dir", str(scratch)]
        else:
            args += ["--input", str(self.cache.npz_path), "--input-format", "npz"]
        r = run_measured(_cli(*args), self.logs, f"partition-{tag}", timeout_s=cfg.timeout_s)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        r["edges_per_s"] = cfg.edges / r["wall_s"]
        report = _json_report(r["stdout"]) if r["rc"] == 0 else None
        if report:
            r["report"] = {k: report.get(k) for k in ("edge_cut", "comm_volume", "max_halo_fraction",
                                                      "node_balance", "edge_balance", "time_s",
                                                      "peak_rss_bytes", "num_nodes", "num_edges")}
        else:
            r["error"] = _tail(r["stderr"], 1500)
        if r["rc"] == 0 and out.is_dir():
            r["out_bytes"] = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
        r["out_dir"] = str(out)
        log.info("%-6s %-11s r%d: rc %d, %.1f s, peak RssAnon %s, VmHWM %s, %.2fM edges/s", method, path, rnd,
                 r["rc"], r["wall_s"], common.fmt_bytes(r["peak_rss_anon_bytes"]),
                 common.fmt_bytes(r["vm_hwm_bytes"]), r["edges_per_s"] / 1e6)
        return r

    def checks(self, run: dict[str, Any], method: str, train: bool) -> dict[str, Any]:
        """``inspect --verify`` on the folder, then (``train``) one short training run."""
        out = run["out_dir"]
        name = Path(out).name
        v = run_measured(_cli("inspect", "--verify", out), self.logs, f"verify-{name}", timeout_s=self.cfg.timeout_s)
        res: dict[str, Any] = {"verify": {"rc": v["rc"], "wall_s": v["wall_s"]}}
        if v["rc"] != 0:
            res["verify"]["error"] = _tail(v["stderr"], 1500)
        log.info("%-6s inspect --verify %s: rc %d, %.1f s", method, name, v["rc"], v["wall_s"])
        if train:
            cmd = _cli("train", "--data", out, "--model", "gcn", "--hidden", "16", "--epochs", "1",
                       "--eval-every", "1", "--log-every", "1")
            t = run_measured(cmd, self.logs, f"train-{name}", timeout_s=self.cfg.timeout_s)
            res["train"] = {"rc": t["rc"], "wall_s": t["wall_s"], "command": " ".join(["gnn-dist", *cmd[3:]]),
                            "final_line": _final_line(t)}
            if t["rc"] != 0:
                res["train"]["error"] = _tail(t["stderr"], 1500)
            log.info("%-6s train 1 epoch on %s: rc %d, %.1f s", method, name, t["rc"], t["wall_s"])
        return res

    def pymetis(self, mode: str, rnd: int) -> dict[str, Any]:
        spec = {"adjacency": str(self.cache.adjacency_dir), "mode": mode, "parts": self.cfg.parts,
                "seed": self.cfg.seed}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "pymetis", json.dumps(spec)]
        r = run_measured(cmd, self.logs, f"pymetis-{mode}-r{rnd}", timeout_s=self.cfg.timeout_s)
        child = _result_line(r["stdout"]) if r["rc"] == 0 else None
        if child is None:
            r["error"] = _tail(r["stderr"], 1500)
        else:
            r.update(child)
        log.info("pymetis %-4s r%d: rc %d, %.1f s (part_graph %.1f s), peak RssAnon %s, VmHWM %s", mode, rnd,
                 r["rc"], r["wall_s"], r.get("part_graph_s", float("nan")),
                 common.fmt_bytes(r["peak_rss_anon_bytes"]), common.fmt_bytes(r["vm_hwm_bytes"]))
        return r

    def run_all(self) -> dict[str, Any]:
        """Every round: for each method, out-of-core then in-memory (pymetis alone, loaded then
        mapped, just before ``metis``); the checks after each out-of-core case (on the in-memory
        output when there is no out-of-core path)."""
        cfg = self.cfg
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {m: {p: [] for p in PATHS} for m in cfg.methods}
        control = (self.cache.adjacency_dir / PYMETIS_MODES["mmap-int32"][0]).is_file()
        pym: dict[str, list[dict[str, Any]]] = {m: [] for m in PYMETIS_MODES if control or m != "mmap-int32"}
        checked = "out-of-core" if self.ooc and "out-of-core" in cfg.paths else "in-memory"
        for rnd in range(cfg.repeats):
            for method in cfg.methods:
                if method == "metis":
                    for mode in pym:
                        pym[mode].append(self.pymetis(mode, rnd))
                for path in cfg.paths:
                    if path == "out-of-core" and not self.ooc:
                        continue
                    r = self.partition(method, path, rnd)
                    if path == checked and r["rc"] == 0:
                        train = cfg.train and method == cfg.train_method and rnd == 0
                        r["checks"] = self.checks(r, method, train)
                    if not cfg.keep:
                        shutil.rmtree(r["out_dir"], ignore_errors=True)
                    runs[method][path].append(r)
        if not cfg.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        return {"cases": runs, "pymetis": pym, "checked_path": checked}


# ----------------------------------------------------------------------------- analysis
_MEDIAN_KEYS = ("wall_s", "peak_rss_anon_bytes", "peak_rss_file_bytes", "peak_vm_rss_bytes", "vm_hwm_bytes",
                "edges_per_s", "part_graph_s", "load_s")


def summarize_runs(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Medians over the successful runs of one case (``None`` when none succeeded)."""
    ok = [r for r in runs if r["rc"] == 0]
    if not ok:
        return None
    out: dict[str, Any] = {"n": len(ok), "failed": len(runs) - len(ok)}
    for k in _MEDIAN_KEYS:
        vals = [r[k] for r in ok if r.get(k) is not None]
        if vals:
            out[k] = statistics.median(vals)
    first = ok[0]
    for k in ("report", "checks", "edge_cuts", "array_bytes", "dtype", "copy_warnings", "rss_anon_after_imports",
              "rss_anon_after_load", "rss_anon_after_call", "out_bytes"):
        if k in first:
            out[k] = first[k]
    return out


def analyse(cfg: BenchConfig, raw: dict[str, Any], input_bytes: int) -> dict[str, Any]:
    """Case medians, the pymetis copy finding and the target rows."""
    summary = {m: {p: summarize_runs(rs) for p, rs in by_path.items()} for m, by_path in raw["cases"].items()}
    pym = {mode: summarize_runs(rs) for mode, rs in raw["pymetis"].items()}
    finding = pymetis_copy_finding(pym)
    targets: list[dict[str, Any]] = []

    def row(what: str, where: str, value: float | None, target: str, ok: bool | None, graded: bool,
            detail: str = "") -> None:
        targets.append({"what": what, "where": where, "value": value, "target": target, "ok": ok,
                        "graded": graded, "detail": detail})

    for method in cfg.methods:
        ooc, mem = summary[method]["out-of-core"], summary[method]["in-memory"]
        best = ooc or mem
        where = "out-of-core" if ooc else "in-memory (no out-of-core path yet)"
        if method in STREAMING and best:
            v = best["peak_rss_anon_bytes"] / input_bytes
            row(f"{method}: peak RssAnon / input bytes", where, v,
                f"<= {TARGETS['streaming_anon_per_input_byte']}",
                v <= TARGETS["streaming_anon_per_input_byte"], ooc is not None,
                f"{common.fmt_bytes(best['peak_rss_anon_bytes'])} of {common.fmt_bytes(input_bytes)}")
            e = best["edges_per_s"]
            row(f"{method}: edges/s, whole command", where, e, f">= {TARGETS['streaming_edges_per_s']:.0e}",
                e >= TARGETS["streaming_edges_per_s"], ooc is not None, f"{best['wall_s']:.1f} s")
        if method == "metis" and best and finding.get("reference_bytes"):
            v = best["peak_rss_anon_bytes"] / finding["reference_bytes"]
            row("metis: peak RssAnon / pymetis alone", where, v, f"<= {TARGETS['metis_anon_vs_pymetis']}",
                v <= TARGETS["metis_anon_vs_pymetis"], ooc is not None,
                f"{common.fmt_bytes(best['peak_rss_anon_bytes'])} vs "
                f"{common.fmt_bytes(finding['reference_bytes'])} ({finding['reference']})")
        if ooc and mem:
            row(f"{method}: out-of-core / in-memory wall time", "both", ooc["wall_s"] / mem["wall_s"], "-", None,
                False)
            row(f"{method}: out-of-core / in-memory peak RssAnon", "both",
                ooc["peak_rss_anon_bytes"] / mem["peak_rss_anon_bytes"], "-", None, False)
        checked = summary[method][raw["checked_path"]]
        if checked and "checks" in checked:
            c = checked["checks"]
            row(f"{method}: inspect --verify", raw["checked_path"], c["verify"]["rc"], "exit 0",
                c["verify"]["rc"] == 0, raw["checked_path"] == "out-of-core")
            if "train" in c:
                row(f"{method}: trains (1 epoch)", raw["checked_path"], c["train"]["rc"], "exit 0",
                    c["train"]["rc"] == 0, raw["checked_path"] == "out-of-core", f"{c['train']['wall_s']:.1f} s")
    return {"summary": summary, "pymetis": pym, "pymetis_copy": finding, "targets": targets}


def pymetis_copy_finding(pym: dict[str, dict[str, Any] | None]) -> dict[str, Any]:
    """Does pymetis copy its input? Loaded and memory-mapped runs differ by the loaded arrays'
    own bytes whether pymetis copies or not, so the answer comes from the control: the same CSR
    memory-mapped as int32, which pymetis must convert to its index dtype (a copy of the
    arrays' full width). If the control's peak RssAnon is above the mapped run's by about the
    arrays' bytes, the mapped run made no such copy: pymetis used the arrays in place. If the
    two are equal, pymetis copies its input either way. ``warn_on_copies`` (pymetis's own
    report) is listed beside. ``reference_bytes``: the smaller peak of the loaded and mapped
    runs (the metis target's denominator)."""
    peaks = {m: r["peak_rss_anon_bytes"] for m, r in pym.items() if r and m in ("load", "mmap")}
    if not peaks:
        return {}
    ref = min(peaks, key=peaks.get)
    out: dict[str, Any] = {"reference": f"pymetis alone, arrays {'loaded' if ref == 'load' else 'memory-mapped'}",
                           "reference_bytes": peaks[ref], "peaks": dict(peaks),
                           "copy_warnings": {m: r.get("copy_warnings") for m, r in pym.items() if r}}
    load, mmap, control = pym.get("load"), pym.get("mmap"), pym.get("mmap-int32")
    arrays = (load or mmap or {}).get("array_bytes")
    out["array_bytes"] = arrays
    if load and mmap:
        out["load_minus_mmap_bytes"] = load["peak_rss_anon_bytes"] - mmap["peak_rss_anon_bytes"]
    if mmap and control and arrays:
        extra = control["peak_rss_anon_bytes"] - mmap["peak_rss_anon_bytes"]
        frac = extra / arrays
        out.update(control_minus_mmap_bytes=extra, control_minus_mmap_fraction=frac)
        out["peaks"]["mmap-int32"] = control["peak_rss_anon_bytes"]
        if arrays < MIN_ARRAY_BYTES_FOR_VERDICT:
            out["copies"] = None
            out["verdict"] = (f"not decided: the arrays ({common.fmt_bytes(arrays)}) are too small against the "
                              "noise of the peaks (allocator arenas, imports); run a larger graph")
        elif frac > 0.75:
            out["copies"] = False
            out["verdict"] = (f"pymetis does not copy {mmap.get('dtype')} input: it partitions the arrays in place, "
                              "so memory-mapped they add no anonymous memory (the int32 control, which it must "
                              f"convert, peaks {frac:.0%} of the arrays' bytes higher than the mapped run)")
        elif frac < 0.25:
            out["copies"] = True
            out["verdict"] = ("pymetis copies its input even in its own index dtype: the int32 control, which "
                              f"it must convert, peaks only {frac:.0%} of the arrays' bytes above the mapped run")
        else:
            out["copies"] = None
            out["verdict"] = (f"inconclusive: the int32 control peaks {frac:.0%} of the arrays' bytes above the "
                              "mapped run")
    return out


# ----------------------------------------------------------------------------- report
_MODE_LABEL = {"load": "arrays loaded", "mmap": "arrays memory-mapped",
               "mmap-int32": "control: int32 arrays memory-mapped (pymetis converts)"}


def _mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f}"


def _prepare_peaks(g: dict[str, Any]) -> str:
    """The peaks of the children that made the cached products, where they were recorded."""
    parts = [f"{what} {_mib(g[key])} MiB" for what, key in
             (("generator", "generate_peak_rss_anon_bytes"), (".npz writer", "npz_peak_rss_anon_bytes"),
              ("symmetric adjacency (scipy, in memory)", "adjacency_peak_rss_anon_bytes")) if g.get(key)]
    return f"; peak RssAnon of the children that made them: {', '.join(parts)}" if parts else ""


def render_markdown(payload: dict[str, Any]) -> str:
    cfg, env, g, res = payload["config"], payload["environment"], payload["graph"], payload["results"]
    L = [f"# Out-of-core partitioning benchmark ({env['date'][:10]})", ""]
    L.append(f"Generated by `{payload['command']}` in {payload['wall_s'] / 60:.1f} min. "
             f"Code: git {env.get('git_revision')} plus the working tree of that day.")
    L += ["", "## Setup", ""]
    mem = env.get("memory_bytes")
    L.append(f"- Machine: {env['cpu_model']}, {env['cpu_count']} logical CPUs, "
             f"{common.fmt_bytes(mem)} RAM; {env['platform']}; Python {env['python']}, "
             + ", ".join(f"{k} {v}" for k, v in payload["versions"].items()) + ".")
    la, lb = env.get("load_average_1_5_15") or [], payload.get("load_average_after") or []
    L.append("- **Shared machine**: load average (1/5/15 min) "
             f"{'/'.join(f'{x:.1f}' for x in la)} at the start, {'/'.join(f'{x:.1f}' for x in lb)} at the end "
             "(each case's 1-min load at its start is in the JSON). Times can be off by tens of percent; "
             "memory peaks are not affected by the load.")
    L.append(f"- Graph: {g['nodes']:,} nodes in {g['blocks']:,} community blocks, {g['edges']:,} directed "
             f"int64 edges ({g['intra_block_fraction']:.1%} inside their source's block), "
             f"{g['features']} float32 features, {g['classes']} classes, masks 60/20/20; "
             f"{g.get('undirected_edges', 0):,} undirected edges, {g.get('isolated_nodes', 0):,} isolated nodes. "
             f"Input (npy-dir) **{common.fmt_bytes(g['input_bytes'])}**; the `.npz` peer "
             f"{common.fmt_bytes(g.get('npz_bytes'))}. Generated in {g['generate_s']:.1f} s "
             f"({'cached from an earlier run' if g['cached'] else 'this run'})" + _prepare_peaks(g) + ".")
    L.append(f"- P = {cfg['parts']}, seed {cfg['seed']}, {cfg['repeats']} round(s), cases interleaved "
             "(method A out-of-core, A in-memory, B ...); medians over rounds. Each case is a fresh "
             "`python -m gnn_dist_cli partition ...` (the `gnn-dist` command); wall time is the whole "
             "command (start-up, read, partition, write), edges/s = E / wall time.")
    L.append("- Memory: the parent samples the child's `/proc/PID/status` every 10 ms: **RssAnon** "
             "(anonymous memory: what the targets measure), RssFile (mapped file pages, page cache), "
             "VmHWM = peak RSS with file pages (the child's `ru_maxrss`).")
    base = payload["raw"].get("baseline") or {}
    if base.get("rc") == 0:
        L.append(f"- Floor: `partition --help` (the interpreter and the CLI's imports) peaks at RssAnon "
                 f"{_mib(base['peak_rss_anon_bytes'])} MiB "
                 f"({common.fmt_ratio(base['peak_rss_anon_bytes'] / g['input_bytes'], 3)} of the input); the "
                 "methods and the out-of-core path import more (numba, scipy) when they run. On a small input "
                 "this floor, not the graph, dominates every ratio.")
    if not payload["out_of_core_available"]:
        L.append("- **The out-of-core path is not available yet** (`partition --help` does not list "
                 "`npy-dir`): only the in-memory peer ran; its rows are the baseline the out-of-core "
                 "path must beat, and the checks ran on the in-memory outputs.")
    L += ["", "## Targets", ""]
    rows = []
    for t in res["targets"]:
        v = t["value"]
        if "edges/s" in t["what"]:
            val = f"{v / 1e6:.2f}M"
        elif t["target"] == "exit 0":
            val = f"exit {v}"
        else:
            val = f"{v:.3f}x"
        if t["detail"]:
            val += f" ({t['detail']})"
        met = "-" if t["ok"] is None else ("yes" if t["ok"] else "**no**")
        rows.append([t["what"], t["where"] + ("" if t["graded"] else " (info)"), val, t["target"], met])
    L.append(common.markdown_table(["target", "where", "measured", "target", "met"], rows))
    L += ["", "Rows marked (info) are not graded: ratios without a target, or the in-memory peer "
          "standing in for a path not there yet.", "", "## Cases", ""]
    head = ["method", "path", "wall s", "edges/s", "peak RssAnon MiB", "RssAnon / input", "peak RssFile MiB",
            "VmHWM MiB", "read / partition / write s", "edge cut", "comm volume", "node bal.", "checks"]
    rows = []
    for method, by_path in res["summary"].items():
        if method == "metis":
            for mode, r in res["pymetis"].items():
                if r:
                    rows.append(["pymetis alone", _MODE_LABEL[mode],
                                 f"{r['wall_s']:.1f} (part_graph {r['part_graph_s']:.1f})", "-",
                                 _mib(r["peak_rss_anon_bytes"]), common.fmt_ratio(r["peak_rss_anon_bytes"] / g["input_bytes"], 3),
                                 _mib(r["peak_rss_file_bytes"]), _mib(r["vm_hwm_bytes"]), "-",
                                 f"{2 * r['edge_cuts']:,} (undirected x2)", "-", "-", "-"])
        for path, r in by_path.items():
            if path not in cfg.get("paths", PATHS):
                rows.append([method, path, "not run (--paths)"] + ["-"] * (len(head) - 3))
                continue
            if path == "out-of-core" and not payload["out_of_core_available"]:
                rows.append([method, path, "not available"] + ["-"] * (len(head) - 3))
                continue
            if r is None:
                fails = payload["raw"]["cases"][method][path]
                why = (fails[0].get("error") or "").strip().splitlines()[-1:] if fails else []
                rows.append([method, path, f"failed: {why[0] if why else '?'}"] + ["-"] * (len(head) - 3))
                continue
            rep = r.get("report") or {}
            ts = rep.get("time_s") or {}
            stages = " / ".join(f"{ts[k]:.1f}" for k in ("read", "partition", "write") if k in ts) or "-"
            checks = "-"
            if "checks" in r:
                c = r["checks"]
                checks = f"verify exit {c['verify']['rc']}"
                if "train" in c:
                    checks += f", train exit {c['train']['rc']} ({c['train']['wall_s']:.0f} s)"
            rows.append([method, path, f"{r['wall_s']:.1f}", f"{r['edges_per_s'] / 1e6:.2f}M",
                         _mib(r["peak_rss_anon_bytes"]), common.fmt_ratio(r["peak_rss_anon_bytes"] / g["input_bytes"], 3),
                         _mib(r.get("peak_rss_file_bytes")), _mib(r.get("vm_hwm_bytes")), stages,
                         f"{rep['edge_cut']:,}" if rep.get("edge_cut") is not None else "-",
                         f"{rep['comm_volume']:,}" if rep.get("comm_volume") is not None else "-",
                         f"{rep['node_balance']:.3f}" if rep.get("node_balance") is not None else "-", checks])
    L.append(common.markdown_table(head, rows))
    L += ["", "## pymetis: does it copy its input?", ""]
    f = res["pymetis_copy"]
    if f:
        if f.get("verdict"):
            L.append(f"**Finding: {f['verdict']}.**")
            L.append("")
        L.append("Peak RssAnon of pymetis alone: "
                 + "; ".join(f"{_MODE_LABEL[m]} {_mib(v)} MiB" for m, v in f["peaks"].items())
                 + f". The arrays (`xadj` + `adjncy`, index dtype) are {_mib(f['array_bytes'])} MiB. Loaded and "
                 "mapped differ by the loaded arrays themselves whether pymetis copies or not, so the "
                 "control decides: the same CSR mapped as int32, which pymetis has to convert to its index "
                 f"dtype. The metis target divides by the smaller of loaded and mapped ({f['reference']}). "
                 "pymetis's own `warn_on_copies=True` said: "
                 + "; ".join(f"{_MODE_LABEL[m]}: {', '.join(w) if w else 'no copy warning'}"
                             for m, w in f["copy_warnings"].items()) + ".")
        for mode, r in res["pymetis"].items():
            if r and r.get("rss_anon_after_load") is not None:
                L.append(f"- {_MODE_LABEL[mode]}: RssAnon {_mib(r['rss_anon_after_imports'])} MiB after the imports, "
                         f"{_mib(r['rss_anon_after_load'])} MiB after `np.load`, "
                         f"{_mib(r['rss_anon_after_call'])} MiB after `part_graph` returned.")
    else:
        L.append("Not measured (metis not among the methods).")
    train = [r.get("checks", {}).get("train") for by in res["summary"].values() for r in by.values() if r]
    train = [t for t in train if t]
    if train:
        L += ["", "## Training check", ""]
        for t in train:
            L.append(f"`{t['command']}`: exit {t['rc']} in {t['wall_s']:.1f} s"
                     + (f"; {t['final_line']}" if t.get("final_line") else "") + ".")
    L.append("")
    return "\n".join(L)


def _final_line(run: dict[str, Any]) -> str | None:
    """Rank 0's ``final:`` line of a training run's output, if any."""
    for path in (run["stderr"], run["stdout"]):
        for line in reversed(_tail(path, 1 << 16).splitlines()):
            if "final" in line and "{" in line:
                return line.strip()[-400:]
    return None


# ----------------------------------------------------------------------------- main
def parse_args(argv: list[str]) -> tuple[BenchConfig, Path | None]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"{QUICK['nodes']:,} nodes, {QUICK['edges']:,} edges, {QUICK['features']} features; "
                         "no training check unless --train")
    ap.add_argument("--nodes", type=int, default=None, help="nodes (default 4,000,000)")
    ap.add_argument("--edges", type=int, default=None, help="directed edges (default 40,000,000)")
    ap.add_argument("--features", type=int, default=None, help="float32 features per node (default 64)")
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=None)
    ap.add_argument("--paths", nargs="+", choices=PATHS, default=None,
                    help="which paths run (default: both, interleaved)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1, help="rounds of every case (medians reported)")
    train = ap.add_mutually_exclusive_group()
    train.add_argument("--train", dest="train", action="store_true", default=None,
                       help="run the training check (default: on, off with --quick)")
    train.add_argument("--no-train", dest="train", action="store_false")
    ap.add_argument("--cache-dir", default=None, help="generated graphs and partition folders "
                                                      "(default benchmarks/.cache/out_of_core)")
    ap.add_argument("--keep", action="store_true", help="keep the partition folders and logs")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per child process")
    ap.add_argument("--out", type=Path, default=None,
                    help="result stem (default benchmarks/results/out_of_core_<hw>_<date>[_quick])")
    a = ap.parse_args(argv)
    sizes = QUICK if a.quick else {}
    cfg = BenchConfig(quick=a.quick, parts=a.parts, seed=a.seed, keep=a.keep, timeout_s=a.timeout,
                      repeats=a.repeats, train=(not a.quick) if a.train is None else a.train)
    for k in ("nodes", "edges", "features"):
        setattr(cfg, k, getattr(a, k) if getattr(a, k) is not None else sizes.get(k, getattr(cfg, k)))
    if a.methods:
        cfg.methods = [m for m in METHODS if m in a.methods]
    if a.paths:
        cfg.paths = [p for p in PATHS if p in a.paths]
    if a.cache_dir:
        cfg.cache_dir = a.cache_dir
    if cfg.repeats < 1 or cfg.parts < 2:
        ap.error(f"--repeats must be >= 1 and --parts >= 2 (got {cfg.repeats}, {cfg.parts})")
    try:
        cfg.spec()
    except ValueError as e:
        ap.error(str(e))
    return cfg, a.out


def check_disk(cfg: BenchConfig) -> str | None:
    """One line when less than 3x the input's bytes are free where the cache goes, else None."""
    root = Path(cfg.cache_dir)
    probe = root
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    need = 3 * cfg.spec().input_bytes()
    if free < need:
        return (f"out_of_core: only {common.fmt_bytes(free)} free at {probe}, but the input is "
                f"{common.fmt_bytes(cfg.spec().input_bytes())} and the run needs 3x that "
                f"({common.fmt_bytes(need)}: npy-dir, .npz peer, partition folders); free space or pass "
                "--cache-dir on a larger disk, or smaller --nodes/--edges/--features")
    return None


def run_dir(cache: GraphCache) -> Path:
    """Partition folders, scratch folders and the children's logs of a run (deleted at the end
    unless ``--keep``)."""
    return cache.dir / "runs"


def prepare(cache: GraphCache, what: str, timeout_s: float, index_bytes: int = 8) -> dict[str, Any]:
    """One product of the cache (``npy``, ``npz``, ``adjacency``): reused when made before, else
    made by a measured child, whose peak memory is recorded with it."""
    done = cache.cached(what, index_bytes)
    if done:
        return {"cached": True, **done}
    spec = {"cache_dir": str(cache.dir.parent), "spec": asdict(cache.spec), "what": what, "index_bytes": index_bytes}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "prepare", json.dumps(spec)]
    cache.dir.mkdir(parents=True, exist_ok=True)
    r = run_measured(cmd, run_dir(cache) / "logs", f"prepare-{what}", timeout_s=timeout_s)
    made = _result_line(r["stdout"]) if r["rc"] == 0 else None
    if made is None:
        raise RuntimeError(f"preparing the {what} of {cache.dir} failed (exit {r['rc']}):\n{_tail(r['stderr'])}")
    peaks = {"peak_rss_anon_bytes": r["peak_rss_anon_bytes"], "vm_hwm_bytes": r["vm_hwm_bytes"],
             "process_wall_s": r["wall_s"]}
    cache.annotate(what, **peaks)
    return {**made, **peaks}


def run_benchmark(cfg: BenchConfig, command: str) -> dict[str, Any]:
    import pymetis

    t_start = time.perf_counter()
    env_before = common.environment(("numpy", "scipy"))
    spec = cfg.spec()
    cache = GraphCache(cfg.cache_dir, spec)
    made = prepare(cache, "npy", cfg.timeout_s)
    log.info("npy-dir %s: %s (%s)", cache.npy_dir,
             "cached" if made["cached"] else f"generated in {made['seconds']:.1f} s, peak RssAnon "
             f"{common.fmt_bytes(made['peak_rss_anon_bytes'])}", common.fmt_bytes(sum(made["file_bytes"].values())))
    npz = prepare(cache, "npz", cfg.timeout_s)
    log.info(".npz peer: %s", "cached" if npz["cached"] else f"written in {npz['seconds']:.1f} s")
    width = pymetis._internal._idx_type_width() // 8
    adj = prepare(cache, "adjacency", cfg.timeout_s, width) if "metis" in cfg.methods else {}
    if adj:
        log.info("symmetric adjacency: %s, %d undirected edges",
                 "cached" if adj["cached"] else f"built in {adj['seconds']:.1f} s", adj["undirected_edges"])
    base = measure_baseline(run_dir(cache) / "logs", cfg.timeout_s)
    caps = base["capabilities"]
    ooc = caps["npy-dir"]
    log.info("out-of-core path: --input-format npy-dir %s, --scratch-dir %s",
             *("available" if caps[k] else "NOT available yet" for k in ("npy-dir", "scratch-dir")))
    input_bytes = sum(made["file_bytes"].values())
    raw = Runner(cfg, cache, caps).run_all()
    raw["baseline"] = base
    env_after = common.environment(())
    results = analyse(cfg, raw, input_bytes)
    graph = {"nodes": spec.nodes, "edges": spec.edges, "features": spec.features, "classes": spec.classes,
             "blocks": spec.blocks, "block_size": spec.block_size, "p_local": spec.p_local,
             "intra_block_fraction": made["intra_block_fraction"], "input_bytes": input_bytes,
             "file_bytes": made["file_bytes"], "npz_bytes": npz.get("file_bytes"), "cached": made["cached"],
             "generate_s": made["seconds"], "generate_peak_rss_anon_bytes": made.get("peak_rss_anon_bytes"),
             "npz_write_s": npz["seconds"], "npz_peak_rss_anon_bytes": npz.get("peak_rss_anon_bytes"),
             **{k: adj[k] for k in ("undirected_edges", "isolated_nodes", "max_degree", "index_bytes") if k in adj},
             "adjacency_s": adj.get("seconds"), "adjacency_peak_rss_anon_bytes": adj.get("peak_rss_anon_bytes"),
             "cache_dir": str(cache.dir)}
    return {"command": command, "config": asdict(cfg), "environment": env_before,
            "partitioners_digest": common.source_digest(_ROOT / "partitioners")[:16],
            "load_average_after": env_after["load_average_1_5_15"], "versions": _versions(),
            "out_of_core_available": ooc, "partition_capabilities": caps, "graph": graph,
            "wall_s": time.perf_counter() - t_start, "results": results, "raw": raw}


def _versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for dist in ("numpy", "scipy", "pymetis", "gnn-dist"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--child"]:
        return _child_main(argv[1:])
    logging.basicConfig(level=logging.INFO, format="[out-of-core] %(message)s")
    cfg, out = parse_args(argv)
    problem = check_disk(cfg)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    command = "python benchmarks/out_of_core.py" + (" " + " ".join(argv) if argv else "")
    payload = run_benchmark(cfg, command)
    stem = out or common.default_result_stem("out_of_core", "_quick" if cfg.quick else "")
    markdown = render_markdown(payload)
    json_path, md_path = common.write_results(stem, payload, markdown)
    print(markdown)
    for t in payload["results"]["targets"]:
        log.info("%s [%s]: %s (%s) %s", t["what"], t["where"], f"{t['value']:.4g}", t["target"],
                 "-" if t["ok"] is None else ("ok" if t["ok"] else "MISSED"))
    finding = payload["results"]["pymetis_copy"].get("verdict")
    if finding:
        log.info("pymetis: %s", finding)
    log.info("wrote %s and %s", json_path, md_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
