"""Hostile run files: checkpoints, their ``latest`` pointer and checksum files, rank files and
``--save-model`` files, and full or read-only disks (issue 33).

Each file is crafted here from a real one (one in-process training run writes a checkpoint folder
and a model file): pointers and checksums that are links to ``/dev/zero``, FIFOs or huge sparse
files; archives whose records inflate far past their size (deflated zeros), or that use the
legacy format; model files with an unhashed extra entry, a header stating widths or layers its
tensors do not have, a header nested 100,000 deep; sparse, meta, quantized and stride-0 tensors;
checkpoints re-signed (checksums recomputed) with fields of the wrong type. Every one must be
refused with one line naming the file (and the field), before anything is allocated for what
it claims, without blocking. A write onto a full disk (``os.fdopen``'s writes raise ENOSPC,
in-process) or a read-only folder is one line, leaves no temporary and no half-written
checkpoint, and ``--save-model`` keeps the trained weights elsewhere and says where.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import shutil
import signal
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
import torch

from corpus_utils import one_line, small_graph
from partitioners.format.writer import write_partition
from train_helpers import ErrorLines

from gnn_dist import checkpoints as ckpt
from gnn_dist.atomic_file import StorageError, atomic_write
from gnn_dist.checkpoints import CheckpointError
from gnn_dist.model_file import ModelFileError, load_model_file, save_model_file

pytestmark = pytest.mark.filterwarnings("ignore:Unable to enable fault handler:UserWarning")

TRAIN = ["--model", "gcn", "--hidden", "8", "--layers", "2", "--lr", "0.05", "--seed", "3", "--log-every", "0"]


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One part, two epochs through ``gnn_dist.train.main``: a checkpoint folder and a model file."""
    from gnn_dist.train import main

    root = tmp_path_factory.mktemp("runfiles")
    data = root / "data"
    write_partition(small_graph(), np.zeros(12, np.int32), 1, data, method="test", method_params={}, seed=0)
    code = main(["--data", str(data), "--epochs", "2", *TRAIN, "--checkpoint-dir", str(root / "ck"),
                 "--save-model", str(root / "model.pt")])
    assert code == 0
    return {"data": data, "ck": root / "ck", "model": root / "model.pt"}


@pytest.fixture
def ck(run: dict[str, Path], tmp_path: Path) -> Path:
    """A copy of the checkpoint folder, to break."""
    out = tmp_path / "ck"
    shutil.copytree(run["ck"], out)
    return out


@contextlib.contextmanager
def deadline(seconds: int = 20) -> Iterator[None]:
    """Fail (rather than hang) if the block blocks, e.g. on opening a FIFO."""
    def expired(*_: Any) -> None:
        raise TimeoutError(f"blocked for {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def resign(folder: Path, state: dict[str, Any], epoch: int = 2) -> Path:
    """Write ``state`` as the checkpoint of ``epoch`` with a matching checksum file and point
    ``latest`` at it, as someone who can rewrite both would."""
    path = ckpt.checkpoint_path(folder, epoch)
    buf = io.BytesIO()
    torch.save(state, buf)
    write_signed(path, buf.getvalue())
    (folder / "latest").write_text(path.name + "\n")
    return path


def write_signed(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.with_name(path.name + ".sha256").write_text(f"{hashlib.sha256(data).hexdigest()}  {len(data)}  {path.name}\n")


def deflated(data: bytes) -> bytes:
    """A ``torch.save`` archive with its records deflated (``torch.load`` reads it alike)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info.filename), compress_type=zipfile.ZIP_DEFLATED)
    return out.getvalue()


def model_payload(run: dict[str, Path]) -> dict[str, Any]:
    return torch.load(run["model"], weights_only=True)


def save_model(path: Path, payload: dict[str, Any], *, header: Any = None, sign: bool = True) -> Path:
    """``payload`` (a model file's dict) saved at ``path``; with ``header`` (a dict or text) in
    place of its own, re-signed so only the checks after the sha256 stand in the way."""
    from gnn_dist.model_file import MODEL_VERSION, _digest

    payload = dict(payload)
    if header is not None:
        payload["header"] = header if isinstance(header, str) else json.dumps(header, sort_keys=True)
    if sign:
        state = payload["state_dict"]
        payload["sha256"] = _digest(MODEL_VERSION, payload["header"], state, sorted(state))
    torch.save(payload, path)
    return path


# ------------------------------------------------------------------------------ 1. not regular, not bounded
def test_a_pointer_or_checksum_linked_to_dev_zero_a_fifo_or_a_huge_file_is_refused_unread(ck: Path, tmp_path: Path):
    latest = ck / "latest"
    sums = ck / "checkpoint-000002.pt.sha256"
    good_sum = sums.read_bytes()
    huge = tmp_path / "huge"
    with huge.open("wb") as f:       # 8 GiB that take no disk
        f.truncate(8 << 30)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for victim, target in ((latest, "/dev/zero"), (latest, fifo), (latest, huge), (sums, "/dev/zero"),
                           (sums, fifo), (sums, huge)):
        victim.unlink()
        victim.symlink_to(target)
        with deadline(), pytest.raises(CheckpointError) as exc:
            ckpt.load_checkpoint(ck)
        what = "pointer file" if victim == latest else "checksum file"
        expected = {"/dev/zero": "a character device", fifo: "a FIFO", huge: "more than one can be"}[target]
        assert one_line(exc, str(victim.name), what, expected)
        victim.unlink()
        victim.write_bytes(b"checkpoint-000002.pt\n" if victim == latest else good_sum)
    with deadline(), pytest.raises(CheckpointError) as exc:   # the pointer itself a FIFO, not a link to one
        latest.unlink()
        os.mkfifo(latest)
        ckpt.latest_checkpoint(ck)
    one_line(exc, str(latest), "a FIFO", "delete it")
    assert ckpt.latest_checkpoint(tmp_path / "nowhere") is None


def test_a_checkpoint_rank_file_or_model_file_linked_to_dev_zero_is_refused(ck: Path, run: dict[str, Path],
                                                                             tmp_path: Path):
    main = ck / "checkpoint-000002.pt"
    size = main.stat().st_size
    main.unlink()
    main.symlink_to("/dev/zero")
    with deadline(), pytest.raises(CheckpointError) as exc:
        ckpt.load_checkpoint(main)
    one_line(exc, str(main), "a character device")
    rank = ckpt.rank_state_path(ck, 2, 0, 1)
    os.mkfifo(rank)
    entry = {"name": rank.name, "size": size, "sha256": "0" * 64}
    with deadline(), pytest.raises(CheckpointError) as exc:
        ckpt.load_rank_state(ck, entry, epoch=2, rank=0, num_parts=1)
    one_line(exc, str(rank), "a FIFO")
    with pytest.raises(CheckpointError) as exc:   # a rank file's name is a name in the folder, never a path
        ckpt.load_rank_state(ck, {**entry, "name": "../../etc/passwd"}, epoch=2, rank=0, num_parts=1)
    one_line(exc, "not a rank file's name")
    for target in ("/dev/zero", tmp_path / "fifo"):
        if target != "/dev/zero":
            os.mkfifo(target)
        link = tmp_path / f"model-{Path(target).name}.pt"
        link.symlink_to(target)
        with deadline(), pytest.raises(ModelFileError) as exc:
            load_model_file(link)
        one_line(exc, str(link), "not a regular file")
    linked = tmp_path / "linked.pt"   # a link to a real model file is followed
    linked.symlink_to(run["model"])
    assert load_model_file(linked).sha256 == load_model_file(run["model"]).sha256


# ------------------------------------------------------------------------------ 2. inflation, unhashed entries
def test_an_unhashed_extra_entry_or_a_deflated_bomb_in_a_model_file_is_refused_before_it_inflates(
        run: dict[str, Path], tmp_path: Path):
    payload = model_payload(run)
    extra = save_model(tmp_path / "extra.pt", {**payload, "notes": torch.zeros(4)})
    with pytest.raises(ModelFileError) as exc:
        load_model_file(extra)
    one_line(exc, str(extra), "notes", "sha256 does not cover")

    buf = io.BytesIO()   # 64 MiB of zeros riding along, deflated to about 64 KiB
    torch.save({**payload, "junk": torch.zeros(16 << 20)}, buf)
    bomb = tmp_path / "bomb.pt"
    bomb.write_bytes(deflated(buf.getvalue()))
    assert bomb.stat().st_size < (1 << 20)
    with pytest.raises(ModelFileError) as exc:
        load_model_file(bomb)
    one_line(exc, str(bomb), "uncompressed", "torch.save writes records uncompressed")

    legacy = tmp_path / "legacy.pt"    # the pre-zip format allocates the sizes it states
    torch.save(payload, legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(ModelFileError) as exc:
        load_model_file(legacy)
    one_line(exc, str(legacy), "not the zip archive torch.save writes")


def test_tensors_claiming_more_than_the_file_holds_are_refused(run: dict[str, Path], tmp_path: Path):
    payload = model_payload(run)
    state = payload["state_dict"]
    name = next(k for k, v in state.items() if v.dim() == 2)
    strided = {**payload, "state_dict": {**state, name: torch.zeros(1).expand(1 << 30)}}   # 4 GiB if made contiguous
    path = save_model(tmp_path / "stride0.pt", strided, sign=False)
    with pytest.raises(ModelFileError) as exc:
        load_model_file(path)
    one_line(exc, str(path), name, "stride-0")
    big = torch.zeros(1 << 18)   # ten names over one 1 MiB storage: 10 MiB of tensors in a 1 MiB file
    shared = {**payload, "state_dict": {**state, **{f"alias{i}": big for i in range(10)}}}
    path = save_model(tmp_path / "shared.pt", shared, sign=False)
    with pytest.raises(ModelFileError) as exc:
        load_model_file(path)
    one_line(exc, str(path), "more than the file's")


def test_a_re_signed_checkpoint_that_inflates_or_nests_without_end_is_refused(ck: Path, run: dict[str, Path]):
    state = ckpt.load_checkpoint(ck)
    buf = io.BytesIO()
    torch.save({**state, "junk": torch.zeros(16 << 20)}, buf)
    path = ckpt.checkpoint_path(ck, 2)
    write_signed(path, deflated(buf.getvalue()))
    with pytest.raises(CheckpointError) as exc:
        ckpt.load_checkpoint(ck)
    one_line(exc, str(path), "uncompressed")
    nested: list[Any] = []
    for _ in range(200):
        nested = [nested]
    resign(ck, {**state, "history": nested})
    with pytest.raises(CheckpointError) as exc:
        ckpt.load_checkpoint(ck)
    one_line(exc, str(path), "nested more than 64 deep")


# ------------------------------------------------------------------------------ 3, 4. headers
def test_a_header_stating_widths_or_layers_its_tensors_lack_is_refused_before_building(run: dict[str, Path],
                                                                                      tmp_path: Path, monkeypatch):
    payload = model_payload(run)
    header = json.loads(payload["header"])
    cases = {"wide": ("hidden", 1 << 33, "file holds"), "deep": ("layers", 10 ** 6, "more than 4096"),
             "in": ("in_dim", 1 << 40, "file holds")}
    for name, (key, value, message) in cases.items():
        changed = json.loads(json.dumps(header))
        (changed if key in ("in_dim", "out_dim") else changed["model"])[key] = value
        path = save_model(tmp_path / f"{name}.pt", payload, header=changed)
        with pytest.raises(ModelFileError) as exc:
            load_model_file(path)
        one_line(exc, str(path), message)

    # within the limits but not the tensors' widths: refused by the meta build, before any allocation
    changed = json.loads(json.dumps(header))
    changed["model"]["hidden"] = header["model"]["hidden"] * 2   # 16: fewer than the file's weights
    path = save_model(tmp_path / "other.pt", payload, header=changed)
    mf = load_model_file(path)
    from gnn_dist import model_file

    built: list[str] = []
    real = model_file._build

    def spy(*args: Any) -> Any:
        built.append(str(torch.get_default_device()))
        return real(*args)

    monkeypatch.setattr(model_file, "_build", spy)
    with pytest.raises(ModelFileError) as exc:
        mf.build()
    one_line(exc, str(path), "is not the one its tensors are weights of", "convs.")
    assert built == ["meta"], "the model was built for real before its shapes were compared"
    built.clear()
    load_model_file(run["model"]).build()
    assert built == ["meta", "cpu"]


def test_a_header_nested_100000_deep_or_with_a_huge_integer_is_one_line(run: dict[str, Path], tmp_path: Path):
    payload = model_payload(run)
    cases = {"deep": ("[" * 100_000 + "]" * 100_000, "nested more than 64 levels"),
             "deep-in-strings": ('{"x": "' + "[" * 100_000 + '"}', "lacks"),   # brackets in a string do not nest
             "digits": ('{"x": ' + "9" * 5000 + "}", "not JSON")}
    for name, (text, message) in cases.items():
        path = save_model(tmp_path / f"{name}.pt", payload, header=text)
        with pytest.raises(ModelFileError) as exc:
            load_model_file(path)
        one_line(exc, str(path), message)


# ------------------------------------------------------------------------------ 5. sparse, meta, quantized
@pytest.mark.parametrize("kind", ["sparse", "meta", "quantized", "complex"])
def test_a_sparse_meta_or_odd_tensor_in_a_model_file_or_checkpoint_is_refused(kind: str, run: dict[str, Path],
                                                                              ck: Path, tmp_path: Path):
    odd = {"sparse": lambda: torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0),
                                                     (1 << 30, 1 << 30)),
           "meta": lambda: torch.empty(1 << 40, device="meta"),
           "quantized": lambda: torch.quantize_per_tensor(torch.zeros(4), 0.1, 0, torch.qint8),
           "complex": lambda: torch.zeros(3, dtype=torch.complex64)}[kind]()
    expected = {"sparse": "sparse_coo tensor", "meta": "meta device", "quantized": "dtype", "complex": "dtype"}[kind]
    payload = model_payload(run)
    path = save_model(tmp_path / "odd.pt", {**payload, "state_dict": {**payload["state_dict"], "odd": odd}},
                      sign=False)
    with pytest.raises(ModelFileError) as exc:
        load_model_file(path)
    one_line(exc, str(path), "odd", expected)
    state = ckpt.load_checkpoint(ck)
    path = resign(ck, {**state, "model": {**state["model"], "odd": odd}})
    with pytest.raises(CheckpointError) as exc:
        ckpt.load_checkpoint(ck)
    one_line(exc, str(path), "model['odd']", expected)


# ------------------------------------------------------------------------------ 6. re-signed, wrong types
def _set(state: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """``state`` with the field ``dotted`` (``optimizer.state.0.exp_avg``) set to ``value``."""
    keys = dotted.split(".")
    if keys[0] == "model":   # parameter names have dots
        keys = ["model", ".".join(keys[1:])]
    out: Any = state
    for k in keys[:-1]:
        out = out[int(k) if isinstance(out, list) or (k.isdigit() and int(k) in out) else k]
    last = keys[-1]
    out[int(last) if isinstance(out, list) else last] = value
    return state


FORMAT_CASES = {   # field: (value, the field as the message names it); refused by check_state (pre-launch, ranks)
    "rng.torch": ("abc", "rng.torch"),
    "rng.python.words": (torch.zeros(3, dtype=torch.int64), "rng.python.words"),
    "rng.numpy.keys": (torch.zeros(624, dtype=torch.float32), "rng.numpy.keys"),
    "rng.numpy.pos": ("623", "rng.numpy.pos"),
    "history": ("several epochs", "history"),
    "history.0.train_loss": ("high", "history[0].train_loss"),
    "history.1": ([1, 2], "history[1]"),
    "epoch": ("2", "epoch"),
    "optimizer.state.0.exp_avg": ("big", "optimizer.state[0].exp_avg"),
    "optimizer.param_groups": ({"lr": 1}, "optimizer.param_groups"),
    "config.optim.lr": ("fast", "config.optim.lr"),
    "selection.best.val_acc": ("good", "selection.best.val_acc"),
    "selection.since_best": (-1, "selection.since_best"),
    "pipeline_state.rank_files": ([{"name": "../../etc/passwd", "size": 1, "sha256": "0" * 64}],
                                  "pipeline_state.rank_files[0].name"),
    "halo_widths": ("adaptive", "halo_widths"),
    "graph_fingerprint": (7, "graph_fingerprint"),
    "graph_fingerprint_scheme": ("2", "graph_fingerprint_scheme"),
    "scheme_1_graph_fingerprint": (7, "scheme_1_graph_fingerprint"),
    "model_info.hidden_dim": ([8], "model_info.hidden_dim"),
}
APPLY_CASES = {   # field: (value, named); refused against this run's model, optimizer and config
    "optimizer.state.0.exp_avg": (torch.zeros(7, 7), "optimizer.state[0].exp_avg has shape [7, 7]"),
    "optimizer.param_groups.0.lr": ("fast", "optimizer.param_groups[0].lr is a str"),
    "optimizer.param_groups.0.amsgrad": (3, "optimizer.param_groups[0].amsgrad is an int"),
    "config.schedule": ("sync", "config.schedule is a str"),
    "config.schedule.pipeline": (3, "config.schedule.pipeline is an int"),
    "config.report.eval_every": ("often", "config.report.eval_every is a str"),
    "model.convs.0.lin.weight": (torch.zeros(8, 4), "model.convs.0.lin.weight has shape [8, 4]"),
}


def _fresh_state(run: dict[str, Path]) -> dict[str, Any]:
    """The state of the pristine checkpoint (never the copy a case has re-signed)."""
    return ckpt.load_checkpoint(run["ck"])


@pytest.mark.parametrize("field", sorted(FORMAT_CASES))
def test_a_re_signed_checkpoint_with_a_mistyped_field_is_one_line_naming_it(field: str, ck: Path,
                                                                            run: dict[str, Path]):
    value, named = FORMAT_CASES[field]
    path = resign(ck, _set(_fresh_state(run), field, value))
    with pytest.raises(CheckpointError) as exc:
        ckpt.load_checkpoint(ck)
    one_line(exc, str(path), f"field {named} is ")


def test_a_checkpoint_that_does_not_fit_this_run_is_refused_before_anything_changes(ck: Path, run: dict[str, Path]):
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(str(run["data"]))
    for field, (value, named) in APPLY_CASES.items():
        path = resign(ck, _set(_fresh_state(run), field, value))
        model = build_model("gcn", in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=2,
                            seed=3)
        trainer = gnn_dist.Trainer(model, part, lr=0.05, log_every=0, checkpoint_dir=str(ck))
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        with pytest.raises(CheckpointError) as exc:
            trainer.resume()
        one_line(exc, str(path), f"field {named}")
        assert trainer.epoch == 0 and all(torch.equal(v, trainer.model.state_dict()[k]) for k, v in before.items())


def test_a_mistyped_rng_state_stops_the_run_and_its_pre_launch_check_with_exit_2(ck: Path, run: dict[str, Path],
                                                                               capsys):
    from gnn_dist.train import main

    state = _fresh_state(run)
    state["rng"]["torch"] = "not a ByteTensor"
    path = resign(ck, state)
    epochs = ckpt.checkpoint_epochs(ck)
    args = ["--data", str(run["data"]), "--epochs", "4", *TRAIN, "--checkpoint-dir", str(ck), "--resume", "latest"]
    capsys.readouterr()
    assert main([*args, "--validate"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "field rng.torch" in err[0], err
    with ErrorLines("gnn_dist.train") as errors:
        assert main(args) == 2
    assert len(errors.lines) == 1 and "field rng.torch is a str" in errors.lines[0], errors.lines
    assert "Traceback" not in capsys.readouterr().err
    assert ckpt.checkpoint_epochs(ck) == epochs, "no step ran"


# ------------------------------------------------------------------------------ 7. full and read-only disks
@contextlib.contextmanager
def full_disk(monkeypatch: pytest.MonkeyPatch, root: Path, budget: int = 1000, only: str = "") -> Iterator[None]:
    """Files opened for writing (``os.fdopen(fd, "wb")``) under ``root`` (whose names start with
    ``only``) take ``budget`` bytes in all, then every write raises ENOSPC, as on a full disk;
    other writes are real."""
    real = os.fdopen
    root = Path(os.path.realpath(root))

    class Full(io.BufferedWriter):
        written = 0

        def write(self, data: Any) -> int:
            n = memoryview(data).nbytes
            if Full.written + n > budget:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            Full.written += n
            return super().write(data)

    def fdopen(fd: int, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        where = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if "w" in mode and where.is_relative_to(root) and where.name.startswith(only):
            return Full(io.FileIO(fd, "w"))
        return real(fd, mode, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(os, "fdopen", fdopen)
        yield


def _read_only_folder(path: Path) -> bool:
    """``path`` made read-only (0o555); False when this process writes there anyway (root)."""
    path.mkdir()
    path.chmod(0o555)
    probe = path / ".probe"
    try:
        probe.write_bytes(b"x")
    except OSError:
        return True
    probe.unlink()
    return False


def test_atomic_write_on_a_full_or_read_only_disk_leaves_the_old_file_and_no_temporary(tmp_path: Path,
                                                                                      monkeypatch):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")
    with full_disk(monkeypatch, tmp_path), pytest.raises(StorageError) as exc:
        atomic_write(target, lambda f: f.write(b"x" * 5000), what="the file ")
    one_line(exc, f"cannot write the file {target}", "No space left on device (ENOSPC)", "nothing was written")
    assert isinstance(exc.value, OSError) and exc.value.errno == errno.ENOSPC
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"] and target.read_bytes() == b"old"

    real = tempfile.mkstemp

    def read_only(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    with pytest.raises(StorageError) as exc:
        atomic_write(target, lambda f: f.write(b"new"))
    one_line(exc, str(target), "(EROFS)")
    monkeypatch.setattr(tempfile, "mkstemp", real)
    locked = tmp_path / "ro"
    if _read_only_folder(locked):   # not as root, whom the mode does not stop (the EROFS case above stands in)
        with pytest.raises(StorageError) as exc:
            atomic_write(locked / "f.bin", lambda f: f.write(b"new"))
        one_line(exc, str(locked / "f.bin"), "Permission denied")
    locked.chmod(0o755)


def test_a_checkpoint_on_a_full_disk_leaves_the_previous_one_as_latest(ck: Path, monkeypatch):
    state = ckpt.load_checkpoint(ck)
    before = sorted(p.name for p in ck.iterdir())
    for only, what in (("", "the checkpoint file"), (".checkpoint-000003.pt.sha256.", "the checkpoint's checksum "
                                                                                      "file"),
                       (".latest.", "the checkpoint pointer")):
        with full_disk(monkeypatch, ck, budget=0 if only else 1000, only=only), pytest.raises(StorageError) as exc:
            ckpt.save_checkpoint(ck, 3, state)
        one_line(exc, f"cannot write {what} {ck}", "ENOSPC")
        assert sorted(p.name for p in ck.iterdir()) == before, "a file of the failed checkpoint was left"
        assert ckpt.latest_checkpoint(ck) == ckpt.checkpoint_path(ck, 2)
    assert ckpt.load_checkpoint(ck)["epoch"] == 2


def test_save_model_on_a_full_disk_keeps_the_weights_elsewhere_and_says_where(run: dict[str, Path], tmp_path: Path,
                                                                              monkeypatch):
    from gnn_dist.config import ModelConfig
    from partitioners.format import load_partition_meta

    mf = load_model_file(run["model"])
    model, meta = mf.build(), load_partition_meta(str(run["data"]))
    full, spare = tmp_path / "full", tmp_path / "spare"
    full.mkdir()
    spare.mkdir()
    config = ModelConfig(**mf.header["model"])
    with full_disk(monkeypatch, full), pytest.raises(StorageError) as exc:
        save_model_file(full / "m.pt", model, config, meta, rescue=[full, spare])
    text = one_line(exc, f"cannot write the model file {full / 'm.pt'}", "ENOSPC",
                    f"saved to {spare / 'm.pt'} instead")
    assert list(full.iterdir()) == []
    assert load_model_file(spare / "m.pt").state_dict.keys() == mf.state_dict.keys()
    with full_disk(monkeypatch, tmp_path), pytest.raises(StorageError) as exc:
        save_model_file(full / "m.pt", model, config, meta, rescue=[spare])
    one_line(exc, "could not be saved elsewhere either", f"{spare}: No space left on device")
    assert text


def test_train_save_model_on_a_full_disk_is_one_line_exit_1_with_the_weights_in_the_checkpoint_folder(
        run: dict[str, Path], tmp_path: Path, monkeypatch, capsys):
    from gnn_dist import train

    if train._report(StorageError("probe"), 0, False) != 1:
        pytest.skip("gnn_dist.train._report does not report StorageError as one line with exit code 1 yet")
    full = tmp_path / "full"
    full.mkdir()
    with full_disk(monkeypatch, full), ErrorLines("gnn_dist.train") as errors:
        code = train.main(["--data", str(run["data"]), "--epochs", "1", *TRAIN, "--checkpoint-dir",
                           str(tmp_path / "ck"), "--save-model", str(full / "m.pt")])
    assert code == 1 and len(errors.lines) == 1, errors.lines
    assert f"saved to {tmp_path / 'ck' / 'm.pt'} instead" in errors.lines[0]
    assert "Traceback" not in capsys.readouterr().err
    assert load_model_file(tmp_path / "ck" / "m.pt").header["training"]["epochs"] == 1
    assert list(full.iterdir()) == []

