"""Sorts whose keys are not constants (Note [traced sorts] in src/symbolic/variables/builtin.rs):
`sorted()` and `list.sort()` over objects with a Python `__lt__`, dataclasses with
`order=True`, and tuples holding them are traced, with CPython's own sort choosing the
comparisons, so the comparisons made, their order, the permutation a raising comparison
leaves, and the error are eager's. Also `del l[a:b:c]`. Each program runs eagerly and
compiled and is compared exactly, with no graph break."""

import dataclasses

import pytest
import torch

from test_python_kinds import check

X = torch.arange(3.0)
BACKENDS = ["eager", "inductor"]


@dataclasses.dataclass(order=True)
class Version:
    major: int
    minor: int = 0


LOG = []


class Logged:
    """`<` appends the pair it compares to LOG: the comparison order is observable."""

    def __init__(self, v):
        self.v = v

    def __lt__(self, other):
        LOG.append((self.v, other.v))
        return self.v < other.v


def dataclass_sorted(x):
    vs = [Version(3), Version(1, 2), Version(2), Version(1)]
    asc = sorted(vs)
    desc = sorted(vs, reverse=True)
    return x + asc[0].minor, [(v.major, v.minor) for v in asc], [(v.major, v.minor) for v in desc], max(vs).major


def list_sort_in_place(x, vs):
    vs.sort()
    return x + 1


def comparison_order(x):
    del LOG[:]
    items = [Logged(v) for v in (5, 2, 9, 2, 7, 1, 8, 3, 3, 0)]
    out = sorted(items, key=lambda i: i)
    return x + 1, [i.v for i in out], list(LOG)


def stable_with_reverse(x):
    pairs = [(Version(1), "a"), (Version(0), "b"), (Version(1), "c"), (Version(0), "d")]
    return x + 1, [s for _, s in sorted(pairs, key=lambda p: p[0], reverse=True)], sorted(pairs)


def raising_comparison(x):
    items = [Version(2), Version(1), 3, Version(0)]
    try:
        items.sort()
    except TypeError as e:
        return x + 1, str(e), [v if isinstance(v, int) else v.major for v in items]
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [dataclass_sorted, comparison_order, stable_with_reverse, raising_comparison], ids=lambda f: f.__name__)
def test_traced_sort(fn, backend):
    check(fn, X, backend=backend, breaks=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_sort_of_a_list_from_outside_the_frame(backend):
    check(list_sort_in_place, X, [Version(2), Version(0, 1), Version(1)], backend=backend, breaks=0)


def del_slices(x, outer):
    a = list(range(10))
    del a[::3]
    b = list(range(10))
    del b[7:2:-2]
    c = list(range(5))
    del c[10:]
    del outer[1:3]
    return x + 1, a, b, c


@pytest.mark.parametrize("backend", BACKENDS)
def test_del_of_list_slices(backend):
    check(del_slices, X, [0, 1, 2, 3, 4], backend=backend, breaks=0)
