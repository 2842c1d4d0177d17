"""Objects that keep their attributes in `__slots__`, ordering comparisons of user objects and
sequences, and the AttributeError the trace raises (issue 7): each program runs eagerly and compiled on copies of the same inputs and is compared
exactly, with graph and break counts showing it was captured.

Note [slotted objects] (src/symbolic/variables/user_defined.rs): a slot is a `member_descriptor`
on the class; reads and writes of it are attribute reads and writes of the trace (a write to an
object from outside the frame is replayed after the graph, Note [slot writes] in
src/symbolic/object_protocol.rs), and an object of a slotted class made in the frame is tracked
like any user object. Before, every slot write was a graph break and every slotted object made
in the frame a break at its construction."""

import collections
import dataclasses
import functools

import pytest
import torch

import dynamo
from test_python_kinds import check, no_fallback

BACKENDS = ["eager", "inductor"]


class Pair:
    __slots__ = ("a", "b")

    def __init__(self, a):
        self.a = a


class PairWithDict(Pair):
    __slots__ = ("c", "__dict__")

    @property
    def twice(self):
        return self.a * 2


@dataclasses.dataclass(slots=True)
class SlotConfig:
    x: torch.Tensor
    n: int = 0


@dataclasses.dataclass(slots=True, order=True)
class Ordered:
    k: int
    v: float = 0.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_slot_writes_to_an_argument_are_replayed_and_read_back(backend):
    def fn(p, x):
        before = hasattr(p, "b")
        p.b = x * 2
        p.a = p.a + 1
        return before, hasattr(p, "b"), p.b + p.a, getattr(p, "b") * 1

    check(fn, Pair(1), torch.ones(3), graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_slot_writes_on_subclasses_with_and_without_a_dict(backend):
    class Sub(Pair):
        __slots__ = ("c",)

    def fn(s, d, x):
        s.c = x
        s.a = 2
        d.a = x
        d.extra = 3
        return s.c * s.a + d.a + d.extra

    check(fn, Sub(1), PairWithDict(1), torch.ones(3), graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_slotted_objects_made_in_the_frame(backend):
    def fn(x):
        p = Pair(x)
        r = [hasattr(p, "b"), getattr(p, "b", 5)]
        try:
            p.b
        except AttributeError as e:
            r.append(str(e))
        p.b = x + 1
        q = PairWithDict(x)
        q.c = x * 3
        q.extra = 1
        return p.a + p.b + q.twice + q.c, r, p, q, q.extra

    check(fn, torch.ones(3), graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_slotted_dataclasses(backend):
    def fn(cfg, x):
        cfg.n += 1
        cfg.x = cfg.x + x
        made = SlotConfig(x * 2, 3)
        made.n = made.n * 2
        # (Equality of dataclasses with tensor fields: CPython 3.13 compares field by field,
        # which asks a tensor's truth; 3.11 and 3.12 compare tuples, identity first.)
        point = Ordered(made.n, 0.5)
        return (cfg.x.sum() + cfg.n + made.x, point == Ordered(6, 0.5), point != Ordered(6, 1.0),
                Ordered(1) < Ordered(2), Ordered(2, 1.0) >= Ordered(2, 2.0), made)

    check(fn, SlotConfig(torch.ones(2)), torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


def test_what_slotted_objects_refuse_is_raised_as_in_eager():
    def fn(x):
        y = x * 2
        p = Pair(x)
        out = []
        try:
            p.not_a_slot = 1  # no __dict__: AttributeError (its message differs across versions)
        except AttributeError as e:
            out.append(str(e))
        try:
            vars(p)
        except TypeError as e:
            out.append(str(e))
        try:
            p.__dict__
        except AttributeError as e:
            out.append((str(e), e.name))
        return y + 1, out

    check(fn, torch.ones(2))


def test_a_slotted_object_made_in_the_frame_escapes_with_its_type():
    def fn(x, sink):
        p = Pair(x + 1)
        p.b = sink
        sink.append(p)
        return p

    eager_sink, sink = [], []
    e = fn(torch.ones(2), eager_sink)
    dynamo.reset()
    c = dynamo.optimize("eager")(fn)(torch.ones(2), sink)
    assert type(c) is Pair and sink[0] is c and c.b is sink
    assert torch.equal(c.a, e.a)
    assert dynamo.counters()["graphs"] == 1


@pytest.mark.parametrize("kind", ["tensor", "list", "dict", "object", "slotted"])
def test_attribute_error_name_and_obj_in_a_handler(kind):
    """`e.name` is the missing name, `e.obj` the object of this call (a break where the
    trace's exception cannot hold it), for every kind of value the lookup fails on."""

    class Plain:
        pass

    def make(x):
        return {"tensor": lambda: x, "list": lambda: [x], "dict": lambda: {"a": x}, "object": Plain, "slotted": lambda: Pair(x)}[kind]()

    def made_here(x):
        y = x * 2
        o = make(x)
        try:
            o.missing
        except AttributeError as e:
            return y + 1, e.name, e.obj is o, str(e)

    def argument(o, x):
        y = x * 2
        try:
            o.missing
        except AttributeError as e:
            return y + 1, e.name, e.obj is o, str(e)

    for fn, args in ((made_here, (torch.ones(2),)), (argument, (make(torch.ones(2)), torch.ones(2)))):
        expected = fn(*args)
        dynamo.reset()
        compiled = dynamo.optimize("eager")(fn)
        for _ in range(2):  # the second call runs the cached code
            got = compiled(*args)
            assert got[1:] == expected[1:] and torch.equal(got[0], expected[0])
        assert dynamo.counters()["graphs"] >= 1


# ----- ordering comparisons ----------------------------------------------------------------------


@functools.total_ordering
class Rank:
    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        return isinstance(other, Rank) and self.n == other.n

    def __lt__(self, other):
        if not isinstance(other, Rank):
            return NotImplemented
        return self.n < other.n


class OnlyGreater:
    def __init__(self, n):
        self.n = n

    def __gt__(self, other):
        return ("gt", self.n, other)


@dataclasses.dataclass(order=True)
class Version:
    major: int
    minor: int = 0


@dataclasses.dataclass(order=True)
class SubVersion(Version):
    pass


@pytest.mark.parametrize("backend", BACKENDS)
def test_ordering_of_user_objects_follows_do_richcompare(backend):
    """Note: dataclass `order=True` and `functools.total_ordering` methods are inlined; the
    reflected method answers when the left one is missing, first when the right operand's class
    is a subclass; TypeError with CPython's message when neither side answers (all were breaks)."""

    def fn(x, given):
        out = [Version(1) < Version(2), Version(2, 1) <= Version(2, 0), Version(3) > Version(1), Version(1) >= Version(1)]
        out += [Rank(1) < Rank(2), Rank(1) <= Rank(1), Rank(3) > Rank(2), Rank(2) >= Rank(3)]
        out += [3 < OnlyGreater(1), OnlyGreater(1) > 2, Version(1) < given, given > Version(5)]
        for a, b in ((Version(1), 5), (2.5, Rank(1)), (Version(1), SubVersion(2)), (Rank(1), Version(1))):
            try:
                out.append(a < b)
            except TypeError as e:
                out.append(str(e))
        return x + 1, out

    check(fn, torch.ones(2), Version(3), graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_ordering_of_lists_and_tuples_is_lexicographic(backend):
    point = collections.namedtuple("point", "a b")

    def fn(x, t):
        n = x.shape[0]
        return (x + 1, (n, 2) < (n, 3), [n, 1] >= [n], (1, 2) <= (1, 2), x.shape > (1,), x.shape < torch.Size([n, 1]),
                point(1, n) < point(1, n + 1), (n,) < (n, 1), t < (5, 5), [1, 2] < [1, 2, 0], (x, 1) < (x, 2))

    check(fn, torch.ones(3, 2), (4, 9), graphs=1, breaks=0, backend=backend)
    no_fallback()


# ----- Python types as dtypes -------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_types_as_dtypes_compile(backend):
    """Note [Python types as dtypes] (src/symbolic/output_graph.rs): `dtype=int` and friends
    made the exported graph invalid Python (`<class 'int'>`), so the whole frame ran eagerly."""

    def fn(x):
        a = (x * 2).to(int)
        b = torch.zeros(2, dtype=float) + x.to(dtype=float)
        c = torch.ones(2, dtype=bool) & (x > 0)
        d = torch.tensor(0, dtype=int) + torch.arange(2, dtype=int)
        e = x.to(complex) * 2
        return a, b, c, d, e

    check(fn, torch.tensor([1.5, -2.0]), graphs=1, breaks=0, backend=backend)
    no_fallback()
