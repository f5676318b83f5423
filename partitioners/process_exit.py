"""End a finished command, rank or agent without the interpreter's teardown.

A process that imported torch spends 1-2 s of CPU after its last line in Python's finalization
(clearing every module and collecting the garbage of torch, and of ``torch._dynamo`` and sympy,
which the optimizer's first step imports), and one that imported numpy, scipy and numba (a
``gnn-dist`` command) a few tenths: a job's end waits for it, rank after rank, then the agent,
then the command. :func:`exit_process` does what matters of that teardown (the non-daemon
threads are joined, the ``atexit`` hooks run: the run locks, ``weakref.finalize``, torch's,
logging's; ``sys.stdout`` and ``sys.stderr`` are flushed) and ends the process with
``os._exit``. Torch-free, so the command (``gnn_dist_cli``) and the runtime share it.

Only for a ``__main__`` that is done (``python -m gnn_dist_cli``, ``gnn_dist.train``,
``gnn_dist.predict``, the agent ``gnn_dist.distributed.local_run``): an uncaught exception still
goes the usual way (its traceback, torch's error file); so does every exit under a profiler or a
tracer (``python -m cProfile``, a debugger), which may still have work to do after ``__main__``
returns.
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
