"""What ``partition.json`` records of how the parts were made: its ``method_params``.

``{"balance": [...], "refine": bool}`` as always, then only what differs from the defaults, so
that a folder written without those options is the same as before they existed:

  ``refine_objective``  what ``refine`` lowered, when not the total volume (``"max-volume"``)
  ``part_weights``      each part's fraction of every balance criterion (summing to 1), when
                        the parts were sized to their devices (``--part-weights``)
  ``device_memory``     each part's device memory in bytes, when the weights came from them
                        (``--device-memory``): ``gnn-dist plan --data`` checks each rank
                        against its own device by default

:func:`recorded_part_weights` reads the fractions back: a folder without them has equal parts.
Torch-free.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = ["method_params", "recorded_part_weights", "recorded_device_memory", "DEFAULT_REFINE_OBJECTIVE"]

DEFAULT_REFINE_OBJECTIVE = "volume"
"""What ``refine`` lowers unless told otherwise: the total communication volume."""


def method_params(balance: Iterable[str], refine: bool, *, refine_objective: str = DEFAULT_REFINE_OBJECTIVE,
                  part_weights: Iterable[float] | None = None,
                  device_memory: Iterable[int] | None = None) -> dict[str, Any]:
    """The ``method_params`` object of ``partition.json`` (module docstring); ``part_weights``
    are the normalised fractions (:func:`partitioners.methods.targets.check_part_weights`),
    ``device_memory`` the bytes they were made from."""
    out: dict[str, Any] = {"balance": list(balance), "refine": bool(refine)}
    if refine and refine_objective != DEFAULT_REFINE_OBJECTIVE:
        out["refine_objective"] = refine_objective
    if part_weights is not None:
        out["part_weights"] = [float(w) for w in part_weights]
    if device_memory is not None:
        out["device_memory"] = [int(b) for b in device_memory]
    return out


def recorded_part_weights(params: Mapping[str, Any] | None, num_parts: int) -> tuple[float, ...]:
    """Each part's recorded fraction (``method_params["part_weights"]``); ``1 / P`` each when
    the folder records none (equal parts, every folder written before part weights)."""
    weights = (params or {}).get("part_weights")
    if not weights:
        return (1.0 / num_parts,) * num_parts
    return tuple(float(w) for w in weights)


def recorded_device_memory(params: Mapping[str, Any] | None) -> tuple[int, ...] | None:
    """Each part's device memory in bytes as recorded (``method_params["device_memory"]``), or
    None when the parts were not sized by ``--device-memory``."""
    sizes = (params or {}).get("device_memory")
    return None if not sizes else tuple(int(b) for b in sizes)
