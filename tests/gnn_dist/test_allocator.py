"""gnn_dist.distributed.allocator: when the tuning applies, which mallopt calls are made, and that
they return freed memory.

The decision logic runs in-process against a stand-in C library and a stand-in kernel THP mode
file (no process-wide change to the test process). The behaviour runs in fresh interpreters
(glibc reads ``MALLOC_*_`` at start-up), three at once: 8 blocks of the tuned threshold's size
(8 MiB) are filled, a 9th pins the heap top, the 8 are freed; with the tuning they were mmapped
and go back to the OS, without it (glibc's dynamic threshold, or a user's 32 MiB one) they came
from the heap, which keeps them.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gnn_dist.distributed.allocator as allocator
from gnn_dist.distributed import DistributedConfigError
from gnn_dist.distributed.allocator import (DEFAULT_MMAP_THRESHOLD, ENV_VAR, THP_ENV_VAR, kernel_thp_mode,
                                            torch_huge_pages, tune_allocator)

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20


class FakeGlibc:
    """Records ``mallopt(param, value)`` calls; answers ``result``."""

    def __init__(self, result: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.result = result

    def mallopt(self, param: ctypes.c_int, value: ctypes.c_int) -> int:
        self.calls.append((param.value, value.value))
        return self.result

    def gnu_get_libc_version(self) -> bytes:
        return b"2.36"


class FakeMusl:
    """musl has a ``mallopt`` stub but no ``gnu_get_libc_version``."""

    def mallopt(self, param: ctypes.c_int, value: ctypes.c_int) -> int:
        raise AssertionError("mallopt must not be called on a non-glibc C library")


TUNED = [(-3, DEFAULT_MMAP_THRESHOLD), (-1, 2 * DEFAULT_MMAP_THRESHOLD)]
"""The mallopt calls of the tuning: mmap threshold, then trim threshold at twice it."""
ON = {ENV_VAR: "1"}


@pytest.fixture
def thp_mode(tmp_path: Path):
    """``thp_mode(text)``: a kernel THP mode file holding ``text`` (``None``: no such file)."""
    def make(text: str | None) -> Path:
        path = tmp_path / "transparent_hugepage_enabled"
        if text is not None:
            path.write_text(text)
        return path
    return make


@pytest.fixture(autouse=True)
def fresh_log_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no decision logged yet (the module logs each decision once)."""
    monkeypatch.setattr(allocator, "_logged", set())


def test_applies_fixed_thresholds() -> None:
    libc = FakeGlibc()
    t = tune_allocator(ON, libc=libc)
    assert libc.calls == TUNED
    assert t.applied == {"M_MMAP_THRESHOLD": DEFAULT_MMAP_THRESHOLD, "M_TRIM_THRESHOLD": 2 * DEFAULT_MMAP_THRESHOLD}
    assert t.kept == {} and t.failed == {} and t.skipped is None and t.reason == f"{ENV_VAR}=1"


@pytest.mark.parametrize("text, mode", [
    ("always [madvise] never\n", "madvise"), ("[always] madvise never\n", "always"),
    ("always madvise [never]\n", "never"), ("garbled\n", None), (None, None)])
def test_kernel_thp_mode_reads_the_bracketed_word(thp_mode, text: str | None, mode: str | None) -> None:
    assert kernel_thp_mode(thp_mode(text)) == mode


@pytest.mark.parametrize("thp_env, text, on, why", [
    ("1", "always [madvise] never", True, f"{THP_ENV_VAR}=1, kernel THP mode madvise"),
    ("1", "[always] madvise never", True, f"{THP_ENV_VAR}=1, kernel THP mode always"),
    ("1", "always madvise [never]", False, f"{THP_ENV_VAR}=1 but the kernel's THP mode is never"),
    ("1", None, False, f"{THP_ENV_VAR}=1 but no kernel THP mode"),
    (None, "[always] madvise never", False, f"{THP_ENV_VAR} is unset"),
    ("0", "always [madvise] never", False, f"{THP_ENV_VAR} is '0', not 1"),
    ("true", "always [madvise] never", False, f"{THP_ENV_VAR} is 'true', not 1"),  # torch ignores it
])
def test_default_follows_torch_huge_pages(thp_mode, thp_env: str | None, text: str | None, on: bool,
                                          why: str) -> None:
    env = {} if thp_env is None else {THP_ENV_VAR: thp_env}
    path = thp_mode(text)
    assert torch_huge_pages(env, path)[0] is on
    assert why in torch_huge_pages(env, path)[1]
    libc = FakeGlibc()
    t = tune_allocator(env, libc=libc, thp_mode_path=path)
    assert libc.calls == (TUNED if on else [])
    assert t.skipped == (None if on else t.reason)
    assert t.reason.startswith(f"{ENV_VAR} unset; torch's huge-page CPU allocations are {'on' if on else 'off'}")
    assert why in t.reason


@pytest.mark.parametrize("switch, thp_env, text, tuned", [
    ("1", None, "always madvise [never]", True),   # forced on without huge pages
    ("yes", "0", None, True),
    ("0", "1", "[always] madvise never", False),   # forced off with huge pages
    ("off", "1", "always [madvise] never", False),
])
def test_switch_overrides_the_default(thp_mode, switch: str, thp_env: str | None, text: str | None,
                                      tuned: bool) -> None:
    env = {ENV_VAR: switch} | ({} if thp_env is None else {THP_ENV_VAR: thp_env})
    libc = FakeGlibc()
    t = tune_allocator(env, libc=libc, thp_mode_path=thp_mode(text))
    assert libc.calls == (TUNED if tuned else []) and t.reason == f"{ENV_VAR}={switch}"


def test_decision_is_logged_once_at_debug(thp_mode, caplog: pytest.LogCaptureFixture) -> None:
    env = {THP_ENV_VAR: "1"}   # the allocator's details are -v's (the default start-up log stays short)
    with caplog.at_level(logging.DEBUG, logger="gnn_dist.distributed.allocator"):
        for _ in range(2):
            tune_allocator(env, libc=FakeGlibc(), thp_mode_path=thp_mode("always [madvise] never"))
        tune_allocator({}, libc=FakeGlibc(), thp_mode_path=thp_mode("always [madvise] never"))
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(messages) == 2, messages
    assert messages[0].startswith("allocator tuning on (")
    assert f"{THP_ENV_VAR}=1, kernel THP mode madvise" in messages[0]
    assert messages[1].startswith("allocator tuning off: ") and "cost CPU time" in messages[1]


@pytest.mark.parametrize("env, kept_name, kept", [
    ({"MALLOC_MMAP_THRESHOLD_": "131072"}, "M_MMAP_THRESHOLD", "MALLOC_MMAP_THRESHOLD_=131072"),
    ({"MALLOC_TRIM_THRESHOLD_": "0"}, "M_TRIM_THRESHOLD", "MALLOC_TRIM_THRESHOLD_=0"),
    ({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=65536"}, "M_MMAP_THRESHOLD",
     "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=65536"),
])
def test_user_settings_win(env: dict[str, str], kept_name: str, kept: str) -> None:
    libc = FakeGlibc()
    t = tune_allocator(env | ON, libc=libc)
    assert t.kept == {kept_name: kept}
    assert kept_name not in t.applied and len(t.applied) == 1
    assert [p for p, _ in libc.calls] == [-3 if kept_name == "M_TRIM_THRESHOLD" else -1]


@pytest.mark.parametrize("value", ["0", "off", " False "])
def test_turned_off(value: str) -> None:
    libc = FakeGlibc()
    t = tune_allocator({ENV_VAR: value}, libc=libc)
    assert libc.calls == [] and t.applied == {} and t.skipped == t.reason == f"{ENV_VAR}={value}"


@pytest.mark.parametrize("value", ["2", "maybe", ""])
def test_bad_switch_names_the_variable(value: str) -> None:
    with pytest.raises(DistributedConfigError, match=f"{ENV_VAR}={value!r} is not understood") as info:
        tune_allocator({ENV_VAR: value}, libc=FakeGlibc())
    assert info.value.variable == ENV_VAR and "or unset it" in str(info.value)


def test_not_glibc_is_a_logged_no_op(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="gnn_dist.distributed.allocator"):
        t = tune_allocator(ON, libc=FakeMusl())
    assert t.skipped == "not glibc" and t.applied == {}
    assert "not glibc" in caplog.text


def test_refused_value_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gnn_dist.distributed.allocator"):
        t = tune_allocator(ON, libc=FakeGlibc(result=0))
    assert t.applied == {} and set(t.failed) == {"M_MMAP_THRESHOLD", "M_TRIM_THRESHOLD"}
    assert "mallopt refused" in caplog.text


def _is_glibc() -> bool:
    try:
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):
        return False
    return hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt") and sys.platform.startswith("linux")


# In the child: tune (as a rank's start-up does), then fill 9 blocks of the threshold's size, free
# the first 8, and report how much RSS they left behind. A first 16 MiB block, mmapped and freed,
# raises glibc's dynamic threshold above them, as a training step's first large temporaries do.
_CHILD = textwrap.dedent("""
    import json
    from gnn_dist.distributed.allocator import tune_allocator

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    t = tune_allocator()
    first = b"\\x01" * (16 << 20)
    del first
    before = rss()
    blocks = [b"\\x01" * (SIZE + i) for i in range(9)]
    filled = rss()
    del blocks[:8]
    print(json.dumps({"applied": t.applied, "kept": t.kept, "skipped": t.skipped,
                      "filled": filled - before, "left": rss() - before}))
""").replace("SIZE", str(DEFAULT_MMAP_THRESHOLD))


@pytest.mark.skipif(not _is_glibc(), reason="glibc-specific behaviour")
def test_freed_blocks_return_to_the_os_with_tuning_only() -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT), base.get("PYTHONPATH", "")])
    base.pop(ENV_VAR, None)
    envs = {"tuned": {**base, ENV_VAR: "1"}, "off": {**base, ENV_VAR: "0"},
            "user": {**base, ENV_VAR: "1", "MALLOC_MMAP_THRESHOLD_": str(32 * MiB)},
            "auto": {**base, THP_ENV_VAR: "1"}}   # the launchers' default: tuned where THP works
    procs = {name: subprocess.Popen([sys.executable, "-c", _CHILD], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for name, env in envs.items()}
    out = {}
    for name, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        assert proc.returncode == 0, stderr
        out[name] = json.loads(stdout.strip().splitlines()[-1])
    assert out["tuned"]["applied"] == {"M_MMAP_THRESHOLD": DEFAULT_MMAP_THRESHOLD,
                                       "M_TRIM_THRESHOLD": 2 * DEFAULT_MMAP_THRESHOLD}
    assert out["off"]["skipped"] == f"{ENV_VAR}=0" and out["off"]["applied"] == {}
    assert out["user"]["kept"] == {"M_MMAP_THRESHOLD": f"MALLOC_MMAP_THRESHOLD_={32 * MiB}"}
    auto_on = torch_huge_pages(envs["auto"])[0]   # this machine's kernel THP mode decides
    assert out["auto"]["applied"] == (out["tuned"]["applied"] if auto_on else {}), out["auto"]
    for name in out:
        assert out[name]["filled"] > 60 * MiB, out   # the blocks were resident
    # untuned (or under the user's 32 MiB threshold) the 64 MiB came from the heap and stay;
    # tuned, only the pinned block (8 MiB) stays
    assert out["off"]["left"] > 48 * MiB, out
    assert out["user"]["left"] > 48 * MiB, out
    assert out["tuned"]["left"] < 16 * MiB, out
    assert (out["auto"]["left"] < 16 * MiB) if auto_on else (out["auto"]["left"] > 48 * MiB), out
