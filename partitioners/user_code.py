"""``--import FILE.py|MODULE``: a user's own components (models, layers, schedules, tasks, partition
methods, stage adapters) loaded into the process before its configuration is resolved.

A component registers itself when its module is imported (``@register_model``,
``@register_schedule``, ``@register_method``, ...), so loading the user's module is all it
takes: ``gnn-dist partition``, ``gnn_dist.train``, ``gnn_dist.predict`` and the pre-launch check
(``--validate``) import each ``--import`` (and the ``import = [...]`` list of a ``--config``
file) first, in every rank, so the stock command line knows ``--model mine`` as it knows
``--model gcn``. Torch-free (the runtime's entry points use it too).

``FILE.py`` is loaded as the module named by its stem (its folder goes first on ``sys.path``, as
for a script, so it can import its siblings); anything else is a module name imported as
``import MODULE`` would. Loading the same file or module again is a no-op. A file that is
missing, not a regular file, or raises while it loads is one line naming it
(:class:`UserCodeError`). This runs the user's own code, which the user named on the command
line: it is never read from a data file.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

__all__ = ["UserCodeError", "import_user_code"]


class UserCodeError(ValueError):
    """An ``--import`` that cannot be loaded: the message is the one line to print."""


def import_user_code(targets: Iterable[str], *, flag: str = "--import") -> list[ModuleType]:
    """Import each of ``targets`` (a ``.py`` file or a module name), in order; returns the modules."""
    return [_import_one(str(target), flag) for target in targets]


def _import_one(target: str, flag: str) -> ModuleType:
    if not target.strip():
        raise UserCodeError(f"{flag}: expected a Python file (my_models.py) or a module name, got {target!r}")
    is_file = target.endswith(".py") or os.sep in target or (os.altsep is not None and os.altsep in target)
    if is_file:
        return _import_file(Path(target), flag)
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name == target or target.startswith(f"{exc.name}."):
            raise UserCodeError(f"{flag} {target}: no such module (a file needs its path and .py suffix)") from None
        raise UserCodeError(f"{flag} {target}: {_describe(exc)}") from None
    except Exception as exc:  # the user's module raised while it was imported
        raise UserCodeError(f"{flag} {target}: {_describe(exc)}") from None


def _import_file(path: Path, flag: str) -> ModuleType:
    if not path.exists():
        raise UserCodeError(f"{flag} {path}: no such file")
    if not path.is_file():
        raise UserCodeError(f"{flag} {path}: not a regular file")
    resolved = path.resolve()
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) and _same(module.__file__, resolved):
            return module   # already loaded
    name = path.stem if path.stem.isidentifier() else "user_" + "".join(c if c.isalnum() else "_" for c in path.stem)
    if name in sys.modules:   # another file of the same stem: keep both
        name = f"{name}_{hashlib.sha256(str(resolved).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise UserCodeError(f"{flag} {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    folder = str(resolved.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise UserCodeError(f"{flag} {path}: {_describe(exc)}") from None
    return module


def _same(file: str, resolved: Path) -> bool:
    try:
        return Path(file).resolve() == resolved
    except OSError:
        return False


def _describe(exc: BaseException) -> str:
    """``Type: message (file:line)`` of the innermost frame in the user's code, on one line."""
    tb = exc.__traceback__
    where = ""
    while tb is not None:
        code = tb.tb_frame.f_code
        if "importlib" not in code.co_filename:
            where = f" ({code.co_filename}:{tb.tb_lineno})"
        tb = tb.tb_next
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{type(exc).__name__}: {text}{where}"
