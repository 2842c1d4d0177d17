"""Findings of stop 52: each is the smallest program that broke needlessly, recompiled or
differed from eager, run eagerly and compiled and compared exactly, with graph, break,
recompile and fallback counts."""

import pytest
import torch
import torch.nn as nn

import dynamo
from _compare import check

BACKENDS = ["eager", "aot_eager", "inductor"]


# Note [modules guarded by type] (src/symbolic/builder.rs): a module is guarded by its type and
# what the trace reads from it, not its identity, so instances of one class share compiled
# code (a layer whose forward breaks compiled once per layer, 13 graphs for 12 layers; torch
# 4). Everything that differs between instances must still be seen: attribute values, the kind
# of a child, a missing bias, hooks, an instance-level forward, tied weights, container sizes,
# the training flag, identity tests and writes to the instance.


class _BreakingLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        x = self.lin(x).relu()
        if x.sum().item() > -1e9:  # a break in every layer
            x = x * 2
        return x + 1


class _Stack(nn.Module):
    def __init__(self, n=12):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList([_BreakingLayer() for _ in range(n)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_layers_with_a_break_share_compiled_code(backend):
    m = _Stack()
    c = check(lambda x: m(x), lambda: (torch.randn(2, 8, generator=torch.Generator().manual_seed(1)),), backend, calls=3)
    # The stack's frame breaks at the layer call; each layer's frame is one graph before the
    # break and one after, shared by all twelve layers.
    assert c["graphs"] <= 4, c
    assert c["recompiles"] <= 2, c


class _Configured(nn.Module):
    def __init__(self, scale, flag, act, bias=True):
        super().__init__()
        torch.manual_seed(int(scale * 10))
        self.scale = scale
        self.flag = flag
        self.act = act
        self.lin = nn.Linear(4, 4, bias=bias)

    def forward(self, x):
        y = self.lin(x) * self.scale
        if self.flag:
            y = y + 1
        return self.act(y)


def _configured_instances():
    return [
        _Configured(2.0, True, nn.ReLU()),
        _Configured(3.0, True, nn.ReLU()),
        _Configured(2.0, False, nn.ReLU()),
        _Configured(2.0, True, nn.Tanh()),
        _Configured(2.0, True, nn.Identity()),
        _Configured(2.0, True, nn.ReLU(), bias=False),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_instances_differing_in_attributes_children_and_bias(backend):
    ms = _configured_instances()
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(2))
    expected = [m(x) for m in ms]
    dynamo.reset()
    for _ in range(2):
        for m, e in zip(ms, expected):
            got = dynamo.optimize(backend)(m)(x)
            assert torch.allclose(got, e), (m.scale, m.flag, type(m.act), m.lin.bias is None)


class _Doubler(nn.Module):
    def forward(self, x):
        return x * 2


def _call_all(ms, x):
    return [m(x) for m in ms]


@pytest.mark.parametrize("backend", BACKENDS)
def test_instance_level_forward_and_hooks_on_one_instance(backend):
    def make():
        ms = [_Doubler() for _ in range(4)]
        ms[1].forward = lambda x: x * 100
        ms[2].register_forward_hook(lambda mod, args, out: out + 1000)
        ms[3].register_forward_pre_hook(lambda mod, args: (args[0] - 7,))
        return ms, torch.ones(2)

    c = check(_call_all, make, backend, calls=2)
    assert c["graphs"] >= 1, c


class _Tied(nn.Module):
    def __init__(self, tie):
        super().__init__()
        self.a = nn.Parameter(torch.ones(3))
        self.b = self.a if tie else nn.Parameter(torch.ones(3))

    def forward(self, x):
        with torch.no_grad():
            self.a.add_(1)
        return x * self.b + (self.a is self.b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tied_and_untied_instances(backend):
    def make(i):
        return [_Tied(False), _Tied(True)] if i % 2 == 0 else [_Tied(True), _Tied(False)], torch.ones(3)

    check(_call_all, make, backend, calls=4)


class _Containers(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.ps = nn.ParameterList([nn.Parameter(torch.full((2,), float(i))) for i in range(n)])
        self.ls = nn.ModuleList([nn.Identity() for _ in range(n)])
        self.md = nn.ModuleDict({f"k{i}": nn.Identity() for i in range(n)})

    def forward(self, x):
        for p in self.ps:
            x = x + p
        x = x * len(self.ls)
        if "k2" in self.md:
            x = x - 1
        if self.ps:
            x = x + self.ps[-1]
        for k in self.md:
            x = self.md[k](x) + 1
        return x + len(self.ps)


@pytest.mark.parametrize("backend", BACKENDS)
def test_container_modules_of_different_sizes(backend):
    def make(i):
        return [_Containers(n) for n in ([1, 3, 0, 2] if i % 2 == 0 else [2, 0, 3, 1])], torch.zeros(2)

    check(_call_all, make, backend, calls=3)


class _Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x + self.calls


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_reach_their_own_instance(backend):
    ms = [_Counting() for _ in range(3)]
    ref = [_Counting() for _ in range(3)]
    dynamo.reset()
    f = dynamo.optimize(backend)(_call_all)
    for _ in range(3):
        for i in [0, 2, 1, 2]:
            assert torch.equal(f([ms[i]], torch.zeros(1))[0], _call_all([ref[i]], torch.zeros(1))[0])
    assert [m.calls for m in ms] == [m.calls for m in ref]


_seen = {}


class _Peer(nn.Module):
    def __init__(self):
        super().__init__()
        self.peer = self

    def forward(self, x):
        _seen[id(self)] = _seen.get(id(self), 0) + 1
        if self.peer is self:
            return x + 1
        return x - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_identity_of_instances(backend):
    def make():
        ms = [_Peer() for _ in range(3)]
        ms[1].peer = ms[0]
        return ms, torch.zeros(1)

    check(_call_all, make, backend, calls=3)


class _Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x):
        return self.bn(x) * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_flag_per_instance(backend):
    def make():
        torch.manual_seed(3)
        a, b = _Norm(), _Norm()
        b.eval()
        with torch.no_grad():
            b.bn.running_mean.fill_(0.5)
        return [a, b, a], torch.randn(4, 3, generator=torch.Generator().manual_seed(4))

    check(_call_all, make, backend, calls=2)


# Note [methods of builtin types at a break] (src/symbolic/translator.rs): `od.update(...)` on
# an OrderedDict from outside the frame, cut by a break inside its traced stand-in, went back
# on the stack as `dict.update`, which writes the hash table past the OrderedDict's linked list:
# the new keys were missing from `list(od)` (audit 52, Q1). And `hasattr(view, "keys")` of a
# dict view or a builtin iterator is answered by its type, so the stand-in does not break.

from collections import Counter, OrderedDict, defaultdict


def _odict_update_items(x, d):
    d.update({"b": 2}.items())
    return x + 1


def _odict_update_zip(x, d):
    d.update(zip(["c", "d"], [3, 4]))
    return x + 1


def _odict_update_generator(x, d):
    d.update((k, len(k)) for k in ["ee", "f"])
    return x + 1


def _odict_update_after_break(x, d):
    m = OrderedDict([("act", 1)])
    print("break")
    m.update({"fc4": 2}.items())
    d.update(m)
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_odict_update_items, _odict_update_zip, _odict_update_generator, _odict_update_after_break])
def test_ordered_dict_update_from_lazy_pairs(fn, backend):
    def run(f):
        d = OrderedDict(a=1)
        out = f(torch.ones(1), d)
        return out, list(d.items()), list(reversed(d))

    c = check(lambda: run(fn), lambda: (), backend, calls=2)
    assert c["graphs"] >= 1, c


# `dict(d)`, `dict(d, k=v)` and `{}.update(d)` of a dict subclass whose `__iter__` is dict's
# copy its raw storage (`dict_merge`'s fast path, Objects/dictobject.c): an overridden `keys()`
# or `__getitem__` is not called (audit 52, Q2).


class _ReversedKeys(dict):
    def keys(self):
        return list(reversed(list(super().keys())))


class _ConstantItems(dict):
    def __getitem__(self, k):
        return 100


def _merge_subclass(x, d):
    t = {}
    t.update(d)
    return x * d["foo"], dict(d), dict(d, z=0), t, defaultdict(int, d), Counter(d)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [_ReversedKeys, _ConstantItems])
def test_dict_merge_of_subclass_reads_storage(cls, backend):
    check(_merge_subclass, lambda: (torch.ones(1), cls({"foo": 1, "bar": 2})), backend, calls=2)


# An exception made in the trace holds its arguments themselves: a list given to it was a
# copy, so the handler's `e.args[0].append(...)` missed the caller's list and `e.args[0] is l`
# was False (audit 52, S3).


def _exception_holds_list(x, l):
    try:
        raise ValueError(l)
    except ValueError as e:
        e.args[0].append("x")
        return x + len(e.args[0]), e.args[0] is l


def _exception_of_frame_list(x):
    l = []
    e = ValueError(l)
    l.append(1)
    return x + 1, e.args


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_arguments_keep_identity(backend):
    def run(f):
        l = []
        return f(torch.ones(2), l), l

    check(lambda: run(_exception_holds_list), lambda: (), backend, calls=3)
    check(_exception_of_frame_list, lambda: (torch.ones(2),), backend, calls=2)


# `__getattr__ = dict.get` on a dict subclass (a "dotdict" config) read its attributes with a
# break each; they are reads of the object's dict storage (audit 52, Q3).


class _DotDict(dict):
    __getattr__ = dict.get
    __setattr__ = dict.__setitem__


def _read_dotdict(x, cfg):
    return x * cfg.get("a", 3) * cfg.b + (cfg.zz is None) + cfg.a


@pytest.mark.parametrize("backend", BACKENDS)
def test_dotdict_attributes_are_storage_reads(backend):
    def make(i):
        return torch.ones(2), _DotDict({"a": 1 + i % 2, "b": 2})

    c = check(_read_dotdict, make, backend, calls=4)
    assert c["graph_breaks"] == 0, c
    assert c["graphs"] <= 2, c


# Note [Python comparisons of objects passed in] (src/symbolic/variables/user_defined.rs):
# `==`, `in`, `list.index`, `list.count` on objects from outside the frame whose class defines
# `__eq__` in Python broke the graph at each use (audit 52, S2).


class _Key:
    def __init__(self, v):
        self.v = v

    def __eq__(self, o):
        return isinstance(o, _Key) and o.v == self.v

    __hash__ = None


class _Loud:
    def __init__(self, v):
        self.v = v

    def __eq__(self, o):
        return "yes" if isinstance(o, _Loud) and o.v == self.v else NotImplemented


def _find_key(x, l, e):
    i = l.index(e) if e in l else -1
    return x * (i + l.count(e)), e == l[0], e != l[0], _Loud(1) == e


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_eq_of_objects_passed_in(backend):
    cases = [([_Key(1), _Key(2)], _Key(2)), ([_Key(1)], _Key(3)), ([_Key(5), _Key(5)], _Key(5))]

    def make(i):
        l, e = cases[i]
        return torch.ones(2), l, e

    c = check(_find_key, make, backend, calls=3)
    assert c["graph_breaks"] == 0, c
