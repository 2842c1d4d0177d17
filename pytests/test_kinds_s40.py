"""Python kinds the trace left to graph breaks, round s40: each program runs eagerly and
compiled on copies of the same inputs and is compared exactly (values, Python types, identity,
mutated state), with graph and break counts showing the code was captured.

Kinds: instances of `list` and `dict` subclasses passed into the frame and mutated there (Note
[list subclass objects from outside the frame], Note [dict subclass objects from outside the
frame] in src/symbolic/variables/user_defined.rs)."""

import copy

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


def picture(v):
    """An exactly comparable picture of `v`: types at every level, tensors by value, and the
    instance attributes of list subclasses."""
    if isinstance(v, torch.Tensor):
        return ("tensor", v.dtype, tuple(v.shape), v.detach().clone())
    if isinstance(v, BaseException):
        return (type(v), str(v))
    if isinstance(v, (list, tuple)):
        attrs = sorted((k, picture(a)) for k, a in vars(v).items()) if hasattr(v, "__dict__") else None
        return (type(v), [picture(i) for i in v], attrs)
    if isinstance(v, dict):
        attrs = sorted((k, picture(a)) for k, a in vars(v).items()) if hasattr(v, "__dict__") else None
        return (type(v), [(k, picture(i)) for k, i in v.items()], attrs)
    if isinstance(v, (int, float, str, bool, type(None))):
        return (type(v), v)
    return (type(v), id(v))


def same(a, b):
    if isinstance(a, tuple) and len(a) == 4 and a[0] == "tensor":
        return b[0] == "tensor" and a[1:3] == b[1:3] and torch.allclose(a[3], b[3], rtol=1e-5, atol=1e-6)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and type(a) is type(b) and len(a) == len(b):
        return all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def run(f, args):
    try:
        ret = f(*args)
    except Exception as e:  # compared like a value
        ret = e
    # Which argument the result is, if any (identity).
    which = next((i for i, a in enumerate(args) if ret is a), None)
    return picture(ret), which, [picture(a) for a in args]


def check(f, *args, backend="eager", graphs=1, breaks=0, calls=2):
    """`f` eagerly and compiled (`calls` times, on fresh deep copies of `args` each time):
    equal results, identity of the result among the arguments and mutated arguments, and
    `graphs` graphs with `breaks` breaks."""
    want = run(f, copy.deepcopy(args))
    dynamo.reset()
    g = dynamo.optimize(backend)(f)
    for _ in range(calls):
        got = run(g, copy.deepcopy(args))
        assert same(want, got), f"eager    {want!r}\ncompiled {got!r}"
    c = dynamo.counters()
    assert c["graphs"] == graphs and c["graph_breaks"] == breaks and c["eager_fallbacks"] == 0, c
    assert c["recompiles"] == 0, c


# ----- list subclasses passed in and mutated ------------------------------------------------


class Plain(list):
    pass


class WithAttrs(list):
    def __init__(self, items, scale):
        super().__init__(items)
        self.scale = scale
        self.calls = 0


class DoublingAppend(list):
    """Overrides `append`: the override runs, its `super()` call reaches list's."""

    def append(self, v):
        super().append(v * 2)


class CountingSetitem(list):
    """Overrides `__setitem__`; the replay after the graph must not call it again."""

    def __setitem__(self, i, v):
        self.writes = getattr(self, "writes", 0) + 1
        super().__setitem__(i, v)


class Processors(list):
    """transformers' LogitsProcessorList: `__call__` walks `self`."""

    def __call__(self, x):
        for p in self:
            x = p(x)
        return x


X = torch.arange(6.0).reshape(2, 3)


def list_methods(l, x):
    l.append(x + 1)
    l.extend([x, x * 2])
    l.insert(0, x - 1)
    p = l.pop()
    l[1] = x * 3
    del l[0]
    l += [p]
    l.reverse()
    return x.sin() + len(l)


def list_remove_and_clear(l, x):
    l.remove(1)
    n = len(l)
    r = l.index(2)
    found = 3 in l
    l.clear()
    return x * n + r, bool(l), found


def list_sort(l, x):
    l.append(3)
    l.sort()
    l.sort(key=lambda v: -v)
    return x + l[0]


def list_returned(l, x):
    l.append(x.cos())
    return l


def list_read_after_write(l, x):
    l.append(x + 2)
    total = x * 0
    for t in l:
        total = total + t
    return total, len(l), bool(l)


def list_unbound_methods(l, x):
    list.append(l, x + 1)
    list.__setitem__(l, 0, x)
    return x.relu()


def attrs_and_mutation(l, x):
    l.calls += 1
    l.append(x * l.scale)
    return l[-1] + l.calls


def overridden_append(l, x):
    l.append(x)
    l.append(x + 1)
    return x.sum()


def overridden_setitem(l, x):
    l[0] = x * 5
    return x + 1


def processors_extended(l, x):
    l.append(torch.relu)
    return l(x)


def aliased(a, b, x):
    a.append(x)
    return len(b), x + 1


LIST_CASES = {
    "methods": (list_methods, lambda: (Plain([X, X + 1]), X)),
    "remove_clear": (list_remove_and_clear, lambda: (Plain([3, 1, 2]), X)),
    "sort": (list_sort, lambda: (Plain([5, 1, 4]), X)),
    "returned": (list_returned, lambda: (Plain([X]), X)),
    "read_after_write": (list_read_after_write, lambda: (Plain([X]), X)),
    "unbound_methods": (list_unbound_methods, lambda: (Plain([X, X]), X)),
    "attrs": (attrs_and_mutation, lambda: (WithAttrs([X], 3.0), X)),
    "overridden_append": (overridden_append, lambda: (DoublingAppend([]), X)),
    "overridden_setitem": (overridden_setitem, lambda: (CountingSetitem([X]), X)),
    "processors": (processors_extended, lambda: (Processors([torch.sin]), X)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(LIST_CASES))
def test_list_subclass_mutated_in_the_frame(case, backend):
    f, make = LIST_CASES[case]
    check(f, *make(), backend=backend)


def test_list_subclass_aliased_argument():
    l = Plain([X])
    want = aliased(l, l, X)
    l2 = Plain([X])
    dynamo.reset()
    got = dynamo.optimize("eager")(aliased)(l2, l2, X)
    assert got[0] == want[0] and torch.equal(got[1], want[1]) and len(l2) == len(l)
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


def test_list_subclass_keeps_identity_and_type():
    l = Plain([X])
    dynamo.reset()
    out = dynamo.optimize("eager")(list_returned)(l, X)
    assert out is l and type(out) is Plain and len(l) == 2
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


# ----- dict subclasses passed in and mutated ------------------------------------------------


class PlainDict(dict):
    pass


class CountingDict(dict):
    """Overrides `__setitem__`; the replay after the graph must not call it again."""

    def __setitem__(self, k, v):
        self.writes = getattr(self, "writes", 0) + 1
        super().__setitem__(k, v)


class DefaultZero(dict):
    def __missing__(self, k):
        return 0


def dict_methods(d, x):
    d["a"] = x + 1
    d.update(b=x)
    p = d.pop("k")
    d.setdefault("c", x * 2)
    del d["b"]
    n = 0
    for k in d:
        n += 1
    return x.sin() + p + n, len(d), list(d.keys()), "a" in d, bool(d)


def dict_popitem_clear(d, x):
    k, v = d.popitem()
    d.clear()
    return x * v, k, len(d), bool(d)


def dict_read_after_write(d, x):
    d["k"] = x * 2
    return d["k"] + d.get("k"), list(d.items())[0][0], d["missing"]


def dict_unbound_methods(d, x):
    dict.__setitem__(d, "u", x)
    dict.update(d, {"v": x + 1})
    return x.relu()


def dict_returned(d, x):
    d["new"] = x.cos()
    return d


DICT_CASES = {
    "methods": (dict_methods, lambda: (PlainDict(k=1), X)),
    "popitem_clear": (dict_popitem_clear, lambda: (PlainDict(k=1, j=2), X)),
    "read_after_write": (dict_read_after_write, lambda: (DefaultZero(k=X), X)),
    "unbound_methods": (dict_unbound_methods, lambda: (PlainDict(k=1), X)),
    "overridden_setitem": (dict_methods, lambda: (CountingDict(k=1), X)),
    "returned": (dict_returned, lambda: (PlainDict(k=1), X)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(DICT_CASES))
def test_dict_subclass_mutated_in_the_frame(case, backend):
    f, make = DICT_CASES[case]
    check(f, *make(), backend=backend)


# ----- higher-order ops: one named break, eager's results ---------------------------------


def _add(a, b):
    return a + b


def _pair_combine(a, b):
    # Mamba's selective scan: h_t = A_t * h_{t-1} + B_t, as pairs (A, B).
    return a[0] * b[0], b[0] * a[1] + b[1]


def hop_associative_scan(x):
    from torch._higher_order_ops.associative_scan import associative_scan

    y = x * 2
    return associative_scan(_add, y, dim=0) + 1


def hop_associative_scan_pairs(x):
    from torch._higher_order_ops.associative_scan import associative_scan

    a = torch.sigmoid(x)
    b = x.cos()
    return associative_scan(_pair_combine, (a, b), dim=0)[1].sum(0)


def hop_scan(x):
    from torch._higher_order_ops.scan import scan

    def step(c, xs):
        c = c + xs
        return c, c * 2

    return scan(step, torch.zeros(x.shape[1]), x)


def hop_cond(x):
    return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))


HOP_CASES = {"associative_scan": hop_associative_scan, "associative_scan_pairs": hop_associative_scan_pairs, "scan": hop_scan, "cond": hop_cond}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(HOP_CASES))
def test_higher_order_op_breaks_once_with_its_reason(case, backend):
    """The frame breaks once, at the operator, with its named reason, and gives eager's
    results. Compiled first: these operators run torch.compile internally, and in this test
    process a first eager call of one left the frame hook seeing no frame afterwards (a
    finding, not modelled here). The operator's own first call runs torch's frames through the
    hook, so only the reasons of this frame are counted."""
    f = HOP_CASES[case]
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(x)
    want = f(x)
    for a, b in zip(torch.utils._pytree.tree_leaves(want), torch.utils._pytree.tree_leaves(got)):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    assert dynamo.counters()["graphs"] >= 1
    mine = [r for r in dynamo._C.break_reasons() if r.startswith(f"{f.__name__}:")]
    assert len(mine) == 1 and "[GB0027 higher_order_op]" in mine[0] and "takes a function" in mine[0], mine


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_text_of_dicts_and_sets_of_literals(backend):
    """`str`/`repr`/f-string of a dict or set of literals built in the trace is folded (the C
    text of a fresh copy); before, each was a graph break."""

    def f(x, n):
        d = {"a": n, 2: (3, 4.5), "nested": {"k": [1, "z"]}}
        s = {n, 7}
        return x + 1, str(d), repr(d), f"{d}|{d!r}|{s}", str(s), str({})

    want = f(torch.ones(2), 5)
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(2), 5)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:]
    assert dynamo.counters()["graph_breaks"] == 0
