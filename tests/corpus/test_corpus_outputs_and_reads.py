"""Hostile inputs and full disks, the output and reader half (issue 33): the metrics file, the
predictions file, pairs files, OGB archives and the report's metrics reader.

Every hostile file is crafted here. A full disk is simulated in-process (a write raises
``OSError(ENOSPC)``, after writing part of its data where that is what a disk does); tests run as
root, whom a folder's mode does not stop, so a read-only folder is ``os.access`` saying so.
Each case must end in one line naming the file (and the line or field) with its exit code
(2: the input; 1: the disk), leave no half-written file, and stay within the bound
``docs/troubleshooting.md`` states (measured here with tracemalloc where memory is the point).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import json
import os
import tracemalloc
import zipfile
import zlib
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from corpus_utils import error_lines, one_line, run_cli, small_graph
from gnn_dist_cli.command import EXIT_USAGE
from partitioners.format.writer import write_partition
from train_helpers import ErrorLines

pytestmark = pytest.mark.filterwarnings("ignore:Unable to enable fault handler:UserWarning")

TRAIN = ["--model", "gcn", "--hidden", "8", "--layers", "2", "--lr", "0.05", "--seed", "3", "--log-every", "0",
         "--kernels", "torch"]


# ------------------------------------------------------------------------------ helpers
@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A one-part folder and a model trained on it (two epochs, in-process)."""
    from gnn_dist.train import main

    root = tmp_path_factory.mktemp("outputs")
    data = root / "data"
    write_partition(small_graph(), np.zeros(12, np.int32), 1, data, method="test", method_params={}, seed=0)
    assert main(["--data", str(data), "--epochs", "2", *TRAIN, "--save-model", str(root / "model.pt")]) == 0
    return {"data": data, "model": root / "model.pt"}


@contextlib.contextmanager
def full_disk_for(monkeypatch: pytest.MonkeyPatch, target: Path, *, room: int = 0) -> Iterator[None]:
    """``os.write`` to ``target`` writes ``room`` more bytes in all, then raises ENOSPC (a short
    write first, as a disk that fills mid-write does)."""
    real = os.write
    left = [room]

    def write(fd: int, data: Any) -> int:
        try:
            where = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            return real(fd, data)
        if where != target.resolve():
            return real(fd, data)
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real(fd, memoryview(data)[:left[0]])
        left[0] -= n
        return n

    with monkeypatch.context() as m:
        m.setattr(os, "write", write)
        yield


@contextlib.contextmanager
def full_disk_under(monkeypatch: pytest.MonkeyPatch, root: Path) -> Iterator[None]:
    """Files opened with ``os.fdopen`` for writing under ``root`` (atomic_write's temporary
    files) take 100 bytes, then raise ENOSPC."""
    real = os.fdopen

    class Full(io.BufferedWriter):
        written = 0

        def write(self, data: Any) -> int:
            n = memoryview(data).nbytes
            if Full.written + n > 100:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            Full.written += n
            return super().write(data)

    def fdopen(fd: int, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        where = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if "w" in mode and where.is_relative_to(root.resolve()):
            return Full(io.FileIO(fd, "w"))
        return real(fd, mode, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(os, "fdopen", fdopen)
        yield


def gz(text_parts: Iterator[bytes]) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(c.compress(p) for p in text_parts) + c.flush()


# ------------------------------------------------------------------------------ 1. --metrics
def test_a_metrics_record_on_a_full_disk_leaves_the_file_at_its_last_complete_line(tmp_path: Path, monkeypatch):
    from gnn_dist.atomic_file import StorageError
    from gnn_dist.metrics import MetricsFile
    from gnn_dist_cli.run_report import read_metrics

    path = tmp_path / "m.jsonl"
    m = MetricsFile(str(path))
    m.start({"epochs": 3}, 0)
    record = {"train_loss": 0.5, "epoch_time_s": 0.1, "train_acc": 0.5, "val_acc": 0.5, "test_acc": 0.5}
    for epoch in (0, 1):
        m.append({"epoch": epoch, **record})
    before = path.read_bytes()
    for room in (0, 40):   # nothing written, and a short write of 40 bytes before ENOSPC
        with full_disk_for(monkeypatch, path, room=room), pytest.raises(StorageError) as exc:
            m.append({"epoch": 2, **record, "note": "x" * 200})
        one_line(exc, f"cannot write the metrics file {path}", "No space left on device (ENOSPC)",
                 "epoch 2's record was not written", "ends with the last complete record")
        assert exc.value.errno == errno.ENOSPC
        assert path.read_bytes() == before, "the file does not end at its last complete line"
    got = read_metrics(path)
    assert [e["epoch"] for e in got.epochs] == [0, 1] and not got.warnings
    m.append({"epoch": 2, **record})   # the disk has room again: the file goes on whole
    assert [e["epoch"] for e in read_metrics(path).epochs] == [0, 1, 2]

    with full_disk_under(monkeypatch, tmp_path), pytest.raises(StorageError) as exc:   # the config record
        MetricsFile(str(tmp_path / "n.jsonl")).start({"epochs": 3, "pad": "x" * 500}, 0)
    one_line(exc, f"cannot write the metrics file {tmp_path / 'n.jsonl'}", "ENOSPC")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.jsonl"], "a temporary file was left"


def test_train_with_its_metrics_file_on_a_full_disk_ends_in_one_line(run: dict[str, Path], tmp_path: Path,
                                                                    monkeypatch, capsys):
    from gnn_dist import train

    metrics = tmp_path / "m.jsonl"
    argv = ["--data", str(run["data"]), "--epochs", "3", *TRAIN, "--metrics", str(metrics)]
    real_write = os.write
    seen = {"lines": 0}

    def write(fd: int, data: Any) -> int:   # epoch 0's record, then epoch 1's: a short write, then ENOSPC
        try:
            where = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            return real_write(fd, data)
        if where != metrics.resolve():
            return real_write(fd, data)
        seen["lines"] += 1
        if seen["lines"] == 1:
            return real_write(fd, data)
        if seen["lines"] == 2:
            return real_write(fd, memoryview(data)[:25])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", write)
    with ErrorLines("gnn_dist.train") as errors:
        code = train.main(argv)
    monkeypatch.setattr(os, "write", real_write)
    lines = metrics.read_bytes().split(b"\n")
    assert lines[-1] == b"" and [json.loads(x).get("epoch") for x in lines[:-1]] == [None, 0], lines
    assert code == 1 and len(errors.lines) == 1, errors.lines
    assert f"cannot write the metrics file {metrics}" in errors.lines[0] and "epoch 1's record" in errors.lines[0]
    assert "Traceback" not in capsys.readouterr().err


def test_metrics_into_a_missing_or_read_only_folder_is_refused_before_training(run: dict[str, Path],
                                                                               tmp_path: Path, monkeypatch):
    from gnn_dist.train import main

    missing = tmp_path / "no" / "m.jsonl"
    base = ["--data", str(run["data"]), "--epochs", "1", *TRAIN]
    for validate in (["--validate"], []):   # the pre-launch check, and the ranks (torchrun directly)
        with ErrorLines("gnn_dist.train") as errors:
            code = main([*validate, *base, "--metrics", str(missing)])
        assert code == EXIT_USAGE, validate
        if not validate:
            assert len(errors.lines) == 1 and f"--metrics {missing}: the folder {missing.parent} does not exist" \
                in errors.lines[0], errors.lines
        assert not missing.parent.exists()

    locked = tmp_path / "ro"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if Path(p) == locked and mode & os.W_OK
                        else real(p, mode, *a, **k))
    with ErrorLines("gnn_dist.train") as errors:
        code = main([*base, "--metrics", str(locked / "m.jsonl")])
    assert code == EXIT_USAGE and len(errors.lines) == 1, errors.lines
    assert f"--metrics {locked / 'm.jsonl'}: the folder {locked} is not writable" in errors.lines[0]
    assert list(locked.iterdir()) == []


def test_the_pre_launch_check_refuses_a_metrics_path_that_is_a_folder(run: dict[str, Path], tmp_path: Path):
    from gnn_dist.config_cli import parse_run_config
    from gnn_dist.validate import check_run

    config, _ = parse_run_config(["--data", str(run["data"]), *TRAIN, "--metrics", str(tmp_path)])
    with pytest.raises(ValueError, match=f"--metrics {tmp_path}: is a folder"):
        check_run(config)


# ------------------------------------------------------------------------------ 2. predict --out
def test_predict_out_on_a_full_disk_is_one_line_exit_1_and_no_file(run: dict[str, Path], tmp_path: Path,
                                                                   monkeypatch, capsys):
    from gnn_dist.predict import main as predict_main

    out = tmp_path / "preds.npz"
    with full_disk_under(monkeypatch, tmp_path), ErrorLines("gnn_dist.predict") as errors, \
            ErrorLines("gnn_dist.train") as others:
        code = predict_main(["--data", str(run["data"]), "--model-file", str(run["model"]), "--out", str(out)])
    assert code == 1 and len(errors.lines) == 1 and not others.lines, (errors.lines, others.lines)
    assert f"cannot write --out {out}" in errors.lines[0] and "No space left on device (ENOSPC)" in errors.lines[0]
    assert "Traceback" not in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [], "a half-written file or a temporary was left"
    assert predict_main(["--data", str(run["data"]), "--model-file", str(run["model"]), "--out", str(out)]) == 0
    with np.load(out) as got:
        assert got["node_ids"].tolist() == list(range(12))


# ------------------------------------------------------------------------------ 3. --pairs
def test_a_gzip_bomb_of_pairs_is_refused_before_it_is_parsed(tmp_path: Path):
    from gnn_dist.link.pairs import count_pairs, read_pairs

    bomb = tmp_path / "pairs.txt.gz"   # 32 MiB of "0 1" lines in 32 KB
    bomb.write_bytes(gz(b"0 1\n" * (1 << 20) for _ in range(8)))
    assert bomb.stat().st_size < 64 << 10
    for read in (count_pairs, read_pairs):
        tracemalloc.start()
        try:
            with pytest.raises(ValueError) as exc:
                read(bomb, 10)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        one_line(exc, f"--pairs {bomb}: its gzip data inflates to more than", "100 times its",
                 "decompression bomb")
        assert peak < 8 << 20, f"{read.__name__} held {peak} bytes"


def test_pairs_beyond_the_count_a_graph_allows_are_refused(tmp_path: Path, monkeypatch):
    from gnn_dist.link import pairs as P

    monkeypatch.setattr(P, "PAIRS_FLOOR", 100)
    monkeypatch.setattr(P, "PAIRS_PER_NODE", 4)
    assert P.max_pairs(10) == 100 and P.max_pairs(50) == 200
    text = tmp_path / "pairs.txt"
    text.write_text("".join(f"{i % 10} {(i + 1) % 10}\n" for i in range(150)))
    array = tmp_path / "pairs.npy"
    np.save(array, np.zeros((2, 150), np.int64))
    for f in (text, array):
        for read in (P.count_pairs, P.read_pairs):
            with pytest.raises(ValueError) as exc:
                read(f, 10)
            one_line(exc, f"--pairs {f}: more than 100 pairs, the most read for a graph of 10 nodes")
        assert len(P.read_pairs(f, 50)) == P.count_pairs(f, 50) == 150


def test_a_pairs_line_past_the_line_bound_is_refused_by_its_number(tmp_path: Path):
    from gnn_dist.link.pairs import count_pairs

    f = tmp_path / "pairs.txt"   # plain text: gzipped, this line is a decompression bomb first
    f.write_bytes(b"# pairs\n0 1\n1 2\n" + b"3 " * (1 << 20) + b"\n4 5\n")
    with pytest.raises(ValueError) as exc:
        count_pairs(f, 10)
    one_line(exc, f"--pairs {f}, line 4: a line longer than 65536 bytes", "it starts '3 3 3")
    empty = tmp_path / "empty.txt"
    empty.write_text("# no pairs\n")
    from gnn_dist.link.pairs import read_pairs

    assert read_pairs(empty, 10).shape == (0, 2) and count_pairs(empty, 10) == 0


def shared_on_ranks(rank: int, world_size: int, good: str, missing: str) -> list[list[int]]:
    """Rank 0 names the real file, the others a file that does not exist: they get rank 0's pairs."""
    from gnn_dist.link.pairs import shared_pairs

    return shared_pairs(good if rank == 0 else missing, 10).tolist()


def test_the_ranks_get_the_pairs_rank_0_read(tmp_path: Path):
    from mp_utils import run_ranks

    good = tmp_path / "pairs.txt"
    good.write_text("0 1\n2 3\n9 4\n")
    got = run_ranks(shared_on_ranks, 2, str(good), str(tmp_path / "missing.txt"), timeout=120)
    assert got == [[[0, 1], [2, 3], [9, 4]]] * 2


# ------------------------------------------------------------------------------ 4. OGB archives
def _ogb_csv(root: Path, node_feat: bytes) -> None:
    raw = root / "raw"
    raw.mkdir(parents=True)
    (raw / "edge.csv.gz").write_bytes(gzip.compress(b"0,1\n1,2\n2,0\n"))
    (raw / "num-node-list.csv.gz").write_bytes(gzip.compress(b"3\n"))
    (raw / "node-feat.csv.gz").write_bytes(node_feat)


@pytest.mark.parametrize("where", ["first", "later"])
def test_an_ogb_csv_row_of_gigabytes_is_refused_by_its_line(tmp_path: Path, capsys, where: str):
    wide = b"0," * (64 << 20) + b"0\n"   # 128 MiB of one row, in 128 KB of gzip
    rows = [b"0.5,0.25\n", wide, b"1,2\n"] if where == "later" else [wide, b"0.5,0.25\n", b"1,2\n"]
    root = tmp_path / "ogbn_wide"
    _ogb_csv(root, gz(iter(rows)))
    assert (root / "raw" / "node-feat.csv.gz").stat().st_size < 256 << 10
    tracemalloc.start()
    try:
        code, _, err = run_cli(capsys, "convert", "--input", root, "--out", tmp_path / "npy", "--chunk-bytes",
                               1 << 20, "--no-progress")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    feat = root / "raw" / "node-feat.csv.gz"
    line, limit = (2, "65536 bytes") if where == "later" else (1, "1048576 bytes")
    assert code == EXIT_USAGE and len(error_lines(err)) == 1, err
    assert f"{feat}, line {line}: a line longer than {limit}" in error_lines(err)[0]
    assert len(error_lines(err)[0]) < 500
    # 32 MiB of it is the node count's file, read in blocks of the default 32 MiB (io.ogb.read_num_nodes)
    assert peak < 40 << 20, f"the conversion held {peak} bytes"
    assert not (tmp_path / "npy").exists()


def _npy_header(dtype: str, shape: tuple[int, ...]) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def test_an_ogb_npz_member_declaring_a_row_of_gigabytes_is_refused_before_its_data(tmp_path: Path, capsys):
    root = tmp_path / "ogbn_wide"
    (root / "raw").mkdir(parents=True)
    with zipfile.ZipFile(root / "raw" / "data.npz", "w", zipfile.ZIP_DEFLATED) as z:
        for key, value in {"edge_index": np.zeros((2, 1), np.int64), "num_nodes_list": np.array([1]),
                           "num_edges_list": np.array([1])}.items():
            buf = io.BytesIO()
            np.save(buf, value)
            z.writestr(f"{key}.npy", buf.getvalue())
        with z.open("node_feat.npy", "w", force_zip64=True) as f:   # [1, 2**28] float64: one 2 GiB row
            f.write(_npy_header("<f8", (1, 1 << 28)))
            zeros = bytes(1 << 20)
            for _ in range(16):   # its first 16 MiB (never read)
                f.write(zeros)
    code, _, err = run_cli(capsys, "convert", "--input", root, "--out", tmp_path / "npy", "--no-progress")
    assert code == EXIT_USAGE and len(error_lines(err)) == 1, err
    assert (f"{root / 'raw' / 'data.npz'}, array 'node_feat': shape [1, 268435456]: rows of 268435456 node features; "
            f"at most 1048576 per row") in error_lines(err)[0]


# ------------------------------------------------------------------------------ 5. gnn-dist report
EPOCH = {"train_loss": 0.5, "epoch_time_s": 0.1, "compute_time_s": 0.05, "comm_time_s": 0.01,
         "exposed_comm_s": 0.01, "halo_bytes": 10, "allreduce_bytes": 10, "comm_bytes": 20, "staleness": 0,
         "train_acc": 0.5, "val_acc": 0.5, "test_acc": 0.5}


def _metrics_file(path: Path, field: str, literal: str) -> Path:
    """Three epoch records; line 3 (epoch 1) has ``literal`` as its ``field``."""
    lines = [json.dumps({"config": {"epochs": 3}})]
    for epoch in range(3):
        text = json.dumps({"epoch": epoch, **EPOCH})
        if epoch == 1:
            text = text.replace(f'"{field}": {json.dumps({"epoch": 1, **EPOCH}[field])}', f'"{field}": {literal}')
            assert literal in text
        lines.append(text)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("field, literal, expected", [
    ("train_loss", "1e308", "must be a number within ±1e+100 or null, got 1e+308"),
    ("train_loss", "-1e308", "must be a number within ±1e+100 or null, got -1e+308"),
    ("train_loss", "1" * 4000, "must be a number within ±1e+100 or null, got 111111111111...(4000 characters)"),
    ("val_acc", "9" * 5000, "must be a number within ±1e+100 or null, got 999999999999...(5000 characters)"),
    ("train_loss", "1" * 4000 + ".5", "must be a number within ±1e+100 or null, got 111111111111...(4002 characters)"),
    ("train_loss", "1e400", "must be a number within ±1e+100 or null, got 1e400"),
    ("halo_bytes", "1e200", "must be a number >= 0 within ±1e+100 or null, got 1e+200"),
    ("epoch", "1" * 200, "must be an integer 0 to 9007199254740991, got 111111111111...(200 characters)"),
    ("epoch", str(2**53), f"must be an integer 0 to 9007199254740991, got {2**53}"),
], ids=["1e308", "-1e308", "4000 digits", "5000 digits", "4000-digit float", "1e400", "bytes", "epoch digits",
        "epoch 2**53"])
def test_a_metrics_number_out_of_range_is_one_line_naming_the_line_and_field(tmp_path: Path, capsys, field: str,
                                                                            literal: str, expected: str):
    path = _metrics_file(tmp_path / "m.jsonl", field, literal)
    code, _, err = run_cli(capsys, "report", path, "--out", tmp_path / "r.html")
    assert code == EXIT_USAGE and err.count("\n") == 1 and len(error_lines(err)) == 1, err
    assert f"{path} line 3: field '{field}' {expected}" in err, err
    assert not (tmp_path / "r.html").exists()


def test_a_metrics_file_with_a_huge_config_number_or_line_is_one_line(tmp_path: Path, capsys):
    from gnn_dist_cli.run_report import MetricsFileError, read_metrics

    path = tmp_path / "m.jsonl"
    path.write_text('{"config": {"data": {"num_edges": ' + "9" * 4000 + '}}}\n' + json.dumps({"epoch": 0, **EPOCH})
                    + "\n")
    with pytest.raises(MetricsFileError) as exc:
        read_metrics(path)
    one_line(exc, f"{path} line 1: field 'config.data.num_edges' is 999999999999...(4000 characters)")
    path.write_text(json.dumps({"epoch": 0, **EPOCH}) + "\n" + json.dumps({"epoch": 1, "x": "y" * (2 << 20)}) + "\n")
    with pytest.raises(MetricsFileError) as exc:
        read_metrics(path)
    one_line(exc, f"{path} line 2: longer than 1048576 bytes")
    path.write_text(json.dumps({"epoch": 0, **EPOCH}) + "\n" + json.dumps({"epoch": 1, **EPOCH, "train_loss": None,
                                                                           "val_acc": float("nan")}) + "\n")
    got = read_metrics(path)   # the writer's null (and an old file's NaN) are no value, not an error
    assert got.values("train_loss") == [0.5, None] and got.values("val_acc") == [0.5, None]
