"""partitioners/process_exit.py: a finished ``__main__`` ends with its code, its non-daemon
threads joined, its atexit hooks run and its buffered output written, but without the module
teardown (a ``__del__`` of a module global, which only that teardown runs, never runs); under a
profiler it exits the usual way."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import atexit, os, sys, threading, time
    from partitioners.process_exit import exit_process

    class Teardown:
        def __del__(self, write=os.write):   # sys.stdout may be gone by then: the fd itself
            write(1, b"module teardown\\n")

    KEPT = Teardown()   # a module global: collected only by the interpreter's teardown
    atexit.register(lambda: sys.stdout.write("atexit hook\\n"))

    def late():
        time.sleep(0.3)
        sys.stdout.write("non-daemon thread done\\n")

    threading.Thread(target=late).start()
    sys.stdout.write("buffered line\\n")   # a pipe: block-buffered, not yet written
    exit_process(int(sys.argv[1]))
""")


def run(*args: str, code: int = 3) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args, "-c", SCRIPT, str(code)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_exit_process_keeps_the_exit_code_threads_hooks_and_output_but_skips_the_teardown():
    proc = run(code=3)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.splitlines() == ["buffered line", "non-daemon thread done", "atexit hook"]


def test_under_a_tracer_it_exits_the_usual_way():
    script = "import sys; sys.settrace(lambda *a: None)\n" + SCRIPT
    proc = subprocess.run([sys.executable, "-c", script, "0"], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert "module teardown" in proc.stdout.splitlines()
