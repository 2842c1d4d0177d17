"""Note [breaking where a generator was made] (src/symbolic/convert_frame.rs): a generator the
trace made that cannot live past the graph (live across a graph break, returned, or dropped
while suspended inside a try/with block) moves the break back to the instruction that made it,
so the code before that is still one graph and Python makes and runs the generator itself.
Before, the whole frame ran eagerly."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


def pair(x):
    yield x * 2
    yield x * 3


def guarded_pair(x):
    try:
        yield x + 1
        yield x + 2
    finally:
        pass


def live_across_a_break(x):
    y = x.sin() * 2
    g = pair(y)
    a = next(g)
    dynamo.graph_break()
    return a + next(g)


def dropped_inside_try(x):
    y = x.cos() + 1
    g = guarded_pair(y)
    return next(g), y


def loop_with_a_break(x):
    y = x.exp()
    out = []
    for v in pair(y):
        out.append(v)
        dynamo.graph_break()
    return out


def returned(x):
    y = x * 5
    return y, pair(y)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [live_across_a_break, dropped_inside_try, loop_with_a_break, returned], ids=lambda f: f.__name__)
def test_code_before_the_generator_is_a_graph(fn, backend):
    x = torch.rand(3)
    want = fn(x)
    dynamo.reset()
    got = dynamo.optimize(backend)(fn)(x)
    if fn is returned:
        torch.testing.assert_close(got[0], want[0])
        assert type(got[1]).__name__ == "generator"
        for a, b in zip(got[1], want[1]):
            torch.testing.assert_close(a, b)
    else:
        assert repr(type(got)) == repr(type(want))
        torch.testing.assert_close(got, want)
    c = dynamo.counters()
    assert c["eager_fallbacks"] == 0 and c["graphs"] >= 1
