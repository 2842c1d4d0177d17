"""``optimize`` / ``disable`` / ``run`` / ``reset``: switching the frame hook on and off.

Frames are captured only when they *start* while the hook is on for the current thread. The
hook itself (``dynamo._C.set_eval_frame``) follows torch's protocol: ``None`` off, ``False``
cached code only, a backend callable compiles.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import sysconfig

import torch

from . import _C
from .backends import lookup_backend


def _install_skips() -> None:
    """Skips frames of torch, dynamo and the standard library; keeps site-packages folders
    (which may sit beneath the standard library folder)."""
    skip = {os.path.join(os.path.dirname(torch.__file__), ""), os.path.join(os.path.dirname(os.path.abspath(__file__)), "")}
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib"):
        if paths.get(key):
            skip.add(os.path.join(paths[key], ""))
    keep = {os.path.join(p, "") for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    for key in ("purelib", "platlib"):
        if paths.get(key):
            keep.add(os.path.join(paths[key], ""))
    _C.set_skip_prefixes(sorted(skip), sorted(keep))


_install_skips()


class _Context:
    """Sets the hook's callback for the current thread while active; usable as a context manager
    and as a decorator."""

    def __init__(self, callback):
        self.callback = callback
        self._prev: list = []

    def __enter__(self):
        self._prev.append(_C.set_eval_frame(self.callback))
        return self

    def __exit__(self, *exc):
        _C.set_eval_frame(self._prev.pop())
        return False

    def __call__(self, fn):
        if isinstance(fn, torch.nn.Module):
            return OptimizedModule(fn, self)
        if not callable(fn):
            raise TypeError(f"optimize() expects a function or nn.Module, got {type(fn).__name__}")
        if inspect.isclass(fn):
            raise TypeError("optimize() cannot wrap a class")
        callback = self.callback

        @functools.wraps(fn)
        def _fn(*args, **kwargs):
            prev = _C.set_eval_frame(callback)
            try:
                return fn(*args, **kwargs)
            finally:
                _C.set_eval_frame(prev)

        _fn._dynamo_orig_callable = fn  # type: ignore[attr-defined]
        return _fn


class OptimizedModule(torch.nn.Module):
    """Wraps an ``nn.Module`` so that calls run with the hook on (``optimize(b)(module)``).
    Attribute access falls through to the original module."""

    def __init__(self, mod: torch.nn.Module, ctx: _Context):
        super().__init__()
        self._orig_mod = mod
        self._ctx = ctx
        # The module's forward is the frame to compile, even when it is torch's own code
        # (nn.Sequential.forward), as torch.compile(module) does.
        forward = getattr(type(mod), "forward", None)
        code = getattr(forward, "__code__", None)
        if code is not None:
            _C.force_compile(code)

    def forward(self, *args, **kwargs):
        prev = _C.set_eval_frame(self._ctx.callback)
        try:
            return self._orig_mod(*args, **kwargs)
        finally:
            _C.set_eval_frame(prev)

    def __getattr__(self, name):
        if name in ("_orig_mod", "_ctx"):
            return super().__getattr__(name)
        return getattr(self._orig_mod, name)


def optimize(backend="inductor", *, nopython: bool = False, dynamic=None):
    """Returns a context manager / decorator that compiles frames with ``backend``.

    ``backend`` is a registered name (``"inductor"``, ``"eager"``, see ``list_backends()``) or a
    callable ``backend(gm: torch.fx.GraphModule, example_inputs: list[Tensor]) -> callable``.
    Raises ``KeyError`` for an unknown name. With ``nopython=True`` the first graph break (or a
    frame that cannot be traced) raises ``dynamo.exc.Unsupported`` naming the reason and line.
    """
    compiler = lookup_backend(backend)

    def callback(gm, example_inputs):
        return compiler(gm, example_inputs)

    callback._dynamo_backend = compiler  # type: ignore[attr-defined]
    callback._dynamo_nopython = bool(nopython)  # type: ignore[attr-defined]
    # Cache entries are keyed by the callback object: reuse one per (backend, nopython).
    callback = _CALLBACKS.setdefault((compiler, bool(nopython)), callback)
    return _Context(callback)


_CALLBACKS: dict = {}


def run(fn=None):
    """Runs ``fn`` (or the block) using already-compiled code only: no new compiles."""
    ctx = _Context(False)
    return ctx if fn is None else ctx(fn)


def disable(fn=None, recursive: bool = True):
    """Runs ``fn`` (and everything it calls) eagerly, with the hook off."""
    if fn is None:
        return _Context(None)
    if isinstance(fn, torch.nn.Module):
        fn.forward = disable(fn.forward)
        return fn
    code = getattr(fn, "__code__", None)
    if code is not None:
        _C.skip_code(code)

    @functools.wraps(fn)
    def _fn(*args, **kwargs):
        prev = _C.set_eval_frame(None)
        try:
            return fn(*args, **kwargs)
        finally:
            _C.set_eval_frame(prev)

    _fn._dynamo_disable = True  # type: ignore[attr-defined]
    return _fn


def reset() -> None:
    """Forgets every compiled frame and zeroes the counters (``torch._dynamo.reset()``)."""
    _C.reset()
    try:
        _C.inductor_reset_counters()
    except AttributeError:
        pass
