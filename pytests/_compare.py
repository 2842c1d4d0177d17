"""Exact comparison of eager and compiled results for the audit-findings tests."""

import contextlib
import io
import traceback

import torch

import dynamo


def same(a, b):
    """Whether `b` equals `a` exactly as eager made it: the same type at every level (tuple,
    list, dict with its key order), and tensors of the same type, dtype and shape whose values
    agree within float tolerance (NaNs equal)."""
    if isinstance(a, torch.Tensor):
        return type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a, b, equal_nan=True)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def outcome(f, args):
    """(result or exception summary, stdout) of `f(*args)`; a traceback is compared by its
    (function, line) entries outside dynamo, the caller's own entry dropped."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            res = ("ok", f(*args))
        except Exception as e:  # noqa: BLE001 - compared with eager's
            tb = [(t.name, t.lineno) for t in traceback.extract_tb(e.__traceback__) if "dynamo" not in t.filename]
            res = ("raise", type(e), str(e), tb[1:])
    return res, buf.getvalue()


def check(fn, make_args, backend, calls=3):
    """`fn` on fresh arguments eagerly, then compiled `calls` times, each result compared with
    eager's; `make_args(i)` (or `make_args()`) gives the arguments of call `i`. Returns the
    counters."""
    def args_of(i):
        try:
            return make_args(i)
        except TypeError:
            return make_args()

    dynamo.reset()
    f = dynamo.optimize(backend)(fn)
    for i in range(calls):
        expected = outcome(fn, args_of(i))
        got = outcome(f, args_of(i))
        assert same(expected, got), (expected, got)
    return dynamo.counters()
