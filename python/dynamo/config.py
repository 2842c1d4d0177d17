"""``dynamo.config``: runtime settings (read and written like torch._dynamo.config).

- ``cache_size_limit`` (int, default 8): compiled versions kept per code object; past it the
  frame runs eagerly and one warning names the failing guard.
- ``suppress_errors`` (bool, default True): a compiler or backend failure runs the frame eagerly
  with the error logged (``DYNAMO_LOGS=graph_breaks``); False lets the error reach the caller.
"""

from __future__ import annotations

import sys
import types

from . import _C


class _Config(types.ModuleType):
    @property
    def cache_size_limit(self) -> int:
        return _C.cache_size_limit()

    @cache_size_limit.setter
    def cache_size_limit(self, value: int) -> None:
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"cache_size_limit must be a non-negative int, got {value!r}")
        _C.cache_size_limit(value)

    @property
    def suppress_errors(self) -> bool:
        return _C.suppress_errors()

    @suppress_errors.setter
    def suppress_errors(self, value: bool) -> None:
        _C.suppress_errors(bool(value))


sys.modules[__name__].__class__ = _Config
