"""Findings of stop 53: each is the smallest program that broke needlessly or differed from
eager, run eagerly and compiled and compared exactly (results, side effects in order, printed
text, exceptions), with graph and break counts."""

import pytest
import torch

import dynamo
from _compare import check

BACKENDS = ["eager", "inductor"]

# Every side effect of the programs below, in order: compared with eager's after each run.
LOG = []


def _check_with_log(fn, backend, calls=3):
    """`check`, and the side effects `fn` logs to LOG over `calls` calls equal to eager's."""
    def run(f):
        LOG.clear()
        for _ in range(calls):
            try:
                f(torch.ones(2))
            except Exception as e:  # noqa: BLE001 - logged, compared with eager's
                LOG.append(("raised", type(e).__name__, str(e)))
        return list(LOG)

    expected = run(fn)
    c = check(fn, lambda: (torch.ones(2),), backend, calls=calls)
    dynamo.reset()
    assert run(dynamo.optimize(backend)(fn)) == expected
    return c


# Note [user exception objects] (src/symbolic/variables/exceptions.rs).


class _KeyedError(Exception):
    code = 7

    def __init__(self, msg, *, key=None):
        super().__init__(msg)
        self.key = key
        LOG.append(("init", msg))


class _TextError(_KeyedError):
    def __str__(self):
        LOG.append("str")
        return "text:" + self.args[0]


class _PropertyError(ValueError):
    @property
    def msg(self):
        LOG.append("prop")
        return self.args[0]

    def describe(self):
        LOG.append("describe")
        return "d:" + self.args[0]

    @staticmethod
    def twice(v):
        LOG.append("twice")
        return v * 2


class _EqError(Exception):
    def __eq__(self, other):
        LOG.append("eq")
        return isinstance(other, _EqError) and self.args == other.args

    def __hash__(self):
        LOG.append("hash")
        return 1

    def __len__(self):
        LOG.append("len")
        return 3


class _PairError(Exception):
    def __init__(self, a, b=None):
        self.a = a
        self.b = b


class _ListError(Exception):
    def __init__(self, n):
        self.items = [n]


def _init_and_attrs(x):
    try:
        raise _KeyedError("m", key="k")
    except _KeyedError as e:
        r = (e.args, e.key, e.code, type(e).__name__)
    return x + 1, r


def _python_str(x):
    try:
        raise _TextError("m")
    except _KeyedError as e:
        s, r, f = str(e), repr(e), f"{e}"
    return x + 1, s, r, f


def _property_and_method(x):
    try:
        raise _PropertyError("boom")
    except _PropertyError as e:
        m, d = e.msg, e.describe()
        t = e.twice(2)
    return x + len(m) + len(d) + t


def _operators(x):
    try:
        raise _EqError("a")
    except _EqError as e:
        r = (e == _EqError("a"), len(e), {e: 1}[e])
    return x + 1, r


def _pair(x):
    try:
        raise _PairError(2, b=3)
    except _PairError as e:
        z = 2 + e.a + e.b
    return x + z


def _list_attribute(x):
    try:
        raise _ListError(3)
    except _ListError as e:
        return x + e.items[0]


def _escapes(x):
    y = x + 1
    raise _KeyedError("escapes", key=y.shape[0])


def _made_not_raised(x):
    e = _PropertyError(5)
    e.extra = 7
    return x + e.extra, e.args


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_init_runs_in_the_trace(backend):
    # A user exception class with a Python __init__ calling super().__init__: 0 graphs before.
    c = _check_with_log(_init_and_attrs, backend)
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c
    c = _check_with_log(_pair, backend)
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_python_str_runs_at_each_call(backend):
    # str(e) with a Python __str__ ran once at trace time (and once more for a break message).
    c = _check_with_log(_python_str, backend)
    assert c["graphs"] == 1, c


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_property_and_methods_run_at_each_call(backend):
    # The property and the method ran at trace time only: their side effects were lost from the
    # second call on.
    c = _check_with_log(_property_and_method, backend)
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_with_python_operators_is_left_to_python(backend):
    # __eq__ / __hash__ / __len__ of the class ran once at trace time.
    _check_with_log(_operators, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_attributes_hold_no_copy(backend):
    # A list attribute would be held by the constant object across calls: left to Python.
    _check_with_log(_list_attribute, backend)
    _check_with_log(_escapes, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_made_and_written_not_raised(backend):
    c = _check_with_log(_made_not_raised, backend)
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


def _generator_exit(t):
    try:
        raise GeneratorExit
    except Exception:
        return t.sin()
    except BaseException:
        return t.cos()


def _overflow(t):
    try:
        raise OverflowError("big")
    except ArithmeticError as e:
        return t + len(e.args[0])


def _cause_read(x):
    try:
        raise ValueError("a")
    except ValueError as e:
        exc = e
    return x + 1, exc.__cause__ is None, exc.__suppress_context__


def _cause_read_from(x):
    try:
        try:
            raise KeyError("a")
        except KeyError as err:
            raise _KeyedError("wrapped") from err
    except _KeyedError as e:
        c = type(e.__cause__).__name__
        sc = e.__suppress_context__
    return x + 1, c, sc


@pytest.mark.parametrize("backend", BACKENDS)
def test_more_builtin_exceptions_and_cause_are_traced(backend):
    # raise GeneratorExit / OverflowError were breaks that ran the frame eagerly; reading
    # __cause__ of an exception the trace raised broke too.
    for fn in (_generator_exit, _overflow, _cause_read, _cause_read_from):
        c = _check_with_log(fn, backend)
        assert c["graphs"] == 1 and c["graph_breaks"] == 0, (fn.__name__, c)
