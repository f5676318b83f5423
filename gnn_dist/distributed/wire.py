"""How a schedule's halo rows travel: the wire codec of each direction and the (simulated) link.

A :class:`Transport` belongs to the training schedule that makes it (``halo_dtype``,
``halo_grad_dtype``, ``halo_bits`` and ``simulate_link`` of the schedule's config), never to the
part's exchanger: evaluation exchanges with no transport, in the model's dtype and without delay,
so it stays exact whatever the training schedule sends.

The quantised codecs round stochastically, keyed by the run's seed, the training step, the layer
and each row's original id: the schedule tells its transport the step (:meth:`Transport.begin_step`)
before the step's first exchange.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .codec import AS_IS, CAST_DTYPES, CastCodec, WireCodec, parse_codec
from .link import LinkModel, SimulatedLink
from .quantize import RowKey

__all__ = ["WIRE_DTYPES", "parse_wire_dtype", "Transport", "EXACT"]

WIRE_DTYPES: dict[str, torch.dtype] = CAST_DTYPES
"""The float wire dtypes by name (the quantised ones are :data:`~.codec.QUANTIZED_BITS`)."""


def parse_wire_dtype(name: str | torch.dtype | None) -> torch.dtype | None:
    """``"fp32"``/``"bf16"``/``"fp16"`` (or a floating torch dtype, or None) -> the dtype."""
    codec = parse_codec(name)
    if not isinstance(codec, CastCodec):
        raise ValueError(f"halo_dtype={name!r} is not a float dtype; choose from {', '.join(CAST_DTYPES)}")
    return codec.dtype


@dataclass
class _Clock:
    step: int = 0


@dataclass(frozen=True, slots=True)
class Transport:
    """Halo rows travel in ``rows``' wire format and their gradients in ``grads``' (default: as
    they are), over ``link`` (None: no delay). Every rank must use the same transport; bytes are
    counted as they travel. ``seed`` keys the quantisers' rounding with the step of
    :meth:`begin_step`."""

    rows: WireCodec = AS_IS
    grads: WireCodec = AS_IS
    link: SimulatedLink | None = None
    seed: int = 0
    adaptive: Any = None
    """The :class:`~.adaptive_bits.AdaptiveBits` policy the codecs share, or None."""
    _clock: _Clock = field(default_factory=_Clock, init=False, compare=False, repr=False)

    @classmethod
    def build(cls, halo_dtype: str | torch.dtype | None, simulate_link: LinkModel | str | None, *,
              halo_grad_dtype: str | torch.dtype | None = None, halo_bits: Any = None, seed: int = 0,
              group: Any = None) -> "Transport":
        """From a schedule's ``halo_dtype`` (rows, and gradients unless ``halo_grad_dtype`` names
        theirs), ``halo_bits`` (an :class:`~.adaptive_bits.AdaptiveBitsSpec`: adaptive widths for
        the rows, and for the gradients unless ``halo_grad_dtype`` is given; the allocation is
        agreed over ``group``) and ``simulate_link`` (a fresh link queue)."""
        model = LinkModel.parse(simulate_link) if isinstance(simulate_link, str) else simulate_link
        adaptive = None
        if halo_bits is not None:
            from .adaptive_bits import AdaptiveBits
            adaptive = AdaptiveBits(halo_bits, group=group)
        rows = parse_codec(halo_dtype, adaptive=adaptive)
        grads = rows if halo_grad_dtype is None else parse_codec(halo_grad_dtype)
        return cls(rows, grads, None if model is None else SimulatedLink(model), int(seed), adaptive)

    def begin_step(self, step: int) -> None:
        """The next exchanges belong to training step ``step`` (their rounding's key). With
        adaptive bit widths this may re-decide them: a collective on every rank of the group."""
        self._clock.step = int(step)
        if self.adaptive is not None:
            self.adaptive.begin_step(int(step))

    def state_dict(self) -> dict[str, Any] | None:
        """The adaptive widths' state (a collective), or None without adaptive widths: what a
        checkpoint keeps so that a resumed run decides as the uninterrupted one."""
        return None if self.adaptive is None else self.adaptive.state_dict()

    def load_state_dict(self, state: dict[str, Any] | None) -> str | None:
        """Restore :meth:`state_dict`'s output; returns why it could not (None: restored, or
        nothing to restore)."""
        if self.adaptive is None:
            return None
        if state is None:
            return "the checkpoint holds no adaptive halo widths"
        return self.adaptive.load_state_dict(state)

    def key(self, layer: Any, *, backward: bool) -> RowKey:
        """The rounding key of an exchange tagged ``layer`` in the current step."""
        return RowKey(self.seed, self._clock.step, layer if isinstance(layer, int) else -1, backward)

    def codec(self, *, backward: bool) -> WireCodec:
        return self.grads if backward else self.rows

    @property
    def wire_dtype(self) -> torch.dtype | None:
        """The rows' float wire dtype (None: as they are, or quantised)."""
        return getattr(self.rows, "dtype", None)

    @property
    def exact(self) -> bool:
        """True when rows and gradients travel as they are, with no delay."""
        return self.rows is AS_IS and self.grads is AS_IS and self.link is None

    def __repr__(self) -> str:
        grads = "" if self.grads is self.rows else f", grads={self.grads.name}"
        return f"Transport(rows={self.rows.name}{grads}, link={None if self.link is None else self.link.model})"


EXACT = Transport()
"""Rows as they are, no delay (evaluation's, and the default)."""
