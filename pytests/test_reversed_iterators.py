"""`reversed()` gives the iterator type CPython gives (issue 7, Note [iterator types]): a
`reversed` object for a tuple or a str (it was a `tuple_iterator`), the reversed range's
`range_iterator` for a range. Each program runs eagerly and compiled; the iterator, stepped or
not, returned out of the graph must have eager's exact type and the items eager's has left."""

import pytest
import torch

import dynamo

X = torch.arange(3.0)

PROGRAMS = {
    "tuple": lambda x: (x * 2, reversed((x, x + 1, 7))),
    "tuple_stepped": lambda x: (lambda it: (next(it) * 3, it))(reversed((x, x + 1, x + 2))),
    "tuple_exhausted": lambda x: (lambda it: ([v + 1 for v in it], it))(reversed((x, 1))),
    "tuple_constant": lambda x: (x + 1, reversed((1, 2, 3))),
    "str": lambda x: (x + 1, reversed("abc")),
    "range": lambda x: (x - 1, reversed(range(1, 10, 3))),
    "range_stepped": lambda x: (lambda it: (next(it) * x, it))(reversed(range(5))),
    "shape": lambda x: (x * 2, reversed(x.shape)),
    "list": lambda x: (x * 2, reversed([x, 1])),
}


def rest(it):
    return [v.tolist() if isinstance(v, torch.Tensor) else v for v in it]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_reversed_keeps_cpythons_iterator_type(name, backend):
    f = PROGRAMS[name]
    eager = f(X)
    dynamo.reset()
    compiled = dynamo.optimize(backend)(f)(X)
    assert len(compiled) == len(eager)
    for e, c in zip(eager, compiled):
        assert type(c) is type(e), (type(c), type(e))
        if isinstance(e, torch.Tensor):
            assert torch.equal(c, e)
        elif hasattr(e, "__next__"):
            assert rest(c) == rest(e)
        else:
            assert rest(c) == rest(e)
    assert dynamo.counters()["graphs"] == 1
    assert dynamo.counters()["graph_breaks"] == 0


def test_type_of_reversed_inside_the_frame():
    def f(x):
        return x + len(type(reversed((x, 1))).__name__) + len(type(reversed(range(3))).__name__)

    dynamo.reset()
    assert torch.equal(dynamo.optimize("eager")(f)(X), f(X))
    assert dynamo.counters()["graphs"] == 1
