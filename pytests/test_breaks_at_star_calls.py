"""A graph break at, or under, a `CALL_FUNCTION_EX` whose callable is a bound method of a
builtin type (`"{s}".format(**kw)` with a tensor among the keywords, which the trace cannot
fold): the resumed code gets the NULL and the bound method as they were. Before, the pair was
rewritten to LOAD_METHOD's `[descriptor, self]` form (Note [methods of builtin types at a
break]), which only CALL understands: CALL_FUNCTION_EX then called the string and raised
`TypeError: 'str' object is not callable`; an `import` of a missing module raised that too
(setuptools' import hook formats `**locals()`). Compared with eager exactly
(`test_python_kinds.check`)."""

import pytest
import torch

import dynamo
from test_python_kinds import check

X = torch.arange(3.0)
FMT = "g{s}".format  # a bound method of a constant, read from the globals


def star_star_literal(x):
    return "a{s}".format(**{"s": 1, "x": x}), x + 1


def star_star_local(x):
    d = {"s": 2, "x": x}
    return "b{s}".format(**d), x * 2


def star_args_and_kwargs(x):
    return "c{}{s}".format(*(7,), **{"s": 3, "x": x}), x - 1


def bound_method_in_a_local(x):
    y = x + 1
    f = "d{s}".format
    return f(**{"s": 4, "x": y}), y


def global_bound_method(x):
    y = x + 1
    return FMT(**{"s": 5, "t": y}), y


def pending_star_call_under_a_break(x):
    # The break (print) happens while the outer call's arguments are being built.
    y = x + 1
    return "e{s}{k}".format(**{"s": 6, "k": print("", end="") or 1, "x": y}), y


def missing_import(x):
    y = x * 3
    try:
        import nonexistent_module_for_dynamo_tests  # noqa: F401
    except ImportError as e:
        return type(e).__name__, e.name, y + 1


@pytest.mark.parametrize("fn", [star_star_literal, star_star_local, star_args_and_kwargs, bound_method_in_a_local,
                                global_bound_method, pending_star_call_under_a_break, missing_import],
                         ids=lambda f: f.__name__)
def test_star_call_of_a_builtin_bound_method_at_a_break(fn):
    # The import inside a try block runs its frame eagerly (a protected break there): what
    # counts is the exception.
    check(fn, X, graphs=0 if fn is missing_import else 1)


def test_failing_method_call_keeps_eagers_message():
    # The LOAD_METHOD path still calls the descriptor: eager's error names `str.count()`.
    def f(x):
        y = x + 1
        return "abc".count(1, 2, 3, 4), y

    check(f, X, graphs=1)
