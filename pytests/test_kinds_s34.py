"""Python kinds the trace left to graph breaks or modelled almost right, round s34: each program
runs eagerly and compiled on copies of the same inputs and is compared exactly (values and their
types, mutated arguments, printed text, exceptions), with a graph count showing it was captured."""

import enum

import pytest
import torch

import dynamo

from test_python_kinds import check, no_fallback

BACKENDS = ["eager", "inductor"]


# ----- list slice assignment and container errors ---------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_slice_assignment(backend):
    """`l[a:b] = v` and `l[a:b:c] = v` on a list (Note [list slice assignment]): a plain slice
    replaces any number of items, an extended one exactly as many as it selects, else eager's
    ValueError raised in the trace. Each was a python_error break."""

    def fn(x, given):
        a = [1, 2, 3, 4, 5]
        a[::2] = [10, 30, 50]
        b = [1, 2, 3, 4]
        try:
            b[::2] = [1]
        except ValueError as e:
            err = str(e)
        c = [1, 2, 3]
        c[1:2] = (7, 8, 9)
        c[5:1] = [0]  # an empty slice at 5 (clamped to the end): an insert
        d = [1, 2, 3, 4]
        d[::-2] = "xy"
        d[:] = d + [x]
        given[1::2] = [given[0]] * len(given[1::2])
        e = [1, 2, 3]
        e[10:20:3] = []
        return x + 1, a, err, b, c, d, e

    check(fn, torch.ones(2), [1, 2, 3, 4, 5], graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_container_errors_raised_in_the_trace(backend):
    """The errors of list and dict methods are eager's, raised in the trace so the `except`
    clause runs there: list.remove (modelled now, a break before), list.index, list.pop,
    item assignment and `del` out of range, dict.pop of a missing key, popitem of an empty dict.
    Each was a graph break."""

    def fn(x):
        out = []
        l = [3, 1, 4, 1, 5]
        l.remove(1)
        out.append(list(l))
        for op in range(7):
            try:
                if op == 0:
                    l.remove(42)
                elif op == 1:
                    l.index(42)
                elif op == 2:
                    [].pop()
                elif op == 3:
                    l.pop(10)
                elif op == 4:
                    l[10] = 1
                elif op == 5:
                    del l[-10]
                else:
                    {}.popitem()
            except (ValueError, IndexError, KeyError) as e:
                out.append((type(e).__name__, str(e)))
        d = {"a": 1, 2: "b"}
        try:
            d.pop("zz")
        except KeyError as e:
            out.append(repr(e))
        try:
            del d[(1, 2)]
        except KeyError as e:
            out.append(e.args)
        return x + 1, out, l, d

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


def test_list_remove_of_a_list_passed_in_and_objects():
    class Eq:
        def __init__(self, v):
            self.v = v

        def __eq__(self, other):
            return isinstance(other, Eq) and other.v == self.v

    def fn(x, l):
        a = Eq(1)
        objs = [Eq(0), a, Eq(1)]
        objs.remove(Eq(1))  # equal to `a` by its __eq__
        l.remove(2)
        return x * len(objs), objs[0].v, objs[1] is a, l

    check(fn, torch.ones(2), [1, 2, 3, 2], graphs=1, breaks=0)
    no_fallback()


# ----- with blocks whose body raises ----------------------------------------------------------


class Quiet:
    """A manager that records what its `__exit__` saw and suppresses KeyErrors."""

    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, ty, value, tb):
        self.log.append((ty.__name__ if ty else None, str(value) if value else None))
        return ty is not None and issubclass(ty, KeyError)


class ReadsTraceback:
    def __enter__(self):
        return self

    def __exit__(self, ty, value, tb):
        return tb is not None


@pytest.mark.parametrize("backend", BACKENDS)
def test_with_blocks_whose_body_raises(backend):
    """An exception raised in the trace inside a `with` block calls the manager's `__exit__`
    (WITH_EXCEPT_START, Note [with blocks that raise]) in the trace: `contextlib.suppress` and a
    user manager returning true swallow it, `nullcontext` and a false result let it on to an
    enclosing `except`, and grad mode is restored on the way out. Each was a graph break
    (unsupported opcode WITH_EXCEPT_START)."""
    import contextlib

    def fn(x):
        log = []
        with contextlib.suppress(KeyError, IndexError):
            [].pop()
            log.append("not reached")
        with contextlib.suppress(ValueError):
            x = x + 1
        with Quiet(log) as q:
            {}["k"]
        q.log.append("after")
        try:
            with Quiet(log):
                int("z")
        except ValueError as e:
            log.append(str(e))
        try:
            with contextlib.nullcontext(5) as five:
                log.append(five)
                (1, 2).index(3)
        except ValueError as e:
            log.append(str(e))
        try:
            with torch.no_grad():
                y = x * 2
                {}[0]
        except KeyError as e:
            log.append((repr(e), torch.is_grad_enabled()))
        return x, y, log, torch.is_grad_enabled()

    check(fn, torch.ones(2, requires_grad=True), graphs=1, breaks=0, backend=backend)
    no_fallback()


def test_with_block_exit_that_reads_the_traceback_breaks():
    """The trace has no traceback to hand an `__exit__` that reads it: a break, whose
    instruction runs for real (Note [handlers in the converted frame])."""

    def fn(x):
        y = x + 1
        with ReadsTraceback():
            {}["a"]
        return y

    check(fn, torch.ones(2), graphs=1, breaks=1)


def test_with_block_exception_unhandled_leaves_the_frame():
    import contextlib

    def fn(x):
        y = x + 1
        with contextlib.suppress(KeyError):
            int("z")
        return y

    check(fn, torch.ones(2), graphs=1, breaks=1)


# ----- enum.Flag combinations ---------------------------------------------------------------


class Perm(enum.Flag):
    R = enum.auto()
    W = enum.auto()
    X = enum.auto()


class Mode(enum.IntFlag):
    READ = 4
    WRITE = 2
    EXEC = 1


class Shade(enum.Enum):
    DARK = 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_flag_combinations(backend):
    """`|`, `&`, `^`, `~` of `Flag` / `IntFlag` members run the enum module's own methods on the
    real members (Note [enum operators]); a combination is the pseudo-member the class keeps
    under its value (Note [flag pseudo-members]), used by its real object: `in`, truth, `.value`,
    `.name`, `repr`, dict keys. Plain Enum members refuse `|` with eager's TypeError. Each
    operator was a graph break."""

    def fn(x, p):
        rw = Perm.R | Perm.W
        none = Perm.R & Perm.X
        table = {rw: 1, Perm.X: 2}
        try:
            Shade.DARK | Shade.DARK
        except TypeError as e:
            err = str(e)
        return (
            x * rw.value,
            rw, Perm.R in rw, Perm.X in rw, p in rw, bool(none), rw is (Perm.W | Perm.R),
            ~Perm.R, rw ^ p, table[Perm.W | Perm.R], table.get(p | Perm.X),
            (Mode.READ | Mode.WRITE) & 2, int(Mode.READ | Mode.EXEC), Mode.READ | 8,
            repr(rw), str(~Perm.X), rw.name, err,
        )

    for p in (Perm.R, Perm.X):
        check(fn, torch.ones(2), p, graphs=1, breaks=0, backend=backend)
        no_fallback()


def test_flag_member_passed_in_combined():
    def fn(x, p):
        return x + 1, p | Perm.X, (p | Perm.X).value

    check(fn, torch.ones(2), Perm.R | Perm.W, graphs=1, breaks=0)
    check(fn, torch.ones(2), Perm.W, graphs=1, breaks=0)
    no_fallback()


# ----- object() sentinels ----------------------------------------------------------------------

_MISSING = object()


@pytest.mark.parametrize("backend", BACKENDS)
def test_object_sentinels(backend):
    """`object()` made in the frame is a tracked object without attributes (Note [object
    sentinels]): compared by identity, a `dict.get` / `getattr` default, its type `object`. It
    was a graph break; a module-level sentinel was already identity-guarded."""

    def fn(x, d, v=_MISSING):
        missing = object()
        other = object()
        got = d.get("k", missing)
        out = x * 2 if got is missing else x + got
        return (
            out, got is missing, missing is other, missing == missing, missing != other,
            type(missing) is object, isinstance(missing, object), v is _MISSING,
            getattr(d, "nope", missing) is missing, [missing, 1].index(1),
        )

    check(fn, torch.ones(2), {"j": 1}, graphs=1, breaks=0, backend=backend)
    check(fn, torch.ones(2), {"k": 3}, graphs=1, breaks=0, backend=backend)
    no_fallback()


def test_object_sentinel_that_outlives_the_graph_is_a_fresh_object():
    def fn(x, keep):
        s = object()
        keep.append(s)
        return x + 1, s is keep[0]

    keep = []
    dynamo.reset()
    f = dynamo.optimize("eager")(fn)
    f(torch.ones(2), keep)
    f(torch.ones(2), keep)
    assert len(keep) == 2 and keep[0] is not keep[1] and type(keep[0]) is object
    assert dynamo.counters()["graphs"] >= 1
    no_fallback()


def test_attribute_write_to_an_object_sentinel_is_eagers_error():
    def fn(x):
        s = object()
        y = x + 1
        s.attr = 1
        return y

    check(fn, torch.ones(2), graphs=1, breaks=1)


def test_list_index_and_count_over_objects():
    """`list.index` / `list.count` over items that are not constants compare by identity,
    then equality (a break before)."""

    def fn(x, items):
        s = object()
        local = [1.5, s, 3, s]
        try:
            local.index(7)
        except ValueError as e:
            err = str(e)
        return x + 1, local.index(s), local.index(3, 1, 3), local.count(s), items.index(Perm.W), items.count(Perm.R), err

    check(fn, torch.ones(2), [Perm.R, Perm.W, Perm.R], graphs=1, breaks=0)
    no_fallback()


# ----- class namespaces (mappingproxy) --------------------------------------------------------


class Base:
    kind = "base"

    def forward(self, x):
        return x + 1


class Child(Base):
    scale = 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_dict_lookups(backend):
    """`cls.__dict__` is a mappingproxy: `.get`, `in` and `[]` with a string key read the class's
    own namespace (Note [class dict proxies]), guarded on the key's presence; a missing key is
    eager's KeyError. Each was a graph break."""

    def fn(x, o):
        d = type(o).__dict__
        try:
            Base.__dict__["scale"]
        except KeyError as e:
            err = repr(e)
        return (
            x * d.get("scale", 1), d.get("kind"), "forward" in d, "scale" in Base.__dict__,
            Base.__dict__["kind"], Base.__dict__.get("forward") is Base.forward, err,
        )

    check(fn, torch.ones(2), Child(), graphs=1, breaks=0, backend=backend)
    check(fn, torch.ones(2), Base(), graphs=1, breaks=0, backend=backend)
    no_fallback()


def test_class_dict_lookup_guard_sees_a_new_class_attribute():
    class C:
        pass

    def fn(x, o):
        return x + (1 if "flag" in type(o).__dict__ else 2)

    dynamo.reset()
    f = dynamo.optimize("eager")(fn)
    o = C()
    assert torch.equal(f(torch.ones(2), o), torch.full((2,), 3.0))
    C.flag = True
    assert torch.equal(f(torch.ones(2), o), torch.full((2,), 2.0))
    del C.flag
    assert torch.equal(f(torch.ones(2), o), torch.full((2,), 3.0))


# ----- complex numbers and bytes ------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_and_bytes_constructors(backend):
    """`complex(...)`, `bytes(...)`, `bin`/`oct`/`hex`/`ascii` of literals are folded like the
    other pure builtins (they were graph breaks); their values' arithmetic and methods were
    already constants."""

    def fn(x):
        c = complex(1, 2)
        d = complex("3+4j")
        b = bytes([104, 105])
        try:
            complex("nope")
        except ValueError as e:
            err = str(e)
        return (
            x * abs(d), c * d, (c + d).real, d.imag, c.conjugate(), -c, c / d, c == d,
            b, b.upper(), b.decode(), b[1], b[0:1], bytes(3), bytes("é", "utf-8"), bin(5), oct(8), hex(255), ascii("é"), err,
        )

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


# ----- string formatting over containers -----------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_string_methods_over_lazy_iterables_and_dicts(backend):
    """`sep.join(map(str, xs))` / `sep.join(generator)` take the iterable to its end first (as
    the method's `PySequence_Fast` does), and `"%(a)s" % d`, `"%s" % [..]`, `s.format_map(d)`
    read fresh copies of literal containers, as do other literals' methods
    (`frozenset.union([..])`). Each was a graph break."""

    def fn(x):
        xs = [1, 2, 3]
        d = {"a": 1, "b": "two"}
        return (
            x + 1, "x".join(map(str, xs)), ",".join(str(v * 2) for v in xs), "-".join(reversed(["a", "b"])),
            "%(a)s/%(b)s" % d, "%s" % [1, 2], "{a}+{b}".format_map(d), "ab".translate({97: "z"}),
            frozenset({1, 2}).union([3], (4,)), frozenset([1]).issubset([1, 2]), (1, 2).count(2),
        )

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


# ----- class statements, generator throw, @contextmanager blocks that raise -------------------


def test_class_statement_in_the_frame_is_a_graph_break():
    """A `class` statement runs in Python at a graph break (Note [class statements]); the code
    around it stays in graphs. Before, the whole frame ran eagerly (unsupported opcode)."""

    def fn(x):
        y = x * 2

        class Local:
            k = 3

            def f(self, v):
                return v * self.k

        return Local().f(y) + 1, Local.__name__, Local.k

    check(fn, torch.ones(2), graphs=1, breaks=1)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_generator_throw(backend):
    """`gen.throw(e)` raises `e` at the suspended `yield` inside the generator's own `try`, in the
    trace, and gives the next yielded value (Note [generator throw]); throwing into a finished
    generator raises `e` back. The generator was live across a break, so the frame ran eagerly."""

    def fn(x):
        log = []

        def g():
            for i in range(3):
                try:
                    yield i
                except ValueError as e:
                    log.append(str(e))
                    yield -1

        it = g()
        a = next(it)
        b = it.throw(ValueError("bad"))
        c = next(it)
        d = it.throw(ValueError)
        rest = list(it)
        try:
            it.throw(KeyError("k"))
        except KeyError as e:
            log.append(repr(e))
        return x + a + b + c + d, rest, log

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_contextmanager_block_that_raises(backend):
    """An exception in the block of a @contextmanager manager is thrown into its generator
    (Note [generator context managers that raise]): caught there, it is suppressed; let through
    a `finally`, the cleanup runs in the trace and the exception reaches the enclosing
    `except`. Each was a graph break."""
    import contextlib

    log = []

    @contextlib.contextmanager
    def swallow():
        try:
            yield "s"
        except KeyError as e:
            log.append(("swallowed", repr(e)))

    @contextlib.contextmanager
    def cleanup(tag):
        log.append(("open", tag))
        try:
            yield tag
        finally:
            log.append(("close", tag))

    def fn(x):
        del log[:]
        with swallow() as s:
            y = x + 1
            {}[s]
        try:
            with cleanup("a"):
                y = y * 2
                [].pop()
        except IndexError as e:
            log.append(str(e))
        return y, list(log)

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


def test_generator_throw_into_a_yield_from_reaches_the_inner_generator():
    """A generator suspended in `yield from` hands a throw to the generator it delegates to
    (`_PyGen_yf`): not modelled, so a break, never the outer generator's handler."""

    def fn(x):
        log = []

        def inner():
            try:
                yield 1
            except ValueError:
                log.append("inner")
                yield 2

        def outer():
            try:
                yield from inner()
            except ValueError:
                log.append("outer")
                yield 3

        it = outer()
        a = next(it)
        b = it.throw(ValueError("v"))
        rest = list(it)
        return x + a + b, log, rest

    check(fn, torch.ones(2), graphs=0)


def test_closing_a_generator_in_a_yield_from_closes_the_inner_one():
    """close() (and dropping) of a generator suspended in `yield from` closes the generator it
    delegates to first, whose `finally` runs: left to Python, never skipped."""

    def fn(x):
        log = []

        def inner():
            try:
                yield 1
            finally:
                log.append("inner closed")

        def outer():
            yield from inner()

        it = outer()
        a = next(it)
        it.close()
        dropped = outer()
        next(dropped)
        del dropped
        return x + a, log

    check(fn, torch.ones(2), graphs=0)


# ----- names of functions made in the frame, enum equality -----------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_names_of_functions_made_in_the_frame(backend):
    """`__name__`, `__qualname__`, `__doc__`, `__module__`, `__defaults__`, `__code__` of a function
    made in the frame (Note [names of functions made in the frame]); each was a graph break."""

    def fn(x):
        def helper(v, scale=2, *, shift=0):
            "Doubles."
            return v * scale + shift

        def bare(v):
            return v

        k = 3
        lam = lambda v: v + k  # noqa: E731
        return (
            helper(x), helper.__name__, helper.__qualname__, helper.__doc__, helper.__module__,
            helper.__defaults__, bare.__defaults__, bare.__doc__, lam.__name__, lam.__doc__,
            lam.__code__.co_argcount, lam(x),
        )

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


class Act(enum.Enum):
    RELU = "relu"
    GELU = "gelu"


@pytest.mark.parametrize("backend", BACKENDS)
def test_enum_member_equality_with_values(backend):
    """`member == literal` folds the enum module's (or mixin's) `__eq__` on the real values: a
    plain Enum member is never equal to its value, a str/int mixin member is. Was a graph break."""

    class Color(str, enum.Enum):
        RED = "red"

    def fn(x, a):
        return x + 1, a == "relu", a != "gelu", Act.GELU == "gelu", Color.RED == "red", Level.HIGH == 2, a == Act.RELU

    check(fn, torch.ones(2), Act.RELU, graphs=1, breaks=0, backend=backend)
    no_fallback()


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2



@pytest.mark.parametrize("backend", BACKENDS)
def test_methods_of_literal_types_through_the_type(backend):
    """`int.from_bytes`, `float.fromhex`, `bytes.fromhex`, `int.__add__`, `str.join` called
    through the type with literal arguments fold like the pure builtins; each was a graph
    break (call to int.from_bytes)."""

    def fn(x):
        try:
            float.fromhex("zz")
        except ValueError as e:
            err = str(e)
        return (
            x + int.from_bytes(b"\\x01\\x00", "little"), float.fromhex("0x1p-1"), int.__add__(1, 2),
            str.join(",", ["a", "b"]), float.is_integer(2.0), bytes.fromhex("ff00"),
            str.upper("a"), err,
        )

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


def test_class_dict_lookup_after_a_class_write_in_the_trace():
    """A class attribute the trace wrote is pending until the graph has run: a lookup of that
    name in the class's `__dict__` is left to Python (it read the old namespace: None, False)."""

    def make():
        class C:
            pass

        return C

    for variant in range(3):
        C = make()

        def fn(x, c):
            if variant == 0:
                C.flag = 1
                d = C.__dict__
            elif variant == 1:
                C.flag = 1
                d = type(c).__dict__
            else:
                d = type(c).__dict__
                C.flag = 1
            return x + 1, d.get("flag"), "flag" in d

        dynamo.reset()
        out = dynamo.optimize("eager")(fn)(torch.ones(2), C())
        assert out[1:] == (1, True), (variant, out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_typing_constructs_subscripted_by_classes(backend):
    """`typing.Optional[int]`, `Dict[str, torch.Tensor]`, `Union[int, None]` made in the frame are
    type expressions, constants; subscripting by a class was a graph break."""
    import typing

    def fn(x, v):
        opt = typing.Optional[int]
        table = typing.Dict[str, torch.Tensor]
        return x + 1, opt, table, typing.Union[int, None] == opt, isinstance(v, typing.get_args(opt)), typing.get_origin(table)

    check(fn, torch.ones(2), 3, graphs=1, breaks=0, backend=backend)
    no_fallback()
