"""Findings of stop 54: each is the smallest program that broke needlessly or differed from
eager, run eagerly and compiled and compared exactly (results, types, identities, side effects,
exceptions), with graph and break counts."""

import types

import pytest
import torch

import dynamo
from _compare import check

BACKENDS = ["eager", "inductor"]
SN = types.SimpleNamespace


# Note [namespace objects] (src/symbolic/variables/user_defined.rs).


def _ns_write_read(x, k):
    ns = SN(a=k, b=2)
    ns.b += 1
    ns.c = x * 2
    return x * ns.a + ns.b + ns.c


def _ns_escapes(x, k):
    ns = SN(a=k, t=x + 1)
    ns.t = ns.t * 2
    return vars(ns), type(ns) is SN, isinstance(ns, SN)


def _ns_and_dict(x, k):
    ns = SN(a=k, t=x + 1)
    ns.t = ns.t * 2
    return ns, vars(ns)


def _ns_delete(x, k):
    ns = SN(a=k, b=1)
    del ns.a
    return x + ns.b, hasattr(ns, "a"), getattr(ns, "q", 7), sorted(vars(ns))


def _ns_dict_write(x, k):
    ns = SN(a=k)
    d = ns.__dict__
    d["z"] = x
    return ns.z + ns.a


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_ns_write_read, _ns_escapes, _ns_delete, _ns_dict_write])
def test_namespace_built_in_frame_is_traced(fn, backend):
    """`types.SimpleNamespace(a=..)` made in the frame, its attributes written, read, deleted
    and returned: one graph a compile, no break (audit 53, T10)."""
    c = check(fn, lambda i: (torch.ones(2) * (i + 1), i + 1), backend)
    assert c["graph_breaks"] == 0
    assert c["graphs"] >= 1


def test_namespace_rebuilt_with_its_dict():
    """The namespace and its `vars()` leave the graph as one object and its own dict."""
    dynamo.reset()
    ns, d = dynamo.optimize("eager")(_ns_and_dict)(torch.ones(2), 3)
    assert dynamo.counters()["graph_breaks"] == 0
    assert type(ns) is SN and d is ns.__dict__
    assert ns.a == 3 and torch.equal(ns.t, torch.full((2,), 4.0))


def _ns_compare(x, k):
    a, b = SN(a=k), SN(a=k)
    return x + 1, a == b, a != b, repr(a), str(b)


def _ns_hash(x, k):
    try:
        hash(SN(a=k))
    except TypeError as e:
        return x, str(e)
    return x + 1


def _ns_positional(x, k):
    try:
        return x + 1, SN({"a": k})
    except TypeError as e:
        return x, str(e)


@pytest.mark.parametrize("fn", [_ns_compare, _ns_hash, _ns_positional])
def test_namespace_c_slots_give_eager_values(fn):
    """The namespace's C `__eq__`, `__repr__`, `__hash__` (None) and `__init__`'s positional
    argument (TypeError before 3.13) are not modelled: they break, and give eager's values
    (never a plain object's identity or text)."""
    check(fn, lambda i: (torch.ones(2), i + 1), "eager")


# A defaultdict from outside the frame indexed with a missing key: `defaultdict.__missing__`
# traced (an optimizer's `self.state[p]` on its first step; audit 54, W4).


def _state_step(state, ps):
    for p in ps:
        s = state[p]
        if "buf" not in s:
            s["buf"] = torch.zeros_like(p)
        s["buf"].add_(p)
    return len(state)


class _CountingDefaultDict(__import__("collections").defaultdict):
    pass


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["defaultdict", "subclass"])
def test_defaultdict_missing_key_from_outside_is_traced(kind, backend):
    import collections

    cls = collections.defaultdict if kind == "defaultdict" else _CountingDefaultDict
    ps = [torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.full((3,), 2.0))]
    eager_state, state = cls(dict), cls(dict)
    dynamo.reset()
    f = dynamo.optimize(backend)(_state_step)
    for _ in range(3):
        assert f(state, ps) == _state_step(eager_state, ps)
    assert type(state) is cls and list(state) == ps
    for p in ps:
        assert torch.equal(state[p]["buf"], eager_state[p]["buf"])
    c = dynamo.counters()
    assert c["graph_breaks"] == 0 and c["graphs"] == 2


def _missing_without_factory(d, k):
    try:
        return d[k]
    except KeyError as e:
        return ("KeyError", e.args)


def _missing_list_factory(d, k):
    d[k].append(k)
    return d[k], len(d)


@pytest.mark.parametrize("fn,factory", [(_missing_without_factory, None), (_missing_list_factory, list)])
def test_defaultdict_missing_key_semantics(fn, factory):
    """No factory: eager's KeyError(key); a factory: its value stored under the key, and
    the dict's new item seen by Python after the call."""
    import collections

    def make(i):
        return collections.defaultdict(factory, {"x": [0]}), f"k{i}"

    eager = [make(i) for i in range(3)]
    comp = [make(i) for i in range(3)]
    dynamo.reset()
    f = dynamo.optimize("eager")(fn)
    for (ed, ek), (cd, ck) in zip(eager, comp):
        assert f(cd, ck) == fn(ed, ek)
        assert dict(cd) == dict(ed)
    assert dynamo.counters()["graph_breaks"] == 0


# Note [setitem writes a view] (src/symbolic/output_graph.rs): `y[idx] op= v` writes back the
# view it read; only the written view is compared with the value (audit 54, X2).


def _slice_augassign(y):
    y = y.clone()
    y[1:3] += 1
    y[0] *= 2
    y[None, 3] -= 1
    y[..., 1:] -= y[..., :-1].clone()
    return y


def _loop_augassign(x):
    out = torch.zeros(3, *x.shape)
    for i in range(3):
        out[i] += x * i
    return out


def _partial_overlap_setitem(y):
    y = y.clone()
    y[1:3] = y[0:2]
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_slice_augassign, _loop_augassign])
def test_augmented_setitem_on_a_view_is_one_graph(fn, backend):
    c = check(fn, lambda: (torch.arange(16.0).reshape(4, 4),), backend)
    assert c["graph_breaks"] == 0 and c["graphs"] == 1


def test_partial_overlap_setitem_still_raises():
    """`y[1:3] = y[0:2]` partly overlaps: eager's RuntimeError, the same under dynamo."""
    check(_partial_overlap_setitem, lambda: (torch.arange(4.0),), "eager")


# `bool(n)` and `pow(n, e, m)` of a symbolic int stay symbolic (audit 54, X1).


def _bool_of_int(x, n):
    return x * 2, bool(n), bool(x.shape[0] - 1)


def _pow3_of_int(x, n):
    return x * pow(n, 2, 7), pow(n, 3, -5)


@pytest.mark.parametrize("fn", [_bool_of_int, _pow3_of_int])
def test_builtins_of_a_dynamic_int_do_not_specialize(fn):
    """Five sizes: the static compile, then one dynamic graph (eager: 5 values)."""
    c = check(fn, lambda i: (torch.ones(i + 5), i + 5), "eager", calls=5)
    assert c["graphs"] == 2 and c["recompiles"] == 1


# A hand-written optimizer: `id(p)` of a parameter is its real id (ID_MATCH on its source), and
# `p.grad = None` on a leaf input is a write replayed after the graph (audit 54, W2).


def _momentum_run(compiled):
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)
    bufs = {}

    def step(m, x):
        loss = m(x).pow(2).mean()
        loss.backward()
        with torch.no_grad():
            for p in m.parameters():
                buf = bufs.setdefault(id(p), torch.zeros_like(p))
                buf.mul_(0.9).add_(p.grad)
                p -= 0.1 * buf
                p.grad = None
                assert p.grad is None
        return loss.detach()

    f = dynamo.optimize("eager")(step) if compiled else step
    losses = [f(m, x).item() for _ in range(4)]
    return losses, [p.grad for p in m.parameters()], sorted(bufs) == sorted(id(p) for p in m.parameters()), [p.detach().clone() for p in m.parameters()]


def test_hand_written_optimizer_ids_and_grad_clearing():
    dynamo.reset()
    got = _momentum_run(True)
    want = _momentum_run(False)
    assert got[0] == want[0] and got[1] == want[1] == [None, None] and got[2] and want[2]
    assert all(torch.equal(a, b) for a, b in zip(got[3], want[3]))
    c = dynamo.counters()
    # The backward breaks (it runs as Python); nothing else does. The update after it compiles
    # twice: the first step inserts the momentum buffers into `bufs` (its keys are guarded).
    assert c["graph_breaks"] == 1 and c["graphs"] == 3, c


def _grad_cleared_then_read(p):
    p.grad = None
    return p * 2, p.grad


def _grad_of_computed(x):
    y = x * 2
    y.grad = None
    return y


@pytest.mark.parametrize("fn", [_grad_cleared_then_read, _grad_of_computed])
def test_grad_set_to_none(fn):
    def make():
        p = torch.nn.Parameter(torch.ones(3))
        p.grad = torch.full((3,), 5.0)
        return (p,)

    check(fn, make, "eager")


# Note [dynamic compile budget] (src/symbolic/convert_frame.rs): a compile with symbolic sizes
# that runs past `config.dynamic_compile_budget_s` is redone with static sizes, and the code
# stays static (audit 54, V1: Swin at a second image size did not finish in minutes).


def _windowed(x):
    b, c, h, w = x.shape
    y = x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5)
    return y.reshape(b, -1, c * 4).sum(1)


def test_dynamic_compile_past_budget_compiles_static():
    before = dynamo.config.dynamic_compile_budget_s
    dynamo.config.dynamic_compile_budget_s = 0
    try:
        c = check(_windowed, lambda i: (torch.arange(2 * 3 * (4 + 2 * i) ** 2, dtype=torch.float32).reshape(2, 3, 4 + 2 * i, 4 + 2 * i).sin(),), "eager", calls=4)
    finally:
        dynamo.config.dynamic_compile_budget_s = before
    # One static compile per size: the budget (0 s) ends the dynamic attempt at once.
    assert c["graphs"] == 4 and c["recompiles"] == 3 and c["graph_breaks"] == 0


def test_dynamic_compile_budget_setting():
    before = dynamo.config.dynamic_compile_budget_s
    assert before == 30.0
    dynamo.config.dynamic_compile_budget_s = 2.5
    assert dynamo.config.dynamic_compile_budget_s == 2.5
    dynamo.config.dynamic_compile_budget_s = before
    with pytest.raises(ValueError):
        dynamo.config.dynamic_compile_budget_s = -1
    # Within the budget the second size makes the sizes symbolic: one graph serves the rest.
    c = check(_windowed, lambda i: (torch.arange(2 * 3 * (4 + 2 * i) ** 2, dtype=torch.float32).reshape(2, 3, 4 + 2 * i, 4 + 2 * i).sin(),), "eager", calls=4)
    assert c["graphs"] == 2 and c["recompiles"] == 1


# Note [global state queries] (src/symbolic/output_graph.rs): the guard of a query that warns
# (a deprecated one) does not show the warning again at the caller's line (audit 54, W5).


def _deprecated_query(x):
    return x * 2 + int(torch.is_autocast_cpu_enabled())


def test_guard_of_a_warning_query_is_quiet():
    import warnings

    def run(f):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            for _ in range(3):
                f(torch.ones(2))
        return [(w.category, w.lineno, str(w.message)) for w in caught]

    expected = run(_deprecated_query)
    dynamo.reset()
    assert run(dynamo.optimize("eager")(_deprecated_query)) == expected
    assert len(expected) == 1
