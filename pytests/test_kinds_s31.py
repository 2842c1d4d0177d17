"""Python kinds whose corners gave silent wrong answers (issue 7): each program runs eagerly and
compiled on copies of the same inputs and is compared exactly (values and their types, mutated
arguments, printed text, exceptions), with a graph count showing it was captured.

Note [items taken one at a time] (src/symbolic/variables/iter.rs): `list.extend`, `+=`,
`deque.extend`/`extendleft`, `dict.update`, `set.update`/`difference_update` write each item of
a lazy iterable before taking the next, and `set.isdisjoint`/`issuperset` stop at the item that
decides, so a generator that reads the container, or an iterator read again afterwards, sees
what it sees in CPython."""

import collections
import dataclasses
import functools
import sys

import pytest
import torch

import dynamo
from test_python_kinds import check, no_fallback

BACKENDS = ["eager", "inductor"]


# ----- containers written from a lazy iterable ---------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_extend_and_iadd_from_a_generator_that_reads_the_list(backend):
    def fn(x, lst):
        lst.extend(v * 2 for v in lst if v < 10)
        local = [1, 2]
        local += (len(local) for _ in range(3))
        other = [1, 2]
        other.extend(map(lambda _: len(other), range(3)))
        return x + len(lst), local, other

    check(fn, torch.ones(2), [1, 2, 3], graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_update_from_a_generator_that_reads_the_dict(backend):
    def fn(x, d):
        d.update(((k, len(d)) for k in "abc"), z=len(d))
        local = {"a": 1}
        local.update((k, len(local)) for k in "abc")
        return x + 1, local

    check(fn, torch.ones(2), {"q": 0}, graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_update_from_its_own_items_raises_changed_size(backend):
    def fn(x):
        d = {"a": 1}
        try:
            d.update((k + "x", v) for k, v in d.items())
        except RuntimeError as e:
            return x, d, str(e)
        return x + 1, d

    check(fn, torch.ones(2), graphs=0, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_set_update_and_difference_update_step_lazy_arguments(backend):
    def fn(x):
        s = {1}
        s.update([5], (len(s) for _ in range(3)), [7])
        t = {1, 2, 3, 4}
        t.difference_update(v + len(t) - 4 for v in [0, 1])
        u = {1, 2}
        u.update(v for v in [5, 6] if len(u) < 3)
        return x + 1, sorted(s), sorted(t), sorted(u)

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_set_isdisjoint_and_issuperset_leave_the_rest_in_the_iterator(backend):
    def fn(x, lst):
        s = {2, 9}
        it = iter(lst)
        a = s.isdisjoint(it)
        rest_a = list(it)
        it = iter(lst)
        b = s.issuperset(it)
        rest_b = list(it)
        it = iter(lst)
        c = s.isdisjoint(v for v in it)
        rest_c = list(it)
        return x + 1, a, rest_a, b, rest_b, c, rest_c

    check(fn, torch.ones(2), [1, 2, 3, 4], graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_deque_extend_steps_a_generator_with_maxlen(backend):
    def fn(x):
        d = collections.deque([1], maxlen=3)
        d.extend(len(d) for _ in range(4))
        e = collections.deque([1], maxlen=3)
        e.extendleft(len(e) * 10 for _ in range(4))
        z = collections.deque(maxlen=0)
        z.extend(v for v in [1, 2])
        return x + 1, d, e, z

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_deque_extend_of_a_generator_over_itself_raises(backend):
    def fn(x, d):
        d.extend(v * 2 for v in d)
        return x + 1, d

    check(fn, torch.ones(2), collections.deque([1, 2]), graphs=0, backend=backend)


# ----- class attributes written in the frame, read through a subclass ---------------------------


class _Base:
    n = 0


class _Sub(_Base):
    pass


@pytest.fixture
def restore_classes():
    yield
    _Base.n = 0
    for cls in (_Base, _Sub):
        for name in ("m", "n"):
            if name in cls.__dict__ and not (cls is _Base and name == "n"):
                delattr(cls, name)


def _run_twice(fn, *args, backend):
    """`fn` eagerly, then compiled, on the class state each starts from; the answers."""
    eager = fn(*args)
    _Base.n = 0
    for cls in (_Base, _Sub):
        for name in ("m", "n"):
            if name in cls.__dict__ and not (cls is _Base and name == "n"):
                delattr(cls, name)
    dynamo.reset()
    compiled = dynamo.optimize(backend)(fn)(*args)
    return eager, compiled


@pytest.mark.parametrize("backend", BACKENDS)
def test_subclass_attribute_after_a_write_to_its_base(backend, restore_classes):
    """`Base.n = 5; Sub.n` answers 5 (the first class of the MRO holding `n`), also through a
    classmethod's `cls` (`cls.count += 1` on a subclass reads the base's new value)."""

    def fn(x):
        _Base.n = 5
        a = _Sub.n
        _Sub.n = a + 1
        return x + a, _Sub.n, _Base.n, getattr(_Sub, "n")

    eager, compiled = _run_twice(fn, torch.ones(2), backend=backend)
    assert torch.equal(eager[0], compiled[0]) and eager[1:] == compiled[1:] == (6, 5, 6)
    assert _Sub.__dict__["n"] == 6 and _Base.n == 5
    assert dynamo.counters()["graphs"] >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_hasattr_after_a_new_attribute_on_the_base_class(backend, restore_classes):
    def fn(x, obj):
        _Base.m = 3
        return x + 1, hasattr(_Sub, "m"), hasattr(obj, "m"), hasattr(_Sub(), "m"), getattr(obj, "m", None), hasattr(_Base, "m")

    eager, compiled = _run_twice(fn, torch.ones(2), _Sub(), backend=backend)
    assert torch.equal(eager[0], compiled[0]) and eager[1:] == compiled[1:] == (True, True, True, 3, True)
    assert dynamo.counters()["graphs"] >= 1


# ----- identity before equality (Note [identity before equality]) ---------------------------------

_NAN = float("nan")
_OTHER_NAN = float("nan")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_nan_key_finds_itself(backend):
    """Dict lookups, `in`, `count` and container comparisons use `PyObject_RichCompareBool`,
    which takes identical objects as equal: the same NaN object is one dict key, is `in` a list
    holding it, and `[nan] == [nan]`; `nan == nan` itself stays False."""

    def fn(x):
        n = _OTHER_NAN
        d = {}
        d[_NAN] = 1
        d[_NAN] = 2
        e = {n: 1}
        e[n] = 3
        lst = [_NAN, 1]
        return (x + 1, len(d), _NAN in d, d.get(_NAN), len(e), e[n], n in e, _NAN in lst, lst.count(_NAN),
                [_NAN] == [_NAN], {_NAN: 1} == {_NAN: 1}, [n] == [n], _NAN == _NAN, n == n)

    ret = check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()
    assert ret[1][1:] == [(int, 1), (bool, True), (int, 2), (int, 1), (int, 3), (bool, True), (bool, True), (int, 1),
                          (bool, True), (bool, True), (bool, True), (bool, False), (bool, False)]


# ----- binding errors name the function's __qualname__ -------------------------------------------


@dataclasses.dataclass
class _Pair:
    a: int
    b: int = 2


def _base(a, b, *, c):
    return a + b + c


@functools.wraps(_base)
def _wrapper(a, b=1):
    return a + b


@pytest.mark.parametrize("backend", BACKENDS)
def test_binding_errors_name_the_functions_qualname(backend):
    """CPython names a function that cannot bind its arguments by its `__qualname__`
    (`func_qualname`), not its code's `co_qualname`: a dataclass `__init__` is `_Pair.__init__`,
    not `__create_fn__.<locals>.__init__`; a `functools.wraps` wrapper takes the wrapped name."""

    def fn(x):
        out = []
        for call in (lambda: _Pair(), lambda: _Pair(1, 2, 3), lambda: _Pair(1, z=3), lambda: _wrapper(x, 1, 2)):
            try:
                call()
            except TypeError as e:
                out.append(str(e))
        return x + 1, out

    ret = check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()
    assert "_Pair.__init__() missing 1 required positional argument: 'a'" == ret[1][1][1][0][1]


# ----- attribute errors: raised where eager raises them, with eager's type name ---------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_attribute_of_a_list_or_dict_raises_inside_the_try(backend):
    """`lst.zz` / `d.zz()` raise AttributeError at the lookup, inside the `try`; a bound-method
    tracker made for the missing name used to fail only when rebuilt, outside the handler."""

    def fn(x, lst, d):
        out = []
        for get in (lambda: lst.zz, lambda: d.zz(), lambda: [1].zz, lambda: {1}.zz):
            try:
                out.append(get())
            except AttributeError as e:
                out.append(str(e))
        return x + 1, out

    check(fn, torch.ones(2), [1], {"a": 1}, graphs=1, breaks=0, backend=backend)
    no_fallback()


class _Outer:
    class Inner:
        def __init__(self):
            self.a = 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_error_names_the_type_by_tp_name(backend):
    """CPython's message prints the type's `tp_name`: a nested class's `__name__` (`'Inner'`,
    not its qualname), a C type's dotted name (`'collections.OrderedDict'`)."""

    def fn(x, inner, od, dd):
        out = []
        local = _Outer.Inner()
        for get in (lambda: inner.zz, lambda: local.zz, lambda: od.zz, lambda: dd.zz, lambda: collections.OrderedDict().zz):
            try:
                out.append(get())
            except AttributeError as e:
                out.append(str(e))
        try:
            del local.zz
        except AttributeError as e:
            out.append(str(e))
        return x + 1, out

    ret = check(fn, torch.ones(2), _Outer.Inner(), collections.OrderedDict(a=1), collections.defaultdict(int), graphs=1, breaks=0, backend=backend)
    no_fallback()
    assert ret[1][1][1][0][1] == "'Inner' object has no attribute 'zz'"
    assert ret[1][1][1][2][1] == "'collections.OrderedDict' object has no attribute 'zz'"


# ----- constant guards compare types at every level (Note [exact constant guards]) --------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_guards_tell_equal_values_of_other_types_apart(backend):
    """`(1, 2) == (True, 2)` and `frozenset({1}) == frozenset({True})` hold, but their `repr` and
    item types differ: the cache entry compiled for one must not answer for the other."""

    def fn(x, t, fs, d):
        return x * 2, repr(t), [type(v).__name__ for v in t], repr(fs), repr(list(d))

    compiled = dynamo.optimize(backend)(fn)
    calls = [
        ((1, 2), frozenset({1}), {(1,): 0}),
        ((True, 2), frozenset({True}), {(True,): 0}),
        ((1.0, 2), frozenset({1.0}), {(1.0,): 0}),
        (((0.0,),), frozenset({0.0}), {(0.0,): 0}),
        (((-0.0,),), frozenset({-0.0}), {(-0.0,): 0}),
    ]
    for args in calls:
        eager = fn(torch.ones(2), *args)
        got = compiled(torch.ones(2), *args)
        assert torch.equal(eager[0], got[0]) and eager[1:] == got[1:], (args, eager[1:], got[1:])
    assert dynamo.counters()["graphs"] == len(calls)


# ----- module namespaces (Note [module namespaces are not dict trackers]) -------------------------

_G = 0


@pytest.fixture
def restore_global():
    global _G
    _G = 0
    yield
    _G = 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_globals_dict_write_is_seen_by_the_global_read(backend, restore_global):
    """`globals()["_G"] = 7; _G` answers 7: the globals dict handed on at the break is the
    namespace LOAD_GLOBAL reads, not a dict tracker whose write the read would not see."""
    global _G

    def fn(x, g):
        globals()["_G"] = 7
        a = _G
        g["_G"] = 11
        return x + a, _G

    eager = fn(torch.ones(2), globals())
    _G = 0
    compiled = dynamo.optimize(backend)(fn)(torch.ones(2), globals())
    assert torch.equal(eager[0], compiled[0]) and eager[1] == compiled[1] == 11 and _G == 11
    assert dynamo.counters()["graphs"] >= 1


def _scaled(a, *, k=1):
    return a * k


@pytest.fixture
def restore_kwdefaults():
    yield
    _scaled.__kwdefaults__ = {"k": 1}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_call_binds_the_kwdefaults_the_trace_wrote(backend, restore_kwdefaults):
    """`f.__kwdefaults__["k"] = 5; f(x)` binds k=5: the inlined call reads the dict's tracker,
    whose write is still pending, not the real dict."""

    def fn(x):
        _scaled.__kwdefaults__["k"] = 5
        return _scaled(x), _scaled(x, k=2)

    eager = fn(torch.ones(2))
    _scaled.__kwdefaults__ = {"k": 1}
    compiled = dynamo.optimize(backend)(fn)(torch.ones(2))
    assert all(torch.equal(a, b) for a, b in zip(eager, compiled))
    assert _scaled.__kwdefaults__ == {"k": 5}
    assert dynamo.counters()["graphs"] >= 1


_MOD_G = 0


def _set_mod_g(v):
    global _MOD_G, _MOD_NEW
    _MOD_G = v
    _MOD_NEW = v


@pytest.fixture
def restore_module_globals():
    yield
    global _MOD_G
    _MOD_G = 0
    globals().pop("_MOD_NEW", None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_attribute_after_a_global_write_of_its_function(backend, restore_module_globals):
    """`mod.f()` writing a global of its module (STORE_GLOBAL, pending in the trace), then
    `mod.name` / `hasattr(mod, name)`: the module's attributes are those globals."""
    global _MOD_G
    mod = sys.modules[__name__]

    def fn(x):
        _set_mod_g(7)
        return x + mod._MOD_G, hasattr(mod, "_MOD_NEW"), getattr(mod, "_MOD_NEW", None)

    eager = fn(torch.ones(2))
    _MOD_G = 0
    globals().pop("_MOD_NEW", None)
    compiled = dynamo.optimize(backend)(fn)(torch.ones(2))
    assert torch.equal(eager[0], compiled[0]) and eager[1:] == compiled[1:] == (True, 7)
    assert dynamo.counters()["graphs"] >= 1


class _Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.count = 0

    def forward(self, x):
        self.count += 1
        self.twice = self.count * 2
        return x * self.count, self.__dict__["count"], vars(self)["twice"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_dict_after_an_attribute_write(backend):
    """`self.count += 1; self.__dict__["count"]` reads the new count: the dict tracker of the
    instance dict would not see the pending attribute write (Note [a module's __dict__ and its
    attributes])."""
    eager_m, compiled_m = _Counting(), _Counting()
    compiled = dynamo.optimize(backend)(compiled_m)
    for _ in range(3):
        e, c = eager_m(torch.ones(2)), compiled(torch.ones(2))
        assert torch.equal(e[0], c[0]) and e[1:] == c[1:]
    assert compiled_m.count == eager_m.count == 3
    assert dynamo.counters()["graphs"] >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_handler_of_a_protected_break_reads_the_locals_before_it(backend):
    """A break at the last instruction of a `try` body (`t[0] += 1` on a tuple raises) runs it
    under the handler; the `except` clause's reads (`y`, `t`) must be in their slots, though
    the instruction's successor outside the block does not read them (Note [protected
    breaks]): they used to be left unbound (UnboundLocalError)."""

    def fn(x):
        y = x + 1
        t = (x.clone(),)
        try:
            t[0] += 1
        except TypeError as e:
            return y, t[0], str(e)
        return x

    check(fn, torch.ones(2), graphs=1, breaks=1, backend=backend)
