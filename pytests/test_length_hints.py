"""Length hints and iterators over subclass storage, compared with eager (values, and which
user methods run, in which order):

- `list(o)`, `tuple(o)`, `[*o]`, `f(*o)`, `l.extend(o)` and `sorted(o)` call `iter(o)`, then
  `PyObject_LengthHint(o)`, which runs a Python `__len__` (a TypeError from it is cleared) or,
  without one, `__length_hint__`; the trace ran neither (Note [length hints]);
- a list or tuple iterator walks its sequence's storage, whatever `__iter__`/`__getitem__` a
  subclass defines; the items an iterator passed in (or made by `list.__iter__(l)` before a
  graph break) has left were read through the subclass's methods (Note [iterators over
  subclass storage])."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]
LOG = []


class Sized:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        LOG.append("iter")
        return iter(self.items)

    def __len__(self):
        LOG.append("len")
        return len(self.items)


class SizedGen(Sized):
    def __iter__(self):
        LOG.append("iter")
        for v in self.items:
            LOG.append(("next", v))
            yield v


class Hinted:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        LOG.append("iter")
        return iter(self.items)

    def __length_hint__(self):
        LOG.append("hint")
        return 2


class LenTypeError(Sized):
    def __len__(self):
        LOG.append("len")
        raise TypeError("no length")


class LenValueError(Sized):
    def __len__(self):
        LOG.append("len")
        raise ValueError("bad length")


class NegativeLen(Sized):
    def __len__(self):
        LOG.append("len")
        return -1


def _g(*args):
    return args


USES = {
    "list": lambda o: list(o),
    "tuple": lambda o: tuple(o),
    "star_list": lambda o: [*o],
    "star_call": lambda o: _g(*o),
    "extend": lambda o: _extend(o),
    "sorted": lambda o: sorted(o),
}


def _extend(o):
    out = [0]
    out.extend(o)
    return out


def _run(fn, backend, *make_args):
    def outcome(f):
        LOG.clear()
        try:
            r = f(torch.ones(2), *[m() for m in make_args])
            return ("ok", r[0].tolist(), repr(r[1]), list(LOG))
        except Exception as e:  # noqa: BLE001 - compared with eager's
            return ("raised", type(e).__name__, str(e), list(LOG))

    want = outcome(fn)
    dynamo.reset()
    opt = dynamo.optimize(backend)(fn)
    for _ in range(2):
        assert outcome(opt) == want
    return want


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("use", sorted(USES))
@pytest.mark.parametrize("cls", [Sized, SizedGen, Hinted])
def test_length_hint_runs_between_iter_and_next(backend, use, cls):
    u = USES[use]

    def f(x, o):
        return x + 1, u(o)

    want = _run(f, backend, lambda: cls([3, 1, 2]))
    assert want[0] == "ok" and ("len" in want[3] or "hint" in want[3])
    dynamo.reset()
    assert dynamo.explain(f)(torch.ones(2), cls([3, 1, 2])).graph_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [LenTypeError, LenValueError, NegativeLen])
def test_length_hint_errors(backend, cls):
    def f(x, o):
        return x + 1, list(o)

    want = _run(f, backend, lambda: cls([1, 2]))
    assert want[0] == ("ok" if cls is LenTypeError else "raised")


class L(list):
    def __iter__(self):
        LOG.append("L.iter")
        return iter([100, 200])

    def __len__(self):
        LOG.append("L.len")
        return 7


class GetL(list):
    def __getitem__(self, i):
        return 99


class T(tuple):
    def __iter__(self):
        return iter((100, 200))

    def __getitem__(self, i):
        return 99

    def __len__(self):
        return 7


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_iter_of_a_subclass_walks_its_storage_across_a_break(backend):
    def f(x, l):
        s = 0
        for v in list.__iter__(l):
            s += v
        return x + s, s

    assert _run(f, backend, lambda: L([1, 2, 3]))[1] == [7.0, 7.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuple_iter_of_a_subclass_walks_its_storage(backend):
    def f(x, t):
        s = 0
        for v in tuple.__iter__(t):
            s += v
            x = x + v
        return x, s

    assert _run(f, backend, lambda: T((1, 2, 3)))[1] == [7.0, 7.0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", ["list", "tuple"])
def test_iterator_passed_in_over_a_subclass_reads_its_storage(backend, make):
    cls = GetL if make == "list" else T

    def f(x, it):
        first = next(it)
        return x + first, [first, *it]

    def arg():
        seq = cls([1, 2, 3]) if make == "list" else cls((1, 2, 3))
        return list.__iter__(seq) if make == "list" else tuple.__iter__(seq)

    assert _run(f, backend, arg)[2] == "[1, 2, 3]"


@pytest.mark.parametrize("backend", BACKENDS)
def test_loop_over_an_iterator_of_a_subclass_with_a_break_in_the_body(backend):
    def f(x, it):
        out = []
        for v in it:
            out.append(v)
            print(v)
            x = x + v
        return x, out

    assert _run(f, backend, lambda: list.__iter__(GetL([1, 2, 3])))[2] == "[1, 2, 3]"
