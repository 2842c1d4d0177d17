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
from .eval_frame import OptimizedModule, allow_in_graph, disable, graph_break, is_compiling, mark_dynamic, mark_static, optimize, reset, run
from .utils import counters, explain


def _quiet_structured_trace() -> None:
    # torch's structured-trace logger ("torch.__trace", always at DEBUG) exists for TORCH_TRACE
    # files; the ShapeEnv logs to it while we trace, and pytest attaches its capture handlers to
    # it (it does not propagate), so a failing test's "Captured log" filled with empty DEBUG
    # records. Without TORCH_TRACE nothing reads it: switch it off.
    import logging
    import os

    if not os.environ.get("TORCH_TRACE"):
        logging.getLogger("torch.__trace").disabled = True


_quiet_structured_trace()

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
