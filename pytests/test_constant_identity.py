"""Immutable values from the frame's inputs keep their identity when they leave the graph
(Note [constants keep their identity] in `src/symbolic/output_graph.rs`).

A str, float, big int, bytes, complex, tuple of literals or frozenset that the frame receives is
a constant to the trace, guarded by value. Before, it was rebuilt as the constant object of the
compile that made the code: on a later call with an equal but distinct value, `f(s) is s` was
False, and a value stored into a list, an attribute or a global was the first call's object.
Each test makes fresh, equal but distinct objects for every call, so that a stale object shows."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


def _fresh(kind, i):
    """A new object of `kind` for call `i`, equal to the one of every other call of its kind
    (the cache entry is reused) but not the same object."""
    return {
        "str": lambda: "".join(["ab"] * 3),
        "float": lambda: float("2.5"),
        "big_int": lambda: int("1000000"),
        "negative_int": lambda: int("-7777"),
        "bytes": lambda: bytes([1, 2, 3]),
        "complex": lambda: complex(1.5, -2),
        "tuple": lambda: tuple([1, "x", 2.5]),
        "nested_tuple": lambda: tuple([(1, 2), ("a",)]),
        "frozenset": lambda: frozenset([3, 4]),
        "slice": lambda: slice(1, int("1000"), 2),
    }[kind]()


KINDS = ["str", "float", "big_int", "negative_int", "bytes", "complex", "tuple", "nested_tuple", "frozenset", "slice"]


class Counting:
    """A backend that counts graphs and runs them as they are."""

    def __init__(self, backend):
        self.real = dynamo.lookup_backend(backend)
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.real(gm, example_inputs)


def _run(fn, backend, make_args, check, calls=3):
    """Runs `fn` eagerly and compiled on fresh arguments from `make_args(i)` for each call;
    `check(args, result)` must hold for both. Returns the graph count."""
    for i in range(calls):
        args = make_args(i)
        check(args, fn(*args))
    dynamo.reset()
    counting = Counting(backend)
    opt = dynamo.optimize(counting)(fn)
    for i in range(calls):
        args = make_args(i)
        check(args, opt(*args))
    return counting.graphs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", KINDS)
def test_returned_argument_is_the_argument(backend, kind):
    def f(x, v):
        return x + 1, v

    def check(args, r):
        assert r[1] is args[1]
        assert torch.equal(r[0], args[0] + 1)

    assert _run(f, backend, lambda i: (torch.ones(2), _fresh(kind, i)), check) == 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["str", "big_int", "tuple", "float"])
def test_used_argument_is_still_the_argument(backend, kind):
    # The trace reads the value (a comparison, a len, a format): it is guarded by value, and
    # still comes back as the very object.
    def f(x, v):
        y = x * 2 if v == _fresh(kind, 0) else x
        return y, v, f"{v}"

    def check(args, r):
        assert r[1] is args[1]
        assert r[2] == f"{args[1]}"

    assert _run(f, backend, lambda i: (torch.ones(2), _fresh(kind, i)), check) == 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["str", "float", "tuple", "frozenset"])
def test_stored_into_containers_attributes_and_globals(backend, kind):
    class Box:
        pass

    def f(x, v, out, box):
        global STORED
        out.append(v)
        box.v = v
        STORED = v
        return x + 1, {"k": v}, [v, v]

    def make(i):
        return torch.ones(2), _fresh(kind, i), [], Box()

    def check(args, r):
        v = args[1]
        assert args[2][0] is v
        assert args[3].v is v
        assert STORED is v
        assert r[1]["k"] is v
        assert r[2][0] is v and r[2][1] is v

    assert _run(f, backend, make, check) == 1


STORED = None


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_read_from_objects_and_containers(backend):
    class O:
        pass

    def f(x, o, lst, d):
        return x + 1, o.name, lst[1], d["k"], lst[0][1]

    def make(i):
        o = O()
        o.name = _fresh("str", i)
        return torch.ones(2), o, [_fresh("tuple", i), _fresh("float", i)], {"k": _fresh("bytes", i)}

    def check(args, r):
        _, o, lst, d = args
        assert r[1] is o.name
        assert r[2] is lst[1]
        assert r[3] is d["k"]
        assert r[4] == "x"

    assert _run(f, backend, make, check) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_read_before_the_frame_replaces_it(backend):
    # The frame reads a value, then writes another in its place: the value it returns is the
    # one it read (the reload runs before the frame's writes are replayed).
    class O:
        pass

    def f(x, o, lst, d):
        global G
        s, a, b, g = o.s, lst[0], d["k"], G
        o.s = "new"
        lst[0] = 0.5
        del d["k"]
        G = "replaced"
        return x + 1, s, a, b, g

    def make(i):
        global G
        o = O()
        o.s = _fresh("str", i)
        G = _fresh("tuple", i)
        return torch.ones(2), o, [_fresh("float", i)], {"k": _fresh("big_int", i)}

    kept = []

    def check(args, r):
        _, o, lst, d = args
        assert r[1] == "ababab" and r[2] == 2.5 and r[3] == 1000000 and r[4] == (1, "x", 2.5)
        assert o.s == "new" and lst == [0.5] and d == {} and G == "replaced"
        kept.append(r)

    _run(f, backend, make, check)
    # Distinct objects on each call, as eagerly: none is a constant of an earlier call.
    compiled = kept[3:]
    for k in range(1, 5):
        assert len({id(r[k]) for r in compiled}) == 3


G = None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["str", "float", "tuple"])
def test_across_a_graph_break(backend, kind):
    def f(x, v, o):
        w = v
        print("break")
        o.append(w)
        return x + 1, w

    def check(args, r):
        assert r[1] is args[1]
        assert args[2][0] is args[1]

    _run(f, backend, lambda i: (torch.ones(2), _fresh(kind, i), []), check)


@pytest.mark.parametrize("backend", BACKENDS)
def test_shared_small_values_need_no_reload(backend):
    # Values CPython shares between equal instances are the same object either way.
    def f(x, a, b, c, d):
        return x + 1, a, b, c, d

    def check(args, r):
        assert all(r[k + 1] is args[k + 1] for k in range(4))

    _run(f, backend, lambda i: (torch.ones(2), 7, None, (), True), check)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuples_of_constants_keep_their_items(backend):
    # BUILD_TUPLE folds constants into a constant tuple; unpacking it, indexing it or
    # returning it gives back the items' own objects. A tuple argument's items too.
    def f(x, s, v, t):
        a, b, c, d = s, v, t, s  # BUILD_TUPLE + UNPACK_SEQUENCE
        first, second = t
        pair = (s, v)
        return x + 1, (s, v), a, b, c, d, first, second, pair[0], t[1], [*t][0]

    def make(i):
        return torch.ones(2), _fresh("str", i), _fresh("float", i), (_fresh("bytes", i), _fresh("big_int", i))

    def check(args, r):
        _, s, v, t = args
        assert r[1][0] is s and r[1][1] is v
        assert r[2] is s and r[3] is v and r[4] is t and r[5] is s
        assert r[6] is t[0] and r[7] is t[1] and r[8] is s and r[9] is t[1] and r[10] is t[0]

    assert _run(f, backend, make, check) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_constant_frame_returns_its_arguments(backend):
    # No tensor work at all: the frame is still converted, and returns the objects it got.
    def f(s, v):
        return s, v

    def check(args, r):
        assert r[0] is args[0] and r[1] is args[1]

    _run(f, backend, lambda i: (_fresh("str", i), _fresh("tuple", i)), check)
