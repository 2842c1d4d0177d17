"""Python kinds that `copy.deepcopy` of a config runs (transformers'
`PreTrainedConfig.get_text_config(decoder=True)`, issue: whole-model capture of BART): `id()` of
objects from outside the frame and of objects built in it, dicts keyed by classes, `delattr`,
and `copy.copy` / `copy.deepcopy` of containers and user objects. Each is run eagerly and
compiled and compared exactly, with graph and break counts.
"""

import copy
import dataclasses

import pytest
import torch

import dynamo

from test_python_kinds import check


# ----- id() ------------------------------------------------------------------------------------

class Box:
    def __init__(self, v):
        self.v = v


OUTSIDE = Box(3)
OTHER = Box(4)


def test_id_of_an_object_from_outside_is_its_id():
    def f(x):
        return x + (1 if id(OUTSIDE) == id(OUTSIDE) else 0) + (2 if id(OUTSIDE) != id(OTHER) else 0)

    check(f, torch.ones(2), graphs=1, breaks=0)


def test_id_of_an_object_from_outside_as_a_dict_key():
    table = {id(OUTSIDE): 10}

    def f(x, o):
        return x + table.get(id(o), -1)

    check(f, torch.ones(2), OUTSIDE, graphs=1, breaks=0)
    # The id is guarded: another object recompiles and finds no entry.
    dynamo.reset()
    opt = dynamo.optimize("eager")(f)
    assert torch.equal(opt(torch.ones(2), OUTSIDE), torch.full((2,), 11.0))
    assert torch.equal(opt(torch.ones(2), OTHER), torch.zeros(2))


def test_id_of_objects_built_in_the_frame_as_memo_keys():
    """The memo protocol of `copy.deepcopy`: ids of new objects are keys equal only to
    themselves."""
    def f(x):
        a, b, memo = Box(1), [x], {}
        memo[id(a)] = a
        memo[id(b)] = 5
        memo[id(memo)] = [a]
        same = id(a) == id(a) and id(a) in memo and id(b) in memo and memo.get(id(Box(0))) is None
        return x * memo[id(b)] + memo[id(a)].v + (1 if same else 0)

    check(f, torch.ones(2), graphs=1, breaks=0)


def test_ids_of_two_objects_built_in_the_frame_compare_in_python():
    """Two ids of objects built in the trace are equal in eager when the first object died
    before the second was made (`id([1]) == id([2])` is usually True): the trace does not know,
    so the comparison runs in Python. (It gave False before; an `except TypeError:` around
    `id([1]) + 1` also ran its handler in the trace.)"""

    def temporaries(x):
        return id([1]) == id([2]), x + 1

    def both_alive(x):
        a, b = [1], [2]
        return id(a) != id(b), x + 1

    def arithmetic(x):
        try:
            v = id([1]) + 1
        except TypeError:
            return x - 1
        return x + v * 0

    for f in (temporaries, both_alive, arithmetic):
        check(f, torch.ones(2), graphs=0)


def test_id_of_an_object_built_in_the_frame_outliving_the_graph():
    """An id that leaves the frame is the id of the object that leaves with it; a use of its
    value (`hex`) runs in Python. (Both frames now run eagerly: the id of an object the trace
    built has no value until the object exists.)"""
    def f(x):
        b = Box(x)
        return b, id(b)

    dynamo.reset()
    b, i = dynamo.optimize("eager")(f)(torch.ones(2))
    assert i == id(b)

    def g(x):
        b = Box(2)
        return x + len(hex(id(b))) * 0 + b.v

    check(g, torch.ones(2), graphs=0)

    def h(x):
        b = Box(x)
        return {id(b): b}

    dynamo.reset()
    d = dynamo.optimize("eager")(h)(torch.ones(2))
    (k, v), = d.items()
    assert k == id(v)


# ----- dicts keyed by classes ------------------------------------------------------------------

def _atomic(x):
    return x


def _as_list(x):
    return list(x)


DISPATCH = {int: _atomic, str: _atomic, list: _as_list, type(None): _atomic, float: lambda v: v * 2}


def test_dict_keyed_by_classes_from_globals():
    def f(x):
        conv = DISPATCH.get(type(2.5))
        miss = DISPATCH.get(torch.Tensor)
        return x + conv(2.5) + (1 if miss is None else 0) + (1 if list in DISPATCH else 0) + len(DISPATCH[list]((1, 2)))

    check(f, torch.ones(2), graphs=1, breaks=0)


def test_dict_keyed_by_classes_is_guarded():
    def f(x):
        return x + DISPATCH.get(bytes, lambda v: 0)(1)

    dynamo.reset()
    opt = dynamo.optimize("eager")(f)
    assert torch.equal(opt(torch.ones(2)), torch.ones(2))
    DISPATCH[bytes] = lambda v: v + 6
    try:
        assert torch.equal(opt(torch.ones(2)), torch.full((2,), 8.0))
    finally:
        del DISPATCH[bytes]


def test_dict_keyed_by_classes_built_in_the_frame():
    def f(x):
        d = {int: 1, float: 2}
        d[str] = 3
        return x + d[type(1.0)] + d.get(str) + len(d) + (1 if bool not in d else 0)

    check(f, torch.ones(2), graphs=1, breaks=0)


# ----- delattr / del o.a -----------------------------------------------------------------------

def test_delattr_on_an_object_built_in_the_frame():
    def f(x):
        b = Box(1)
        b.w = 2
        delattr(b, "w")
        c = Box(3)
        del c.v
        return x + b.v + (0 if hasattr(b, "w") else 10) + (0 if hasattr(c, "v") else 100) + len(vars(b))

    check(f, torch.ones(2), graphs=1, breaks=0)


def test_delattr_of_a_missing_attribute_raises_as_eager():
    def f(x):
        b = Box(1)
        try:
            delattr(b, "nope")
        except AttributeError:
            return x - 1
        return x

    check(f, torch.ones(2), graphs=1)


class Tracked:
    def __init__(self):
        self.log = []
        self.a = 1

    def __delattr__(self, name):
        self.log.append(name)
        super().__delattr__(name)


def test_delattr_calls_a_custom_delattr():
    def f(x):
        t = Tracked()
        delattr(t, "a")
        return x + len(t.log) + (0 if hasattr(t, "a") else 5)

    check(f, torch.ones(2), graphs=1, breaks=0)


def test_delattr_on_an_object_from_outside_is_replayed():
    def f(x, o):
        delattr(o, "v")
        return x + 1

    o = Box(1)
    check(f, torch.ones(2), o, graphs=1)
    o = Box(1)
    dynamo.reset()
    dynamo.optimize("eager")(f)(torch.ones(2), o)
    assert not hasattr(o, "v")


# ----- copy.copy / copy.deepcopy -----------------------------------------------------------------

def test_deepcopy_of_containers_of_literals():
    def f(x):
        a = [1, [2, 3], {"k": (4, [5])}]
        b = copy.deepcopy(a)
        b[1].append(9)
        b[2]["k"][1].append(7)
        return x + len(a[1]) + len(a[2]["k"][1]) * 10 + len(b[1]) * 100 + (1000 if b is not a and b[1] is not a[1] else 0)

    check(f, torch.ones(2), graphs=1, breaks=0)


def test_deepcopy_keeps_shared_references_shared():
    def f(x):
        inner = [1]
        a = [inner, inner]
        b = copy.deepcopy(a)
        b[0].append(2)
        return x + len(b[1]) + (10 if b[0] is b[1] else 0) + len(inner) * 100

    check(f, torch.ones(2), graphs=1, breaks=0)


@dataclasses.dataclass
class Cfg:
    layers: int = 2
    names: list = dataclasses.field(default_factory=lambda: ["a", "b"])
    scale: float = 0.5


CFG = Cfg()


def test_deepcopy_of_a_user_object_from_outside():
    """`copy.deepcopy(cfg)` of a config from outside the frame: a new object of the same
    class, equal attributes, no shared mutable state; the original is untouched."""
    def f(x):
        c = copy.deepcopy(CFG)
        c.layers = 7
        c.names.append("z")
        return x * c.layers + len(c.names) + len(CFG.names) * 10 + CFG.layers * 100 + (1000 if type(c) is Cfg else 0)

    check(f, torch.ones(2), graphs=1, breaks=0)
    assert CFG.layers == 2 and CFG.names == ["a", "b"]


def test_deepcopy_of_a_user_object_returned():
    def f(x):
        return x + 1, copy.deepcopy(CFG)

    dynamo.reset()
    out, c = dynamo.optimize("eager")(f)(torch.ones(2))
    assert c == CFG and c is not CFG and c.names is not CFG.names


def test_copy_copy_of_a_user_object_shares_attributes():
    def f(x):
        c = copy.copy(CFG)
        c.layers = 9
        return x + c.layers + CFG.layers * 10 + (100 if c.names is CFG.names else 0)

    check(f, torch.ones(2), graphs=1, breaks=0)


class WithDeepcopy:
    def __init__(self):
        self.n = 1

    def __deepcopy__(self, memo):
        new = WithDeepcopy()
        new.n = self.n + 40
        return new


class WithState:
    def __init__(self):
        self.n = 1

    def __getstate__(self):
        return {"n": self.n * 3}

    def __setstate__(self, state):
        self.n = state["n"] + 1


@pytest.mark.parametrize("cls", [WithDeepcopy, WithState])
def test_deepcopy_protocol_methods_are_called(cls):
    obj = cls()

    def f(x):
        return x + copy.deepcopy(obj).n + copy.copy(obj).n * 100

    check(f, torch.ones(2), graphs=1)


# ----- objects whose class has its own __getattribute__ (transformers' configs) -----------------

class AliasObj:
    """Like transformers' `PreTrainedConfig`: reads and writes map aliases through
    `attribute_map`, deferring to `object`'s methods through `super()`."""

    attribute_map = {"hidden": "hidden_size"}

    def __init__(self):
        self.hidden_size = 4

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)


ALIAS = AliasObj()


def test_object_with_its_own_getattribute_built_in_the_frame():
    def f(x):
        a = AliasObj()
        a.hidden = 7
        return x + a.hidden + a.hidden_size * 10 + (100 if hasattr(a, "hidden") else 0) + getattr(a, "nope", 3)

    check(f, torch.ones(2), graphs=1, breaks=0)


def test_deepcopy_then_rename_attributes_like_get_text_config():
    """`PreTrainedConfig.get_text_config(decoder=True)` of a flat encoder-decoder config: a deep
    copy whose attributes are renamed with getattr / delattr / setattr."""
    def f(x):
        c = copy.deepcopy(ALIAS)
        v = getattr(c, "hidden_size")
        delattr(c, "hidden_size")
        setattr(c, "width", v + 1)
        return x + c.width + (10 if hasattr(c, "hidden") else 0) + ALIAS.hidden * 100

    check(f, torch.ones(2), graphs=1, breaks=0)
    assert ALIAS.hidden_size == 4


# ----- type expressions (huggingface_hub's strict dataclass validators) -------------------------

import typing

FIELD_TYPES = {"a": int | None, "b": typing.Optional[typing.List[int]], "c": typing.Literal["x", "y"], "d": list[str]}
VALIDATORS = {typing.Union: "union", typing.Literal: "literal", list: "list", type(int | None): "union"}


def test_type_expressions_are_constants():
    def f(x):
        out = []
        for name, tp in FIELD_TYPES.items():
            origin = typing.get_origin(tp)
            out.append((name, VALIDATORS.get(origin), len(typing.get_args(tp)), tp == FIELD_TYPES[name]))
        return x + len(out), out

    check(f, torch.ones(2), graphs=1, breaks=0)
