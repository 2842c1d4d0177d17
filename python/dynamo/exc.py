"""Exceptions raised by dynamo (``dynamo.exc``)."""

from ._C import Unsupported

__all__ = ["Unsupported"]
