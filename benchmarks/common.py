"""Shared helpers for the benchmark scripts: timing, memory, interleaving, result files.

Nothing here knows about a particular benchmark (or imports torch), so every script in
``benchmarks/`` can use it::

    import common                                     # benchmarks/ is sys.path[0] for a script;
                                                      # importing it puts the repo root and tests/ there too
    times = common.interleave({"ours": step_a, "peer": step_b}, rounds=5)   # ABAB...
    summary = {name: common.summarize(t) for name, t in times.items()}
    common.write_results("benchmarks/results/theme_cpu2_2026-01-01", payload, markdown)

Results are written atomically (temp file + rename), one JSON with the raw numbers and one
Markdown report next to it, named ``[theme]_[hardware]_[date]`` (see ``docs`` and STYLE.md §9).
"""

from __future__ import annotations

import datetime as _dt
import importlib
import json
import logging
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (str(ROOT), str(ROOT / "tests")):  # gnn_dist/partitioners without an install; mp_utils
    if _path not in sys.path:
        sys.path.insert(0, _path)

__all__ = [
    "timed",
    "interleave",
    "summarize",
    "peak_rss_bytes",
    "current_rss_bytes",
    "cpu_usage",
    "environment",
    "hardware_tag",
    "default_result_stem",
    "markdown_table",
    "fmt_bytes",
    "fmt_ratio",
    "write_text_atomic",
    "write_json_atomic",
    "write_results",
    "repo_root",
    "source_digest",
]

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- timing
def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``(fn(*args, **kwargs), wall seconds)`` measured with ``time.perf_counter``."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def interleave(runners: Mapping[str, Callable[[], Any]], rounds: int | Mapping[str, int],
               *, warmup: int = 0) -> dict[str, list[float]]:
    """Run the peers' measurements interleaved, A B C A B C ..., and collect their times.

    Each runner performs one measured unit (e.g. one training epoch) and returns its own time
    in seconds (an int or float); anything else (None, a tensor, ...) means "time the call from
    outside" (its wall time). ``warmup`` calls of
    each runner come first, interleaved the same way, and are not recorded. ``rounds`` may be
    a per-runner mapping: a runner with fewer rounds simply drops out of the later ones.
    Interleaving spreads the background load of a shared machine over all peers alike.

    Returns ``{name: [seconds of round 0, round 1, ...]}``.
    """
    per = {name: (rounds[name] if isinstance(rounds, Mapping) else rounds) for name in runners}
    for name, n in per.items():
        if n < 0:
            raise ValueError(f"interleave: rounds for {name!r} must be >= 0, got {n}")
    if warmup < 0:
        raise ValueError(f"interleave: warmup must be >= 0, got {warmup}")
    for _ in range(warmup):
        for name, fn in runners.items():
            if per[name] > 0:
                fn()
    times: dict[str, list[float]] = {name: [] for name in runners}
    for r in range(max(per.values(), default=0)):
        for name, fn in runners.items():
            if r < per[name]:
                own, wall = timed(fn)
                is_time = isinstance(own, (int, float)) and not isinstance(own, bool)
                times[name].append(float(own if is_time else wall))
    return times


def summarize(values: Iterable[float]) -> dict[str, float | int]:
    """``median``, ``min``, ``max``, quartiles ``q1``/``q3`` and ``n`` of ``values`` (NaN when empty)."""
    v = sorted(float(x) for x in values)
    if not v:
        nan = float("nan")
        return {"n": 0, "median": nan, "min": nan, "max": nan, "q1": nan, "q3": nan}
    if len(v) >= 2:
        q1, _, q3 = statistics.quantiles(v, n=4, method="inclusive")
    else:
        q1 = q3 = v[0]
    return {"n": len(v), "median": statistics.median(v), "min": v[0], "max": v[-1], "q1": q1, "q3": q3}


# ----------------------------------------------------------------------------- memory
def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far, in bytes (``ru_maxrss``; Linux: KiB)."""
    scale = 1 if sys.platform == "darwin" else 1024
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale


def cpu_usage() -> dict[str, float]:
    """This process's CPU use so far (all threads): ``user_s``, ``sys_s`` (kernel time: page faults,
    system calls), ``minor_faults``. Subtract two snapshots to get a region's share."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return {"user_s": r.ru_utime, "sys_s": r.ru_stime, "minor_faults": float(r.ru_minflt)}


def current_rss_bytes() -> int:
    """Resident set size of this process now, in bytes (``/proc/self/statm``, else psutil)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import psutil

        return int(psutil.Process().memory_info().rss)


# ----------------------------------------------------------------------------- environment
def repo_root() -> Path:
    """The repository root (the parent of ``benchmarks/``)."""
    return Path(__file__).resolve().parent.parent


def _version(module: str) -> str | None:
    try:
        return str(getattr(importlib.import_module(module), "__version__", "unknown"))
    except Exception:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_revision() -> str | None:
    """``git rev-parse --short HEAD`` (read-only), or None outside a checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo_root(), capture_output=True,
                             text=True, timeout=10, check=True)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def source_digest(folder: str | os.PathLike[str], pattern: str = "*.py") -> str:
    """sha256 over the relative paths and contents of the files under ``folder`` matching
    ``pattern`` (sorted): ties a result to the exact sources, committed or not."""
    import hashlib

    root = Path(folder)
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob(pattern) if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def cached_metis_partitions(dataset: str, parts: Iterable[int], seed: int,
                            cache_dir: str | os.PathLike[str],
                            edge_split: Sequence[float] | None = None,
                            part_weights: Sequence[float] | None = None) -> dict[int, str]:
    """P -> a METIS partition folder of catalog ``dataset`` for each P in ``parts``, made once and
    kept under ``cache_dir``. The folder name carries a digest of the ``partitioners`` sources,
    so a change to the generators, the partitioner or the format makes new folders instead of
    silently reusing graphs the current code would not produce. ``edge_split`` (train, val, test
    fractions) partitions the graph with that edge split, as ``gnn-dist partition --edge-split``
    does (seeded with ``seed``), for link prediction."""
    from partitioners.api import partition_graph
    from partitioners.catalog import load_dataset
    from partitioners.format import load_partition_meta

    digest = source_digest(repo_root() / "partitioners")[:12]
    split_tag = "" if edge_split is None else "-split" + ",".join(f"{f:g}" for f in edge_split)
    split_tag += "" if part_weights is None else "-w" + ",".join(f"{w:g}" for w in part_weights)
    graph, extra = None, {}
    paths: dict[int, str] = {}
    for num_parts in parts:
        path = Path(cache_dir) / "partitions" / f"{dataset}{split_tag}-metis-seed{seed}-p{num_parts}-{digest}"
        try:
            meta = load_partition_meta(path)
            ok = meta.num_parts == num_parts and meta.name == dataset
        except Exception:
            ok = False
        if not ok:
            if graph is None:
                graph, t = timed(load_dataset, dataset, seed=seed)
                log.info("generated %s in %.1f s", dataset, t)
                if edge_split is not None:
                    from partitioners.io.edge_split import with_edge_split

                    graph, extra["edge_split"] = with_edge_split(graph, edge_split, seed)
            _, t = timed(partition_graph, graph, num_parts, "metis", path, seed=seed, overwrite=True,
                         extra_meta=extra or None, part_weights=part_weights)
            log.info("partitioned %s into %d parts in %.1f s -> %s", dataset, num_parts, t, path)
        paths[num_parts] = str(path)
    return paths


def environment(packages: Sequence[str] = ()) -> dict[str, Any]:
    """What a result depends on: date, host, CPU, memory, load, Python and ``packages`` versions."""
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = None
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": mem,
        "load_average_1_5_15": load,
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in packages},
        "git_revision": _git_revision(),
    }


def hardware_tag() -> str:
    """``cpu<N>`` (logical CPUs) for result file names; ``gpu<N>`` when torch sees CUDA devices."""
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        if torch.cuda.is_available():
            return f"gpu{torch.cuda.device_count()}"
    return f"cpu{os.cpu_count()}"


def default_result_stem(theme: str, suffix: str = "") -> Path:
    """``benchmarks/results/[theme]_[hardware]_[date][suffix]`` (no extension); a second run of
    the day gets ``_2``, ``_3``, ... rather than overwriting the first's files."""
    name = f"{theme}_{hardware_tag()}_{_dt.date.today().isoformat()}{suffix}"
    folder = repo_root() / "benchmarks" / "results"
    stem, n = folder / name, 1
    while any(stem.with_name(stem.name + ext).exists() for ext in (".md", ".json", ".txt", ".csv")):
        n += 1
        stem = folder / f"{name}_{n}"
    return stem


# ----------------------------------------------------------------------------- formatting
def fmt_bytes(n: float | int | None) -> str:
    """``1536 -> '1.50 KiB'``; ``None``/NaN -> ``'-'``."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def fmt_ratio(x: float | None, digits: int = 2) -> str:
    """``0.7512 -> '0.75x'``; ``None``/NaN -> ``'-'``."""
    if x is None or math.isnan(x):
        return "-"
    return f"{x:.{digits}f}x"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub Markdown table; cells are ``str()``-ed, ``|`` escaped."""
    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |",
             "| " + " | ".join("---" for _ in headers) + " |"]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"markdown_table: a row has {len(row)} cells but there are {len(headers)} headers")
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- files
def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` through a temp file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _json_default(o: Any) -> Any:
    if hasattr(o, "item") and callable(o.item):  # numpy / torch scalars
        return o.item()
    if hasattr(o, "tolist") and callable(o.tolist):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"cannot write a {type(o).__name__} to JSON")


def write_json_atomic(path: str | os.PathLike[str], payload: Any) -> Path:
    """``payload`` as indented JSON (numpy/torch scalars and arrays converted), atomically.

    NaN/inf are written as ``null`` so the file is strict JSON.
    """
    def clean(o: Any) -> Any:
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, Mapping):
            return {str(k): clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        return o

    return write_text_atomic(path, json.dumps(clean(payload), indent=2, default=_json_default) + "\n")


def write_results(stem: str | os.PathLike[str], payload: Any, markdown: str) -> tuple[Path, Path]:
    """Write ``stem.json`` (raw numbers) and ``stem.md`` (the report); returns both paths."""
    stem = Path(stem)
    if stem.suffix in (".md", ".json"):
        stem = stem.with_suffix("")
    json_path = write_json_atomic(stem.with_name(stem.name + ".json"), payload)
    md_path = write_text_atomic(stem.with_name(stem.name + ".md"), markdown)
    return json_path, md_path
