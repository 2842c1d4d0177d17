"""Findings of stop 49: each is the smallest program that differed from eager (or recompiled
where nothing it used changed), run eagerly and compiled and compared exactly, with graph and
recompile counts."""

import contextlib
import io

import pytest
import torch

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


def _run(fn, calls, backend):
    """`fn` over `calls` (argument tuples) eagerly, then compiled: (results, stdout) of each."""
    out = {}
    for mode in ("eager", "compiled"):
        dynamo.reset()
        f = fn if mode == "eager" else dynamo.optimize(backend)(fn)
        buf = io.StringIO()
        res = []
        with contextlib.redirect_stdout(buf):
            for args in calls:
                try:
                    res.append(("ok", f(*args)))
                except Exception as e:  # noqa: BLE001 - compared with eager's
                    res.append(("raise", type(e), str(e)))
        out[mode] = (res, buf.getvalue())
    return out["eager"], out["compiled"]


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a, b, equal_nan=True)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _check(fn, calls, backend):
    (er, eo), (cr, co) = _run(fn, calls, backend)
    assert eo == co
    assert len(er) == len(cr)
    for x, y in zip(er, cr):
        assert _same(x, y), (x, y)


# A tuple of frame arguments formatted with `%` (`'step %d/%d' % (i, n)`) realized both ints at
# BUILD_TUPLE, so a loop printing its step recompiled at every step until the cache limit; the
# tuple is now a lazy constant (Note [lazy constants] in src/symbolic/output_graph.rs), and
# every use of it still guards its items.


def _fmt_tuple(x, i, j):
    print("step %d/%d" % (i, j))
    return x + 1


def _fmt_tuple_str(x, s, i):
    msg = "%s-%05d" % (s, i)
    return x * 2, msg


def _tuple_index(x, i, j):
    t = (i, j)
    return x + t[1]


def _tuple_unpack(x, i, j):
    t = (i, j)
    a, b = t
    return x * a - b


def _tuple_returned(x, i, j):
    t = (i, j)
    return x + 1, t


def _tuple_across_break(x, i, j):
    t = (i, j)
    dynamo.graph_break()
    return x + 1, t, "%d:%d" % t


def _tuple_as_key(x, i, j):
    d = {(i, j): x}
    return d[(i, j)] + 1, list(d)


def _tuple_compared(x, i, j):
    if (i, j) > (2, 0):
        return x + 1
    return x - 1


def _tuple_len_hash(x, i, j):
    t = (i, j, i)
    return x + len(t), t.count(i), hash(t) == hash((i, j, i))


CALLS_IJ = [(torch.ones(3), k, k + 1) for k in range(5)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_fmt_tuple, _tuple_index, _tuple_unpack, _tuple_returned, _tuple_across_break, _tuple_as_key, _tuple_compared, _tuple_len_hash])
def test_lazy_tuple_of_arguments_matches_eager(fn, backend):
    _check(fn, CALLS_IJ, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lazy_tuple_with_a_string_matches_eager(backend):
    _check(_fmt_tuple_str, [(torch.ones(2), s, k) for k, s in enumerate(["a", "bb", "a", "c"])], backend)


def test_printing_a_tuple_of_step_counters_does_not_recompile():
    dynamo.reset()
    f = dynamo.optimize("eager")(_fmt_tuple)
    with contextlib.redirect_stdout(io.StringIO()) as buf:
        for k in range(8):
            f(torch.ones(2), k, 100 - k)
    assert buf.getvalue().splitlines()[3] == "step 3/97"
    c = dynamo.counters()
    assert c["recompiles"] == 0 and c["cache_hits"] == 14, c


# An error that the fake-tensor trace cannot see (a kernel without an implementation for the
# dtype: `x & x` of floats, `lerp` of ints; a dim check: `softmax(x, 1)` of a 1-d tensor),
# raised by a graph that also writes an input, escaped the user's `except` (and skipped the
# write): such a graph was not protected at all. It is now protected on its first call and,
# once it failed, on every call (`_C.snapshot_inputs_first_call`, Note [graph failure reruns
# the frame] in src/pycodegen/mod.rs).


def _bitand_then_write(x):
    try:
        y = x & x
    except Exception:  # noqa: BLE001 - the program under test
        y = x.sum()
    x.mul_(2)
    return y


def _write_then_softmax(x):
    x.add_(1)
    try:
        y = torch.softmax(x, 1)
    except IndexError:
        y = x * 3
    return y


def _write_then_lerp(x):
    x.add_(1)
    return torch.lerp(x, x, x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn,make",
    [(_bitand_then_write, lambda: torch.arange(6.0)), (_write_then_softmax, lambda: torch.arange(4.0)), (_write_then_lerp, lambda: torch.arange(4))],
)
def test_unseen_kernel_error_in_a_graph_writing_its_input_reruns_as_eager(fn, make, backend):
    dynamo.reset()
    cf = dynamo.optimize(backend)(fn)
    for _ in range(3):
        a, b = make(), make()
        try:
            e = ("ok", fn(a))
        except Exception as ex:  # noqa: BLE001
            e = ("raise", type(ex), str(ex))
        try:
            c = ("ok", cf(b))
        except Exception as ex:  # noqa: BLE001
            c = ("raise", type(ex), str(ex))
        assert _same(e, c), (e, c)
        assert torch.equal(a, b)
    counters = dynamo.counters()
    assert counters["graphs"] == 1 and counters["graph_failures"] == 3, counters


def _write_input(x, y):
    x.add_(y)
    return x * 2


def test_a_graph_writing_its_input_is_protected_on_its_first_call_only():
    dynamo.reset()
    cf = dynamo.optimize("eager")(_write_input)
    a = torch.ones(3)
    for k in range(3):
        cf(a, torch.full((3,), float(k)))
    assert torch.equal(a, torch.full((3,), 4.0))
    # An error on a later call (a shape the graph's guards let through would not do; a
    # `y` that fails to broadcast recompiles): the user sees eager's exception.
    with pytest.raises(RuntimeError):
        cf(a, torch.ones(4))
    assert torch.equal(a, torch.full((3,), 4.0))
