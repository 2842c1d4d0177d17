"""Tensors by identity. Dicts keyed by tensors (Note [tensor dict keys] in
src/symbolic/variables/dicts.rs): a tensor hashes by identity, so a dict built in the frame may
be keyed by its tensors, and lookups, `in`, writes, deletes and iteration are traced. `id()` of
a tensor stays Python's. Every program runs
eagerly and compiled and is compared exactly; the graph and break counts show the work was
captured."""

import collections
import io
import contextlib

import torch

import dynamo
from test_python_kinds import check

X = torch.tensor([1.0, -2.0, 3.0])
Y = torch.tensor([0.5, 4.0, -1.0])


def compiled_result(f, *args):
    dynamo.reset()
    return dynamo.optimize("eager")(f)(*args)


def test_membership_lookup_and_get():
    def f(x, y):
        d = {x: 1}
        return (x in d, y in d, d[x] + 1, d.get(y, 5), d.get(x)), x + 1

    check(f, X, Y, graphs=1, breaks=0)


def test_items_walked_in_insertion_order():
    def f(x, y):
        d = {}
        d[y] = y * 3
        d[x] = x * 2
        out = 0
        for k, v in d.items():
            out = out * 2 + k * v
        keys = list(d)
        return out, len(d), keys[0] * 1, list(d.values())[1].sum()

    check(f, X, Y, graphs=1, breaks=0)


def test_delete_pop_setdefault_popitem():
    def f(x, y):
        d = {x: 1, y: 2}
        del d[x]
        first = d.setdefault(x, 7)
        again = d.setdefault(x, 8)
        popped = d.pop(y)
        missing = d.pop(y, "gone")
        k, v = d.popitem()
        return first, again, popped, missing, v, k * 2, len(d)

    check(f, X, Y, graphs=1, breaks=0)


def test_returned_dict_keeps_the_very_tensors():
    def f(x, y):
        h = x * 2
        return {x: 1, h: "computed", y: y + 1}, h

    eager_d, _ = f(X, Y)
    d, h = compiled_result(f, X, Y)
    assert dynamo.counters()["graphs"] == 1
    assert type(d) is dict and len(d) == 3
    keys = list(d)
    assert keys[0] is X and keys[1] is h and keys[2] is Y
    assert [type(v) for v in d.values()] == [type(v) for v in eager_d.values()]
    assert torch.equal(d[Y], eager_d[Y]) and torch.equal(h, X * 2)


def test_writes_to_a_dict_from_outside_the_frame():
    def f(d, x, y):
        d[x] = 1
        d[y] = y * 2
        return x + 1

    eager_d, compiled_d = {"a": 1}, {"a": 1}
    f(eager_d, X, Y)
    compiled_result(f, compiled_d, X, Y)
    assert dynamo.counters()["graphs"] == 1 and dynamo.counters()["graph_breaks"] == 0
    assert list(compiled_d)[0] == "a" and list(compiled_d)[1] is X and list(compiled_d)[2] is Y
    assert compiled_d[X] == 1 and torch.equal(compiled_d[Y], eager_d[Y])


def test_defaultdict_and_ordered_dict_keyed_by_tensors():
    def f(x, y):
        dd = collections.defaultdict(list)
        dd[x].append(1)
        dd[y].append(2)
        dd[x].append(3)
        od = collections.OrderedDict()
        od[y] = 1
        od[x] = 2
        od.move_to_end(y)
        return dd[x], len(dd), [v for v in od.values()], x in od, x * 2

    check(f, X, Y, graphs=1, breaks=0)


def test_unpacked_copied_and_compared():
    def f(x, y):
        d = {x: 1, y: 2}
        d2 = {**d}
        d3 = dict(d)
        d4 = d.copy()
        d4[x] = 5
        return d2 == d, d3 == d, d4 == d, set(d) == {x, y}, x * 1

    check(f, X, Y, graphs=1, breaks=0)


def test_an_input_passed_twice_is_one_key():
    """`y in {x: 1}` decided False while x and y were distinct: the same tensor passed as both
    recompiles (NO_ALIAS) and gives eager's True."""

    def f(x, y):
        d = {x: 1}
        return y in d, x + y

    g = dynamo.optimize("eager")(f)
    dynamo.reset()
    assert g(X, Y)[0] is False
    assert g(X, X)[0] is True
    assert f(X, X)[0] is True
    assert dynamo.counters()["graphs"] == 2


def test_key_error_of_a_missing_tensor_key():
    """The KeyError would carry the real tensor: it breaks, and eager's handler runs."""

    def f(x, y):
        d = {x: 1}
        try:
            d[y]
        except KeyError as e:
            return x - 1, e.args[0] is y
        return x + 1, None

    check(f, X, Y, graphs=0, breaks=1)


def test_printed_dict_of_tensor_keys():
    def f(x):
        d = {x: 1}
        print(d, d.keys())
        return x * 2

    check(f, X)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        compiled_result(f, X)
    assert "tensor([ 1., -2.,  3.])" in out.getvalue() and "TracedKey" not in out.getvalue()


def test_id_of_an_input_is_its_real_id():
    """An input's id may equal a value from outside (here a hash computed after a break): it
    stays Python's."""

    def f(x):
        y = x + 1
        return y.__hash__() == id(y), id(x) == id(x), x * 2

    check(f, X)


# ----- dicts from outside the frame keyed by tensors ------------------------------------------
# Each tensor key is a graph input read from its place among the keys (`Source::DictKey`), and
# the dict's DICT_KEYS guard pins the keys' identity.


def test_lookup_in_a_dict_passed_in():
    def f(d, x, z):
        return d[x] * 2, x in d, z in d, d["s"], [k + 1 for k in d if isinstance(k, torch.Tensor)]

    d = {X: torch.ones(3), Y: torch.zeros(3), "s": 1}
    z = torch.ones(3)
    want = f(d, X, z)
    got = compiled_result(f, d, X, z)
    assert dynamo.counters()["graphs"] == 1 and dynamo.counters()["graph_breaks"] == 0
    assert torch.equal(got[0], want[0]) and got[1:4] == want[1:4] == (True, False, 1)
    assert all(torch.equal(a, b) for a, b in zip(got[4], want[4])) and len(got[4]) == 2


def test_ema_of_parameters_keyed_by_parameter():
    m = torch.nn.Linear(3, 2)
    shadow = {p: p.detach().clone() for p in m.parameters()}
    want = {p: v.clone() for p, v in shadow.items()}

    def update(m, shadow):
        for p in m.parameters():
            shadow[p].mul_(0.9).add_(p.detach() * 2, alpha=0.1)
        return len(shadow)

    update(m, want)
    dynamo.reset()
    assert dynamo.optimize("eager")(update)(m, shadow) == 2
    assert dynamo.counters()["graphs"] == 1 and dynamo.counters()["graph_breaks"] == 0
    for p in m.parameters():
        assert torch.equal(shadow[p], want[p])


def test_other_key_objects_recompile():
    def f(d, x):
        return d[x] * 2

    g = dynamo.optimize("eager")(f)
    dynamo.reset()
    a, b = torch.randn(3), torch.randn(3)
    assert torch.equal(g({a: a}, a), a * 2)
    assert torch.equal(g({b: b}, b), b * 2)
    assert torch.equal(g({a: b, b: a}, a), b * 2)
    assert dynamo.counters()["graphs"] == 3


def test_writes_to_a_tensor_keyed_dict_passed_in():
    def f(d, x, y):
        d[y] = 5
        del d[x]
        d["n"] = len(d)
        return y + 1

    eager_d, compiled_d = {X: 1, Y: 2}, {X: 1, Y: 2}
    f(eager_d, X, Y)
    compiled_result(f, compiled_d, X, Y)
    assert dynamo.counters()["graphs"] == 1 and dynamo.counters()["graph_breaks"] == 0
    assert list(compiled_d.items()) == [(Y, 5), ("n", 1)] == list(eager_d.items())
    assert list(compiled_d)[0] is Y


def test_tensor_keyed_dict_across_a_break():
    def f(d):
        print("break")
        return [k + 1 for k in d], list(d.values())

    d = {X: 1, Y: 2}
    got = compiled_result(f, d)
    assert dynamo.counters()["graphs"] == 1 and dynamo.counters()["graph_breaks"] == 1
    assert torch.equal(got[0][0], X + 1) and torch.equal(got[0][1], Y + 1) and got[1] == [1, 2]
