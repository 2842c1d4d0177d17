"""Backend registry: ``backend(gm: torch.fx.GraphModule, example_inputs: list[Tensor]) -> callable``.

Built in: ``"eager"`` (runs the captured fx graph as is), ``"aot_eager"`` (AOTAutograd's
forward and backward graphs run as fx modules) and ``"inductor"`` (dynamo's own code generator:
fused LLVM kernels for pointwise ops, torch kernels for the rest; forward and backward graphs
for training).
"""

from __future__ import annotations

from typing import Callable

_BACKENDS: dict[str, Callable] = {}


def register_backend(compiler_fn: Callable | None = None, name: str | None = None):
    """Registers ``compiler_fn`` under ``name`` (default: its ``__name__``); usable as a decorator."""

    def add(fn: Callable) -> Callable:
        _BACKENDS[name or fn.__name__] = fn
        return fn

    return add if compiler_fn is None else add(compiler_fn)


def lookup_backend(compiler_fn) -> Callable:
    """Resolves a backend name (or returns a callable unchanged). Raises
    ``dynamo.exc.InvalidBackend`` (a RuntimeError and a KeyError) for unknown names, TypeError
    for anything else."""
    if callable(compiler_fn):
        return compiler_fn
    if isinstance(compiler_fn, str):
        if compiler_fn not in _BACKENDS:
            from .exc import InvalidBackend

            raise InvalidBackend(compiler_fn, _BACKENDS)
        return _BACKENDS[compiler_fn]
    raise TypeError(f"backend must be a name or a callable, got {type(compiler_fn).__name__}")


def list_backends() -> list[str]:
    """Names of the registered backends, sorted."""
    return sorted(_BACKENDS)


@register_backend(name="eager")
def eager(gm, example_inputs):
    """Runs the captured graph with PyTorch's own kernels (a capture-only check)."""
    return gm.forward


@register_backend(name="aot_eager")
def aot_eager(gm, example_inputs):
    """AOTAutograd with torch kernels: a graph whose inputs require grad (under grad mode) is
    differentiated by dynamo's derivative rules, partitioned, and its forward and backward graphs
    run as torch.fx modules (isolates autodiff bugs from codegen bugs); other graphs run as
    ``eager`` does."""
    from .aot import aot_compile

    return aot_compile(gm, example_inputs, "aot_eager")


@register_backend(name="inductor")
def inductor(gm, example_inputs):
    """Dynamo's inductor: fuses pointwise ops and reductions into LLVM-compiled loops; other ops
    call torch. Returns a ``dynamo._C.CompiledGraph``; a graph whose inputs require grad (under
    grad mode) goes through AOTAutograd first and both its forward and backward graphs are
    compiled (``dynamo.aot``).

    Dynamo calls the result only after the frame's guards passed, and those pin every graph
    input's dtype, device, sizes, strides and requires_grad, so the graph skips its own per-call
    input checks (Note [guarded inputs] in src/inductor/wrapper.rs). The backward graph keeps
    them: its inputs (saved values, tangents) are not guarded.
    """
    from .aot import aot_compile

    return aot_compile(gm, example_inputs, "inductor")
