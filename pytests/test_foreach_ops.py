"""`torch._foreach_*` ops in a trace (issue 7, deliverable 3): an in-place foreach op returns the
very list it wrote (`torch._foreach_add_(xs, 1) is xs` in eager), which the trace gave up on
("op result of type list holds tensors", a break, and a frame of only in-place foreach calls
compiled nothing). Each program is one graph, equal to eager in its result and in the lists it
mutated, on both backends, called twice."""

import pytest
import torch

import dynamo


def chain(xs):
    ys = torch._foreach_mul(xs, 2)
    return torch._foreach_add(ys, 1)


def in_place_identity(xs):
    r = torch._foreach_add_(xs, 1)
    return xs[0] * 2, r is xs, type(r).__name__


def in_place_chain(xs):
    torch._foreach_mul_(xs, 3)
    torch._foreach_add_(xs, [1.0, 2.0])
    torch._foreach_addcmul_(xs, xs, xs, value=0.5)
    return xs


def sgd_momentum(params, grads, bufs):
    torch._foreach_mul_(bufs, 0.9)
    torch._foreach_add_(bufs, grads)
    torch._foreach_add_(params, bufs, alpha=-0.1)
    return torch._foreach_norm(params)


def lists(n, scale):
    return [[torch.arange(2.0) * scale + i, torch.ones(3) * (i + 2)] for i in range(n)]


@pytest.mark.parametrize("fn,n", [(chain, 1), (in_place_identity, 1), (in_place_chain, 1), (sgd_momentum, 3)], ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_foreach_program_is_one_graph(fn, n, backend):
    dynamo.reset()
    explained = dynamo.explain(fn)(*lists(n, 1.0))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    dynamo.reset()
    compiled = dynamo.optimize(backend)(fn)
    for scale in (1.0, 0.5):
        eager_in, compiled_in = lists(n, scale), lists(n, scale)
        want, got = fn(*eager_in), compiled(*compiled_in)
        assert repr(got) == repr(want)
        for a, b in zip(eager_in, compiled_in):
            assert all(torch.equal(u, v) for u, v in zip(a, b))
