"""A rank's one-line failure reason, left where torchrun's summary looks for it.

A rank that refuses its input (a partition cut for another world size, a bad option) prints one
line and exits with code 2. Started by ``gnn-dist train`` the job then ends with that line; started
by torchrun directly, torchrun follows it with its own ~45-line failure summary, whose "Root Cause"
says ``traceback : To enable traceback see: ...`` unless the rank left a reason in the file torchrun
names in ``TORCHELASTIC_ERROR_FILE``. :func:`leave_failure_note` writes the line there (torchrun's
error-file format: ``{"message": ..., "timestamp": ...}``), so the summary's last block reads
``traceback : <the line>``. Nothing is written outside torchrun (no variable), and an existing file
(torchrun's ``@record`` handler wrote it for an exception) is left as it is.
"""

from __future__ import annotations

import json
import os
import time

from . import environ

__all__ = ["leave_failure_note"]


def leave_failure_note(message: str) -> bool:
    """Write ``message`` for torchrun's failure summary; True when written. Never raises: a note
    that cannot be written leaves the summary as torchrun makes it."""
    path = environ.error_file()
    if path is None:
        return False
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)   # never over another note
    except OSError:
        return False
    with os.fdopen(fd, "w") as out:
        json.dump({"message": " ".join(str(message).split()), "timestamp": int(time.time())}, out)
    return True
