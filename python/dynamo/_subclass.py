"""Runtime helpers for tensors of ``torch.Tensor`` subclasses that reach a graph.

Note [tensor subclasses] (``src/symbolic/variables/tensor_subclass.rs``): the graph only ever
sees plain tensors. A subclass input is handed to the compiled graph as a plain alias of itself
(``plain``), and a result the trace gave a subclass is made one again after the graph
(``rewrap``), both with the subclass's ``__torch_function__`` switched off, as
``torch.Tensor.__torch_function__`` switches it off around its own ``as_subclass``.
"""

import torch

__all__ = ["plain", "rewrap", "PlainInputs", "new_probe", "run_probe"]

_Disable = torch._C.DisableTorchFunctionSubclass
_Tensor = torch.Tensor


def plain(t):
    """A ``torch.Tensor`` sharing ``t``'s storage and autograd history (``t`` of any subclass).

    Runs no ``__torch_function__`` of the subclass. Shapes, dtype and device are ``t``'s.
    """
    if type(t) is _Tensor:
        return t
    with _Disable():
        return _Tensor.as_subclass(t, _Tensor)


def rewrap(t, cls, attrs=None):
    """``t`` (a tensor the graph computed) as an instance of ``cls``, eager's ``_convert``.

    ``attrs``: a dict of Python attributes the traced code set on the object; they go into its
    ``__dict__``. No ``__torch_function__`` runs.
    """
    # One graph output rebuilt twice (`return y, y`) is one object, as in eager.
    d = t.__dict__
    out = d.get("_dynamo_rewrapped")
    if out is not None and type(out) is cls:
        return out
    with _Disable():
        out = _Tensor.as_subclass(t, cls)
    d["_dynamo_rewrapped"] = out
    if attrs:
        out.__dict__.update(attrs)
    return out


class PlainInputs:
    """Calls ``compiled`` with the inputs at ``positions`` (subclass tensors) as plain aliases.

    The compiled graph then runs only the ops it recorded; the subclass's ``__torch_function__``
    already ran (inlined) while the frame was traced.
    """

    __slots__ = ("compiled", "positions")

    def __init__(self, compiled, positions):
        self.compiled = compiled
        self.positions = frozenset(positions)

    def __call__(self, *args):
        pos = self.positions
        return self.compiled(*[plain(a) if i in pos else a for i, a in enumerate(args)])


class _Seen(Exception):
    pass


class _Probe(_Tensor):
    """A tensor whose ``__torch_function__`` reports what it was called with and stops."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise _Seen(func, args, kwargs)


def new_probe():
    """A fresh probe tensor (no elements) for ``run_probe``."""
    with _Disable():
        return _Tensor.as_subclass(torch.empty(0), _Probe)


def run_probe(fn, args, kwargs):
    """``(func, args, kwargs)`` that ``fn(*args, **kwargs)`` hands to ``__torch_function__``.

    ``args`` hold probe tensors (``new_probe``) where the traced call had tensors; ``None`` when
    the call raises before, or finishes without, reaching ``__torch_function__``.
    """
    try:
        # No `**{}`: a C function would receive an empty dict where eager passes none.
        if kwargs:
            fn(*args, **kwargs)
        else:
            fn(*args)
    except _Seen as seen:
        return seen.args
    except Exception:
        return None
    return None
