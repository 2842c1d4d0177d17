"""Attribute lookups stay eager's after the compile (issue 7; breaker round of stop 27):
- a class attribute found on a base class is guarded against a class earlier in the MRO
  defining the name later (Note [shadowed class attributes] in
  src/symbolic/variables/user_defined.rs): a subclass's own value, method, or a dict
  subclass's own `keys` / `items` / `__getitem__` / `__contains__` / `__iter__` added after
  the compile recompiles instead of running the cached base-class answer;
- an inlined function's `__code__` is guarded (assigning a new code object recompiles);
- an AttributeError raised by the trace and caught there carries `name` and `obj`, as
  `PyObject_GenericGetAttr` sets them."""

import pytest
import torch

import dynamo

X = torch.ones(2)


def twice(fn, *args, change):
    """Runs `fn` compiled once, applies `change`, then compares compiled and eager."""
    dynamo.reset()
    compiled = dynamo.optimize("eager")(fn)
    compiled(*args)
    change()
    want, got = fn(*args), compiled(*args)
    return want, got


def test_subclass_value_shadowing_a_base_attribute_later():
    class Base:
        k = 1

        def scale(self):
            return 2

    class Sub(Base):
        pass

    def f(o, x):
        return x * o.k * o.scale()

    o = Sub()
    want, got = twice(f, o, X, change=lambda: setattr(Sub, "k", 50))
    assert torch.equal(want, got) and want[0] == 100
    want, got = twice(f, o, X, change=lambda: setattr(Sub, "scale", lambda self: 7))
    assert torch.equal(want, got) and want[0] == 350


class Grown(dict):
    pass


PATCHES = {
    "keys": (lambda d: list(d.keys()), lambda self: ["patched"]),
    "items": (lambda d: list(d.items()), lambda self: [("p", 1)]),
    "getitem": (lambda d: d["a"], lambda self, k: "patched"),
    "contains": (lambda d: "zz" in d, lambda self, k: True),
    "iter": (lambda d: list(d), lambda self: iter(["patched"])),
}
DUNDER = {"getitem": "__getitem__", "contains": "__contains__", "iter": "__iter__"}


@pytest.mark.parametrize("which", sorted(PATCHES))
def test_method_added_to_a_dict_subclass_after_the_compile(which):
    read, patch = PATCHES[which]
    cls = type("Grown" + which, (Grown,), {})
    d = cls(a=1)

    def f(d, x):
        return read(d), x + 1

    name = DUNDER.get(which, which)
    want, got = twice(f, d, X, change=lambda: setattr(cls, name, patch))
    assert want[0] == got[0] and torch.equal(want[1], got[1]), (want, got)


def helper(x):
    return x + 1


def test_inlined_function_code_assignment_recompiles():
    def f(x):
        return helper(x)

    old = helper.__code__
    try:
        want, got = twice(f, X, change=lambda: setattr(helper, "__code__", (lambda x: x * 100).__code__))
        assert torch.equal(want, got) and want[0] == 100
    finally:
        helper.__code__ = old


class Plain:
    pass


def test_caught_attribute_error_has_name_and_obj():
    """`e.obj` is the object of each call: the trace's exception, made once, cannot hold it, so
    reading it breaks (the second call returned the first call's object before)."""

    def g(a, x):
        y = x + 1
        try:
            a.nope
        except AttributeError as e:
            return str(e), e.name, e.obj is a, e.obj, y

    dynamo.reset()
    compiled = dynamo.optimize("eager")(g)
    for a in (Plain(), Plain()):
        want, got = g(a, X), compiled(a, X)
        assert want[:3] == got[:3] == ("'Plain' object has no attribute 'nope'", "nope", True)
        assert got[3] is a
    assert dynamo.counters()["graphs"] >= 1
