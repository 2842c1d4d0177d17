"""Runtime helpers for tensors of ``torch.Tensor`` subclasses that reach a graph.

Note [tensor subclasses] (``src/symbolic/variables/tensor_subclass.rs``): the graph only ever
sees plain tensors. A subclass input is handed to the compiled graph as a plain alias of itself
(``plain``), and a result the trace gave a subclass is made one again after the graph
(``rewrap``), both with the subclass's ``__torch_function__`` switched off, as
``torch.Tensor.__torch_function__`` switches it off around its own ``as_subclass``.
"""

import torch

__all__ = ["plain", "rewrap", "PlainInputs", "dispatch_probe"]

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


def dispatch_probe(name, pattern):
    """What eager passes to ``__torch_function__`` for ``operator.<name>(*operands)``.

    ``pattern``: one item per operand, ``None`` for a tensor, ``(value,)`` for a constant.
    Returns ``(func, order)``: ``func`` is the object handed to ``__torch_function__`` and
    ``order`` its positional arguments, each the index of a tensor operand or
    ``("const", value)``; ``None`` if the operator does not reach ``__torch_function__`` with
    positional arguments only.
    """
    import operator

    probes = []
    operands = []
    for item in pattern:
        if item is None:
            with _Disable():
                p = _Tensor.as_subclass(torch.empty(0), _Probe)
            probes.append(p)
            operands.append(p)
        else:
            operands.append(item[0])
    try:
        getattr(operator, name)(*operands)
    except _Seen as seen:
        func, args, kwargs = seen.args
    except Exception:
        return None
    else:
        return None
    if kwargs:
        return None
    order = []
    for a in args:
        k = next((i for i, o in enumerate(operands) if o is a and pattern[i] is None), None)
        if k is not None:
            order.append(k)
        elif isinstance(a, _Tensor):
            return None
        else:
            order.append(("const", a))
    return func, tuple(order)
