"""Attribute writes through Python code of the object's class are traced, not a break (Note
[traced descriptors] in src/symbolic/variables/descriptors.rs): a custom `__setattr__`, a
property's setter, a data descriptor's `__set__` (and its `__get__` on reads), on objects passed
in and on objects built in the frame. Each case equals eager: result and the object's state."""

import pytest
import torch

import dynamo


class Logs:
    def __init__(self):
        object.__setattr__(self, "log", [])

    def __setattr__(self, k, v):
        self.log.append(k)
        super().__setattr__(k, v * 10 if isinstance(v, int) else v)


class Prop:
    def __init__(self):
        self._v = 0

    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, x):
        self._v = x * 2


class Plus1:
    def __set_name__(self, owner, name):
        self.name = "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        return getattr(obj, self.name, 0) * 3

    def __set__(self, obj, v):
        setattr(obj, self.name, v + 1)


class WithDesc:
    d = Plus1()


def _set_on_input(o, x):
    o.a = 1
    o.b = 2
    return x + o.a


def _set_on_new(x):
    o = Logs()
    o.a = 1
    return x + o.a, o.log


def _prop_on_input(p, x):
    p.v = 3
    return x + p.v


def _prop_on_new(x):
    p = Prop()
    p.v = 3
    return x + p.v, p._v


def _desc_on_input(w, x):
    w.d = 5
    return x + w.d


def _desc_on_new(x):
    w = WithDesc()
    w.d = 5
    return x + w.d, w._d


CASES = [
    (_set_on_input, Logs),
    (_set_on_new, None),
    (_prop_on_input, Prop),
    (_prop_on_new, None),
    (_desc_on_input, WithDesc),
    (_desc_on_new, None),
]


def _state(o):
    return dict(o.__dict__)


@pytest.mark.parametrize("fn,cls", CASES, ids=[c[0].__name__ for c in CASES])
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_writes_run_the_class_code(fn, cls, backend):
    x = torch.ones(3)
    dynamo.reset()
    opt = dynamo.optimize(backend)(fn)
    for _ in range(2):
        args = (cls(),) if cls else ()
        want = fn(*args, x)
        args2 = (cls(),) if cls else ()
        got = opt(*args2, x)
        assert repr(got) == repr(want)
        if cls:
            assert _state(args2[0]) == _state(args[0])
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, (c, dynamo._C.break_reasons())


def test_redefined_setter_recompiles():
    class P:
        @property
        def v(self):
            return self._v

        @v.setter
        def v(self, x):
            self._v = x + 1

    def fn(p, x):
        p.v = 1
        return x * p.v

    x = torch.ones(2)
    dynamo.reset()
    opt = dynamo.optimize("eager")(fn)
    assert torch.equal(opt(P(), x), x * 2)
    P.v = property(lambda self: self._v, lambda self, x: setattr(self, "_v", x + 5))
    assert torch.equal(opt(P(), x), x * 6)
