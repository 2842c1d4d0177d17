"""Reasons that used to break as `GB0000 other` now carry a named kind (docs/graph_breaks.md).

Each program hits one such reason; the compiled call must match eager (result or exception) and
the logged break reason must name the kind.
"""

import itertools

import pytest
import torch

import dynamo
from dynamo import _C


def _fstring_of_tensor(x):
    return x + 1, f"{x}"


def _enumerate_tensor_start(x):
    out = x
    for _, v in enumerate([x, x], x):
        out = out + v
    return out


def _list_insert_tensor_index(x):
    items = [1, 2]
    items.insert(x, 3)
    return x + len(items)


def _list_pop_tensor_index(x):
    items = [1, 2]
    items.pop(x)
    return x + len(items)


def _del_tensor_index(x):
    items = [1, 2]
    del items[x]
    return x + len(items)


def _getattr_tensor_name(x):
    return getattr(x, x)


def _product_negative_repeat(x):
    return x + len(list(itertools.product([1, 2], repeat=-1)))


def _combinations_float_r(x):
    return x + len(list(itertools.combinations([1, 2], 1.5)))


def _dict_function_key(x):
    # (a tensor key is traced: Note [tensor dict keys])
    d = {(lambda: 0): 1, 2: 3}
    return x + 1, len(d)


def _setdefault_function_key(x):
    d = {}
    d.setdefault(lambda: 0, 1)
    return x + 1, len(d)


def _unbound_local(x):
    if x.shape[0] > 5:
        y = 1
    return x + y  # noqa: F821 - UnboundLocalError, as in eager


def _unpack_too_many(x):
    a, b = [x, x, x]
    return a + b


def _undefined_name(x):
    return x + not_defined_anywhere  # noqa: F821


def _list_pop_out_of_range(x):
    items = [1]
    items.pop(5)
    return x


def _dict_pop_missing_key(x):
    d = {"a": 1}
    d.pop("b")
    return x


CASES = [
    (_fstring_of_tensor, "GB0016 unsupported_operation", "f-string of tensor"),
    (_enumerate_tensor_start, "GB0016 unsupported_operation", "enumerate start is not a constant"),
    (_list_insert_tensor_index, "GB0016 unsupported_operation", "insert index"),
    (_list_pop_tensor_index, "GB0016 unsupported_operation", "pop index"),
    (_del_tensor_index, "GB0016 unsupported_operation", "del with a non-constant index"),
    (_getattr_tensor_name, "GB0016 unsupported_operation", "getattr with a non-constant name"),
    (_product_negative_repeat, "GB0007 unsupported_call", "product() repeat"),
    (_combinations_float_r, "GB0007 unsupported_call", "combinations() r is not an int"),
    (_dict_function_key, "GB0016 unsupported_operation", "dict key is not a constant"),
    (_setdefault_function_key, "GB0016 unsupported_operation", "dict key is not a constant"),
    # User errors the trace itself meets: the rest of the frame runs as Python and raises them.
    (_unbound_local, "GB0009 raises_exception", "local 'y' referenced before assignment"),
    (_unpack_too_many, "GB0009 raises_exception", "ValueError: too many values to unpack (expected 2)"),
    (_undefined_name, "GB0009 raises_exception", "name 'not_defined_anywhere' is not defined"),
    (_list_pop_out_of_range, "GB0009 raises_exception", "IndexError: pop index out of range"),
    (_dict_pop_missing_key, "GB0009 raises_exception", "KeyError: 'b'"),
]


def _run(fn, x):
    try:
        return fn(x), None
    except Exception as e:  # the user's own error, compared by type and message
        return None, e


@pytest.mark.parametrize("fn,kind,context", CASES, ids=[c[0].__name__ for c in CASES])
def test_formerly_other_reason_has_a_named_kind(fn, kind, context):
    # the first trace of the program logs the reason (a later run may break elsewhere first)
    _run(dynamo.explain(fn), torch.ones(1))
    reasons = _C.break_reasons()
    assert any(f"[{kind}] {context}" in r for r in reasons), reasons
    assert not any("GB0000" in r for r in reasons), reasons
    want, want_exc = _run(fn, torch.ones(1))
    have, have_exc = _run(dynamo.optimize("eager")(fn), torch.ones(1))
    if want_exc is not None:
        assert type(have_exc) is type(want_exc) and str(have_exc) == str(want_exc), (have_exc, want_exc)
    else:
        assert have_exc is None, have_exc
        assert str(have) == str(want)
