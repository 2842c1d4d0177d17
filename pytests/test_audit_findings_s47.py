"""Findings of stop 47's testers: each is the smallest program that differed from eager, run
eagerly and compiled and compared exactly (values, types, identity, mutated state), with graph
counts that show the code was captured."""

import copy

import pytest
import torch

import dynamo


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and [type(k) for k in a] == [type(k) for k in b] and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _run(f, make_args, backend):
    """`f` on fresh arguments from `make_args()`, eagerly and compiled (after a reset): the two
    results and the two argument lists after the calls, and the compiled frame's explanation."""
    want_args = make_args()
    want = f(*want_args)
    dynamo.reset()
    explained = dynamo.explain(f)(*make_args())
    dynamo.reset()
    got_args = make_args()
    got = dynamo.optimize(backend)(f)(*got_args)
    return want, got, want_args, got_args, explained


# C5: a loop over `enumerate(it)` or `zip(it, ...)` with a graph break in its body traveled to
# the resume function as a snapshot of its remaining items, so the iterator `it` it steps (a
# local, or the caller's) was left one item in: `list(it)` after the loop gave the rest again.

def _loop_over_local_iterator(x):
    it = iter([1, 2, 3])
    for i, v in enumerate(it):
        x = x + v * i
        dynamo.graph_break()
    return x, list(it)


def _zip_over_local_iterator(x):
    it = iter([1, 2, 3])
    for a, b in zip(it, (4, 5, 6)):
        x = x + a * b
        dynamo.graph_break()
    return x, list(it)


def _loop_over_callers_iterator(x, it):
    for i, v in enumerate(it):
        x = x + v
        dynamo.graph_break()
    return x


def _zip_stops_early_over_callers_iterator(x, it):
    for a, b in zip((10, 20), it):
        x = x + a * b
        dynamo.graph_break()
    return x


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("f", [_loop_over_local_iterator, _zip_over_local_iterator])
def test_loop_over_iterator_of_a_local_steps_it(f, backend):
    want, got, _, _, explained = _run(f, lambda: (torch.zeros(1),), backend)
    assert _same(got, want), (got, want)
    assert explained.graph_count >= 2


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("f", [_loop_over_callers_iterator, _zip_stops_early_over_callers_iterator])
def test_loop_over_callers_iterator_steps_it(f, backend):
    want, got, want_args, got_args, explained = _run(f, lambda: (torch.zeros(1), iter([1, 2, 3, 4])), backend)
    assert _same(got, want), (got, want)
    assert list(got_args[1]) == list(want_args[1])
    assert explained.graph_count >= 2


# C1: the replay of a dict from outside the frame took an equal key of another type for the
# same key (`2` and `2.0`): after `d.pop(2); d[2.0] = v` eager's dict holds the key 2.0 and the
# compiled one kept 2. Every dict kind a replay writes: dict, OrderedDict, defaultdict, a dict
# subclass; `del` and `pop`; int/float and int/bool.

class _DictSubclass(dict):
    pass


def _pop_then_insert_equal_key(x, d):
    d.pop(2)
    d[2.0] = "new"
    return x + 1


def _del_then_insert_true(x, d):
    del d[1]
    d[True] = "new"
    return x + 1


def _assign_equal_key_keeps_stored(x, d):
    d[2.0] = "new"
    return x + 1


DICT_KINDS = {
    "dict": lambda: {1: "a", 2: "b"},
    "OrderedDict": lambda: __import__("collections").OrderedDict([(1, "a"), (2, "b")]),
    "defaultdict": lambda: __import__("collections").defaultdict(list, {1: "a", 2: "b"}),
    "subclass": lambda: _DictSubclass({1: "a", 2: "b"}),
}


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("kind", sorted(DICT_KINDS))
@pytest.mark.parametrize("f", [_pop_then_insert_equal_key, _del_then_insert_true, _assign_equal_key_keeps_stored])
def test_replayed_dict_keeps_eagers_key_objects(f, kind, backend):
    make = DICT_KINDS[kind]
    want, got, want_args, got_args, explained = _run(f, lambda: (torch.ones(1), make()), backend)
    assert _same(got, want)
    assert _same(got_args[1], want_args[1]), (got_args[1], want_args[1])
    assert explained.graph_count == 1 and explained.graph_break_count == 0


# C2, C3: OrderedDict.move_to_end kept the stored key object in eager but stored the argument
# (`move_to_end(True)` on key 1 gave key True); OrderedDict's KeyError for a missing tuple key
# has the tuple as its arguments (`PyErr_SetObject`), dict's has it wrapped.

def _move_to_end_with_equal_key(x):
    import collections

    m = collections.OrderedDict([(1, "a"), ("x", 2)])
    m.move_to_end(True)
    m.move_to_end(1.0, last=False)
    return x + 1, list(m.items()), [type(k) for k in m]


def _missing_tuple_keys(x):
    import collections

    m = collections.OrderedDict([(1, "a")])
    out = []
    for call in (lambda: m.move_to_end((1, 2)), lambda: m.pop((3, 4)), lambda: m.pop(()), lambda: {}.pop((5, 6)), lambda: m[(7, 8)]):
        try:
            call()
        except KeyError as e:
            out.append(e.args)
    return x + 1, out


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("f", [_move_to_end_with_equal_key, _missing_tuple_keys])
def test_ordered_dict_methods_as_cpython(f, backend):
    want, got, _, _, explained = _run(f, lambda: (torch.ones(1),), backend)
    assert _same(got, want), (got, want)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
