"""Repeated calls of a math function on the same arguments are computed once (Note [one
evaluation of a math function] in `src/inductor/cse.rs`).

Eager computes `torch.erf(x)` twice with one routine, so both give the same bits; the generated
code computed the two nodes in two kernels whose loops took different routines, so
`erf(x) - erf(x).min(1).values > 0` held at a row's minimum (the differential fuzzer's inductor
seed 2500000, id 6052). Calls whose values reach the graph's outputs stay separate tensors."""

import pytest
import torch

import dynamo


def _inputs(seed, shape=(4, 4)):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


@pytest.mark.parametrize("seed", [1234, 0, 7])
@pytest.mark.parametrize("op", ["erf", "exp", "tanh", "sigmoid", "sin", "log1p"])
def test_difference_from_the_row_minimum_is_zero_there(seed, op):
    fn = getattr(torch, op)

    def f(x):
        d = fn(x) - fn(x).min(1, keepdim=True).values
        return (d > 0).float(), d

    x = _inputs(seed, (4, 4)).abs() if op == "log1p" else _inputs(seed, (4, 4))
    want = f(x)
    dynamo.reset()
    got = dynamo.optimize("inductor")(f)(x)
    assert torch.equal(got[0], want[0])
    assert torch.equal(got[1] == 0, want[1] == 0)


def test_fuzzer_program_6052():
    class C:
        def __init__(self, w, n):
            self.w = w
            self.n = n

        def scale(self, t):
            return t * self.n + self.w

    def f(x, y, obj):
        v1 = torch.stack([y[i] * i for i in range(4)])
        v2 = obj.scale(torch.lerp(v1, x, 0.3))
        return (((torch.erf(x) - torch.erf(x).min(1, keepdim=True).values) > 0) ^ (v2 > 0)).float()

    g = torch.Generator().manual_seed(1234)
    x, y, w = (torch.randn(4, 4, generator=g) for _ in range(3))
    want = f(x, y, C(w, 2))
    dynamo.reset()
    assert torch.equal(dynamo.optimize("inductor")(f)(x, y, C(w, 2)), want)


def test_returned_calls_stay_separate_tensors():
    def f(x):
        a = torch.exp(x)
        b = torch.exp(x)
        return a, b, torch.exp(x).view(-1)

    x = _inputs(3)
    opt = dynamo.optimize("inductor")(f)
    a, b, c = opt(x)
    assert a is not b and a.data_ptr() != b.data_ptr() and c.data_ptr() not in (a.data_ptr(), b.data_ptr())
    b0, c0 = b.clone(), c.clone()
    a.add_(1)
    assert torch.equal(b, b0) and torch.equal(c, c0)
    assert torch.allclose(b, torch.exp(x))


def test_merged_call_read_by_a_view_and_an_output():
    # One call is read only inside the graph, the other is returned: the returned one is kept.
    def f(x):
        s = torch.tanh(x).sum(1)
        t = torch.tanh(x)
        return t, s

    x = _inputs(4)
    want = f(x)
    dynamo.reset()
    got = dynamo.optimize("inductor")(f)(x)
    assert torch.allclose(got[0], want[0])
    assert torch.allclose(got[1], want[1])
    assert got[0].data_ptr() != got[1].data_ptr()


def test_in_place_forms_are_not_merged():
    def f(x):
        y = x.clone()
        y.exp_()
        z = torch.exp(x)
        y.add_(1)
        return y, z

    x = _inputs(5)
    want = f(x)
    dynamo.reset()
    got = dynamo.optimize("inductor")(f)(x)
    assert torch.allclose(got[0], want[0]) and torch.allclose(got[1], want[1])
    assert not torch.equal(got[0], got[1])


@pytest.mark.parametrize("training", [False, True])
def test_training_graphs(training):
    # The forward and backward graphs AOTAutograd makes go through the same pass.
    def f(x, w):
        h = torch.sigmoid(x @ w) * torch.sigmoid(x @ w)
        return (h - torch.sigmoid(x @ w).amin(1, keepdim=True)).sum()

    x = _inputs(6, (8, 4))
    w = _inputs(8, (4, 4)).requires_grad_(training)
    want = f(x, w)
    if training:
        want.backward()
        gw, w.grad = w.grad.clone(), None
    dynamo.reset()
    got = dynamo.optimize("inductor")(f)(x, w)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)
    if training:
        got.backward()
        assert torch.allclose(w.grad, gw, rtol=1e-5, atol=1e-6)
