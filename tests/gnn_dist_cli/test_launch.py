"""The supervisor of ``gnn-dist train``'s torchrun agent (``gnn_dist_cli.launch``), with fake agents.

Torch-free: each "agent" is a small Python program, so the signal, leftover and filtering rules
are checked in a second or two each. What a real torchrun job does is checked in
``tests/gnn_dist_cli/test_train_launch.py``.

- A signal is forwarded; an agent that ignores it, and a descendant in a session of its own, are
  killed after the grace period, or at once on a second signal; the exit code is ``128 + signal``.
- Descendants an agent leaves running are killed after the reap grace; the agent's code is kept.
- A signal ignored when the supervisor starts (``nohup``) is not forwarded.
- The stderr filter withholds rank tracebacks and traceback blocks, drops them when the agent
  printed summary lines, and shows them unchanged otherwise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from gnn_dist_cli.launch import FailureFilter, exit_code, run_torchrun
from train_helpers import default_signals

REPO = Path(__file__).resolve().parents[2]

# An agent that ignores SIGINT/SIGTERM and starts a descendant in its own session (as torchrun
# starts its ranks) that ignores them too; it writes the descendant's pid to argv[1].
STUBBORN = textwrap.dedent("""
    import signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGINT, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c",
                              "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                              "signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)"],
                             start_new_session=True)
    open(sys.argv[1], "w").write(str(child.pid))
    time.sleep(600)
""")
# An agent that starts a descendant in its own session, then exits 0 leaving it running.
LEAVER = textwrap.dedent("""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    open(sys.argv[1], "w").write(str(child.pid))
    time.sleep(2.5)  # long enough for the supervisor to have recorded it
""")
SUPERVISOR = ("import os, sys\nfrom gnn_dist_cli.launch import run_torchrun\n"
              "sys.exit(run_torchrun(sys.argv[3:], os.environ, grace_s=float(sys.argv[1]), "
              "reap_grace_s=float(sys.argv[2])))")


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_file(path: Path, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"the fake agent did not start within {timeout} s"
        time.sleep(0.05)
    return int(path.read_text())


def _supervise(agent: str, pid_file: Path, grace_s: float, reap_grace_s: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SUPERVISOR, str(grace_s), str(reap_grace_s),
                             sys.executable, "-c", agent, str(pid_file)],
                            env=_env(), stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)


def _kill_all(*pids: int | None) -> None:
    for pid in pids:
        if pid is not None and not _gone(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_agent_that_ignores_the_signal_is_killed_after_the_grace_period(tmp_path, sig, code):
    pid_file = tmp_path / "pid"
    sup = _supervise(STUBBORN, pid_file, grace_s=1.5, reap_grace_s=1.0)
    agent = grandchild = None
    try:
        grandchild = _wait_file(pid_file)
        agent = psutil.Process(sup.pid).children()[0].pid
        time.sleep(1.2)  # a tree record has seen the grandchild
        sent = time.monotonic()
        sup.send_signal(sig)
        _, err = sup.communicate(timeout=30)
        assert time.monotonic() - sent < 1.5 + 4.0, err
        assert sup.returncode == code, err
        assert f"got {sig.name}: stopping torchrun (pid {agent})" in err
        assert "torchrun did not stop within 1.5 s: killing torchrun" in err
        deadline = time.monotonic() + 5
        while not (_gone(agent) and _gone(grandchild)):
            assert time.monotonic() < deadline, "a process of the tree survived"
            time.sleep(0.05)
    finally:
        sup.kill()
        _kill_all(agent, grandchild)


@pytest.mark.timeout(120)
def test_a_second_signal_kills_at_once(tmp_path):
    pid_file = tmp_path / "pid"
    sup = _supervise(STUBBORN, pid_file, grace_s=60, reap_grace_s=1.0)
    grandchild = None
    try:
        grandchild = _wait_file(pid_file)
        time.sleep(1.2)
        sent = time.monotonic()
        sup.send_signal(signal.SIGINT)
        time.sleep(0.5)
        sup.send_signal(signal.SIGINT)
        _, err = sup.communicate(timeout=30)
        assert time.monotonic() - sent < 5, err
        assert sup.returncode == 130 and "a second signal: killing torchrun" in err
        assert _gone(grandchild)
    finally:
        sup.kill()
        _kill_all(grandchild)


@pytest.mark.timeout(120)
def test_descendants_left_running_are_killed_and_the_agents_code_kept(tmp_path):
    pid_file = tmp_path / "pid"
    sup = _supervise(LEAVER, pid_file, grace_s=5, reap_grace_s=0.5)
    grandchild = None
    try:
        grandchild = _wait_file(pid_file)
        _, err = sup.communicate(timeout=60)
        assert sup.returncode == 0, err
        assert f"killed 1 process(es) torchrun left running: pids {grandchild}" in err
        assert _gone(grandchild)
    finally:
        sup.kill()
        _kill_all(grandchild)


@pytest.mark.timeout(120)
def test_a_signal_ignored_at_start_stays_ignored(tmp_path):
    """``nohup gnn-dist train ...``: a hangup must not stop the job."""
    code = "import signal\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\n" + SUPERVISOR
    sup = subprocess.Popen([sys.executable, "-c", code, "5", "1", sys.executable, "-c",
                            "import time; open(__import__('sys').argv[1], 'w').write('1'); time.sleep(2)",
                            str(tmp_path / "started")], env=_env(), stderr=subprocess.PIPE, text=True)
    try:
        _wait_file(tmp_path / "started")
        sup.send_signal(signal.SIGHUP)
        _, err = sup.communicate(timeout=60)
        assert sup.returncode == 0 and "got SIGHUP" not in err, err
    finally:
        sup.kill()


TRACEBACK = ["Traceback (most recent call last):\n", '  File "x.py", line 1, in <module>\n', "    boom()\n",
             "ValueError: boom\n"]


def _filter(lines: list[str]) -> tuple[list[str], FailureFilter]:
    filt = FailureFilter()
    return [line for line in lines if filt.feed(line)], filt


def test_filter_withholds_rank_tracebacks_and_traceback_blocks():
    chained = [*TRACEBACK, "\n", "The above exception was the direct cause of the following exception:\n", "\n",
               *TRACEBACK]
    lines = ["[rank0] config: {}\n", "[rank1]: Traceback (most recent call last):\n", '[rank1]:   File "y"\n',
             "[rank1]: KeyError: 'x'\n", *chained, "[rank0] rank 0: ValueError: boom\n",
             "[gnn-dist] error: rank 1 failed: KeyError: 'x'\n"]
    passed, filt = _filter(lines)
    assert passed == ["[rank0] config: {}\n", "[rank0] rank 0: ValueError: boom\n",
                      "[gnn-dist] error: rank 1 failed: KeyError: 'x'\n"]
    assert filt.withheld == lines[1:-2] and filt.num_summary_lines == 1


def test_exit_code():
    assert exit_code(0) == 0 and exit_code(1) == 1 and exit_code(-9) == 137
    assert exit_code(1, signal.SIGTERM) == 143 and exit_code(0, signal.SIGINT) == 130


def _agent_printing(*stderr_lines: str, code: int) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.stderr.write({''.join(stderr_lines)!r}); sys.exit({code})"]


def test_withheld_lines_are_dropped_after_a_summary(capsys):
    code = run_torchrun(_agent_printing("[rank0] log line\n", *TRACEBACK, "[gnn-dist] error: rank 0 failed: "
                                        "ValueError: boom\n", code=1), _env())
    err = capsys.readouterr().err
    assert code == 1
    assert err == "[rank0] log line\n[gnn-dist] error: rank 0 failed: ValueError: boom\n"


def test_an_unrecognised_failure_is_shown_unchanged(capsys):
    code = run_torchrun(_agent_printing("[rank0] log line\n", *TRACEBACK, code=3), _env())
    assert code == 3
    assert capsys.readouterr().err == "[rank0] log line\n" + "".join(TRACEBACK)


def test_verbose_passes_everything_through(capfd):
    code = run_torchrun(_agent_printing(*TRACEBACK, "[gnn-dist] error: rank 0 failed: x\n", code=1), _env(),
                        verbose=True)
    assert code == 1
    assert capfd.readouterr().err == "".join(TRACEBACK) + "[gnn-dist] error: rank 0 failed: x\n"
