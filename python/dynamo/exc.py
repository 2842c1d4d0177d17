"""Exceptions raised by dynamo (``dynamo.exc``)."""

from ._C import Unsupported

__all__ = ["InvalidBackend", "Unsupported"]


class InvalidBackend(RuntimeError, KeyError):
    """An unknown backend name given to ``optimize`` / ``lookup_backend`` (torch's
    ``torch._dynamo.exc.InvalidBackend``, a RuntimeError; also a KeyError, what dynamo raised
    before, so existing ``except KeyError`` handlers still catch it)."""

    def __init__(self, name: str, available) -> None:
        super().__init__(f"Invalid backend: {name!r}, see `dynamo.list_backends()` for available backends: {sorted(available)}")

    def __str__(self) -> str:  # KeyError's str() would quote the message
        return RuntimeError.__str__(self)
