"""A `for` loop over a range or a tuple of literals whose body breaks the graph continues in a
resume function that receives the loop's iterator; its items are guarded only when the trace
uses them (Note [items of iterators from outside the frame] in src/symbolic/builder.rs), so one
resume function serves every iteration instead of one compile per iteration."""

import warnings

import pytest
import torch

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


def power_iteration(A, n):
    v = torch.ones(A.shape[0])
    for i in range(n):
        v = A @ v
        v = v / v.norm()
        if v[0] < 0:  # data-dependent: a graph break in the loop body
            break
    return v


@pytest.mark.parametrize("backend", BACKENDS)
def test_range_loop_with_a_break_compiles_its_resume_function_once(backend):
    A = torch.rand(4, 4) + 0.1
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = dynamo.optimize(backend)(power_iteration)(A, 50)
    assert torch.allclose(out, power_iteration(A, 50), atol=1e-6)
    c = dynamo.counters()
    assert not [x for x in w if "cache_size_limit" in str(x.message)]
    assert c["cache_limit_hits"] == 0 and c["recompiles"] <= 2, c


def loop_using_the_index(x, n):
    out = []
    for i in range(n):
        x = x + i
        if x.sum() > 1000:
            break
        out.append(i * 2)
    return x, out, i


@pytest.mark.parametrize("backend", BACKENDS)
def test_loop_index_used_by_the_trace_is_guarded(backend):
    x = torch.zeros(2)
    e = loop_using_the_index(x, 6)
    c = dynamo.optimize(backend)(loop_using_the_index)(x, 6)
    assert torch.equal(c[0], e[0]) and c[1] == e[1] and c[2] == e[2]


def loop_over_tuple(x):
    seen = []
    for s in (1.5, None, "a", 3, (4, 5)):
        if x.sum() > 0:
            x = x * 2
        seen.append(s)
        print(s)
    return x, seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_loop_over_a_tuple_of_literals_with_a_break(backend, capsys):
    x = torch.ones(2)
    e = loop_over_tuple(x)
    eager_out = capsys.readouterr().out
    c = dynamo.optimize(backend)(loop_over_tuple)(x)
    assert capsys.readouterr().out == eager_out
    assert torch.equal(c[0], e[0]) and c[1] == e[1]
    assert dynamo.counters()["cache_limit_hits"] == 0


def test_iterator_passed_in_recompiles_only_when_its_items_are_used():
    def step(it, x):
        k = next(it)  # taken, not used by the trace
        return x + 1

    cf = dynamo.optimize("eager")(step)
    it = iter(range(10))
    for n in range(5):
        assert cf(it, torch.zeros(1)).item() == 1.0
    assert next(it) == 5
    assert dynamo.counters()["recompiles"] == 0

    def use(it, x):
        return x + next(it)

    cf = dynamo.optimize("eager")(use)
    it = iter((1, 2, 3))
    assert [cf(it, torch.zeros(1)).item() for _ in range(3)] == [1.0, 2.0, 3.0]
    with pytest.raises(StopIteration):
        cf(it, torch.zeros(1))
