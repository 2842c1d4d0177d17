"""Python-kind faults a report-only tester found this stop, each as its smallest program,
compared with eager (values, exact types, exceptions):

- `len()` of an object whose `__len__` returns a bool gave the bool; truth testing through
  `__len__` skipped CPython's checks (`slot_sq_length`: `__index__`, then ValueError for a
  negative and OverflowError past `sys.maxsize`)."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


class Sized:
    def __init__(self, v):
        self.v = v

    def __len__(self):
        return self.v


def _outcome(fn, *args):
    try:
        r = fn(torch.ones(2), *args)
        return ("ok", r[0].tolist(), repr(r[1:]), [type(v) for v in r[1:]])
    except Exception as e:  # noqa: BLE001 - compared with eager's
        return ("raised", type(e).__name__, str(e))


def _compare(fn, backend, *args):
    want = _outcome(fn, *args)
    dynamo.reset()
    opt = dynamo.optimize(backend)(fn)
    for _ in range(2):
        assert _outcome(opt, *args) == want
    return want


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("v", [True, False, 3, 0, -1, 2**63, 2**70, -(2**70), 1.5, "3"])
def test_len_of_a_python_len(backend, v):
    def f(x, v):
        n = len(Sized(v))
        return x + 1, n, type(n)

    _compare(f, backend, v)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("v", [True, False, 3, 0, -1, 2**63, -(2**70), 1.5])
def test_truth_through_a_python_len(backend, v):
    def f(x, v):
        try:
            return x + 1, bool(Sized(v)), "no error"
        except (OverflowError, ValueError, TypeError) as e:
            return x - 1, type(e).__name__, str(e)

    _compare(f, backend, v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_len_error_caught_in_the_frame(backend):
    def f(x):
        try:
            n = len(Sized(-5))
        except ValueError as e:
            return x - 1, str(e)
        return x + n, "none"

    assert _compare(f, backend)[0] == "ok"


# A negative number raised to a tensor power: torch.fx printed `operator.pow(-2.0, x)` as
# `-2.0 ** x`, which Python reads as `-(2.0 ** x)` (Note [negative powers bases in fx code]).
POW_BACKENDS = ["eager", "aot_eager", "inductor", "custom"]


def _backend(name):
    if name != "custom":
        return name

    def custom(gm, example_inputs):
        return gm.forward

    return custom


@pytest.mark.parametrize("backend", POW_BACKENDS)
def test_negative_base_to_a_tensor_power(backend):
    import math

    def f(x, k, g):
        return (-1) ** x, (-2.0) ** x, (-k) ** x, (1 - 2) ** x, (-math.inf) ** x, (-0.0) ** g, (-k) ** k, (-3) ** x.long()

    x = torch.tensor([0.0, 1.0, 2.0, 3.0])
    want = f(x, 3, 0.0)
    dynamo.reset()
    got = dynamo.optimize(_backend(backend))(f)(x, 3, 0.0)
    for a, b in zip(got, want):
        if isinstance(b, torch.Tensor):
            assert torch.equal(a, b)
        else:
            assert a == b and type(a) is type(b)


@pytest.mark.parametrize("backend", POW_BACKENDS)
def test_negative_base_power_gradient(backend):
    def f(x):
        return ((-1.0) ** x * x).sum()

    x = torch.tensor([0.0, 1.0, 2.0, 3.0], requires_grad=True)
    f(x).backward()
    want = x.grad.clone()
    x.grad = None
    dynamo.reset()
    got = dynamo.optimize(_backend(backend))(f)(x)
    assert got.item() == f(x).item()
    x.grad = None
    dynamo.optimize(_backend(backend))(f)(x).backward()
    torch.testing.assert_close(x.grad, want, equal_nan=True)


# Two equal frozensets can iterate in different orders; the guard matched them in any order,
# so the second call reused what the trace computed from the first one's order.
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("wrap", ["plain", "in_tuple"])
def test_equal_frozensets_with_another_order_recompile(backend, wrap):
    def f(x, s):
        if wrap == "in_tuple":
            s = s[0]
        out = []
        for v in s:
            x = x + v
            out.append(v)
        return x, list(s), next(iter(s)), str(s), out

    s1, s2 = frozenset([9, 1]), frozenset([1, 9])
    assert s1 == s2 and list(s1) != list(s2)
    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    for s in (s1, s2, s1):
        arg = (s,) if wrap == "in_tuple" else s
        got, want = opt(torch.zeros(1), arg), f(torch.zeros(1), arg)
        assert repr(got[1:]) == repr(want[1:])


# An int compared with a float argument: Python compares exactly, the ShapeEnv compared in
# floating point, so 2**53 + 1 == 2.0**53 held (Note [ints against symbolic floats]).
CMP_ARGS = [(3, 3.0), (2**53 + 1, 2.0**53), (2**53 + 1, 2.0**53), (2**63 - 1, 2.0**63), (-(2**53) - 1, -(2.0**53)), (5, 4.5), (10**20 + 1, 1e20)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_against_a_float_argument(backend):
    def f(x, a, g):
        if a == g:
            x = x + 1
        else:
            x = x - 1
        return x, (a == g, a != g, a < g, a <= g, a > g, a >= g, g == a, g > a), (a,) == (g,), [a] < [g]

    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    for a, g in CMP_ARGS:
        got, want = opt(torch.zeros(1), a, g), f(torch.zeros(1), a, g)
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:], (a, g)


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_int_against_a_float_argument_and_float_of_an_int(backend):
    def f(x, a, g):
        return x + 1, 2**53 + 1 == g, 2**53 + 1 > g, a == float(a), a - int(float(a))

    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    for a, g in CMP_ARGS:
        got, want = opt(torch.zeros(1), a, g), f(torch.zeros(1), a, g)
        assert got[1:] == want[1:], (a, g)


# Deep values (Note [deep values]): a linked structure built in the frame, or a deeply nested
# tuple argument, crashed the interpreter (a recursive walk exhausted the C stack).
class _Node:
    def __init__(self, nxt, v):
        self.nxt = nxt
        self.v = v


@pytest.mark.parametrize("kind", ["list", "dict", "object"])
def test_deep_structure_built_in_the_frame(kind):
    def f(x):
        node = None
        for i in range(3000):
            node = [node, i] if kind == "list" else {"next": node, "v": i} if kind == "dict" else _Node(node, i)
        return x + 1, node

    want = f(torch.ones(1))
    dynamo.reset()
    got = dynamo.optimize("eager")(f)(torch.ones(1))
    assert torch.equal(got[0], want[0])
    a, b, n = got[1], want[1], 0
    while a is not None:
        va, vb = (a[1], b[1]) if kind == "list" else (a["v"], b["v"]) if kind == "dict" else (a.v, b.v)
        assert va == vb and type(a) is type(b)
        a, b = (a[0], b[0]) if kind == "list" else (a["next"], b["next"]) if kind == "dict" else (a.nxt, b.nxt)
        n += 1
    assert b is None and n == 3000


@pytest.mark.parametrize("kind", ["tuple", "pair", "frozenset"])
def test_deeply_nested_argument(kind):
    t = ()
    for _ in range(30000):
        t = (t,) if kind == "tuple" else (t, 1) if kind == "pair" else frozenset([t])

    def f(x, t):
        return x + 1, len(t)

    dynamo.reset()
    opt = dynamo.optimize("eager")(f)
    for _ in range(2):
        assert opt(torch.ones(1), t)[1] == f(torch.ones(1), t)[1]


# A comparison of a float argument with NaN went to the ShapeEnv, which failed to evaluate it
# and logged a warning to the user's stderr (eager prints nothing).
@pytest.mark.parametrize("backend", BACKENDS)
def test_comparison_with_nan_is_quiet(backend, capfd):
    def f(x, a):
        return x + 1, float("nan") < a, a == float("nan"), a != float("nan"), float("nan") >= a

    want = f(torch.ones(1), 1.0)
    capfd.readouterr()
    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    for a in (1.0, 2.5):
        assert opt(torch.ones(1), a)[1:] == want[1:]
    assert capfd.readouterr().err == ""


# Lists nested 1500 deep compared in the frame: eager raises RecursionError (CPython enters a
# recursive call per level); the trace answered True.
@pytest.mark.parametrize("n", [50, 1500])
def test_deeply_nested_comparison(n):
    def f(x, n):
        a, b = [], []
        for _ in range(n):
            a, b = [a], [b]
        x = x + 1
        try:
            return x, a == b, a < b
        except RecursionError as e:
            return x, "RecursionError", str(e)

    want = f(torch.ones(1), n)
    dynamo.reset()
    assert dynamo.optimize("eager")(f)(torch.ones(1), n)[1:] == want[1:]


# dict.fromkeys was a graph break.
class _MyDict(dict):
    pass


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_fromkeys_is_traced(backend):
    def f(x, keys):
        d = dict.fromkeys(keys, 0)
        e = dict.fromkeys("ab")
        g = dict.fromkeys([1, True, 1.0, 2])
        h = {}.fromkeys(keys, [])
        m = _MyDict.fromkeys(keys)
        d["z"] = 5
        return x + len(d), d, e, g, h, m, type(m), h["a"] is h["b"]

    want = f(torch.ones(2), ["a", "b", "a"])
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(2), ["a", "b", "a"])
    assert repr(got[1:]) == repr(want[1:]) and torch.equal(got[0], want[0])
    dynamo.reset()

    def g(x, keys):
        return x + len(dict.fromkeys(keys, 0))

    assert dynamo.explain(g)(torch.ones(2), ["a", "b"]).graph_break_count == 0


# str()/repr()/f-strings of a deque built in the frame were graph breaks.
@pytest.mark.parametrize("backend", BACKENDS)
def test_text_of_a_deque_of_literals(backend):
    import collections

    def f(x):
        d = collections.deque([1, 2, 3], maxlen=2)
        e = collections.deque("ab")
        e.appendleft(0)
        return x + 1, str(d), repr(e), f"{d}", str(collections.deque())

    want = f(torch.ones(1))
    dynamo.reset()
    assert dynamo.optimize(backend)(f)(torch.ones(1))[1:] == want[1:]
    dynamo.reset()
    assert dynamo.explain(f)(torch.ones(1)).graph_break_count == 0
