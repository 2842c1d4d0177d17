"""Python kinds the trace left to graph breaks or modelled almost right (issue 7), round s33: each
program runs eagerly and compiled on copies of the same inputs and is compared exactly (values and
their types, mutated arguments, printed text, exceptions), with a graph count showing it was
captured."""

import pytest
import torch

import dynamo
from test_python_kinds import check, no_fallback

BACKENDS = ["eager", "inductor"]


# ----- set operations of dict views -----------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_view_set_operations_and_comparisons(backend):
    """`d.keys()` and `d.items()` are set-like: `&`, `|`, `-`, `^`, comparisons and `isdisjoint`
    with the view on either side run as the real C code on real stand-ins and give a set
    tracker in eager's order (Note [dict view set operations]); each was a graph break."""

    def fn(x):
        d = {3: "a", 1: "b", 20: "c"}
        e = {1: 0, 7: 1}
        s = {1, 99}
        alias = s
        s |= d.keys()  # a new set: set's `|=` leaves a view to the view's `|`
        return (
            x + 1,
            list(d.keys() & e.keys()),
            list(d.keys() | e),
            list(d.keys() - [3]),
            list({5, 3} ^ d.keys()),
            list(d.items() & {(1, "b"), (2, "x")}),
            list(s),
            s is alias,
            d.keys() == {1, 3, 20},
            d.keys() != e.keys(),
            d.keys() == [3, 1, 20],
            d.items() <= {(3, "a"), (1, "b"), (20, "c"), 0},
            d.keys() < {1, 3},
            d.keys().isdisjoint((7, 8)),
            d.items().isdisjoint(e.items()),
        )

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_view_operations_of_a_dict_passed_in(backend):
    def fn(x, d):
        missing = {"w", "b"} - d.keys()
        return x * len(missing), sorted(missing), sorted(d.keys() - {"a"}), d.keys() >= {"a"}

    check(fn, torch.ones(2), {"a": 1, "b": 2, "c": 3}, graphs=1, breaks=0, backend=backend)
    no_fallback()
