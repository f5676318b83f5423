"""Exception types of the distributed layer: ``ValueError`` subclasses for bad user input, and
:class:`CollectiveError` (a ``RuntimeError``) for a collective a peer did not complete."""

from __future__ import annotations

__all__ = ["DistributedConfigError", "HaloSpecError", "CollectiveError"]


class DistributedConfigError(ValueError):
    """The launch environment or an ``init_distributed`` argument is invalid.

    ``variable`` names the environment variable (or argument) that is wrong, when there is one.
    """

    def __init__(self, message: str, *, variable: str | None = None) -> None:
        super().__init__(message)
        self.variable = variable


class HaloSpecError(ValueError):
    """The send/halo lists given to a :class:`~gnn_dist.distributed.halo.HaloExchanger` are
    inconsistent (locally, or with what the peer ranks say they send)."""


class CollectiveError(RuntimeError):
    """A collective did not complete: a peer died, stalled, or exceeded the group's timeout.

    The message names the collective (which exchange, which layer), its direction and the peer
    ranks, and keeps the backend's own reason.
    """
