"""`yield from` inside generators the trace inlines (Note [yield from] in
src/symbolic/translator.rs): each item of the sub-iterator passes through, and the expression's
value is the sub-generator's return value (None for a plain iterable). torch's
`Module.parameters()`, `modules()`, `named_modules()` and `children()` delegate this way, so
their loops and the Transformer's eval fast-path check are captured in one graph."""

import pytest
import torch
from torch import nn

import dynamo

from test_python_kinds import check


def compiled_run(f, *args):
    """`f(*args)` compiled with the eager backend after a reset; the counters after it."""
    dynamo.reset()
    out = dynamo.optimize("eager")(f)(*args)
    return out, dynamo.counters()


# ----- the cases from the report ----------------------------------------------------------------

def gen_tuple(x):
    yield x
    yield from (x + 1,)


def test_yield_from_tuple_in_sum():
    x = torch.arange(3.0)
    check(lambda x: sum(gen_tuple(x)), x, graphs=1, breaks=0)
    assert torch.equal(sum(gen_tuple(x)), 2 * x + 1)


def test_parameters_weight_decay_term():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 2)))
    f = lambda m, x: m(x).mean() + 1e-4 * sum(p.pow(2).sum() for p in m.parameters())
    x = torch.randn(2, 4)
    expected = f(m, x)
    e = dynamo.explain(f)(m, x)
    assert (e.graph_count, e.graph_break_count) == (1, 0), str(e)
    out, c = compiled_run(f, m, x)
    assert type(out) is type(expected) and torch.allclose(out, expected)
    assert (c["graphs"], c["graph_breaks"]) == (1, 0), c


def test_parameters_sum_and_count():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 3), nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 2, bias=False)))

    def f(x):
        ps = list(m.parameters())
        return x + sum(p.sum() for p in ps), len(ps)

    x = torch.zeros(2)
    expected = f(x)
    out, c = compiled_run(f, x)
    assert out[1] == expected[1] == 5 and type(out[1]) is int
    assert torch.allclose(out[0], expected[0])
    assert (c["graphs"], c["graph_breaks"]) == (1, 0), c


def test_named_modules_prefixes_and_children():
    m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Sequential(nn.Tanh())))
    # A module reached twice is listed once (the memo of named_modules).
    m.append(m[0])

    def f(x):
        names = [n for n, _ in m.named_modules()]
        kinds = [type(c).__name__ for c in m.children()]
        count = sum(1 for _ in m.modules())
        return x * count, names, kinds

    x = torch.ones(2)
    expected = f(x)
    out, c = compiled_run(f, x)
    assert expected[1] == ["", "0", "1", "1.0", "1.1", "1.1.0"]
    assert out[1] == expected[1] and out[2] == expected[2]
    assert torch.equal(out[0], expected[0])
    assert (c["graphs"], c["graph_breaks"]) == (1, 0), c


# ----- the value of a `yield from` expression ---------------------------------------------------

def sub_returning(x):
    yield x
    yield x * 2
    return x + 10


def outer_taking_return(x):
    r = yield from sub_returning(x)
    yield r
    r2 = yield from [x - 1]  # a plain iterable: None
    yield r2 is None


def test_return_value_through_yield_from():
    x = torch.tensor([1.0, 2.0])
    check(lambda x: list(outer_taking_return(x)), x, graphs=1, breaks=0)
    out, c = compiled_run(lambda x: list(outer_taking_return(x)), x)
    assert torch.equal(out[2], x + 10) and out[4] is True and len(out) == 5


def recursive(x, depth):
    yield x * depth
    if depth:
        total = yield from recursive(x, depth - 1)
        return total + depth
    return 0


def test_recursive_user_generators():
    def f(x):
        g = recursive(x, 3)
        items = []
        while True:
            try:
                items.append(next(g))
            except StopIteration as stop:
                return items, stop.value
    x = torch.ones(2)
    expected = f(x)
    assert expected[1] == 6
    check(lambda x: sum(recursive(x, 3)), x, graphs=1, breaks=0)
    check(lambda x: list(outer_taking_return(x)) + [sum(recursive(x, 2))], x, graphs=1, breaks=0)


def over_containers(x, d):
    yield from [x, x + 1]
    yield from d.items()
    yield from d.values()
    yield from iter((x * 3,))
    yield from range(2)
    yield from (v * 2 for v in (x, x))


def test_yield_from_containers_and_iterators():
    x = torch.arange(2.0)
    f = lambda x: list(over_containers(x, {"a": x * 4, "b": 5}))
    check(f, x, graphs=1, breaks=0)
    out, c = compiled_run(f, x)
    assert len(out) == 11 and out[2][0] == "a" and out[7] == 0 and type(out[7]) is int


def test_yield_from_an_exhausted_generator_gives_none():
    def outer(x, g):
        r = yield from g
        yield r

    def f(x):
        g = sub_returning(x)
        first = list(g)
        return first, list(outer(x, g))

    x = torch.ones(1)
    check(f, x, graphs=1, breaks=0)
    out, c = compiled_run(f, x)
    assert out[1] == [None]


# ----- Transformer eval fast path (`self.modules()` in the fast-path check) ---------------------

def encoder(nhead=2):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, nhead, 16, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


@pytest.mark.parametrize("fast_path", [True, False])
def test_transformer_encoder_eval(fast_path):
    # The fast path needs eval mode, no autograd, no hooks and an even number of heads (the
    # check walks `self.modules()` for hooks); one head turns it off.
    enc = encoder(2 if fast_path else 1).eval()
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        expected = enc(x)
        e = dynamo.explain(enc)(x)
        out, c = compiled_run(enc, x)
    assert (e.graph_count, e.graph_break_count) == (1, 0), str(e)
    fused = [op for op in e.ops_per_graph[0] if "_transformer_encoder_layer_fwd" in str(op)]
    assert len(fused) == (2 if fast_path else 0), e.ops_per_graph
    assert c["graphs"] >= 1 and c["graph_breaks"] == 0, c
    assert torch.allclose(out, expected, atol=1e-6)


def test_transformer_encoder_eval_with_grad():
    enc = encoder().eval()
    x = torch.randn(2, 5, 8)
    expected = enc(x)
    out, c = compiled_run(enc, x)
    assert torch.allclose(out, expected, atol=1e-6)
    assert (c["graphs"], c["graph_breaks"]) == (1, 0), c


def test_transformer_eval_captures():
    torch.manual_seed(0)
    t = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True).eval()
    src, tgt = torch.randn(2, 5, 8), torch.randn(2, 3, 8)
    with torch.no_grad():
        expected = t(src, tgt)
        out, c = compiled_run(t, src, tgt)
    assert torch.allclose(out, expected, atol=1e-6)
    assert c["graphs"] >= 1, c


# ----- what is not modelled stays a clean break -------------------------------------------------

class Countdown:
    """An iterator of a user type: its `__next__` runs in Python."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n == 0:
            raise StopIteration
        self.n -= 1
        return self.n


def test_yield_from_a_user_iterator_is_traced():
    # Note [user iterators]: `yield from` a user iterator steps its `__next__` in the trace
    # (it was a graph break before).
    def gen(x, it):
        yield x
        yield from it

    def f(x):
        return [v for v in gen(x, Countdown(2))]

    x = torch.ones(2)
    expected = f(x)
    dynamo.reset()
    out = dynamo.optimize("eager")(f)(x)
    assert len(out) == len(expected) == 3 and torch.equal(out[0], expected[0]) and out[1:] == [1, 0]
    e = dynamo.explain(f)(x)
    assert e.graph_break_count == 0, str(e)
