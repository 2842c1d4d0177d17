"""Iterators from outside the frame (Note [iterators from outside the frame] in
src/symbolic/side_effects.rs): a list, tuple, range or dict iterator the frame receives (an
argument, an attribute, a global) and steps with `next`, a `for` loop, `list()` or
`itertools.islice` is advanced in the caller exactly as eagerly, on every call of the compiled
function, also across a graph break."""

import itertools

import pytest
import torch

import dynamo

MAKERS = {
    "list": lambda: iter([1, 2, 3, 4, 5]),
    "tuple": lambda: iter((1, 2, 3, 4, 5)),
    "range": lambda: iter(range(1, 6)),
    "dict_keys": lambda: iter({1: "a", 2: "b", 3: "c", 4: "d", 5: "e"}),
    "dict_values": lambda: iter({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}.values()),
}


def run_both(f, make_args, calls=3):
    """(eager results, compiled results, counters after the compiled calls): `f` called `calls`
    times on one set of arguments from `make_args()`, then the arguments' state (`rest`)."""
    a_e = make_args()
    eager = [f(*a_e) for _ in range(calls)]
    dynamo.reset()
    a_c = make_args()
    cf = dynamo.optimize("eager")(f)
    compiled = [cf(*a_c) for _ in range(calls)]
    return (eager, a_e), (compiled, a_c), dynamo.counters()


def rest(it):
    return list(it)


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_next_on_argument_advances_callers_iterator(kind):
    def f(x, it):
        return x + 1, next(it), next(it)

    (e, (_, it_e)), (c, (_, it_c)), cnt = run_both(f, lambda: (torch.ones(1), MAKERS[kind]()), calls=2)
    assert [r[1:] for r in c] == [r[1:] for r in e]
    assert rest(it_c) == rest(it_e)
    # A dict iterator whose dict the frame does not otherwise reach is a graph break (its
    # items are not read from outside); the others are captured whole.
    assert cnt["graphs"] >= 1 and (cnt["graph_breaks"] == 0 or kind.startswith("dict"))


def test_training_step_sees_next_batch():
    def step(w, batches):
        x, y = next(batches)
        return ((x @ w - y) ** 2).mean()

    torch.manual_seed(0)
    data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(4)]
    w = torch.ones(3, 1)
    (e, (_, it_e)), (c, (_, it_c)), cnt = run_both(step, lambda: (w, iter(data)))
    assert [v.item() for v in c] == [v.item() for v in e]
    assert len(rest(it_c)) == len(rest(it_e)) == 1
    assert cnt["graphs"] >= 1 and cnt["graph_breaks"] == 0


class Loader:
    def __init__(self):
        self.it = iter([10, 20, 30, 40])


G_IT = None


def test_attribute_and_global_iterators_advance():
    def f(x, loader):
        return x + next(loader.it)

    (e, (_, l_e)), (c, (_, l_c)), _ = run_both(f, lambda: (torch.zeros(1), Loader()))
    assert [v.item() for v in c] == [v.item() for v in e] == [10, 20, 30]
    assert rest(l_c.it) == rest(l_e.it) == [40]

    def g(x):
        return x + next(G_IT)

    global G_IT
    G_IT = iter((1, 2, 3))
    eager = [g(torch.zeros(1)).item() for _ in range(2)]
    left_e = rest(G_IT)
    dynamo.reset()
    G_IT = iter((1, 2, 3))
    cg = dynamo.optimize("eager")(g)
    compiled = [cg(torch.zeros(1)).item() for _ in range(2)]
    assert compiled == eager and rest(G_IT) == left_e == [3]


def test_for_loop_with_early_return_list_and_islice():
    def first_positive(x, it):
        for v in it:
            if v > 0:
                return x + v, v
        return x, None

    (e, (_, it_e)), (c, (_, it_c)), _ = run_both(first_positive, lambda: (torch.zeros(1), iter([0, 1, 2, 3])))
    assert [r[1] for r in c] == [r[1] for r in e] == [1, 2, 3]
    assert rest(it_c) == rest(it_e)

    def take(x, it):
        return x, list(itertools.islice(it, 2))

    (e, (_, it_e)), (c, (_, it_c)), _ = run_both(take, lambda: (torch.zeros(1), iter(range(7))))
    assert [r[1] for r in c] == [r[1] for r in e] == [[0, 1], [2, 3], [4, 5]]
    assert rest(it_c) == rest(it_e) == [6]

    def drain(x, it):
        return x, list(it)

    (e, (_, it_e)), (c, (_, it_c)), _ = run_both(drain, lambda: (torch.zeros(1), iter([1, 2])), calls=2)
    assert [r[1] for r in c] == [r[1] for r in e] == [[1, 2], []]


def test_steps_across_a_graph_break_advance_the_same_iterator():
    def f(x, it):
        a = next(it)
        print("between")  # graph break: the resume function gets the caller's iterator
        b = next(it)
        return x + a + b

    (e, (_, it_e)), (c, (_, it_c)), cnt = run_both(f, lambda: (torch.zeros(1), iter([1, 2, 3, 4, 5, 6, 7])), calls=3)
    assert [v.item() for v in c] == [v.item() for v in e] == [3, 7, 11]
    assert rest(it_c) == rest(it_e) == [7]
    assert cnt["graph_breaks"] >= 1


def test_loop_over_outside_iterator_broken_inside_body():
    def f(x, it):
        total = x
        for v in it:
            if v == 3:
                break
            print("step", v)  # graph break inside the loop body
            total = total + v
        return total

    (e, (_, it_e)), (c, (_, it_c)), _ = run_both(f, lambda: (torch.zeros(1), iter([1, 2, 3, 4, 5])), calls=2)
    assert [v.item() for v in c] == [v.item() for v in e]
    assert rest(it_c) == rest(it_e) == []


def test_one_iterator_through_two_paths_is_one_tracker():
    def f(x, a, b):
        return x + next(a) * 10 + next(b)

    it_e = iter([1, 2, 3, 4, 5, 6])
    eager = [f(torch.zeros(1), it_e, it_e).item() for _ in range(2)]
    dynamo.reset()
    cf = dynamo.optimize("eager")(f)
    it_c = iter([1, 2, 3, 4, 5, 6])
    compiled = [cf(torch.zeros(1), it_c, it_c).item() for _ in range(2)]
    assert compiled == eager == [12, 34]
    assert rest(it_c) == [5, 6]
    # Then two different iterators: the alias guard fails, each is stepped once.
    a, b = iter([1, 2]), iter([3, 4])
    assert cf(torch.zeros(1), a, b).item() == 13
    assert rest(a) == [2] and rest(b) == [4]


@pytest.mark.parametrize("view", ["items", "keys", "values"])
def test_dict_walk_finished_before_the_dict_shrinks(view):
    """A walk over a dict that continues in a resume function (the loop body breaks on a tensor
    value) and ends before the frame pops a key: the replayed steps run before the replayed
    pop, as in eager, instead of raising 'dictionary changed size during iteration' (fuzzer
    seed 97002)."""

    def f(x, d):
        for item in getattr(d, view)():
            x = x + 1
            if x.sum() > 0:  # data-dependent: the loop continues in a resume function
                x = x * 2
        d.pop("b")
        return x

    for backend in ["eager", "inductor"]:
        dynamo.reset()
        d_e, d_c = {"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 2, "c": 3}
        want = f(torch.ones(2), d_e)
        got = dynamo.optimize(backend)(f)(torch.ones(2), d_c)
        assert torch.equal(got, want) and d_c == d_e
