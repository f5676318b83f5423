"""End a finished rank or agent without the interpreter's teardown.

A process that imported torch spends 1-2 s of CPU after its last line in Python's finalization
(clearing every module and collecting the garbage of torch, and of ``torch._dynamo`` and sympy,
which the optimizer's first step imports): the job's end waits for it, rank after rank, then
the agent. :func:`exit_process` does what matters of that teardown (the non-daemon threads are
joined, the ``atexit`` hooks run: the run locks, ``weakref.finalize``, torch's; ``sys.stdout``,
``sys.stderr`` and the logging handlers are flushed) and ends the process with ``os._exit``.

Only for a ``__main__`` that is done (``gnn_dist.train``, ``gnn_dist.predict``, the agent): an
uncaught exception still goes the usual way (its traceback, torch's error file); so does every
exit under a profiler or a tracer (``python -m cProfile``, a debugger), which may still have
work to do after ``__main__`` returns.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

__all__ = ["exit_process"]


def exit_process(code: int | None) -> NoReturn:
    """Exit with ``code`` (``None``: 0), as ``sys.exit`` would, less the module teardown."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    me = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not me and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()   # logging's own hook among them: its handlers flushed and closed
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):   # closed or gone: nothing left to write
            pass
    os._exit(0 if code is None else int(code))
