"""Faults a report-only tester found in this stop's own work, each as its smallest program,
compared with eager (values, types, and how often user code runs):

- `yield from` a user iterator lost its StopIteration's value (Note [user iterators]);
- `len()` of an iterator counted (and drained) its items instead of raising TypeError, so
  `heapq.nsmallest(2, iter(l))` took its sized path over an empty iterator and returned [];
- `str()` of a dict that contains itself recursed without end (a crash);
- `str()` of a set built in the trace printed a copy, whose members can sit in another order;
- `del` of an argument a closure captures was not replayed after a graph break;
- a property raising AttributeError, or an empty slot, did not fall back to the class's
  `__getattr__` (Note [__getattr__ after an AttributeError]), and an empty slot's guard ran
  `__getattr__` and failed at every call;
- `hasattr`/`getattr(m, name, default)` of a module with a PEP 562 `__getattr__` ran it once,
  at trace time, instead of at every call."""

import collections
import heapq
import types

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


def _compare(fn, backend, *args, calls=2):
    want = fn(torch.ones(1), *args)
    dynamo.reset()
    opt = dynamo.optimize(backend)(fn)
    for _ in range(calls):
        got = opt(torch.ones(1), *args)
        torch.testing.assert_close(got[0], want[0])
        assert repr(got[1:]) == repr(want[1:])


class Counter3:
    def __init__(self):
        self.i = 0

    def __iter__(self):
        return self

    def __next__(self):
        self.i += 1
        if self.i > 2:
            raise StopIteration(42)
        return self.i


@pytest.mark.parametrize("backend", BACKENDS)
def test_yield_from_a_user_iterator_gives_its_stop_value(backend):
    def gen(it):
        r = yield from it
        yield r

    def f(x):
        return x + 1, list(gen(Counter3()))

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_len_of_an_iterator_raises_and_nsmallest_of_iterators(backend):
    def f(x, l):
        try:
            n = len(iter(l))
        except TypeError as e:
            n = str(e)
        return x + 1, n, heapq.nsmallest(2, iter(l)), heapq.nlargest(2, (v for v in l)), heapq.nlargest(5, map(abs, l))

    _compare(f, backend, [3, 1, 2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_text_of_a_dict_that_contains_itself(backend):
    def f(x):
        d = {1: 2}
        d[2] = d
        return x + 1, str(d), repr(d), f"{d}"

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_text_of_a_set_in_its_own_order(backend):
    def f(x):
        a = set([40, 8, 1, 16, 0])
        b = set()
        for v in range(50, 0, -3):
            b.add(v)
        return x + 1, str(a), f"{b}", tuple(a), ",".join(map(str, a))

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_del_of_a_captured_argument(backend):
    def f(x, y):
        def g():
            return y

        del y
        try:
            return x + g(), None
        except NameError as e:
            return x, str(e)

    _compare(f, backend, 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_getattr_fallbacks_after_an_attribute_error(backend):
    log = []

    class Slotted:
        __slots__ = ("a",)

        def __getattr__(self, k):
            log.append(k)
            return -1

    class Prop:
        @property
        def a(self):
            raise AttributeError("nope")

        def __getattr__(self, k):
            return "fallback-" + k

    def f(x, s, p):
        return x + 1, hasattr(s, "a"), p.a, hasattr(p, "a"), getattr(p, "a", "D")

    want = f(torch.ones(1), Slotted(), Prop())
    want_log = list(log)
    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    for _ in range(3):
        log.clear()
        got = opt(torch.ones(1), Slotted(), Prop())
        assert got[1:] == want[1:] and log == want_log
    assert dynamo.counters()["recompiles"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_getattr_runs_at_every_call(backend):
    log = []

    def hook(name):
        log.append(name)
        if name == "val":
            return 5
        raise AttributeError(name)

    lazy = types.ModuleType("lazy_s43")
    lazy.__getattr__ = hook

    def f(x):
        return x + lazy.val, hasattr(lazy, "nope"), getattr(lazy, "other", 3)

    want = f(torch.ones(1))
    want_log = list(log)
    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    for _ in range(3):
        log.clear()
        got = opt(torch.ones(1))
        assert got[1:] == want[1:] and log == want_log


class ModelOutputLike(collections.OrderedDict):
    def __setitem__(self, k, v):
        super().__setitem__(k, v)
        object.__setattr__(self, k, v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_odict_subclass_update_and_setdefault_reach_its_setitem(backend):
    # OrderedDict's update/setdefault call a subclass's __setitem__ (PyObject_SetItem).
    def f(x, o):
        o.update(logits=x * 2)
        o.setdefault("loss", x.sum())
        return x, getattr(o, "logits", "MISSING"), getattr(o, "loss", "MISSING"), list(o)

    want = f(torch.ones(2), ModelOutputLike())
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(2), ModelOutputLike())
    assert repr(got) == repr(want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["write_at_last", "clear_at_last", "move_noop_last", "move_noop_first"])
def test_odict_iteration_ends_as_odictiter_does(backend, case):
    # After its last key an OrderedDict iterator is done without checking for changes, and a
    # move_to_end that moves nothing changes nothing.
    def f(x, od):
        seen = []
        try:
            for k in od:
                seen.append(k)
                if case == "write_at_last" and k == "b":
                    od["z"] = 1
                elif case == "clear_at_last" and k == "b":
                    od.clear()
                elif case == "move_noop_last":
                    od.move_to_end("b")
                elif case == "move_noop_first":
                    od.move_to_end("a", last=False)
        except RuntimeError as e:
            return x + 1, seen, str(e), list(od)
        return x + 1, seen, None, list(od)

    make = lambda: collections.OrderedDict(a=1, b=2)  # noqa: E731
    want = f(torch.ones(1), make())
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(1), make())
    assert repr(got) == repr(want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_custom_getattribute_error_falls_back_to_getattr(backend):
    class GA:
        def __getattribute__(self, n):
            if n == "z":
                raise AttributeError("gb z")
            return object.__getattribute__(self, n)

        def __getattr__(self, n):
            return ("ga", n)

    def f(x, o):
        return x + 1, o.z, getattr(o, "z", None), hasattr(o, "z")

    _compare(f, backend, GA())


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_getattr_not_asked_for_names_of_our_own(backend):
    # Naming the module in a break reason read `__qualname__` through its PEP 562 hook.
    calls = []
    lazy = types.ModuleType("lazy_s43b")

    def hook(name):
        calls.append(name)
        if name == "heavy":
            setattr(lazy, "heavy", 42)
            return 42
        raise AttributeError(name)

    lazy.__getattr__ = hook

    def f(x):
        return x + lazy.heavy

    f(torch.ones(1))
    want = list(calls)
    del lazy.heavy
    calls.clear()
    dynamo.reset()
    dynamo.optimize(backend)(f)(torch.ones(1))
    assert calls == want == ["heavy"]
