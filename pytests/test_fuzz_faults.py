"""Fault kinds the differential fuzzer and its follow-up probes found (issue: every Python kind
exact), each as its smallest program run eagerly and compiled and compared exactly, with counters
showing the code was captured (no eager fallback):

- a function made in the frame that escapes it while closing over a cell of a function defined
  outside the frame shares that very cell (Note [cells of inlined calls]);
- lists, dicts and objects that contain themselves, built or mutated in the frame, come back as
  one object holding itself (`Rebuild::SharedCyclic`), also when they reach a resume function;
- attribute writes to an object from outside the frame enter its `__dict__` in eager's order;
- `raise` (and exceptions the trace raises: KeyError, IndexError, AttributeError) inside a `try`
  of the converted frame itself, also in a resume function, take the `except` clause in the trace
  (Note [handlers in the converted frame]);
- exceptions that leave the converted frame (`raise` outside a `try` or in an `except` clause,
  re-raises, chains, failing asserts) come after a graph of the code before them, with eager's
  traceback (Note [resume frames in tracebacks]);
- recursive functions made in the frame, or by a closure factory it calls, escape it as one
  function whose cell holds itself."""

import pytest
import torch

import dynamo
from test_python_kinds import check

BACKENDS = ["eager", "inductor"]


def captured(graphs=1):
    c = dynamo.counters()
    assert c["graphs"] >= graphs and c["eager_fallbacks"] == 0, c


# ----- closures over cells of functions from outside the frame ---------------------------------


def _factory():
    k = [1]

    def helper(x):
        def inner(y):
            return y + len(k) + x.sum()

        return inner

    def bump():
        k.append(0)

    return helper, bump


@pytest.mark.parametrize("backend", BACKENDS)
def test_escaping_function_shares_the_cell_of_an_outside_function(backend):
    helper, bump = _factory()

    def fn(x):
        g = helper(x)
        return g(x) * 2, g

    x = torch.ones(2)
    r1, g1 = fn(x)
    r2, g2 = dynamo.optimize(backend)(fn)(x)
    captured()
    assert torch.equal(r1, r2) and type(g2) is type(g1)
    names = g2.__code__.co_freevars
    # The outside cell is the very cell of `helper`'s closure; the inlined call's own cell is new.
    assert g2.__closure__[names.index("k")] is helper.__closure__[helper.__code__.co_freevars.index("k")]
    bump()  # a write through the outside function is seen by the escaped one, as in eager
    assert torch.equal(g1(x), g2(x))


# ----- containers and objects that contain themselves ------------------------------------------


class Box:
    def __init__(self, w):
        self.w = w


class Plain:
    pass


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_dict_and_object_built_in_the_frame_contain_themselves(backend):
    def fn(x):
        lst = [x + 1]
        lst.append(lst)
        d = {"a": x - 1}
        d["self"] = d
        o = Box(x * 2)
        o.me = o
        o.items = [o, lst]
        return lst, d, o

    ref = fn(torch.ones(2))
    lst, d, o = dynamo.optimize(backend)(fn)(torch.ones(2))
    captured()
    assert type(lst) is list and len(lst) == 2 and lst[1] is lst and torch.equal(lst[0], ref[0][0])
    assert list(d) == ["a", "self"] and d["self"] is d and torch.equal(d["a"], ref[1]["a"])
    assert type(o) is Box and o.me is o and o.items[0] is o and o.items[1] is lst
    assert list(vars(o)) == list(vars(ref[2])) == ["w", "me", "items"]
    assert torch.equal(o.w, ref[2].w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_objects_from_outside_made_to_contain_themselves(backend):
    def fn(x, lst, obj):
        lst.append(lst)
        inner = [x]
        inner.append(inner)
        lst.append(inner)
        obj.me = obj
        n = Box(x)
        n.parent = obj
        obj.child = n
        return x * 3

    lst, obj = [1], Plain()
    out = dynamo.optimize(backend)(fn)(torch.ones(2), lst, obj)
    captured()
    assert torch.equal(out, torch.full((2,), 3.0))
    assert lst[0] == 1 and lst[1] is lst and lst[2][1] is lst[2] and torch.equal(lst[2][0], torch.ones(2))
    # New attributes enter the instance dict in the order the frame wrote them.
    assert list(vars(obj)) == ["me", "child"] and obj.me is obj and obj.child.parent is obj
    assert list(vars(obj.child)) == ["w", "parent"]


def test_self_containing_list_lives_across_a_graph_break():
    def fn(x):
        lst = [x + 1]
        lst.append(lst)
        print("break")
        return lst[0] * 2, lst

    ref = fn(torch.ones(2))
    out, lst = dynamo.optimize("eager")(fn)(torch.ones(2))
    captured(graphs=2)
    assert dynamo.counters()["graph_breaks"] == 1
    assert torch.equal(out, ref[0]) and lst[1] is lst and torch.equal(lst[0], ref[1][0])


# ----- exceptions handled inside the converted frame -------------------------------------------


def _raise_after_break(x):
    y = x + 1
    print("break")
    try:
        raise ValueError("a")
    except ValueError:
        y = y * 2
    return y


def _raise_in_frame(x):
    y = x + 1
    try:
        raise ValueError("a")
    except ValueError:
        y = y * 2
    return y


def _raise_with_finally_after_break(x, lst):
    y = x + 1
    print("break")
    try:
        lst.append(1)
        if len(lst) > 0:
            raise KeyError("k")
    except KeyError as e:
        y = y - len(str(e))
    finally:
        y = y + 1
    return y


def _break_inside_try(x):
    try:
        y = x + 1
        print("break")
        raise ValueError("a")
    except ValueError:
        y = y * 2
    return y


def _missing_key(x, d):
    try:
        v = d["missing"]
    except KeyError as e:
        v = len(str(e)) + len(repr(e))
        msg = e.args
    return x + v, msg


def _missing_index(x, lst):
    try:
        v = lst[10]
    except IndexError as e:
        v = str(e)
    return x * 2, v


def _missing_attribute(x, o):
    try:
        v = o.nothere
    except AttributeError:
        v = 7
    return x - v


def _nested_finally(x):
    y = x + 1
    try:
        try:
            raise KeyError("a")
        finally:
            y = y + 10
    except LookupError as e:
        y = y * 2
        err = e
    return y, type(err), err.args


def _raise_in_loop(x):
    out = []
    for i in range(3):
        try:
            if i == 1:
                raise ValueError(i)
            out.append(x + i)
        except ValueError as e:
            out.append(e.args[0])
    return out


HANDLED = [
    (_raise_after_break, (torch.ones(2),), 1),
    (_raise_in_frame, (torch.ones(2),), 0),
    (_raise_with_finally_after_break, (torch.ones(2), []), 1),
    (_break_inside_try, (torch.ones(2),), 1),
    (_missing_key, (torch.ones(2), {"a": 1}), 0),
    (_missing_index, (torch.ones(2), [1]), 0),
    (_missing_attribute, (torch.ones(2), Plain()), 0),
    (_nested_finally, (torch.ones(2),), 0),
    (_raise_in_loop, (torch.ones(2),), 0),
]


@pytest.mark.parametrize("fn,args,breaks", HANDLED, ids=[f.__name__ for f, _, _ in HANDLED])
def test_exception_handled_in_the_converted_frame(fn, args, breaks):
    check(fn, *args, graphs=breaks + 1, breaks=breaks)
    assert dynamo.counters()["eager_fallbacks"] == 0


def test_break_inside_an_except_clause_breaks_at_the_raise():
    """A break inside a clause the trace entered moves back to the raising instruction: the
    code before it is a graph, and Python runs the `raise` under its handler."""

    def fn(x):
        y = x + 1
        try:
            raise ValueError("boom")
        except ValueError:
            print("in handler")
            y = y * 3
        return y

    check(fn, torch.ones(2), graphs=1, breaks=1)
    assert dynamo.counters()["eager_fallbacks"] == 0


# ----- exception objects made in the trace ------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_object_made_in_the_frame_is_new_on_each_call(backend):
    """`ValueError("a")` is folded to a constant while tracing; the transformed code makes a new
    one per call (eager does), reached twice it is one object, and one the trace raised and
    handled keeps the frame eager (eager's carries a traceback)."""

    def made(x):
        e = ValueError("a", 2)
        return x + 1, e, [e]

    opt = dynamo.optimize(backend)(made)
    first, second = opt(torch.ones(1)), opt(torch.ones(1))
    captured()
    assert first[1] is not second[1] and first[2][0] is first[1]
    assert type(first[1]) is ValueError and first[1].args == ("a", 2)

    def raised(x):
        try:
            raise KeyError("k")
        except KeyError as e:
            err = e
        return x + 1, err

    dynamo.reset()
    opt = dynamo.optimize(backend)(raised)
    a, b = opt(torch.ones(1))[1], opt(torch.ones(1))[1]
    assert a is not b and a.__traceback__ is not None and a.args == ("k",)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuple_reached_twice_is_one_object(backend):
    def fn(x):
        t = (x + 1, "k")
        return [t, {"t": t}], t

    ref = fn(torch.ones(1))
    (lst, t) = dynamo.optimize(backend)(fn)(torch.ones(1))
    captured()
    assert lst[0] is t and lst[1]["t"] is t and (ref[0][0] is ref[1])
    assert torch.equal(t[0], ref[1][0])


# ----- exceptions that leave the converted frame -------------------------------------------------


def exception_picture(e):
    """Type, message, `__cause__`/`__context__` chain and the user's traceback frames (file,
    line, function, source line; dynamo's own frames left out) of `e`, comparable exactly."""
    import os
    import traceback

    out = []
    while e is not None:
        frames = [(os.path.basename(f.filename), f.lineno, f.name, f.line) for f in traceback.extract_tb(e.__traceback__)
                  if "dynamo" not in os.path.dirname(f.filename) and f.name not in ("run_raising", "_call")]
        out.append((type(e), str(e), frames, e.__suppress_context__))
        e = e.__cause__ or e.__context__
    return out


def run_raising(fn, args):
    import contextlib
    import io

    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            fn(*args)
    except Exception as e:  # noqa: BLE001 - compared
        return exception_picture(e), printed.getvalue(), repr(args)
    raise AssertionError("expected an exception")


def check_raises(fn, *args, backend="eager", graphs=1):
    """`fn` raises the same exception eagerly and compiled (type, message, chain, traceback
    lines and names), prints and mutates the same, and its code before the raise was captured
    (no frame ran eagerly)."""
    import copy

    eager = run_raising(fn, copy.deepcopy(args))
    dynamo.reset()
    compiled = run_raising(dynamo.optimize(backend)(fn), copy.deepcopy(args))
    assert eager == compiled
    c = dynamo.counters()
    assert c["graphs"] >= graphs and c["eager_fallbacks"] == 0, c


class UserError(Exception):
    pass


class _Exit:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")

    def __exit__(self, t, v, tb):
        self.log.append(("exit", t.__name__ if t else None, str(v)))
        return False


def _raise_builtin(x):
    y = x + 1
    raise ValueError("top")


def _raise_class(x):
    y = x + 1
    raise KeyError


def _raise_user_error(x):
    y = x * 2
    raise UserError("u", 1)


def _raise_after_a_break(x, log):
    y = x * 2
    print("sum", y.sum().item())
    log.append(y)
    raise IndexError("after")


def _raise_in_a_loop(x, log):
    for i in range(3):
        log.append(i)
        x = x + i
        if i == 2:
            raise RuntimeError(f"i={i}")
    return x


# Made with exec: pytest rewrites the `assert` statements of test modules into calls of its own.
_failing_assert_ns = {}
exec(compile("def _failing_assert(x):\n    y = x + 1\n    assert x.shape[0] == 3, 'bad shape'\n    return y\n",
             "<failing assert>", "exec"), _failing_assert_ns)
_failing_assert = _failing_assert_ns["_failing_assert"]


def _raise_in_with(x, log):
    y = x + 1
    with _Exit(log):
        y = y * 2
        raise ValueError("w")


def _raise_in_try_finally(x, log):
    y = x + 1
    try:
        raise TypeError("f")
    finally:
        log.append("finally")
        print("fin")


def _raise_from_an_except_clause(x, log):
    y = x + 1
    try:
        {}["a"]
    except KeyError as e:
        log.append(str(e))
        raise RuntimeError("wrapped") from e


def _raise_in_handler_with_context(x):
    y = x + 1
    try:
        raise KeyError("k")
    except KeyError:
        raise ValueError("from handler")


def _bare_reraise(x):
    y = x + 1
    try:
        raise KeyError("k")
    except KeyError:
        raise


def _reraise_bound(x):
    y = x + 1
    try:
        raise KeyError("k")
    except KeyError as e:
        raise e


def _raise_from_none(x):
    y = x + 1
    try:
        [][1]
    except IndexError:
        raise ValueError("clean") from None


def _nested_handlers(x, log):
    y = x + 1
    try:
        try:
            raise KeyError("inner")
        except KeyError:
            log.append("inner handler")
            raise ValueError("mid")
    except ValueError as e:
        log.append(("outer", str(e), repr(e.__context__)))
        raise


def _unmatched_except(x):
    y = x + 1
    try:
        raise KeyError("k")
    except ValueError:
        y = y * 2
    return y


def _handled_exception_raised_again(x):
    try:
        y = x + 1
        raise ValueError("a")
    except ValueError as e:
        err = e
    raise err


RAISING = [
    (_raise_builtin, lambda: (torch.ones(2),)),
    (_raise_class, lambda: (torch.ones(2),)),
    (_raise_user_error, lambda: (torch.ones(2),)),
    (_raise_after_a_break, lambda: (torch.ones(2), [])),
    (_raise_in_a_loop, lambda: (torch.ones(2), [])),
    (_failing_assert, lambda: (torch.ones(2),)),
    (_raise_in_with, lambda: (torch.ones(2), [])),
    (_raise_in_try_finally, lambda: (torch.ones(2), [])),
    (_raise_from_an_except_clause, lambda: (torch.ones(2), [])),
    (_raise_in_handler_with_context, lambda: (torch.ones(2),)),
    (_bare_reraise, lambda: (torch.ones(2),)),
    (_reraise_bound, lambda: (torch.ones(2),)),
    (_raise_from_none, lambda: (torch.ones(2),)),
    (_nested_handlers, lambda: (torch.ones(2), [])),
    (_unmatched_except, lambda: (torch.ones(2),)),
    (_handled_exception_raised_again, lambda: (torch.ones(2),)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make", RAISING, ids=[f.__name__ for f, _ in RAISING])
def test_exception_leaving_the_converted_frame(fn, make, backend):
    """`raise` outside a `try`, inside an `except` clause, re-raised, chained, through `with`
    and `finally`, or a failing `assert`: the code before it is a graph (the frame does not
    run eagerly), and the exception is eager's, with its traceback: a break at a `raise` runs
    it as ordinary Python after the graph (a protected one under its handler), and resume
    functions do not show as frames of their own (Note [resume frames in tracebacks])."""
    check_raises(fn, *make(), backend=backend)


def test_break_inside_an_except_clause_is_captured_before_the_raise():
    """A break in an `except` clause (`print`) moves to the instruction that raised; the code
    before it is still a graph and Python runs the handler."""

    def fn(x, log):
        y = x + 1
        try:
            raise ValueError("boom")
        except ValueError as e:
            print("in handler", e)
            log.append(str(e))
            y = y * 3
        return y

    check(fn, torch.ones(2), [], graphs=1, breaks=1)
    assert dynamo.counters()["eager_fallbacks"] == 0


def test_sys_exc_info_in_a_traced_handler():
    """`sys.exc_info()` is not traced (the frame may run inside a caller's handler): it breaks
    cleanly, at the instruction that raised when inside a clause the trace entered."""
    import sys

    def inside(x):
        y = x + 1
        try:
            raise ValueError("boom")
        except ValueError:
            t, v, tb = sys.exc_info()
            y = y * 3
            seen = (t, v.args, tb is not None)
        return y, seen, sys.exc_info()

    def outside(x):
        return x + 1, sys.exc_info()

    for fn in (inside, outside):
        dynamo.reset()
        check(fn, torch.ones(2), graphs=1)
        assert dynamo.counters()["eager_fallbacks"] == 0
    # Called from inside a handler, the compiled frame sees the caller's exception as eager does.
    opt = dynamo.optimize("eager")(outside)
    try:
        raise KeyError("caller")
    except KeyError as e:
        assert opt(torch.ones(2))[1][1] is e


def test_reraise_break_reason_names_the_raising_line():
    """A RERAISE (no line of its own) reports the line whose exception it re-raises, not 0."""
    import inspect

    from dynamo import _C

    with pytest.raises(KeyError):
        dynamo.optimize("eager")(_unmatched_except)(torch.ones(2))
    src, start = inspect.getsourcelines(_unmatched_except)
    line = start + next(i for i, l in enumerate(src) if 'raise KeyError("k")' in l)
    reasons = _C.break_reasons()
    assert reasons and f"(at {__file__}:{line} in _unmatched_except)" in reasons[0], reasons
# ----- functions and cells that reach themselves ------------------------------------------------


def _make_fact():
    def fact(n):
        return 1 if n == 0 else n * fact(n - 1)

    return fact


def _make_even_odd():
    def even(n):
        return True if n == 0 else odd(n - 1)

    def odd(n):
        return False if n == 0 else even(n - 1)

    return even, odd


def _closures_of(fn):
    return [c.cell_contents for c in fn.__closure__]


@pytest.mark.parametrize("backend", BACKENDS)
def test_recursive_functions_that_escape_reach_themselves(backend):
    """A recursive helper closes over the cell that holds it: made in the frame (a frame cell)
    or by an inlined closure factory (a cell made anew, filled after the function exists), it
    comes back as one function whose cell holds that very function; mutual recursion too."""

    def own(x):
        def fact(n):
            return 1 if n == 0 else n * fact(n - 1)

        return x * fact(3), fact

    def inlined(x):
        g = _make_fact()
        return x * g(3), g

    def inlined_pair(x):
        e, o = _make_even_odd()
        return x + int(e(4)), e, o

    def inlined_across_a_break(x):
        g = _make_fact()
        print("break")
        return x * g(3), g

    for fn in (own, inlined, inlined_pair, inlined_across_a_break):
        ref = fn(torch.ones(2))
        dynamo.reset()
        out = dynamo.optimize(backend)(fn)(torch.ones(2))
        captured()
        assert torch.equal(out[0], ref[0])
        funcs = out[1:]
        for f, r in zip(funcs, ref[1:]):
            assert f.__code__ is r.__code__ and f(5) == r(5) and f(6) == r(6)
        if len(funcs) == 1:
            assert _closures_of(funcs[0]) == [funcs[0]]
        else:
            even, odd = funcs
            assert _closures_of(even) == [odd] and _closures_of(odd) == [even]


class _Holder:
    pass


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("product", [
    lambda a, b: a @ b,
    lambda a, b: torch.matmul(a, b),
    lambda a, b: torch.mm(a, b),
    lambda a, b: a.mm(b),
    lambda a, b: torch.nn.functional.linear(a, b),
    lambda a, b: torch.bmm(a[None], b[None]),
])
def test_matrix_product_of_two_dtypes_raises_after_eagers_effects(backend, product):
    """Fuzzer seeds 98045/99038: a float @ int64 product passes on fake tensors (their meta
    functions promote) but raises in eager. The graph raised at run time after the trace had
    placed the frame's writes after it, so `lst.append` and `obj.z = ...` were lost. Now the
    product is a graph break: the writes before it happen, then it raises eager's error."""

    def f(x, lst, obj):
        x.add_(1)
        lst.append(len(lst))
        obj.z = 1
        return product(x, torch.where(x > 0, 1, 0))

    def run(fn):
        x, lst, obj = torch.ones(3, 3), [0], _Holder()
        with pytest.raises(RuntimeError) as info:
            fn(x, lst, obj)
        return str(info.value).splitlines()[0], x, lst, vars(obj)

    want = run(f)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(f))
    assert got[0] == want[0] and torch.equal(got[1], want[1]) and got[2:] == want[2:]
