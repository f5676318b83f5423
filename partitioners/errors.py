"""Exception types of the partitioner package (all are ``ValueError``s: bad user input)."""

from __future__ import annotations

__all__ = ["GraphError", "PartitionFormatError"]


class GraphError(ValueError):
    """A graph given by the user is malformed; the message names the field and the bad value."""


class PartitionFormatError(ValueError):
    """A partition folder is unreadable, corrupt or of an unknown version.

    ``path`` is the file (or folder) that is wrong; ``found``/``expected`` carry the format
    versions when the error is a version mismatch.
    """

    def __init__(self, message: str, *, path: str | None = None,
                 found: object = None, expected: object = None) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.found = found
        self.expected = expected
