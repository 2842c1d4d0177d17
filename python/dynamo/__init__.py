"""dynamo: PyTorch 2's compiler stack (TorchDynamo + TorchInductor) rebuilt in Rust.

The API mirrors ``torch._dynamo``::

    import dynamo
    with dynamo.optimize("inductor"):          # or @dynamo.optimize("inductor"), or optimize(b)(module)
        loss = compute_loss(model, x, y)

Frames that *start* inside an ``optimize`` block (or inside an optimized function/module) are
captured by the PEP 523 hook in ``dynamo._C``; frames of torch, the standard library and dynamo
itself are skipped. This package is a thin layer: the work happens in Rust.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

from . import config, exc
from .backends import list_backends, lookup_backend, register_backend
from .eval_frame import OptimizedModule, disable, mark_dynamic, mark_static, optimize, reset, run
from .utils import counters, explain

__all__ = [
    "OptimizedModule",
    "config",
    "counters",
    "exc",
    "disable",
    "explain",
    "list_backends",
    "lookup_backend",
    "mark_dynamic",
    "mark_static",
    "optimize",
    "register_backend",
    "reset",
    "run",
]

try:
    __version__ = _version("dynamo-rs")  # the distribution's name (pyproject.toml)
except _PackageNotFoundError:  # a source tree without installed metadata
    __version__ = "0.0.0+unknown"
