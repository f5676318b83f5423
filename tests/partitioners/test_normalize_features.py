"""``gnn-dist partition --normalize-features row|standard`` (issue 36): the features normalised at
partition time, as PyG's ``NormalizeFeatures`` does (``row``) or to zero-mean unit-variance
columns (``standard``), in memory and out of core alike, and recorded in ``partition.json``."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from corpus.corpus_utils import error_lines, run_cli
from partitioners import load_part, load_partition_meta, verify_partition
from partitioners import normalize
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE
from partitioners.format import writer as writer_mod
from partitioners.io import read_graph
from partitioners.normalize import normalize_features, normalize_graph_features
from partitioners.outofcore import npy_dir

pytestmark = pytest.mark.usefixtures("clean_registry")


@pytest.fixture
def small_chunks(monkeypatch):
    """Every pass takes a few rows at a time, so chunk boundaries fall inside the matrix."""
    monkeypatch.setattr(normalize, "CHUNK_BYTES", 40)
    monkeypatch.setattr(npy_dir, "CHUNK_BYTES", 96)
    monkeypatch.setattr(writer_mod, "NODE_DATA_STEP_BYTES", 64)


def _bag_of_words(seed: int = 0, n: int = 50, f: int = 12) -> np.ndarray:
    """Nonnegative counts with an all-zero row and a row summing to less than 1."""
    rng = np.random.default_rng(seed)
    x = (rng.random((n, f)) < 0.3) * rng.integers(1, 4, (n, f))
    x = x.astype(np.float32)
    x[3] = 0
    x[7] = 0
    x[7, 2] = 0.25
    return x


def _pyg_normalize(x: np.ndarray) -> np.ndarray:
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import Data
    from torch_geometric.transforms import NormalizeFeatures

    return NormalizeFeatures()(Data(x=torch.from_numpy(x.copy()))).x.numpy()


def _node_features(out: Path) -> np.ndarray:
    """The features of every node, by original id, read back from the parts."""
    meta = load_partition_meta(out)
    rows = np.full((meta.num_nodes, meta.feature_dim), np.nan, np.float32)
    for p in range(meta.num_parts):
        part = load_part(out, p)
        rows[part.original_ids[:part.num_inner]] = part.features
    assert not np.isnan(rows).any()
    return rows


def _folder_bytes(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.npy"))}


def _scratch_left(folder: Path) -> list[str]:
    gc.collect()
    return [p.name for p in folder.rglob(".gnn-dist-scratch*")]


# --------------------------------------------------------------------------------- the math
@pytest.mark.parametrize("shift", [0.0, 0.5, -2.0])
def test_row_is_pygs_normalize_features(shift, small_chunks):
    x = _bag_of_words() + np.float32(shift)  # 0.5: no zero left; -2: negative entries
    got = normalize_features(x, "row")
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, _pyg_normalize(x), rtol=0, atol=1e-6)
    if shift == 0.0:
        assert not got[3].any()                                   # an all-zero row stays zero
        np.testing.assert_array_equal(got[7], x[7])               # sum 0.25 < 1: divided by 1
        sums = got.sum(axis=1)
        big = x.sum(axis=1) >= 1
        np.testing.assert_allclose(sums[big], 1.0, rtol=1e-6)


def test_standard_makes_zero_mean_unit_std_columns(small_chunks):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((200, 9)) * rng.uniform(0.1, 30, 9) + rng.uniform(-50, 50, 9)).astype(np.float32)
    x[:, 4] = 0.1                                                 # constant: mean 0.1 is not exact in float
    got = normalize_features(x, "standard")
    assert got.dtype == np.float32
    assert not got[:, 4].any()                                    # centred at 0, not divided by ~0
    rest = np.delete(got, 4, axis=1).astype(np.float64)
    np.testing.assert_allclose(rest.mean(axis=0), 0.0, atol=1e-6)
    np.testing.assert_allclose(rest.std(axis=0), 1.0, atol=1e-5)  # population std (ddof 0)
    x64 = np.delete(x, 4, axis=1).astype(np.float64)
    np.testing.assert_allclose(rest, (x64 - x64.mean(0)) / x64.std(0), rtol=0, atol=1e-6)


def test_float16_stays_float16_and_the_input_is_untouched(small_chunks):
    x = _bag_of_words().astype(np.float16)
    before = x.copy()
    for how in ("row", "standard"):
        got = normalize_features(x, how)
        assert got.dtype == np.float16
        np.testing.assert_array_equal(x, before)
    with pytest.raises(ValueError, match=r"unknown feature normalisation 'l2'; choose one of row, standard"):
        normalize_features(x, "l2")


def test_memory_mapped_features_are_never_loaded_whole(tmp_path, monkeypatch):
    """An npy-dir's features (16 MB) are normalised into a scratch map: numpy's allocations stay
    far below the matrix, and the scratch file goes with the graph."""
    n, f = 4000, 1024
    monkeypatch.setattr(normalize, "CHUNK_BYTES", 1 << 16)
    monkeypatch.setattr(npy_dir, "CHUNK_BYTES", 1 << 16)
    rng = np.random.default_rng(0)
    g = tmp_path / "g"
    g.mkdir()
    np.save(g / "src.npy", rng.integers(0, n, 1000))
    np.save(g / "dst.npy", rng.integers(0, n, 1000))
    x = rng.random((n, f), dtype=np.float32)
    np.save(g / "features.npy", x)
    for how in ("row", "standard"):
        graph = read_graph(g, scratch_dir=tmp_path)
        gc.collect()
        tracemalloc.start()
        try:
            normalize_graph_features(graph, how)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < x.nbytes / 16, (how, peak)
        assert isinstance(graph.x, np.memmap) and not graph.x.flags.writeable
        np.testing.assert_array_equal(graph.x, normalize_features(x, how))
        del graph
        assert _scratch_left(tmp_path) == []


# ------------------------------------------------------------------------------- the folder
@pytest.mark.parametrize("how", ["row", "standard"])
def test_the_folder_holds_the_normalised_features_and_the_record(capsys, tmp_path, how):
    x = _bag_of_words(n=60)
    rng = np.random.default_rng(2)
    np.savez(tmp_path / "g.npz", src=rng.integers(0, 60, 400), dst=rng.integers(0, 60, 400), x=x,
             y=rng.integers(0, 3, 60))
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "partition", "--input", tmp_path / "g.npz", "--parts", "3",
                                "--split", "0.6,0.2,0.2", "--normalize-features", how, "--out", out,
                                "--no-progress", "--json")
    assert code == EXIT_OK, err
    assert f"normalized the features ({how}, float32[60, 12])" in err
    np.testing.assert_array_equal(_node_features(out), normalize_features(x, how))
    meta = load_partition_meta(out)
    assert meta.raw["normalize_features"] == how and meta.feature_dtype == "float32"
    assert verify_partition(out) == []
    # without the flag: the features as given, and no record
    code, _, err = run_cli(capsys, "partition", "--input", tmp_path / "g.npz", "--parts", "3",
                           "--split", "0.6,0.2,0.2", "--out", tmp_path / "plain", "--no-progress")
    assert code == EXIT_OK, err
    np.testing.assert_array_equal(_node_features(tmp_path / "plain"), x)
    assert "normalize_features" not in json.loads((tmp_path / "plain" / "partition.json").read_text())


def test_a_catalog_dataset_takes_the_flag(capsys, tmp_path):
    from partitioners.catalog import load_dataset

    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "2",
                           "--normalize-features", "standard", "--out", out, "--no-progress")
    assert code == EXIT_OK, err
    np.testing.assert_array_equal(_node_features(out), normalize_features(load_dataset("sbm-tiny").x, "standard"))
    assert load_partition_meta(out).raw["normalize_features"] == "standard"


def test_memory_mapped_features_files_of_an_in_memory_input(capsys, tmp_path):
    """``--features F.npy`` is opened memory-mapped: its normalisation goes to a scratch map beside
    ``--out``, removed at once (the file is unlinked when mapped)."""
    x = _bag_of_words(n=40)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "e.npy", np.array([[0, 1, 2, 39], [1, 2, 3, 0]]))
    out = tmp_path / "parts" / "out"
    code, _, err = run_cli(capsys, "partition", "--input", tmp_path / "e.npy", "--features", tmp_path / "x.npy",
                           "--parts", "2", "--normalize-features", "row", "--out", out, "--no-progress")
    assert code == EXIT_OK, err
    np.testing.assert_array_equal(_node_features(out), normalize_features(x, "row"))
    assert _scratch_left(tmp_path) == []


@pytest.mark.parametrize("how, flags", [("row", []), ("standard", ["--symmetrize"]), ("row", ["--method", "fennel"])])
def test_out_of_core_is_byte_identical_to_in_memory(tmp_path, small_chunks, how, flags):
    from gnn_dist_cli.command import main

    rng = np.random.default_rng(3)
    n = 120
    g = tmp_path / "g"
    g.mkdir()
    arrays = {"src": rng.integers(0, n, 900).astype(np.int32), "dst": rng.integers(0, n, 900),
              "features": np.abs(rng.standard_normal((n, 7))) * (rng.random((n, 1)) < 0.9),   # float64, zero rows
              "labels": rng.integers(0, 4, n).astype(np.int32), "train_mask": rng.random(n) < 0.5}
    for name, a in arrays.items():
        np.save(g / f"{name}.npy", a)
    np.savez(tmp_path / "g.npz", **arrays)
    outs = []
    for source in ("g", "g.npz"):
        out = tmp_path / f"out-{source}"
        assert main(["-q", "partition", "--input", str(tmp_path / source), "--parts", "3", "--out", str(out),
                     "--no-progress", "--normalize-features", how, *flags]) == EXIT_OK
        outs.append(out)
    disk, memory = outs
    a, b = _folder_bytes(disk), _folder_bytes(memory)
    assert a == b and any(k.endswith("features.npy") for k in a)
    for out in outs:
        assert json.loads((out / "partition.json").read_text())["normalize_features"] == how
    expected = normalize_features(arrays["features"].astype(np.float32), how)
    np.testing.assert_array_equal(_node_features(disk), expected)
    assert _scratch_left(tmp_path) == []
    assert main(["-q", "inspect", "--verify", str(disk)]) == EXIT_OK


def test_a_planetoid_folder_row_normalised(capsys, tmp_path):
    from test_planetoid import write_planetoid

    d = write_planetoid(tmp_path / "toy", style="py2")
    out = tmp_path / "parts"
    code, _, err = run_cli(capsys, "partition", "--input", tmp_path / "toy", "--input-format", "planetoid",
                           "--normalize-features", "row", "--parts", "2", "--out", out, "--no-progress")
    assert code == EXIT_OK, err
    x = _node_features(out)
    nonzero = d["x"].any(axis=1)
    nonzero[528] = False                                   # missing from test.index: zero features
    np.testing.assert_allclose(x[nonzero].sum(axis=1), 1.0, rtol=1e-6)
    assert not x[~nonzero].any()
    np.testing.assert_allclose(x, _pyg_normalize(read_graph(tmp_path / "toy").x), rtol=0, atol=1e-6)
    meta = load_partition_meta(out)
    assert meta.raw["normalize_features"] == "row" and meta.split["kind"] == "planetoid"


# ------------------------------------------------------------------------------- refusals
def test_a_graph_without_features_is_one_line_exit_2(capsys, tmp_path):
    np.save(tmp_path / "e.npy", np.array([[0, 1, 2], [1, 2, 0]]))
    g = tmp_path / "g"
    g.mkdir()
    np.save(g / "src.npy", np.array([0, 1, 2]))
    np.save(g / "dst.npy", np.array([1, 2, 0]))
    for source, fix in ((tmp_path / "e.npy", "--features F.npy"), (g, "features.npy to the npy-dir")):
        code, stdout, err = run_cli(capsys, "partition", "--input", source, "--parts", "2", "--out",
                                    tmp_path / "out", "--no-progress", "--normalize-features", "row")
        lines = error_lines(err)
        assert code == EXIT_USAGE and stdout == "" and len(lines) == 1, err
        assert lines[0] == (f"[gnn-dist] error: --normalize-features row: {source} has no features to "
                            f"normalise; add {fix}, or drop --normalize-features"), lines
        assert not (tmp_path / "out").exists()
    code, _, err = run_cli(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "2", "--out", tmp_path / "o",
                           "--normalize-features", "l1")
    assert code == EXIT_USAGE and "--normalize-features: invalid choice: 'l1'" in err
