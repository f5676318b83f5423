"""The registry of refinement objectives: what ``refine`` lowers (``refine_objective=``,
``--refine-objective``), each name and its function.

A refiner is ``refine(graph, assignment, num_parts, *, balance, imbalance, seed, part_weights)
-> int32 [N]``: it moves nodes of a valid assignment, keeping every balance criterion within
its bound. Built in (registered in ``partitioners/methods/__init__.py``):

==============  ===============================================================================
``volume``      the total communication volume, halo rows over all parts (the default)
``max-volume``  the busiest link: the largest halo volume one part sends or receives per layer
==============  ===============================================================================

This module is torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["Refiner", "register_refiner", "get_refiner", "refiner_names"]


@dataclass(frozen=True, slots=True)
class Refiner:
    """One registered refinement objective."""

    name: str
    refine: Callable[..., np.ndarray]
    description: str


_REGISTRY: dict[str, Refiner] = {}


def register_refiner(name: str, refine: Callable[..., np.ndarray], description: str) -> None:
    """Register ``refine`` as the objective ``name`` (a name already taken is a ValueError)."""
    if name in _REGISTRY:
        raise ValueError(f"refinement objective {name!r} is already registered")
    _REGISTRY[name] = Refiner(name, refine, description)


def get_refiner(name: str) -> Callable[..., np.ndarray]:
    """The function of the objective ``name``; ValueError listing the registered names otherwise."""
    try:
        return _REGISTRY[name].refine
    except (KeyError, TypeError):
        raise ValueError(f"unknown refinement objective {name!r}; valid objectives are "
                         f"{', '.join(_REGISTRY)}") from None


def refiner_names() -> tuple[str, ...]:
    """The registered objectives, in registration order (the default, ``volume``, first)."""
    return tuple(_REGISTRY)
