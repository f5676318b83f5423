"""The one line a failed rank leaves for torchrun's failure summary (gnn_dist.failure_note)."""

from __future__ import annotations

import json

from gnn_dist.failure_note import leave_failure_note


def test_written_in_torchruns_format_as_one_line(tmp_path, monkeypatch):
    path = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    assert leave_failure_note("error: parts/p3: the partition has num_parts=3\n  but world_size=2")
    data = json.loads(path.read_text())
    assert data["message"] == "error: parts/p3: the partition has num_parts=3 but world_size=2"
    assert isinstance(data["timestamp"], int) and data["timestamp"] > 0
    # torchrun's own reader takes it as the failure's message
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure
    failure = ProcessFailure(local_rank=0, pid=1, exitcode=2, error_file=str(path))
    assert failure.message == data["message"]


def test_never_over_an_existing_note(tmp_path, monkeypatch):
    path = tmp_path / "error.json"
    path.write_text('{"message": "torchrun\'s record of an exception"}')
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    assert not leave_failure_note("error: a second reason")
    assert "exception" in path.read_text()


def test_nothing_outside_torchrun(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert not leave_failure_note("error: x")
    assert list(tmp_path.iterdir()) == []
