"""Instances of `dict` and `OrderedDict` subclasses that come from outside the frame (issue 7,
Note [dict subclass storage] in src/symbolic/variables/user_defined.rs): transformers'
`ModelOutput` handed to a loss function (or live across a graph break inside a model), a
`state_dict()`-style OrderedDict, a user's dict subclass. Their storage is read in the trace
through dict's and OrderedDict's C methods (`items`, `keys`, `values`, `get`, `in`, `len`),
with the view types eager gives (`odict_items` ...); guards and input loads read the storage
itself, so a subclass's own `keys` / `__getitem__` never runs in a guard. Each program is
compared with eager exactly (`test_python_kinds.check`) with its graph and break counts."""

import collections

import pytest
import torch

import dynamo
from test_python_kinds import check

X = torch.arange(4.0)


def model_output(**kw):
    transformers = pytest.importorskip("transformers")
    return transformers.modeling_outputs.CausalLMOutput(**kw)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_model_output_argument_is_one_graph(backend):
    def loss(o, y):
        logits = o["logits"]
        first = o[0]
        return (logits - y).abs().sum() + first.sum(), o.logits * 2, list(o.keys()), len(o), "loss" in o, o.to_tuple()[0] + 1

    check(loss, model_output(logits=X + 1), X, graphs=1, breaks=0, backend=backend)


def test_model_output_views_keep_their_types():
    def f(o):
        items, keys, values = o.items(), o.keys(), o.values()
        return type(items).__name__, type(keys).__name__, type(values).__name__, [(k, v + 1) for k, v in items], o.get("loss"), o.get("logits") * 3

    ret = check(f, model_output(logits=X), graphs=1, breaks=0)  # compared with eager's names
    assert [name for _, name in ret[1][:3]] == ["odict_items", "odict_keys", "odict_values"]


def test_ordered_dict_argument_items_in_linked_list_order():
    def f(sd):
        total = 0
        for name, t in sd.items():
            total = total + t.sum()
        return total, list(sd), list(sd.keys()), [v * 2 for v in sd.values()], type(sd.items()).__name__

    od = collections.OrderedDict([("w", X), ("b", X + 1), ("c", X * 3)])
    od.move_to_end("w")  # the linked list's order differs from the dict storage's
    assert list(od) == ["b", "c", "w"]
    check(f, od, graphs=1, breaks=0)


def test_ordered_dict_guards_follow_reordering_and_new_values():
    def f(sd):
        return [k for k in sd.keys()], sum(v.sum() for v in sd.values())

    dynamo.reset()
    compiled = dynamo.optimize("eager")(f)
    od = collections.OrderedDict([("a", X), ("b", X + 1)])
    assert compiled(od) == f(od)
    od.move_to_end("a")
    got, want = compiled(od), f(od)
    assert got[0] == want[0] == ["b", "a"] and torch.equal(got[1], want[1])
    od["b"] = X * 10  # same keys, a new tensor: read again, not baked in
    got, want = compiled(od), f(od)
    assert torch.equal(got[1], want[1])
    od["c"] = X
    got, want = compiled(od), f(od)
    assert got[0] == want[0] == ["b", "a", "c"] and torch.equal(got[1], want[1])


CALLS = []  # one entry per call of CountingDict's own methods


class CountingDict(dict):
    """A dict subclass whose own `keys` and `__getitem__` record their calls and answer
    differently from the storage."""

    def keys(self):
        CALLS.append("keys")
        return ["shadow"]

    def __getitem__(self, k):
        CALLS.append("getitem")
        return dict.__getitem__(self, k) * 100


def test_subclass_overrides_run_in_the_trace_never_in_guards():
    def f(d):
        # `d[k]` and `d.keys()` are the subclass's; `d.items()`, `d.get` and `len` are dict's.
        return d["a"] + 1, d.keys(), [(k, v * 2) for k, v in d.items()], d.get("a"), len(d)

    d = CountingDict(a=X, b=X + 1)
    check(f, d, graphs=1, breaks=0)
    dynamo.reset()
    compiled = dynamo.optimize("eager")(f)
    compiled(d)
    CALLS.clear()
    for _ in range(3):
        out = compiled(d)
    # Two calls of the user's methods per run (the traced `d["a"]` and `d.keys()`), none from
    # guards or input loads.
    assert CALLS == ["getitem", "keys"] * 3
    assert torch.equal(out[0], X * 100 + 1) and out[1] == ["shadow"]
    assert dynamo.counters()["graphs"] == 1


class WithMissing(dict):
    def __missing__(self, key):
        return torch.zeros(4)


def test_subclass_with_missing_reads_present_and_absent_keys():
    def f(d):
        return d["a"] * 2, d["zzz"] + 1, d.get("zzz"), "zzz" in d

    check(f, WithMissing(a=X), graphs=1)


def test_model_output_across_a_graph_break():
    def f(o):
        h = o["logits"] * 2
        print("break")
        return h + o[0], o.to_tuple()[0].sum(), list(o.items())[0][0]

    check(f, model_output(logits=X), graphs=2, breaks=1)


class Plain(dict):
    pass


class PlainOrdered(collections.OrderedDict):
    pass


@pytest.mark.parametrize("cls", [Plain, PlainOrdered])
def test_plain_subclass_reads_are_captured(cls):
    def f(d):
        return d["a"] * 2, "a" in d, "zz" in d, [k for k in d], list(d.items())[-1][1] + 1, d.get("b", 0), len(d)

    check(f, cls(a=X, b=X + 1), graphs=1, breaks=0)


def test_plain_subclass_missing_key_raises_key_error_as_eager():
    def f(d):
        try:
            return d["nope"]
        except KeyError as e:
            return X + 1, e.args

    check(f, Plain(a=X), graphs=1, breaks=0)


def test_writes_to_a_subclass_argument_still_break_and_match_eager():
    def f(d):
        before = list(d.items())
        d["z"] = X + 1
        return before, list(d.items()), d["z"] * 2

    check(f, Plain(a=X), graphs=1)
