"""Code that used to break the graph although the trace can model it, now captured whole and
compared with eager (values, exact types, exceptions):

- `str(d)` / `repr(d)` of a dict built in the frame holding a float argument (a symbolic
  number: its value, specialized, as in a list);
- the value methods of an int or float argument (`f.hex()`, `f.as_integer_ratio()`,
  `n.bit_length()`, ...), read on the specialized value;
- `functools.cmp_to_key` (a traced stand-in, `dynamo._polyfills.KeyWrapper`, so that a sort by
  it is a traced sort; one that outlives the graph is a graph break, never the stand-in)."""

import functools

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


def _outcome(fn, *args):
    try:
        r = fn(torch.ones(2), *args)
        return ("ok", r[0].tolist(), [(type(v), v) for v in r[1:]])
    except Exception as e:  # noqa: BLE001 - compared with eager's
        return ("raised", type(e).__name__, str(e))


def _captured_whole(fn, backend, *arg_sets):
    """Eager and compiled agree on every argument set, and the compiled frame made one graph
    per compile with no break."""
    wants = [_outcome(fn, *a) for a in arg_sets]
    dynamo.reset()
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return dynamo.lookup_backend(backend)(gm, example_inputs)

    opt = dynamo.optimize(counting)(fn)
    for a, want in zip(arg_sets, wants):
        assert _outcome(opt, *a) == want
    dynamo.reset()
    report = dynamo.explain(fn)(torch.ones(2), *arg_sets[0])
    assert report.break_reasons == []
    assert report.graph_count == 1
    return wants


@pytest.mark.parametrize("backend", BACKENDS)
def test_text_of_a_dict_holding_a_float_argument(backend):
    def f(x, v):
        d = {"k": v, "n": [v, 1]}
        return x + 1, str(d), repr({"k": v}), f"{ {'a': v} }"

    _captured_whole(f, backend, (1.5,), (0.1,), (float("nan"),), (-0.0,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_methods_of_number_arguments(backend):
    def f(x, v, n):
        return x + 1, v.hex(), v.as_integer_ratio(), v.is_integer(), v.real, n.bit_length(), n.to_bytes(4, "little"), n.numerator, n.conjugate()

    _captured_whole(f, backend, (1.5, 7), (2.0, 1000), (-0.1, -3))


def _cmp_desc(p, q):
    return q - p


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_by_cmp_to_key(backend):
    def f(x, lst):
        a = sorted(lst, key=functools.cmp_to_key(_cmp_desc))
        b = sorted(lst, key=functools.cmp_to_key(lambda p, q: (p > q) - (p < q)), reverse=True)
        c = max(lst, key=functools.cmp_to_key(_cmp_desc))
        k = functools.cmp_to_key(lambda p, q: p - q)
        return x + 1, a, b, c, k(3) < k(4), k(3) == k(3), k(5) >= k(4), k(5) != k(5)

    _captured_whole(f, backend, ([3, 1, 2, 5],), ([2, 2, 9],))


@pytest.mark.parametrize("backend", BACKENDS)
def test_cmp_to_key_stable_sort_of_pairs(backend):
    def f(x, pairs):
        by_name = sorted(pairs, key=functools.cmp_to_key(lambda p, q: (p[1] > q[1]) - (p[1] < q[1])))
        return x * 2, by_name

    _captured_whole(f, backend, ([(1, "b"), (1, "a"), (0, "z"), (2, "a")],))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["compare_with_int", "hash", "cmp_raises", "returned_maker", "returned_key"])
def test_cmp_to_key_edges_match_eager(backend, case):
    # Eager's TypeErrors, the error of the comparison, and keys that leave the frame (then
    # real `functools.KeyWrapper`s, made by Python after a break).
    def f(x, lst):
        k = functools.cmp_to_key(lambda p, q: p - q)
        if case == "compare_with_int":
            return x + 1, k(3) < 4
        if case == "hash":
            return x + 1, hash(k(3))
        if case == "cmp_raises":
            return x + 1, sorted(lst, key=functools.cmp_to_key(lambda p, q: 1 / 0))
        if case == "returned_maker":
            return x + 1, type(k).__name__, k
        return x + 1, k(7)

    def outcome(fn):
        try:
            r = fn(torch.ones(2), [3, 1, 2])
            tail = r[-1]
            return ("ok", r[0].tolist(), type(tail), getattr(tail, "obj", None))
        except Exception as e:  # noqa: BLE001 - compared with eager's
            return ("raised", type(e).__name__, str(e))

    want = outcome(f)
    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    for _ in range(2):
        assert outcome(opt) == want


@pytest.mark.parametrize("backend", BACKENDS)
def test_printf_formatting_of_number_arguments(backend):
    def f(x, v, n):
        return x + 1, "%5.1f %s" % (v, n), "%d" % n, "%.3e" % v, "%(a)s|%(b)r" % {"a": v, "b": n}, b"%d" % (n,)

    _captured_whole(f, backend, (1.5, 7), (2.25, -3), (float("inf"), 0))


class OldSequence:
    """Only `__getitem__`: iterated by the old sequence protocol (`iter_iternext`)."""

    def __init__(self, n, stop=IndexError):
        self.n = n
        self.stop = stop

    def __getitem__(self, i):
        if i >= self.n:
            raise self.stop(i)
        return i * 10


@pytest.mark.parametrize("backend", BACKENDS)
def test_old_sequence_protocol(backend):
    def f(x, n):
        s = OldSequence(n)
        a, *b = s
        return x + 1, a, b, list(s), tuple(s), sorted(s, reverse=True), [*s], sum(s)

    _captured_whole(f, backend, (3,), (1,))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("stop", [KeyError, StopIteration])
def test_old_sequence_protocol_other_stops(backend, stop):
    # A StopIteration ends it too; any other error is raised (both as eager, possibly after a
    # graph break).
    def f(x, n):
        return x + 1, list(OldSequence(n, stop))

    want = _outcome(f, 2)
    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    assert _outcome(opt, 2) == want
