"""Frozensets of tensors (Note [frozensets of traced values] in src/symbolic/variables/dicts.rs):
`frozenset(...)` of non-literal members is a set tracker over a real frozenset of the same
stand-ins a set uses, with the frozenset's type, methods and operators, rebuilt as
`frozenset((...))` when it outlives the graph. Each program runs eagerly and compiled and is
compared exactly, with the graph and break counts."""

import torch

import dynamo
from test_python_kinds import check

X = torch.tensor([1.0, -2.0, 3.0])
Y = torch.tensor([0.5, 4.0, -1.0])


def test_membership_type_and_length():
    def f(x, y):
        s = frozenset([x, y, x])
        return x in s, y * 2 in s, len(s), type(s) is frozenset, isinstance(s, frozenset), x * 2

    check(f, X, Y, graphs=1, breaks=0)


def test_operators_keep_the_left_operand_type():
    def f(x, y):
        s = frozenset([x])
        t = s | {y}
        u = {y} | s
        alias = s
        alias |= {y}
        return type(t).__name__, type(u).__name__, len(t), len(s), len(alias), alias is s, y in t, x * 1

    check(f, X, Y, graphs=1, breaks=0)


def test_methods_and_comparisons():
    def f(x, y):
        s = frozenset({x: 1, y: 2})
        return len(s), s.issubset({x, y}), s == frozenset([y, x]), s.copy() is s, type(s.union([x])).__name__, x * 1

    check(f, X, Y, graphs=1, breaks=0)


def test_no_add_on_a_frozenset():
    def f(x, y):
        s = frozenset([x])
        try:
            s.add(y)
        except AttributeError as err:
            return str(err), x + 1
        return None, x

    check(f, X, Y, graphs=1, breaks=0)


def test_hash_is_left_to_python():
    def f(x):
        s = frozenset([x])
        return hash(s) == hash(frozenset([x])), x + 1

    check(f, X, graphs=1)


def test_returned_frozenset_holds_the_very_tensors():
    def f(x, y):
        h = x * 2
        return frozenset([x, h, y]), h

    dynamo.reset()
    s, h = dynamo.optimize("eager")(f)(X, Y)
    assert dynamo.counters()["graphs"] == 1 and dynamo.counters()["graph_breaks"] == 0
    assert type(s) is frozenset and len(s) == 3 and X in s and Y in s and h in s
