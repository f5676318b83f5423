"""How a schedule's halo rows travel: their dtype on the wire and the (simulated) link.

A :class:`Transport` belongs to the training schedule that makes it (``halo_dtype`` and
``simulate_link`` of the schedule's config), never to the part's exchanger: evaluation exchanges
with no transport, in the model's dtype and without delay, so it stays exact whatever the
training schedule sends.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .link import LinkModel, SimulatedLink

__all__ = ["WIRE_DTYPES", "parse_wire_dtype", "Transport"]

WIRE_DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16,
                                       "fp16": torch.float16}
"""Accepted ``halo_dtype`` names and the dtypes rows travel as."""


def parse_wire_dtype(name: str | torch.dtype | None) -> torch.dtype | None:
    """``"fp32"``/``"bf16"``/``"fp16"`` (or a floating torch dtype, or None) -> the dtype."""
    if name is None or isinstance(name, torch.dtype):
        if isinstance(name, torch.dtype) and not name.is_floating_point:
            raise ValueError(f"halo_dtype={name} must be a floating-point dtype")
        return name
    if name not in WIRE_DTYPES:
        raise ValueError(f"halo_dtype={name!r} is not supported; choose from {', '.join(WIRE_DTYPES)}")
    return WIRE_DTYPES[name]


@dataclass(frozen=True, slots=True)
class Transport:
    """Rows travel as ``wire_dtype`` (cast before sending, cast back to the input's dtype on
    arrival; None: as they are) over ``link`` (None: no delay). Every rank must use the same
    wire dtype; bytes are counted as they travel."""

    wire_dtype: torch.dtype | None = None
    link: SimulatedLink | None = None

    @classmethod
    def build(cls, halo_dtype: str | torch.dtype | None, simulate_link: LinkModel | str | None) -> "Transport":
        """From a schedule's ``halo_dtype`` and ``simulate_link`` (a fresh link queue)."""
        model = LinkModel.parse(simulate_link) if isinstance(simulate_link, str) else simulate_link
        return cls(parse_wire_dtype(halo_dtype), None if model is None else SimulatedLink(model))

    @property
    def exact(self) -> bool:
        """True when rows travel as they are, with no delay."""
        return self.wire_dtype is None and self.link is None

    def __repr__(self) -> str:
        return f"Transport(wire_dtype={self.wire_dtype}, link={None if self.link is None else self.link.model})"


EXACT = Transport()
"""Rows as they are, no delay (evaluation's, and the default)."""
