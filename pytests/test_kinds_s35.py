"""Python kinds the trace left to graph breaks, round s35: each program runs eagerly and
compiled on copies of the same inputs and is compared exactly (values and their types, mutated
arguments, printed text, exceptions), with a graph count showing it was captured."""

import pytest
import torch

import dynamo

from test_python_kinds import check, no_fallback

BACKENDS = ["eager", "inductor"]


# ----- enum members of torch's own modules ----------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_enum_member_read_unguarded(backend):
    """`nn.utils.parametrizations.orthogonal` compares `self.orthogonal_map` with members of
    `_OrthMaps`, an Enum of a torch module read as an unguarded global (Note [enum members of
    trusted modules]). It was GB0020 untracked_type and the forward ran eagerly."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)
    torch.nn.utils.parametrizations.orthogonal(lin)

    def fn(x):
        return lin(x).sum(1)

    check(fn, torch.randn(2, 4), graphs=1, breaks=0, backend=backend)
    no_fallback()


# ----- with blocks over threading locks --------------------------------------------------------

import threading

LOCK = threading.Lock()
RLOCK = threading.RLock()


@pytest.mark.parametrize("backend", BACKENDS)
def test_lock_blocks_are_replayed(backend):
    """`with LOCK:` over a module-level Lock or RLock (transformers' hook installation lock):
    acquire and release are replayed after the graph (Note [lock blocks]), `__enter__` answers
    True, writes in the block land, and the locks are free afterwards. Each was GB0004 (C
    `__exit__`)."""
    state = {"n": 0}

    def fn(x):
        with LOCK as got:
            state["n"] += 1
            y = x + 1
        with RLOCK:
            with RLOCK:
                y = y * 2
        return y, got

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    assert not LOCK.locked()
    assert RLOCK.acquire(blocking=False)
    RLOCK.release()
    no_fallback()


def test_lock_block_exception_and_break_inside():
    """An exception leaving a lock block releases the lock (eager's `__exit__` returns None,
    so the exception goes on), and a break inside the block runs with the lock held: the
    replayed `acquire()` comes before the breaking instruction and the resume function leaves
    through the real `__exit__`."""

    def raises(x):
        try:
            with LOCK:
                x = x + 1
                raise ValueError("inside")
        except ValueError as e:
            return x, str(e), LOCK.locked()

    check(raises, torch.ones(2), graphs=1)
    assert not LOCK.locked()

    def breaks(x):
        with LOCK:
            y = x + 1
            held = LOCK.locked()  # a C method: a break, run with the lock held
            y = y * 2
        return y, held, LOCK.locked()

    check(breaks, torch.ones(2), graphs=2)
    assert not LOCK.locked()


# ----- forward hooks registered in the frame --------------------------------------------------


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.b(self.a(x).relu())


def hook_counts(m):
    return [(len(c._forward_hooks), len(c._forward_pre_hooks)) for c in (m, m.a, m.b)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_registered_and_removed_in_the_frame(backend):
    """`register_forward_hook` inside the compiled region (transformers' output capturing):
    the hook runs on the module calls traced after it and the registration and `remove()` are
    replayed after the graph (Note [hooks registered in the trace]). It broke three times
    (GB0007 RemovableHandle, GB0017)."""
    m = TwoLayers()

    def fn(x):
        captured = []
        h = m.a.register_forward_hook(lambda mod, i, o: captured.append(o * 2))
        p = m.b.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
        y = m(x)
        h.remove()
        p.remove()
        z = m(x)  # no hooks any more
        return y, z, captured

    check(fn, torch.randn(2, 4), graphs=1, breaks=0, backend=backend)
    assert hook_counts(m) == [(0, 0)] * 3
    no_fallback()


def test_hooks_kept_after_the_frame_and_their_order():
    """A hook left registered is there after the frame (the next call compiles again and finds
    it as a real hook); `prepend=True` and `with_kwargs=True` order and call it as `_call_impl`
    does; a handle used as a `with` block removes its hook at the end of the block."""

    def run(compiled):
        m = TwoLayers()
        log = []

        def fn(x):
            m.a.register_forward_hook(lambda mod, i, o: log.append("post1"))
            m.a.register_forward_hook(lambda mod, i, o: log.append("post0"), prepend=True)
            m.a.register_forward_pre_hook(lambda mod, a, k: log.append("pre_kw"), with_kwargs=True)
            with m.b.register_forward_hook(lambda mod, i, o: o + 100):
                y = m(x)
            return y + m(x)

        f = dynamo.optimize("eager")(fn) if compiled else fn
        dynamo.reset()
        x = torch.randn(2, 4)
        out = [f(x), f(x)]
        counts = hook_counts(m)
        return out, list(log), counts, dynamo.counters()["graph_breaks"]

    eager_out, eager_log, eager_counts, _ = run(False)
    out, log, counts, breaks = run(True)
    assert all(torch.equal(a, b) for a, b in zip(eager_out, out))
    assert log == eager_log and counts == eager_counts == [(0, 0), (4, 2), (0, 0)]
    assert breaks == 0


def _make_hook_factory():
    # A factory in other globals (as transformers' `install_output_capuring_hook`): the hook it
    # makes closes over the factory's cells and reads the factory module's globals.
    ns = {"SCALE": 3}
    exec(
        "def install(module, store):\n"
        "    def hook(mod, args, out):\n"
        "        store.append(out * SCALE)\n"
        "    module.register_forward_hook(hook)\n",
        ns,
    )
    return ns["install"]


INSTALL = _make_hook_factory()


def test_hook_made_by_another_module_outlives_the_frame():
    """The hook function is made by an inlined call into other globals and outlives the
    graph in the module's hook dict: it is made again by `types.FunctionType` over those
    globals (Note [globals of functions made in the trace]); it was GB0014 before."""

    def run(compiled):
        m = TwoLayers()
        store = []

        def fn(x):
            INSTALL(m.a, store)
            return m(x)

        f = dynamo.optimize("eager")(fn) if compiled else fn
        dynamo.reset()
        x = torch.randn(2, 4)
        y = f(x)
        m(x)  # the hook left registered runs eagerly too
        hook = next(iter(m.a._forward_hooks.values()))
        return y, store, hook.__qualname__, hook.__globals__["SCALE"], dynamo.counters()["graph_breaks"]

    e = run(False)
    c = run(True)
    assert torch.equal(e[0], c[0]) and len(e[1]) == len(c[1]) == 2
    assert all(torch.equal(a, b) for a, b in zip(e[1], c[1]))
    assert e[2:4] == c[2:4] == ("install.<locals>.hook", 3)
    assert c[4] == 0


def test_hook_handle_outliving_the_graph_is_a_break():
    """A handle returned from the frame is not rebuilt (the replay makes the only real one):
    the frame runs it as ordinary Python, with eager's result."""
    m = TwoLayers()

    def fn(x):
        h = m.a.register_forward_hook(lambda mod, i, o: o * 0)
        return m(x), h

    x = torch.randn(2, 4)
    dynamo.reset()
    y, h = dynamo.optimize("eager")(fn)(x)
    assert type(h).__name__ == "RemovableHandle" and hook_counts(m)[1] == (1, 0)
    h.remove()
    assert torch.equal(y, fn(x)[0])


# ----- modules built in forward ----------------------------------------------------------------

BUILT = []


class Act(torch.nn.Module):
    def __init__(self, scale=1.0, python_gelu=False):
        super().__init__()
        self.scale = scale
        self.fn = self._slow if python_gelu else torch.nn.functional.gelu

    def _slow(self, x):
        return x.relu() * 0.5

    def forward(self, x):
        return self.fn(x) * self.scale


class CountingAct(Act):
    def __init__(self):
        super().__init__(2.0)
        BUILT.append(self.scale)  # a write outside the object


class Pooler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.dense = torch.nn.Linear(8, 8)

    def forward(self, h):
        act = Act()  # built on every call, as transformers' ContextPooler does
        slow = Act(0.5, python_gelu=True)
        return act(self.dense(h[:, 0])) + slow(h[:, 1]), act.training, slow.scale


def test_module_built_in_forward():
    """A user module constructed inside forward (Note [modules built in the frame]): the object
    is private to the trace, `nn.Module.__init__` and attribute writes in `__init__` act on it
    for real, and calling it inlines its forward. It was GB0007 + GB0016 in `__init__`, then a
    recompile per call on the dead object's ID_MATCH."""
    m = Pooler()
    x = torch.randn(2, 3, 8)
    check(m, x, graphs=1, breaks=0)
    for backend in BACKENDS:
        dynamo.reset()
        f = dynamo.optimize(backend)(m)
        for _ in range(3):
            y = f(x)
        assert dynamo.counters()["recompiles"] == 0 and dynamo.counters()["graph_breaks"] == 0
        torch.testing.assert_close(y[0], m(x)[0])  # gelu's kernel: float rounding only
    no_fallback()


def test_module_built_in_forward_outliving_the_graph():
    """A module built in forward and returned is made again by `cls(*args, **kwargs)` when its
    arguments are literals and `__init__` wrote nothing outside it (that call's `__init__`
    frame is compiled on its own, as any frame the transformed code calls); one whose `__init__` wrote
    a global list is not rebuilt (the frame runs its construction in Python), so the write
    happens once, as in eager."""

    def fn(x):
        act = Act(3.0)
        return act(x), act

    dynamo.reset()
    y, act = dynamo.optimize("eager")(fn)(torch.ones(2))
    assert type(act) is Act and act.scale == 3.0 and act.fn is torch.nn.functional.gelu and act.training
    assert torch.equal(y, fn(torch.ones(2))[0])

    def counting(x):
        c = CountingAct()
        return c(x), c.scale

    BUILT.clear()
    check(counting, torch.ones(2), graphs=1, breaks=0)
    assert BUILT == [2.0, 2.0]  # once eagerly, once compiled

    def escaping(x):
        c = CountingAct()
        return c(x), c

    BUILT.clear()
    dynamo.reset()
    y, c = dynamo.optimize("eager")(escaping)(torch.ones(2))
    assert type(c) is CountingAct and BUILT == [2.0]


# ----- round() of symbolic floats --------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_round_of_a_float_argument_is_a_node(backend):
    """`round(v, n)` and `round(v)` of a float argument (or of a value computed from it) are
    `builtins.round` nodes run on the Python float (Note [rounding symbolic floats]): one
    compile for every value, results of eager's types. Each value compiled again before (a
    CONSTANT_MATCH on the float), until the cache limit."""

    def fn(x, v):
        return x * round(v, 3), round(v), round(v * 3, 1), round(-v, 2) + 1.0

    dynamo.reset()
    f = dynamo.optimize(backend)(fn)
    for i in range(10):
        v = 0.1 * i + 0.05
        got, want = f(torch.ones(3), v), fn(torch.ones(3), v)
        assert torch.equal(got[0], want[0])
        assert got[1:] == want[1:] and [type(a) for a in got[1:]] == [type(a) for a in want[1:]]
    c = dynamo.counters()
    assert c["compiles"] == 1 and c["graph_breaks"] == 0, c


def test_round_of_an_item_after_a_break():
    """A logging callback's `round(loss.item(), 5)`: the float reaches the resume function on
    its stack. That graph holds number arithmetic only (GB0024: static shapes), so after two
    conversions without a graph the resume function runs eagerly; compiles stop there instead
    of running to the cache limit."""
    seen = []

    def step(x):
        loss = (x * x).sum()
        seen.append(round(loss.item(), 5))
        return loss * 2

    dynamo.reset()
    f = dynamo.optimize("eager")(step)
    for i in range(12):
        x = torch.full((3,), 0.1 * i + 0.3)
        assert torch.equal(f(x), step(x))
    assert seen[0::2] == seen[1::2]
    c = dynamo.counters()
    assert c["compiles"] <= 4 and c["cache_limit_hits"] == 0, c


# ----- type(self).__dict__ of a module ---------------------------------------------------------


class WithClassDict(torch.nn.Module):
    SCALE = 3

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.l = torch.nn.Linear(2, 2)

    def forward(self, x):
        d = type(self).__dict__
        return self.l(x) * d["SCALE"], "forward" in d, d.get("missing", 7), "l" in d


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_dict_of_a_module(backend):
    """`type(self).__dict__` in a module's forward reads the class namespace through the
    module's source (Note [class dict proxies]); it was GB0020 untracked_type (mappingproxy,
    reached without a source). A class attribute set after compiling is seen."""
    m = WithClassDict()
    x = torch.randn(2, 2)
    check(lambda x: m(x), x, graphs=1, breaks=0, backend=backend)
    f = dynamo.optimize(backend)(m)
    WithClassDict.SCALE = 4
    try:
        assert torch.equal(f(x)[0], m(x)[0])
    finally:
        WithClassDict.SCALE = 3
    no_fallback()


# ----- attributes of functions made in the frame -----------------------------------------------

import functools


@pytest.mark.parametrize("backend", BACKENDS)
def test_functools_wraps_on_an_inner_function(backend):
    """`functools.wraps(f)(inner)` inside the frame: `update_wrapper` writes the names, the
    `__dict__` and `__wrapped__` of a function the trace made (Note [attributes of functions
    made in the frame]). It was GB0005 (attribute write of a function)."""

    def fn(x):
        def deco(f):
            @functools.wraps(f)
            def inner(*a):
                return f(*a) + 1

            return inner

        @deco
        def h(t):
            """Doubles."""
            return t * 2

        h.marker = "m"
        return h(x), h.__name__, h.__qualname__, h.__doc__, h.__wrapped__.__name__, h.__dict__["marker"], h.__annotations__

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


def test_wrapped_function_outliving_the_graph():
    """A function with attributes written in the trace that outlives the graph is made again
    and given them back; `__wrapped__` is the one rebuilt function returned beside it."""

    def fn(x):
        def f(t):
            return t - 1

        @functools.wraps(f)
        def g(t):
            return f(t) * 3

        g.tag = 5
        return x + 1, g, f

    dynamo.reset()
    y, g, f = dynamo.optimize("eager")(fn)(torch.ones(2))
    assert dynamo.counters()["graph_breaks"] == 0
    assert g.__name__ == "f" and g.__qualname__ == "test_wrapped_function_outliving_the_graph.<locals>.fn.<locals>.f"
    assert g.__wrapped__ is f and g.tag == 5 and g.__dict__ == {"__wrapped__": f, "tag": 5}
    assert torch.equal(g(torch.ones(2)), torch.zeros(2))


# ----- globals() ---------------------------------------------------------------------------------

COUNT = 0
REGISTRY = {"double": lambda t: t * 2}


@pytest.mark.parametrize("backend", BACKENDS)
def test_globals_reads_and_writes(backend):
    """`globals()[name]`, `.get(name)` and `globals()[name] = v` read and write the frame's
    global names as LOAD_GLOBAL/STORE_GLOBAL do (Note [globals() in a trace]); a write is seen
    by a later `COUNT` read and by `globals()` reads. It was GB0001 (builtin globals)."""

    def fn(x):
        g = globals()
        before = g["COUNT"]
        g["COUNT"] = 7
        f = globals().get("REGISTRY")["double"]
        return f(x) + COUNT, before, globals()["COUNT"], g.get("COUNT", 0)

    global COUNT
    COUNT = 0
    want = fn(torch.ones(2))
    COUNT = 0
    dynamo.reset()
    got = dynamo.optimize(backend)(fn)(torch.ones(2))
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:] == (0, 7, 7) and COUNT == 7
    COUNT = 0
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c
    no_fallback()


def test_globals_missing_name_and_escape():
    """A missing name raises eager's KeyError (a break, run by Python), `.get` of a missing
    name gives the default (a break: no guard keeps a name absent), and `globals()` returned
    from the frame is the module's namespace."""

    def missing(x):
        try:
            return globals()["NOT_THERE"]
        except KeyError as e:
            return x + 1, repr(e), globals().get("NOT_THERE", 5)

    check(missing, torch.ones(2), graphs=0)

    def escape(x):
        return x + 1, globals()

    dynamo.reset()
    y, g = dynamo.optimize("eager")(escape)(torch.ones(2))
    assert g is globals() and dynamo.counters()["graph_breaks"] == 0


# ----- dataclass repr ----------------------------------------------------------------------------

import dataclasses
import reprlib


@dataclasses.dataclass
class Point:
    a: int
    b: float = 1.5
    tag: str = "p"


class Box:
    def __init__(self, v):
        self.v = v

    @reprlib.recursive_repr()
    def __repr__(self):
        return f"Box({self.v!r})"


@pytest.mark.parametrize("backend", BACKENDS)
def test_dataclass_repr_in_the_frame(backend):
    """`repr()` / f-strings of a dataclass (and of a `reprlib.recursive_repr` method) built in
    the frame: the recursion-guard wrapper is answered by its user function while its set is
    empty (Note [recursive repr wrappers]). It was GB0007 on `_thread.get_ident`. An f-string
    of a list or tuple of literals built in the frame folds (it was GB0016)."""

    def fn(x):
        p = Point(1)
        q = Point(2, 2.5, "q")
        b = Box([1, 2])
        items = [1, "a", (2.5, None)]
        return x + p.a, repr(p), f"{q}", str(b), repr(Box(p)), f"{items} {tuple(items)!r}"

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


def test_recursive_repr_of_an_object_reaching_itself():
    """An object whose repr reaches itself: eager answers '...' for the inner reach; the trace
    recurses until its inlining limit and leaves the repr to Python, which agrees."""

    def fn(x):
        b = Box(None)
        b.v = [b]
        return x + 1, repr(b)

    check(fn, torch.ones(2), graphs=1)


# ----- namedtuple classes made in the frame ------------------------------------------------------

import collections


@pytest.mark.parametrize("backend", BACKENDS)
def test_namedtuple_class_made_in_the_frame(backend):
    """`collections.namedtuple(...)` inside the frame makes its class at trace time (Note
    [namedtuple classes made in the frame]): fields, `_replace`, `_asdict`, defaults and the
    class's `__module__` are eager's. It was GB0007 (`sys.intern` inside namedtuple)."""

    def fn(x):
        T = collections.namedtuple("T", "a b c", defaults=[3])
        t = T(x, 2)
        u = t._replace(b=5)
        return t.a * t.b + u.b * u.c, T.__name__, T.__module__, T._fields, u._asdict()["c"], len(u)

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


def test_namedtuple_instance_made_in_the_frame_outliving_the_graph():
    """An instance (or the class) returned is not rebuilt from the trace-time class: eager
    makes a new class per call, and so does the compiled frame (the break moves back to the
    `namedtuple` call, which runs in Python)."""

    def fn(x):
        T = collections.namedtuple("T", ["a", "b"])
        return T(x + 1, 2)

    dynamo.reset()
    f = dynamo.optimize("eager")(fn)
    r1, r2 = f(torch.ones(2)), f(torch.ones(2))
    e1, e2 = fn(torch.ones(2)), fn(torch.ones(2))
    assert type(r1) is not type(r2) and type(e1) is not type(e2)
    assert repr(r1) == repr(e1) and type(r1).__module__ == type(e1).__module__ == __name__
