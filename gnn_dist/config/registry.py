"""What the configuration asks the components, registered by the components themselves.

The config sits near the bottom of the layers (docs/architecture.md): it cannot import the
schedules, models, tasks, caches ... whose names are its choices and whose rules decide whether
a value is valid. Each component instead registers, when its module is imported:

- :func:`register_choices` ``(name, fn)``: ``fn()`` is the valid values of a field (the
  ``choices`` of its flag and of its check; read each time, so a name registered later, e.g. by
  ``--import my_models.py``, is a choice at once);
- :func:`register_check` ``(point, fn)``: ``fn(section)`` runs inside that section's
  ``__post_init__``, where it calls :func:`run_checks` ``(point, self)``, and raises
  :class:`~.fields.ConfigError` or returns ``(field, message)`` (refused) or None; it may
  normalise a value in place (``precompute_first_layer=True`` -> ``"on"``). The points:
  ``schedule``, ``features``, ``task``, ``model.jk``, ``model``, ``trainer`` (across sections)
  and ``run``;
- :func:`register_hook` ``(name, fn)``: a function a config method hands its work to
  (``TaskConfig.resolve``: the tasks' ``resolve_task``).

The built-in components are the modules :mod:`gnn_dist.builtins` imports. The first read of a
registry (:func:`choices`, :func:`run_checks`, :func:`hook`) imports that module once, by the
name :data:`BUILTINS`: a plugin load, like ``--import``, at the moment the config needs the
components' answers, whoever asks (the ``gnn_dist.train`` parser reading its flags' choices, a
``Trainer``, ``predict``, the model file, a ``ModelConfig(model="gat")`` built from Python
alone). It is not an import of this package, which imports no component (and no torch): the
layers stay a one-way street, and :mod:`gnn_dist.config_cli`, at the bottom with it, needs none.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any

from .fields import ConfigError

__all__ = ["BUILTINS", "register_choices", "choices", "choices_of", "register_check", "run_checks", "register_hook",
           "hook", "load_builtins"]

BUILTINS = "gnn_dist.builtins"
"""The module that imports every built-in component (each registers itself)."""

_CHOICES: dict[str, Callable[[], Iterable[str]]] = {}
_CHECKS: dict[str, dict[str, tuple[int, Callable[[Any], Any]]]] = {}
_HOOKS: dict[str, Callable[..., Any]] = {}
_state = "unloaded"   # then "loading", "loaded"


def load_builtins() -> None:
    """Import :data:`BUILTINS` once (a no-op while it is being imported, or after)."""
    global _state
    if _state != "unloaded":
        return
    _state = "loading"
    try:
        importlib.import_module(BUILTINS)
    except BaseException:
        _state = "unloaded"
        raise
    _state = "loaded"


def register_choices(name: str, fn: Callable[[], Iterable[str]]) -> Callable[[], Iterable[str]]:
    """``fn()``: the valid values of the fields that read choices ``name`` (a component's
    registry's names: ``"schedule"``, ``"model"``, ``"task"`` ...); the last registration wins."""
    _CHOICES[name] = fn
    return fn


def choices(name: str) -> tuple[str, ...]:
    """The valid values registered as ``name``, now."""
    load_builtins()
    fn = _CHOICES.get(name)
    if fn is None:
        raise LookupError(f"no component registered the choices {name!r} (gnn_dist.config.registry.register_choices; "
                          f"the built-in ones are imported by {BUILTINS})")
    return tuple(fn())


def choices_of(name: str) -> Callable[[], tuple[str, ...]]:
    """A function returning :func:`choices` ``(name)``: a flag's ``choices``, read when the parser
    is built."""
    def read() -> tuple[str, ...]:
        return choices(name)
    read.__name__ = read.__qualname__ = f"choices_of_{name}"
    return read


def register_check(point: str, fn: Callable[[Any], Any], *, order: int = 0) -> Callable[[Any], Any]:
    """Run ``fn(section)`` at ``point`` of every config's validation (module docstring). Checks
    at one point run by ``order``, then in the order registered: a check across components
    (layer parallelism refusing options other components take) uses ``order=1`` to run after
    their own. Registering the same function again replaces it (a reloaded module)."""
    _CHECKS.setdefault(point, {})[f"{fn.__module__}.{fn.__qualname__}"] = (order, fn)
    return fn


def run_checks(point: str, section: Any) -> None:
    """Run the checks registered at ``point`` on ``section``; the first refusal is a
    :class:`~.fields.ConfigError`."""
    load_builtins()
    for _, fn in sorted(_CHECKS.get(point, {}).values(), key=lambda entry: entry[0]):
        refused = fn(section)
        if refused is not None:
            raise ConfigError(*refused)


def register_hook(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` is the function a config method calls as ``name``; the last registration wins."""
    _HOOKS[name] = fn
    return fn


def hook(name: str) -> Callable[..., Any]:
    """The function registered as ``name``."""
    load_builtins()
    fn = _HOOKS.get(name)
    if fn is None:
        raise LookupError(f"no component registered the hook {name!r} (gnn_dist.config.registry.register_hook; "
                          f"the built-in ones are imported by {BUILTINS})")
    return fn
