"""`collections` kinds and the itertools left to model (issue 7): each program runs eagerly and
compiled on fresh copies of its inputs, compared exactly (`test_python_kinds.check`: values,
types at every level, mutated arguments, printed text, exceptions), with a graph count and a
break count that show the code was captured.

Kinds: `itertools.chain.from_iterable` (and `Counter.elements`, which is built on it), every
lazy itertools iterator with tensor items, `dict | dict` and `d |= other`, `OrderedDict`
equality (ordered against another OrderedDict, unordered against a dict), `move_to_end`,
`popitem(last=False)`, and `Counter` arithmetic."""

import collections
import itertools

import pytest
import torch

import dynamo
from test_python_kinds import check

X = torch.arange(4.0)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_chain_from_iterable_is_lazy_and_captured(backend):
    def f(x):
        rows = [[x, x + 1], [], [x * 2]]
        flat = list(itertools.chain.from_iterable(rows))
        # The outer iterable is read one item per exhausted inner one: a list the loop grows.
        grown = [[x]]
        seen = []
        for v in itertools.chain.from_iterable(grown):
            seen.append(v * 3)
            if len(grown) < 3:
                grown.append([v + 1])
        gen = itertools.chain.from_iterable((t, t - 1) for t in (x, x + 5))
        first = next(gen)
        return flat, seen, first, list(gen), len(grown)

    check(f, X, graphs=1, breaks=0, backend=backend)


def test_chain_from_iterable_returned_keeps_its_type_and_position():
    def f(x):
        it = itertools.chain.from_iterable([[x, x + 1], [x + 2]])
        head = next(it)
        return head, it

    eager_head, eager_it = f(X)
    dynamo.reset()
    head, it = dynamo.optimize("eager")(f)(X)
    assert type(it) is type(eager_it) is itertools.chain
    assert torch.equal(head, eager_head)
    rest, eager_rest = list(it), list(eager_it)
    assert len(rest) == len(eager_rest) == 2 and all(torch.equal(a, b) for a, b in zip(rest, eager_rest))
    assert dynamo.counters()["graphs"] == 1 and dynamo.counters()["graph_breaks"] == 0


LAZY = {
    "chain_from_iterable": lambda x: list(itertools.chain.from_iterable([[x, x + 1], [x * 2]])),
    "pairwise": lambda x: [a + b for a, b in itertools.pairwise([x, x + 1, x + 2])],
    "starmap": lambda x: list(itertools.starmap(torch.add, [(x, 1), (x, 2)])),
    "compress": lambda x: list(itertools.compress([x, x + 1, x + 2], [1, 0, 1])),
    "takewhile": lambda x: list(itertools.takewhile(lambda v: v < 3, [1, 2, 3, 1])) + [x + 1],
    "dropwhile": lambda x: [x * v for v in itertools.dropwhile(lambda v: v < 3, [1, 2, 3, 1])],
    "repeat": lambda x: list(itertools.repeat(x + 1, 3)),
    "cycle_zip": lambda x: list(zip(range(5), itertools.cycle([x, x + 1]))),
    "cycle_islice": lambda x: [x * v for v in itertools.islice(itertools.cycle([1, 2]), 5)],
    "count_zip": lambda x: list(zip(itertools.count(2, 3), [x, x * 2])),
    "count_float": lambda x: [x * c for c, _ in zip(itertools.count(0.5), range(3))],
    "filterfalse": lambda x: [x + v for v in itertools.filterfalse(lambda v: v % 2, range(6))],
}


@pytest.mark.parametrize("name", sorted(LAZY))
def test_lazy_itertools_are_captured(name):
    op = LAZY[name]

    def f(x):
        return op(x * 1)

    check(f, X, graphs=1, breaks=0)


def test_counter_elements_and_arithmetic():
    def f(x):
        a = collections.Counter("abca")
        b = collections.Counter(a=1, d=2)
        c = a + b
        d = a - b
        a.update("zz")
        return c, d, a, a.most_common(2), sorted(a.elements()), list(c.elements()), x + len(c)

    check(f, X, graphs=1, breaks=0)


def test_dict_or_and_ior():
    def f(x, d):
        a = {"a": x, "b": 1}
        b = {"b": x * 2, "c": 3}
        c = a | b
        a |= {"z": 3}
        a |= [("y", x - 1)]
        d |= {"new": x + 1}
        e = d | {}
        return c, a, e, c is a, list(c), x + 1

    check(f, X, {"k": 1}, graphs=1, breaks=0)


def test_dict_or_with_a_non_mapping_raises_as_eager():
    def f(x):
        a = {"a": x}
        try:
            a | [("b", 1)]
        except TypeError as e:
            return str(e), x + 1
        return None

    # `dict | list` is a TypeError in eager; the trace leaves it to Python (a break).
    check(f, X, graphs=0)


def test_ordered_dict_equality_move_to_end_popitem():
    def f(x):
        od = collections.OrderedDict
        a = od(a=1, b=2, c=x)
        b = od(b=2, a=1)
        plain = {"b": 2, "a": 1}
        a.move_to_end("a")
        first = a.popitem(last=False)
        last = a.popitem()
        a["c"] = 9
        return (
            first, last, a, b,
            a == b, b == a, a != b, a == plain, plain == a,
            od(a=1, b=2) == od(a=1, b=2), od(a=1, b=2) == od(b=2, a=1), od(a=1) == od(a=2),
            b == {"a": 1, "b": 2}, {"a": 1} == b, a == {"x": 1},
            x + 1,
        )

    check(f, X, graphs=1, breaks=0)


def test_ordered_dict_popitem_of_empty_raises_as_eager():
    def f(x):
        a = collections.OrderedDict()
        try:
            a.popitem(last=False)
        except KeyError as e:
            return repr(e), x + 1
        return None

    check(f, X, graphs=1)


# ----- next(it) over an iterator from outside the frame -----------------------------------------


@pytest.mark.parametrize("make", [list, tuple])
def test_next_of_a_batch_iterator_compiles_once(make):
    """`step(batches)` with `next(batches)` inside the compiled function: only the item taken is
    read and guarded (`IterKind::Peek`), so the position does not specialize the code; the
    caller's iterator advances exactly as in eager, and the last call raises StopIteration."""

    def step(it, w):
        x = next(it)
        return x * w + 1

    data = [torch.randn(3) for _ in range(6)]
    w = torch.randn(3)
    expect = [d * w + 1 for d in data]
    dynamo.reset()
    compiled = dynamo.optimize("eager")(step)
    batches = iter(make(data))
    got = [compiled(batches, w) for _ in range(6)]
    assert all(torch.equal(a, b) for a, b in zip(got, expect))
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["compiles"] == 1 and c["graph_breaks"] == 0, c
    # Exhausted: the StopIteration is eager's (the trace leaves the raising step to Python).
    with pytest.raises(StopIteration):
        compiled(batches, w)


def test_batch_iterator_items_are_guarded():
    """A later item of another dtype or shape recompiles instead of reusing the graph."""

    def step(it):
        return next(it) * 2

    data = [torch.ones(2), torch.ones(2), torch.ones(3), torch.ones(2, dtype=torch.int64)]
    dynamo.reset()
    compiled = dynamo.optimize("eager")(step)
    it = iter(data)
    got = [compiled(it) for _ in range(4)]
    assert all(torch.equal(g, d * 2) and g.dtype == d.dtype for g, d in zip(got, data))


def test_batch_iterator_list_reached_twice_matches_eager():
    """The list behind the iterator also reached as an argument: read live (no `Peek`)."""

    def step(it, lst):
        x = next(it)
        lst.append(x + 1)
        return next(it) + x

    def run(f):
        data = [torch.ones(2), torch.ones(2) * 2]
        it = iter(data)
        r = f(it, data)
        return r, len(data), next(it, None)

    eager = run(step)
    dynamo.reset()
    compiled = run(dynamo.optimize("eager")(step))
    assert torch.equal(eager[0], compiled[0]) and eager[1] == compiled[1]
    assert (eager[2] is None) == (compiled[2] is None)
    if eager[2] is not None:
        assert torch.equal(eager[2], compiled[2])


# ----- collections.deque (Note [deques] in src/symbolic/variables/deque.rs) ---------------------

deque = collections.deque


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_deque_built_in_the_frame(backend):
    def f(x):
        d = deque([x, x + 1], maxlen=3)
        d.append(x * 2)
        d.appendleft(x * 3)  # drops the rightmost (maxlen 3)
        a = d.pop()
        b = d.popleft()
        d.extend([x, x - 1])  # drops from the left
        d.extendleft([x + 5, x + 6])  # reversed, drops from the right
        d.rotate(1)
        d.rotate(-2)
        d[1] = d[1] * 10
        first, last = d[0], d[-1]
        total = sum(v.sum() for v in d)
        return d, a, b, len(d), first, last, d.maxlen, total, bool(d), isinstance(d, deque)

    check(f, X, graphs=1, breaks=0, backend=backend)


def test_deque_methods_and_protocol():
    def f(x):
        d = deque()
        e = deque(range(5), 2)
        u = deque("abc", maxlen=None)
        d.append(1)
        d.append(2)
        d.insert(1, 7)
        d.remove(1)
        d.reverse()
        c = d.copy()
        c.append(9)
        z = deque(maxlen=0)
        z.append(x)
        g = deque([3, 1, 3])
        out = (
            2 in d, 5 in d, list(d), [i * x for i in d], d.count(2), g.index(3), g.index(3, 1), g.count(3),
            d == deque([2, 7]), d == [2, 7], d != c, e, e.maxlen, u, z, len(z), type(d) is deque,
        )
        d.clear()
        return out, d, c, not d, x + 1

    check(f, X, graphs=1, breaks=0)


def test_deque_passed_in_is_mutated_as_a_side_effect():
    def f(d, x):
        d.append(x)
        y = d.popleft() * 2
        d.appendleft(y)
        d[-1] = d[-1] + 1
        return x + len(d), d.maxlen

    check(f, deque([X, X * 2], maxlen=3), X, graphs=1, breaks=0)
    check(f, deque([1.0, 2.0]), X, graphs=1, breaks=0)


def test_deque_passed_in_guards_its_length_and_maxlen():
    def f(d, x):
        d.append(x)
        return x * len(d)

    dynamo.reset()
    g = dynamo.optimize("eager")(f)
    for d in (deque([1], maxlen=2), deque([1], maxlen=2), deque([1, 2], maxlen=2), deque([1], maxlen=5), deque([1])):
        e = deque(d, maxlen=d.maxlen)
        assert torch.equal(g(d, X), f(e, X)) and list(d)[:-1] == list(e)[:-1] and len(d) == len(e) and d.maxlen == e.maxlen


def test_deque_errors_match_eager():
    def pop_empty(x):
        d = deque()
        try:
            d.pop()
        except IndexError as e:
            return str(e), x + 1

    def index_out_of_range(x):
        d = deque([x])
        try:
            return d[3]
        except IndexError as e:
            return str(e), x + 1

    def mutated_while_iterated(x):
        d = deque([1, 2, 3])
        out = []
        try:
            for v in d:
                out.append(v)
                d.append(v)
        except RuntimeError as e:
            return str(e), out, x + 1

    def slice_index(x):
        d = deque([x])
        try:
            return d[0:1]
        except TypeError as e:
            return str(e), x + 1

    for f in (pop_empty, index_out_of_range, mutated_while_iterated, slice_index):
        check(f, X, graphs=0)


def test_deque_returned_and_shared_keeps_identity():
    def f(x):
        d = deque([x + 1], maxlen=4)
        it = iter(d)
        next(it)
        return d, [d, d], d.maxlen

    def g(x):
        d, pair, m = f(x)
        return pair[0] is d and pair[1] is d, type(d), d.maxlen, m

    check(f, X, graphs=1, breaks=0)
    ret = check(g, X, graphs=1, breaks=0)
    assert ret[1][0] == (bool, True)


# ----- itertools.groupby and itertools.tee ------------------------------------------------------


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_groupby_runs_and_stale_groups(backend):
    def f(x):
        runs = [(k, list(g)) for k, g in itertools.groupby([1, 1, 2, 3, 3, 1])]
        keyed = [(k, [v * x for v in g]) for k, g in itertools.groupby(range(7), key=lambda v: v // 3)]
        # A group left behind when the groupby moves on is exhausted (`_grouper_next`).
        gb = itertools.groupby("aabbc")
        k1, g1 = next(gb)
        k2, g2 = next(gb)
        stale = list(g1)
        half = next(g2)
        rest = [(k, list(g)) for k, g in gb]
        empty = list(itertools.groupby([]))
        return runs, keyed, k1, k2, stale, half, list(g2), rest, empty, x + 1

    check(f, X, graphs=1, breaks=0, backend=backend)


def test_groupby_of_tensors_by_a_traced_key():
    def f(x):
        items = [x, x + 1, x * 0, x - 5]
        return [(k, torch.stack(list(g)).sum(0)) for k, g in itertools.groupby(items, key=lambda t: t.shape[0] > 2)]

    check(f, X, graphs=1, breaks=0)


def test_tee_shares_what_was_taken():
    def f(x):
        a, b = itertools.tee([x, x + 1, x + 2])
        first = next(a)
        both = list(zip(a, b))
        c, d, e = itertools.tee(iter([1, 2, 3]), 3)
        next(c)
        f1, f2 = itertools.tee(c)  # a tee of a tee: `c` itself and a copy at its position
        gen = (v * 2 for v in [x, x])
        g1, g2 = itertools.tee(gen)
        n1 = next(f1)
        rest_of_c = list(c)  # `f1` is `c`: what `f1` took is gone from `c`
        return first, both, list(d), list(e), n1, rest_of_c, list(f2), list(f1), list(g2), list(g1), itertools.tee([1], 0), x + 1

    check(f, X, graphs=1, breaks=0)


def test_deque_special_methods_by_name():
    def f(x):
        d = deque([x, x + 1], maxlen=3)
        d.__iadd__([x * 2, x * 3])
        d.__setitem__(0, x - 1)
        n = d.__len__()
        first = d.__getitem__(0)
        d.__delitem__(1)
        return d, n, first, deque([1, 2]).__contains__(2), list(d.__iter__())

    check(f, X, graphs=1, breaks=0)


@pytest.mark.parametrize("make", [list, tuple])
def test_batch_iterator_items_returned_and_across_a_break(make):
    """Items taken from an iterator passed in and returned as they are, or live across a graph
    break, are the items eager takes (read before the iterator is advanced after the graph)."""

    def f(it):
        a = next(it)
        return a, next(it)

    def g(it, x):
        a = next(it)
        print("break")
        return a + x, next(it)

    data = [torch.ones(1) * i for i in range(6)]
    for fn, args in ((f, ()), (g, (torch.zeros(1),))):
        eager_it, comp_it = iter(make(data)), iter(make(data))
        dynamo.reset()
        compiled = dynamo.optimize("eager")(fn)
        for _ in range(2):
            e, c = fn(eager_it, *args), compiled(comp_it, *args)
            assert all(torch.equal(p, q) for p, q in zip(e, c))
        assert torch.equal(next(eager_it), next(comp_it))


# ----- sets, iterator and view types (Note [set order], Note [iterator types]) --------------------

WORDS = ["w%d" % i * (i % 3 + 1) for i in range(24)]


def test_set_mutated_while_iterated_behaves_as_eager():
    def add_in_loop(x):
        s = {1, 2}
        out = []
        try:
            for v in s:
                s.add(v + 10)
                out.append(v)
        except RuntimeError as e:
            out.append(str(e))
        return x + 1, out

    def next_after_add(x):
        s = {1, 2}
        it = iter(s)
        next(it)
        s.add(5)
        try:
            next(it)
            return x + 1, "no error"
        except RuntimeError as e:
            return x + 1, str(e)

    def shrink(x):
        s = {1, 2}
        it = iter(s)
        next(it)
        s.discard(2)
        s.discard(1)
        try:
            return list(it), x + 1
        except RuntimeError as e:
            return str(e), x + 1

    for f in (add_in_loop, next_after_add, shrink):
        check(f, X, graphs=0)

    def same_size_change(x):
        # remove + add keeps the size: CPython's iterator sees the new items.
        s = {1, 2}
        out = []
        for v in s:
            s.remove(v)
            s.add(v + 100)
            out.append(v)
        return x + 1, out, sorted(s)

    check(same_size_change, X, graphs=1, breaks=0)


def test_sets_of_str_iterate_in_eager_order():
    def f(x):
        lit = {"w0", "w1w1", "w2w2w2", "a", "bb", "c", "dd", "eee", "f", "gg", "h"}
        s = set(WORDS)
        t = s.copy()
        s.difference_update(["w3", "w4w4"])
        u = s | {"zz", "yy", "xx"}
        v = s.union(["q", "r", "s"])
        popped = [t.pop() for _ in range(3)]
        return x + 1, list(lit), list(s), list(t), list(u), list(v), popped, [w for w in s.intersection(WORDS)]

    check(f, X, graphs=1, breaks=0)


def test_iterator_and_view_types_match_eager():
    def f(x):
        od = collections.OrderedDict(a=1)
        its = (iter({1, 2}), iter(frozenset([1])), iter(od), od.keys(), od.values(), od.items(),
               reversed(od), iter("ab"), iter(range(3)), iter((1, 2)), iter([1]), iter({}.items()),
               itertools.product([1], [2]), itertools.permutations([1, 2]), itertools.combinations([1, 2], 1),
               enumerate([1]), zip([1], [2]))
        return x + 1, [type(v).__name__ for v in its]

    check(f, X, graphs=1, breaks=0)

    def leaves(x):
        it = iter("abc")
        next(it)
        return x + 1, it

    def run_leaves(fn):
        y, it = fn(X)
        return type(it).__name__, list(it)

    e = run_leaves(leaves)
    dynamo.reset()
    assert run_leaves(dynamo.optimize("eager")(leaves)) == e == ("str_ascii_iterator", ["b", "c"])

    def set_iter_leaves(x):
        it = iter({1, 2, 3})
        next(it)
        return x + 1, it

    e = run_leaves(set_iter_leaves)
    dynamo.reset()
    assert run_leaves(dynamo.optimize("eager")(set_iter_leaves)) == e


def test_callable_of_containers_matches_eager():
    class Plain:
        pass

    class WithCall:
        def __call__(self):
            return 1

    def f(x):
        return x + 1, [callable(collections.OrderedDict()), callable(collections.Counter()),
                       callable(collections.deque()), callable({}), callable([]), callable(Plain()),
                       callable(WithCall())]

    check(f, X, graphs=1, breaks=0)

    def defaultdict_(x):  # a defaultdict built in the frame is tracked (Note [defaultdict objects])
        return x + 1, callable(collections.defaultdict(int))

    check(defaultdict_, X, graphs=1, breaks=0)


def test_ordered_dict_mutated_during_iteration_message():
    def add(x):
        d = collections.OrderedDict(a=1, b=2)
        out = []
        try:
            for k in d:
                out.append(k)
                d["c"] = 3
        except RuntimeError as e:
            out.append(str(e))
        return x + 1, out

    def move(x):
        d = collections.OrderedDict(a=1, b=2)
        out = []
        try:
            for k in d.values():
                out.append(k)
                d.move_to_end("a")
        except RuntimeError as e:
            out.append(str(e))
        return x + 1, out

    for f in (add, move):
        check(f, X, graphs=0)

    def unchanged(x):
        d = collections.OrderedDict(a=1, b=2)
        d["a"] = 5
        return x + 1, [k for k in d], [v for v in d.values()], list(d.items())

    check(unchanged, X, graphs=1, breaks=0)


def test_set_of_str_returned_iterates_in_eager_order():
    def f(x):
        s = set(WORDS)
        s.difference_update(WORDS[:18])
        s.add("new")
        return x + 1, s

    def listed(fn):
        y, s = fn(X)
        return type(s), list(s)

    e = listed(f)
    dynamo.reset()
    assert listed(dynamo.optimize("eager")(f)) == e

    # Whether a set of str can be rebuilt with eager's order depends on the process's hash
    # seed (the check refuses, and the frame runs without a graph, when it cannot); ints hash
    # to themselves, so this one is always rebuilt and captured. 9 and 17 collide with 1 in a
    # table of 8 slots.
    def g(x):
        s = {1, 9, 17, 3}
        s.update([25, 2])
        return x + 1, s

    e = listed(g)
    dynamo.reset()
    assert listed(dynamo.optimize("eager")(g)) == e
    assert dynamo.counters()["graphs"] == 1 and dynamo.counters()["graph_breaks"] == 0


def test_exhausted_and_lazy_iterators_keep_their_type():
    def f(x):
        its = (itertools.chain([1], [2]), itertools.islice([1, 2], 1), map(abs, [1]), filter(None, [1]))
        return x + 1, [type(v).__name__ for v in its]

    check(f, X, graphs=1, breaks=0)

    def exhausted(x):
        it = iter("ab")
        list(it)
        return x + 1, it

    def listed(fn):
        y, it = fn(X)
        return type(it).__name__, list(it)

    e = listed(exhausted)
    dynamo.reset()
    assert listed(dynamo.optimize("eager")(exhausted)) == e == ("str_ascii_iterator", [])


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_counter_popitem_removes_the_item(backend):
    # breaker5 23: the pair came back but stayed in the Counter built in the frame.
    import collections

    def f(x):
        c = collections.Counter(a=2, b=1, z=1)
        r = c.popitem()
        d = {"k": 1, "j": 2}
        r2 = d.popitem()
        return x + 1, r, dict(c), r2, d

    want = f(torch.ones(1))
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(1))
    assert got[1:] == want[1:]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_hasattr_and_getattr_on_containers_built_in_the_frame(backend):
    # breaker5 28: hasattr answered True and getattr's default was not given.
    def f(x):
        l, d, s, t = [1], {1: 2}, {1}, (1,)
        r = [hasattr(o, "zzz") for o in (l, d, s, t)] + [hasattr(l, "append"), hasattr(d, "keys"), hasattr(s, "add")]
        try:
            r.append(getattr(l, "zzz", "default"))
            r.append(getattr(d, "zzz", "default"))
        except AttributeError as e:
            r.append("AttributeError: " + str(e))
        return x + 1, r

    want = f(torch.ones(1))
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(1))
    assert got[1] == want[1] == [False, False, False, False, True, True, True, "default", "default"]
    assert dynamo.counters()["graph_breaks"] == 0


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_list_copy_is_a_new_list_of_the_same_items(backend):
    # list.copy() (list_copy_impl): a new list, the same item objects; writes to the copy do
    # not reach the original (torchvision's Swin copies its shift sizes in every block).
    shifts = [3, 3]

    def f(x, shifts):
        s = shifts.copy()
        if x.shape[0] >= 2:
            s[0] = 0
        s.append(x)
        return x * s[1], s, s is shifts, s[2] is x

    dynamo.reset()
    x = torch.ones(2, 2)
    got = dynamo.optimize(backend)(f)(x, shifts)
    want = f(x, [3, 3])
    torch.testing.assert_close(got[0], want[0])
    assert type(got[1]) is list and got[1][:2] == want[1][:2] == [0, 3]
    assert got[2:] == want[2:] == (False, True)
    assert shifts == [3, 3]
    assert dynamo.counters()["graph_breaks"] == 0
