"""`for` loops over iterators the trace cannot step (a `DataLoader`): the loop runs in a driver
and its body is a function of its own, compiled once and called per item (Note [loop bodies as
functions] in src/pycodegen/loop_body.rs). Every exit of the body (back edge, `continue`,
`break`, `return`, for-else, exceptions) behaves as in eager Python.
"""

import pytest
import torch

import dynamo

from test_python_kinds import check



def loader(n=6, bs=2):
    data = torch.utils.data.TensorDataset(torch.arange(n * 2.0).reshape(n, 2))
    return torch.utils.data.DataLoader(data, batch_size=bs)


def body_graphs():
    """Counters after a run: graphs compiled, and whether a loop body function was converted."""
    return dynamo.counters()["graphs"]


def accumulate(L, x):
    total = x * 0
    for (b,) in L:
        total = total + (b * 0.25).sum(0)
    return total


def with_break(L, x):
    n = 0
    for (b,) in L:
        n += 1
        x = x + b.sum(0)
        if n == 2:
            break
    return x, n


def with_continue(L, x):
    n = 0
    for (b,) in L:
        n += 1
        if n % 2:
            continue
        x = x * b.sum(0)
    return x, n


def with_return(L, x):
    n = 0
    for (b,) in L:
        n += 1
        if n == 2:
            return b * x
        x = x + 1
    return x


def for_else(L, x, stop):
    n = 0
    for (b,) in L:
        n += 1
        if n == stop:
            found = "stopped"
            break
        x = x + b.sum(0) * 0.5
    else:
        found = "exhausted"
    return x, found


def loop_variable_after_the_loop(L, x):
    for (b,) in L:
        pass
    return b + x


def conditionally_assigned(L, x):
    n = 0
    for (b,) in L:
        n += 1
        if n == 2:
            last = b
        x = x + b.sum(0)
    return x, last


def epochs(L, x):
    for e in range(3):
        for (b,) in L:
            x = x + b.sum(0) * e
    return x


def nested(L, x):
    for (b,) in L:
        for j in range(2):
            x = x + b[j]
        for (c,) in L:
            x = x - c.sum(0) / 10
    return x


CASES = {
    "accumulate": (accumulate, ()),
    "break": (with_break, ()),
    "continue": (with_continue, ()),
    "return": (with_return, ()),
    "for_else_break": (for_else, (2,)),
    "for_else_exhausted": (for_else, (5,)),
    "after_the_loop": (loop_variable_after_the_loop, ()),
    "conditionally_assigned": (conditionally_assigned, ()),
    "epochs": (epochs, ()),
    "nested": (nested, ()),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_loop_over_a_dataloader_matches_eager(name, backend):
    f, extra = CASES[name]
    x = torch.ones(2)
    check(f, loader(), x, *extra, graphs=0, backend=backend)


@pytest.mark.parametrize("name", ["accumulate", "break", "continue", "return", "epochs", "nested"])
def test_loop_body_is_compiled_once(name):
    """The body's tensor code is a graph, compiled on the first item(s) and reused: a second
    call compiles nothing."""
    f, extra = CASES[name]
    x = torch.ones(2)
    dynamo.reset()
    opt = dynamo.optimize("eager")(f)
    opt(loader(), x, *extra)
    c = dynamo.counters()
    assert c["graphs"] >= 1 and c["eager_fallbacks"] == 0, c
    compiles = c["compiles"]
    opt(loader(), x, *extra)
    assert dynamo.counters()["compiles"] == compiles


def test_empty_loader():
    check(accumulate, loader(0), torch.ones(2), graphs=0)


def test_exception_in_the_body_propagates():
    def f(L, x):
        for (b,) in L:
            x = x + b.sum(0)
            if x.shape[0] == 2:
                raise ValueError("stop here")
        return x

    with pytest.raises(ValueError, match="stop here"):
        f(loader(), torch.ones(2))
    dynamo.reset()
    with pytest.raises(ValueError, match="stop here"):
        dynamo.optimize("eager")(f)(loader(), torch.ones(2))


def test_long_loop_does_not_nest_frames():
    """One driver call per item, not one nested resume call per iteration: 3000 items run
    within the recursion limit and compile a bounded number of frames."""
    L = loader(3000, 1)
    want = accumulate(L, torch.ones(2))
    dynamo.reset()
    got = dynamo.optimize("eager")(accumulate)(L, torch.ones(2))
    torch.testing.assert_close(got, want)
    assert dynamo.counters()["compiles"] <= 6, dynamo.counters()


def test_printing_body_keeps_its_output_order(capsys):
    def f(L, x):
        for i, (b,) in enumerate(L):
            print("batch", i)
            x = x + b.sum(0)
        return x

    check(f, loader(), torch.ones(2), graphs=0)


def test_comprehension_over_an_untraceable_iterator():
    """A comprehension's body appends to the list below the iterator (LIST_APPEND): it keeps
    running as a whole (the body cannot become a function), with eager's result."""
    def f(L, x):
        return [b * x for (b,) in L], {b.shape[0] for (b,) in L}, {i: b for i, (b,) in enumerate(L)}

    check(f, loader(), torch.ones(2), graphs=0)


# ----- dead locals live until rebound or returned (Note [dead locals across loop iterations]) ---

EVENTS = []


class Noisy:
    def __init__(self, i):
        self.i = i

    def __del__(self):
        EVENTS.append(("del", self.i))


class Steps:
    """An iterator the trace cannot step (its `__next__` is a user class's)."""

    def __init__(self, n):
        self.n, self.i = n, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i


def rebinds_in_the_body(x):
    for v in Steps(3):
        o = Noisy(v)  # the previous one is freed here; the last one at the return
        x = x + v
        EVENTS.append(("step", v))
    EVENTS.append("after the loop")
    return x


def bound_before_the_loop(x):
    o = Noisy(0)
    for v in Steps(2):
        x = x * 2
        o = Noisy(v)
        EVENTS.append(("step", v))
    return x


def leaves_by_break(x):
    for v in Steps(5):
        o = Noisy(v)
        x = x - v
        if v == 2:
            break
    EVENTS.append("after the break")
    return x


def tensors_only(x):
    for v in Steps(3):
        out = x * v  # dead at the head: dropped after each body, compiled once
        loss = out.sum()
        x = x + loss
    return x


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("fn", [rebinds_in_the_body, bound_before_the_loop, leaves_by_break])
def test_dead_locals_of_a_loop_body_are_freed_where_eager_frees_them(fn, backend):
    # breaker7 R2 / breaker6 06c: a dead local was dropped at the end of each body function.
    import gc

    def run(f):
        EVENTS.clear()
        gc.disable()
        try:
            out = f(torch.ones(2))
        finally:
            gc.enable()
        return out, list(EVENTS)

    want = run(fn)
    dynamo.reset()
    opt = dynamo.optimize(backend)(fn)
    for _ in range(2):
        got = run(opt)
        assert torch.equal(got[0], want[0]) and got[1] == want[1]
    assert dynamo.counters()["graphs"] >= 1


def no_dead_locals(x):
    for v in Steps(3):
        x = x + (x * v).sum()
    return x


def test_dead_tensors_of_a_loop_body_do_not_make_a_second_body():
    def compiles(fn):
        dynamo.reset()
        opt = dynamo.optimize("eager")(fn)
        torch.testing.assert_close(opt(torch.ones(2)), fn(torch.ones(2)))
        n = dynamo.counters()["compiles"]
        opt(torch.ones(2))
        assert dynamo.counters()["compiles"] == n
        return n

    # `out` and `loss` are dropped after each body, as before: no body variant carrying them is
    # compiled (the loop compiles as many frames as one without them).
    assert compiles(tensors_only) == compiles(no_dead_locals)
