"""Python kinds the trace left to graph breaks or modelled almost right (issue 7), round s33: each
program runs eagerly and compiled on copies of the same inputs and is compared exactly (values and
their types, mutated arguments, printed text, exceptions), with a graph count showing it was
captured."""

import collections
import enum
import functools

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


# ----- number and truth protocols of user objects ---------------------------------------------


class Vec:
    def __init__(self, a):
        self.a = a

    def __neg__(self):
        return Vec(-self.a)

    def __pos__(self):
        return Vec(self.a + 100)

    def __invert__(self):
        return Vec(~self.a)

    def __abs__(self):
        return Vec(abs(self.a))


class NoUnary:
    pass


@pytest.mark.parametrize("backend", BACKENDS)
def test_unary_operators_of_user_objects(backend):
    """`-o`, `+o`, `~o`, `abs(o)` call the class's `__neg__`, `__pos__`, `__invert__`,
    `__abs__` (`slot_nb_negative` and siblings), inlined; a class without one is eager's
    TypeError, raised in the trace. Each was a graph break (`Counter`'s `+c`/`-c` too)."""
    import collections

    def fn(x, v):
        w = Vec(3)
        try:
            -NoUnary()
        except TypeError as e:
            neg_error = str(e)
        try:
            abs(NoUnary())
        except TypeError as e:
            abs_error = str(e)
        c = collections.Counter(a=2, b=-1)
        return (-Vec(x)).a, (+w).a, (~w).a, abs(Vec(-2)).a, (-v).a * x, neg_error, abs_error, +c, -c

    check(fn, torch.ones(2), Vec(-3), graphs=1, breaks=0, backend=backend)
    no_fallback()


class Box:
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def __getitem__(self, i):
        return self.items[i]


class Flagged:
    def __init__(self, on):
        self.on = on

    def __bool__(self):
        return self.on


class BadBool:
    def __bool__(self):
        return 1


class NegativeLen:
    def __len__(self):
        return -1


@pytest.mark.parametrize("backend", BACKENDS)
def test_truth_and_iteration_of_user_containers(backend):
    """`if o:` calls a Python `__bool__`, else `__len__` (`slot_nb_bool`, `slot_sq_length`), and
    `for t in o` a plain `__iter__` (`return iter(self.items)`), inlined for objects built in
    the frame and passed in alike; eager's TypeError / ValueError for a bad result. Each was a
    graph break."""

    def fn(x, box):
        made = Box([x, x + 1])
        out = x * 0
        if made and Flagged(True) and not Flagged(False) and not Box([]):
            for t in made:
                out = out + t
        try:
            bool(BadBool())
        except TypeError as e:
            bool_error = str(e)
        try:
            if NegativeLen():
                pass
        except ValueError as e:
            len_error = str(e)
        it = iter(made)
        made.items.append(x * 5)  # the iterator reads the list live
        return out, [t * 2 for t in it], sum(box) * x, bool(box), len(box), bool_error, len_error

    check(fn, torch.ones(2), Box([1, 2, 3]), graphs=1, breaks=0, backend=backend)
    no_fallback()


# ----- errors of operations folded on constants ------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_errors_of_folded_operations_take_their_handler_in_the_trace(backend):
    """An operation on constants runs for real at trace time; the builtin exception it raises is
    eager's, so a `try` around it takes its `except` clause in the trace (Note [errors of folded
    operations]) where each was a `python_error` graph break."""

    def fn(x):
        out = []
        for a, b in [(1, 0), (1.0, 0), (7, 2)]:
            try:
                out.append(a // b)
            except ZeroDivisionError as e:
                out.append(str(e))
        try:
            out.append(int("abc"))
        except ValueError as e:
            out.append(str(e))
        try:
            "abc".index("z")
        except ValueError as e:
            out.append(repr(e))
        s = {1, 2}
        try:
            s.remove(5)
        except KeyError as e:
            out.append(repr(e))
        try:
            (1, 2) < (1, "a")
        except TypeError as e:
            out.append(str(e))
        try:
            sorted([1, "a"])
        except TypeError as e:
            out.append(str(e))
        try:
            divmod(1, 0)
        except ArithmeticError as e:
            out.append((type(e).__name__, e.args))
        return x + 1, out

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_error_of_a_folded_operation_without_a_handler_raises_eagers_error(backend):
    def fn(x):
        y = x * 2
        return y, 1 // 0

    check(fn, torch.ones(2), graphs=1, breaks=1, backend=backend)


# ----- enum members -----------------------------------------------------------------------------


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Act(torch.nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.scale = {Color.RED: 2.0, Color.GREEN: 3.0}
        self.mode = mode

    def forward(self, x):
        return x * self.scale[self.mode]


@pytest.mark.parametrize("backend", BACKENDS)
def test_enum_members_as_keys_members_and_values(backend):
    """Members of a plain enum class are identity-guarded and used by their real objects (Note
    [enum members]): dict keys and set members, `str`/`repr`/`hash`/f-strings folded, the class
    called with a value or indexed by name, iterated, `len` and `in`. Each was a graph break."""

    def fn(x, c):
        d = {Color.RED: x + 1, Color.GREEN: x - 1}
        s = {Color.GREEN, c}
        try:
            Color(7)
        except ValueError as e:
            bad_value = str(e)
        try:
            Color["BLUE"]
        except KeyError as e:
            bad_name = repr(e)
        return (
            d[c], d, c in s, s, len(s),
            Color(1), Color["GREEN"], [m for m in Color], len(Level), Color.RED in Color,
            f"{c.name}:{Level.HIGH}", str(Level.LOW), repr(c), hash(c) == hash(Color.RED),
            {Level.LOW: "a"}[1], bad_value, bad_name,
        )

    for member in (Color.RED, Color.GREEN):
        check(fn, torch.ones(2), member, graphs=1, breaks=0, backend=backend)
        no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_dict_keyed_by_enum_members(backend):
    """A module attribute dict keyed by members is wrapped item by item; the member it is indexed
    by is guarded by identity, so another member recompiles."""
    model = Act(Color.GREEN)

    def fn(x):
        return model(x)

    dynamo.reset()
    compiled = dynamo.optimize(backend)(fn)
    x = torch.ones(2)
    assert torch.equal(compiled(x), x * 3.0)
    model.mode = Color.RED
    assert torch.equal(compiled(x), x * 2.0)
    c = dynamo.counters()
    assert c["graphs"] == 2 and c["graph_breaks"] == 0, c


# ----- non-data descriptors ---------------------------------------------------------------------


class Lazy:
    def __init__(self, v):
        self.v = v
        self.calls = 0

    @functools.cached_property
    def doubled(self):
        self.calls += 1
        return self.v * 2


class Tagged:
    """A non-data descriptor whose Python `__get__` reads the instance."""

    def __get__(self, obj, owner=None):
        if obj is None:
            return "on the class"
        return obj.base + 1


class HasTag:
    tag = Tagged()

    def __init__(self, base):
        self.base = base


@pytest.mark.parametrize("backend", BACKENDS)
def test_cached_property_and_python_get_descriptors(backend):
    """`functools.cached_property` computes once and stores the value in the instance's
    `__dict__`; a non-data descriptor's Python `__get__` is inlined (Note [non-data
    descriptors]). Both were graph breaks, for objects built in the frame and passed in."""

    def fn(x, lazy):
        made = Lazy(x)
        first = made.doubled
        again = made.doubled
        return (
            first + again, made.calls, "doubled" in made.__dict__, first is again,
            lazy.doubled * x, lazy.doubled * x, lazy.calls,
            HasTag(x).tag, HasTag.tag,
        )

    check(fn, torch.ones(2), Lazy(3), graphs=1, breaks=0, backend=backend)
    no_fallback()


# ----- calls of user objects ----------------------------------------------------------------------


class Scaler:
    def __init__(self, k):
        self.k = k
        self.calls = 0

    def __call__(self, y, z=1):
        self.calls += 1
        return y * self.k + z

    def __eq__(self, other):  # compared by state after the run (a callable is otherwise by identity)
        return type(other) is Scaler and (other.k, other.calls) == (self.k, self.calls)


@pytest.mark.parametrize("backend", BACKENDS)
def test_calls_of_objects_with_a_python_call(backend):
    """`o(...)` inlines the class's Python `__call__` (`slot_tp_call`), for an object built in the
    frame (a graph break before) and one passed in, whose writes are replayed."""

    def fn(x, passed):
        made = Scaler(2)
        return made(x), made.calls, passed(x, z=3), passed.calls

    check(fn, torch.ones(2), Scaler(5), graphs=1, breaks=0, backend=backend)
    no_fallback()


# ----- methods and properties of namedtuple subclasses -----------------------------------------


class Pair(collections.namedtuple("Pair", "a b")):
    __slots__ = ()

    @property
    def total(self):
        return self.a + self.b

    def scaled(self, k):
        return Pair(self.a * k, self.b)

    @classmethod
    def of(cls, v):
        return cls(v, v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_namedtuple_subclass_methods_and_properties(backend):
    """A subclass of a namedtuple class without instance attributes is a namedtuple tracker; the
    methods, properties and classmethods it defines are read from the class (through its source,
    `source.__class__` for one passed in) and inlined. Each was a graph break."""

    def fn(x, passed):
        p = Pair(x, 1)
        return p.total, p.scaled(2), p.scaled(3).total, Pair.of(x).total, passed.total * x, passed.scaled(4)

    check(fn, torch.ones(2), Pair(torch.ones(2), 2), graphs=1, breaks=0, backend=backend)
    no_fallback()


# ----- text of user objects ---------------------------------------------------------------------


class Shown:
    def __init__(self, v):
        self.v = v

    def __repr__(self):
        return f"Shown({self.v!r})"

    def __str__(self):
        return "shown " + str(self.v)

    def __format__(self, spec):
        return "fmt" + spec


class ReprOnly:
    def __repr__(self):
        return "ReprOnly()"


class BadStr:
    def __str__(self):
        return 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_repr_str_and_format_of_user_objects(backend):
    """`repr`, `str`, `format` and f-strings of an object whose class defines `__repr__`,
    `__str__` or `__format__` in Python inline them (Note [text of user objects]); `object`'s
    `__str__` falls back to `__repr__` and `object.__format__` to `str` (eager's TypeError for a
    spec); a non-str result is eager's TypeError. Each was a graph break."""

    def fn(x, passed):
        s, r = Shown(3), ReprOnly()
        try:
            str(BadStr())
        except TypeError as e:
            bad_str = str(e)
        try:
            f"{r:>5}"
        except TypeError as e:
            bad_spec = str(e)
        return (
            x + 1, repr(s), str(s), f"{s}", f"{s:>3}", format(s, "q"), f"{s!r}", f"{s!s:>12}|",
            str(r), f"{r}", f"{r!r:^12}", format(r), repr(passed), f"{passed}", bad_str, bad_spec,
        )

    check(fn, torch.ones(2), Shown("in"), graphs=1, breaks=0, backend=backend)
    no_fallback()


# ----- generator send and close ---------------------------------------------------------------


def _running_total():
    total = 0
    while True:
        v = yield total
        total = total + v


@pytest.mark.parametrize("backend", BACKENDS)
def test_generator_send_and_close(backend):
    """`gen.send(v)` resumes the traced generator with `v` as the value of its `yield`, and
    `gen.close()` of one suspended outside any handler finishes it (Note [generator send and
    close]); a non-None send to a just-started generator is eager's TypeError. Each made the
    whole frame run eagerly (the generator was live at the break)."""

    def fn(x):
        g = _running_total()
        try:
            g.send(1)
        except TypeError as e:
            early = str(e)
        next(g)
        a = g.send(x)
        b = g.send(x * 2)
        g.close()
        h = (x * i for i in range(3))
        first = next(h)
        h.close()
        return a, b, next(g, "closed"), first, list(h), early

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_generator_sending_to_itself_is_eagers_error(backend):
    """A generator body calling its own `send` raises eager's `ValueError: generator already
    executing`; the trace leaves it to Python (it panicked on the borrowed generator state)."""

    def fn(x):
        def gen():
            yield 1
            yield g.send(2)

        g = gen()
        next(g)
        try:
            g.send(5)
        except ValueError as e:
            return str(e), x

    check(fn, torch.ones(2), graphs=0, backend=backend)
    assert dynamo.counters()["compile_errors"] == 0
