"""Functions decorated with `@torch.no_grad()`, `@torch.enable_grad()` or
`@torch.set_grad_enabled(flag)` are traced as their body under that grad mode
(`grad_mode_decorated_call` in src/symbolic/object_protocol.rs): the decorator's
`decorate_context` closure is torch code, but it is not a tensor op. Results, `requires_grad`
of the results, the grad mode after the call (also after an exception) and gradients equal
eager's, with no graph break."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


class EMA(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("avg", torch.zeros(3))

    @torch.no_grad()
    def update(self, y):
        self.avg.mul_(0.9).add_(y.mean(0), alpha=0.1)
        return y.sum()

    def forward(self, x):
        y = self.lin(x)
        s = self.update(y)
        return y * 2, s


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_grad_method_of_a_module(backend):
    torch.manual_seed(0)
    m, ref = EMA(), EMA()
    ref.load_state_dict(m.state_dict())
    opt = dynamo.optimize(backend)(m)
    dynamo.reset()
    for _ in range(2):
        x = torch.randn(4, 3)
        (y, s), (y_ref, s_ref) = opt(x), ref(x)
        torch.testing.assert_close((y, s), (y_ref, s_ref))
        assert s.requires_grad is s_ref.requires_grad is False
        assert y.requires_grad and torch.is_grad_enabled()
        y.sum().backward()
        y_ref.sum().backward()
        torch.testing.assert_close(m.avg, ref.avg)
        torch.testing.assert_close(m.lin.weight.grad, ref.lin.weight.grad)
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, dict(c)


@torch.enable_grad()
def _with_grad(x, w):
    return x * w


@torch.set_grad_enabled(False)
def _without_grad(x, w):
    return x * w


@pytest.mark.parametrize("backend", BACKENDS)
def test_enable_grad_and_set_grad_enabled_decorators(backend):
    def f(x, w):
        with torch.no_grad():
            a = _with_grad(x, w)
        b = _without_grad(x, w)
        return a, b, torch.is_grad_enabled()

    w = torch.randn(3, requires_grad=True)
    x = torch.randn(3)
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(x, w)
    want = f(x, w)
    torch.testing.assert_close(got[:2], want[:2])
    assert [t.requires_grad for t in got[:2]] == [t.requires_grad for t in want[:2]] == [True, False]
    assert got[2] is want[2] is True
    assert dynamo.counters()["graph_breaks"] == 0


@torch.no_grad()
def _raises(x):
    if x.sum() > 0:
        pass
    raise KeyError("inside")


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_mode_is_restored_after_an_exception(backend):
    def f(x):
        try:
            _raises(x)
        except KeyError as e:
            return x * 2, torch.is_grad_enabled(), str(e)

    x = torch.ones(2, requires_grad=True)
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(x)
    want = f(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:] and got[0].requires_grad
    assert torch.is_grad_enabled()


@torch.no_grad()
def _gen(x):
    yield x * 2
    yield x * 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_decorated_generator_keeps_its_mode_while_it_runs(backend):
    def f(x):
        return [y.requires_grad for y in _gen(x)], sum(_gen(x))

    x = torch.ones(2, requires_grad=True)
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(x)
    want = f(x)
    assert got[0] == want[0] == [False, False]
    torch.testing.assert_close(got[1], want[1])
