"""Errors raised by the record codec.

These carry no errno: the ``fs`` layer maps them (docs/design.md §1.2).
"""

from __future__ import annotations


class CorruptRecordError(ValueError):
    """A record batch (or record inside one) failed validation.

    Mirrors Kafka's ``CorruptRecordException``/``InvalidRecordException``.

    Attributes:
        path: file the bytes came from, when known (``None`` for in-memory buffers).
        position: byte position of the batch in that file or buffer, when known.
        reason: what was wrong, in words.
    """

    def __init__(self, reason: str, *, path: str | None = None, position: int | None = None):
        self.reason = reason
        self.path = path
        self.position = position
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.position is not None:
            where.append(f"position {self.position}")
        return f"{': '.join(where) + ': ' if where else ''}{self.reason}"

    def located(self, path: str | None = None, position: int | None = None) -> CorruptRecordError:
        """Return a copy naming ``path``/``position`` (those already set are kept)."""
        return CorruptRecordError(
            self.reason,
            path=self.path if self.path is not None else path,
            position=self.position if self.position is not None else position,
        )


class UnsupportedCodecError(CorruptRecordError):
    """A batch names a compression codec this build cannot handle."""
