"""``benchmarks/out_of_core.py`` (issue 14's benchmark) on tiny inputs: the generator is seeded,
chunked and has the community structure it claims, the symmetric adjacency is the simple
undirected graph, the memory sampler sees what a child allocates (anonymous vs file pages), the
pymetis copy verdict follows the control, and the whole harness runs end to end in quick mode
(partition, ``inspect --verify``, result files) on a graph small enough for a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import out_of_core as ooc  # noqa: E402
import out_of_core_graph as gen  # noqa: E402


def _read_dir(folder: Path) -> dict[str, np.ndarray]:
    return {name: np.load(folder / f"{name}.npy") for name in gen.ARRAYS}


def test_generator_is_seeded_chunked_and_has_communities(tmp_path, monkeypatch):
    monkeypatch.setattr(gen, "EDGE_CHUNK", 997)   # many chunks, a ragged last one
    monkeypatch.setattr(gen, "NODE_CHUNK", 301)
    spec = gen.GraphSpec(nodes=3000, edges=20000, features=5, classes=4, block_size=100, seed=3)
    info = gen.generate_npy_dir(spec, tmp_path / "a")
    gen.generate_npy_dir(spec, tmp_path / "b")
    a, b = _read_dir(tmp_path / "a"), _read_dir(tmp_path / "b")
    for name in gen.ARRAYS:
        assert np.array_equal(a[name], b[name]), name          # same spec, same bytes
    gen.generate_npy_dir(gen.GraphSpec(nodes=3000, edges=20000, features=5, classes=4, block_size=100, seed=4),
                         tmp_path / "c")
    assert not np.array_equal(np.load(tmp_path / "c" / "src.npy"), a["src"])   # another seed, another graph

    assert a["src"].dtype == a["dst"].dtype == np.int64 and a["src"].shape == (20000,)
    assert a["features"].dtype == np.float32 and a["features"].shape == (3000, 5)
    assert a["labels"].dtype == np.int64 and set(np.unique(a["labels"])) == set(range(4))
    assert 0 <= a["src"].min() and max(a["src"].max(), a["dst"].max()) < 3000
    masks = np.stack([a["train_mask"], a["val_mask"], a["test_mask"]]).astype(int)
    assert (masks.sum(0) == 1).all() and 0.5 < a["train_mask"].mean() < 0.7
    blocks = spec.blocks
    intra = np.mean(a["src"] % blocks == a["dst"] % blocks)
    assert 0.87 < intra < 0.93 and info["intra_block_fraction"] == pytest.approx(intra)
    assert np.mean(a["labels"] == (np.arange(3000) % blocks) % 4) > 0.75     # labels follow the blocks
    meta = json.loads((tmp_path / "a" / "graph.json").read_text())
    assert meta["num_nodes"] == 3000 and meta["num_classes"] == 4
    sizes = {n: (tmp_path / "a" / f"{n}.npy").stat().st_size for n in gen.ARRAYS}
    assert all(sizes[n] - spec.array_bytes()[n] == 128 for n in gen.ARRAYS)  # data plus one header


def test_symmetric_adjacency_and_npz_peer(tmp_path):
    spec = gen.GraphSpec(nodes=400, edges=3000, features=2, block_size=20, seed=1)
    cache = gen.GraphCache(tmp_path, spec)
    assert not cache.ensure_npy_dir()["cached"] and cache.ensure_npy_dir()["cached"]
    cache.ensure_npz()
    made = cache.ensure_adjacency(np.int64)
    src, dst = np.load(cache.npy_dir / "src.npy"), np.load(cache.npy_dir / "dst.npy")
    want = {(int(u), int(v)) for u, v in zip(src, dst) if u != v}
    want |= {(v, u) for u, v in want}
    xadj, adjncy = np.load(cache.adjacency_dir / "xadj.npy"), np.load(cache.adjacency_dir / "adjncy.npy")
    assert xadj.dtype == adjncy.dtype == np.int64 and xadj.shape == (401,)
    got = [(u, int(v)) for u in range(400) for v in adjncy[xadj[u]:xadj[u + 1]]]
    assert len(got) == len(set(got)) and set(got) == want and made["undirected_edges"] == len(want) // 2
    assert np.array_equal(np.load(cache.adjacency_dir / "adjncy32.npy"), adjncy)
    runs = {mode: ooc.child_pymetis(str(cache.adjacency_dir), mode, 4, 0) for mode in ooc.PYMETIS_MODES}
    assert len({r["edge_cuts"] for r in runs.values()}) == 1 and runs["load"]["edge_cuts"] > 0
    assert runs["load"]["copy_warnings"] == runs["mmap"]["copy_warnings"] == []   # int64: used in place
    assert runs["mmap-int32"]["copy_warnings"] and runs["mmap-int32"]["dtype"] == "int32"
    with np.load(cache.npz_path) as z:
        for name in gen.ARRAYS:
            assert np.array_equal(z[name], np.load(cache.npy_dir / f"{name}.npy")), name
        assert int(z["num_nodes"]) == 400 and int(z["num_classes"]) == spec.classes


def test_sampler_separates_anonymous_from_file_pages(tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(b"\1" * (48 << 20))
    anon = ooc.run_measured([sys.executable, "-c", "import time; a = bytearray(b'x' * (96 << 20)); "
                             "time.sleep(0.2)"], tmp_path, "anon", timeout_s=60)
    mapped = ooc.run_measured([sys.executable, "-c", f"import mmap, time; f = open({str(big)!r}, 'rb'); "
                               "m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ); "
                               "s = sum(m[i] for i in range(0, len(m), 4096)); time.sleep(0.2)"],
                              tmp_path, "mapped", timeout_s=60)
    assert anon["rc"] == mapped["rc"] == 0 and anon["samples"] > 5
    assert anon["peak_rss_anon_bytes"] > 96 << 20                 # the buffer is anonymous memory
    assert mapped["peak_rss_file_bytes"] > 48 << 20                # the touched map is file pages ...
    assert mapped["peak_rss_anon_bytes"] < 32 << 20                # ... not anonymous
    assert anon["vm_hwm_bytes"] >= anon["peak_rss_anon_bytes"]
    assert (tmp_path / "anon.out").exists() and (tmp_path / "anon.err").exists()
    fail = ooc.run_measured([sys.executable, "-c", "raise SystemExit(3)"], tmp_path, "fail", timeout_s=60)
    assert fail["rc"] == 3


def _pym(peak: int, arrays: int = 100 << 20) -> dict:
    return {"peak_rss_anon_bytes": peak, "array_bytes": arrays, "dtype": "int64", "copy_warnings": []}


def test_pymetis_copy_verdict_follows_the_control():
    m = 1 << 20
    no_copy = ooc.pymetis_copy_finding({"load": _pym(600 * m), "mmap": _pym(500 * m), "mmap-int32": _pym(600 * m)})
    assert no_copy["copies"] is False and no_copy["reference_bytes"] == 500 * m
    copies = ooc.pymetis_copy_finding({"load": _pym(700 * m), "mmap": _pym(600 * m), "mmap-int32": _pym(605 * m)})
    assert copies["copies"] is True and "copies its input" in copies["verdict"]
    tiny = ooc.pymetis_copy_finding({"load": _pym(30 * m, m), "mmap": _pym(29 * m, m), "mmap-int32": _pym(31 * m, m)})
    assert tiny["copies"] is None and "too small" in tiny["verdict"]
    assert ooc.pymetis_copy_finding({"load": None, "mmap": None}) == {}


def test_refuses_without_disk_space(tmp_path, monkeypatch, capsys):
    class Usage:
        free = 10 << 20

    monkeypatch.setattr(ooc.shutil, "disk_usage", lambda path: Usage)
    assert ooc.main(["--quick", "--cache-dir", str(tmp_path / "c"), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs 3x" in err[0] and "--cache-dir" in err[0]
    assert not (tmp_path / "c").exists()


def test_quick_harness_end_to_end(tmp_path):
    """One method on one path (the out-of-core one once ``partition`` has it): the command line
    the benchmark builds works, its checks run and the result files are written."""
    cache, stem = tmp_path / "cache", tmp_path / "res"
    help_text = subprocess.run(ooc._cli("partition", "--help"), capture_output=True, text=True, timeout=60,
                               cwd=BENCH.parent).stdout
    path = "out-of-core" if ooc.partition_capabilities(help_text)["npy-dir"] else "in-memory"
    rc = ooc.main(["--quick", "--nodes", "3000", "--edges", "30000", "--features", "4", "--methods", "random",
                   "--paths", path, "--no-train", "--cache-dir", str(cache), "--out", str(stem)])
    assert rc == 0
    payload = json.loads(stem.with_suffix(".json").read_text())
    assert "## Targets" in stem.with_suffix(".md").read_text()
    assert payload["graph"]["nodes"] == 3000 and payload["graph"]["edges"] == 30000
    assert payload["graph"]["input_bytes"] == sum(payload["graph"]["file_bytes"].values())
    assert payload["graph"]["generate_peak_rss_anon_bytes"] > 0
    (run,) = payload["raw"]["cases"]["random"][path]
    assert run["rc"] == 0, run.get("error")
    assert run["peak_rss_anon_bytes"] > 0 and run["wall_s"] > 0 and run["report"]["num_edges"] == 30000
    assert payload["raw"]["checked_path"] == path
    assert payload["results"]["summary"]["random"][path]["checks"]["verify"]["rc"] == 0
    assert not any(cache.rglob("parts-*"))                              # partition folders deleted
    whats = {t["what"] for t in payload["results"]["targets"]}
    assert {"random: peak RssAnon / input bytes", "random: edges/s, whole command",
            "random: inspect --verify"} <= whats
