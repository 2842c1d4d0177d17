"""Note [identity dropout] (src/inductor/alias.rs): `F.dropout(x, 0.0, True)` and
`F.dropout(x, p, False)` return `x` itself in torch; the runtime passes the input object on
instead of calling `F.dropout`, even where the result is a graph output. A dropout that draws
random numbers keeps its call."""

import torch
import torch.fx
import torch.nn.functional as F

import dynamo._C as C


def _compile(fn, *inputs):
    gm = torch.fx.symbolic_trace(fn)
    return C.inductor_compile(gm, list(inputs))


def test_dropout_of_an_input_returns_the_input_object():
    x = torch.randn(4, 8)
    cg = _compile(lambda t: (F.dropout(t, 0.0, True), F.dropout(t, 0.5, False)), x)
    assert cg.plan.count("dropout returns its input") == 2, cg.plan
    a, b = cg(x)
    assert a is x and b is x  # as eager: F.dropout(x, 0.0, True) is x


def test_dropout_of_a_kernel_output_read_by_the_output_and_a_kernel():
    x = torch.randn(4, 8)

    def fn(t):
        h = F.dropout(torch.tanh(t), 0.0, True)
        return h, h * 2 + 1

    cg = _compile(fn, x)
    assert "dropout returns its input" in cg.plan, cg.plan
    h, y = cg(x)
    torch.testing.assert_close(h, torch.tanh(x))
    torch.testing.assert_close(y, torch.tanh(x) * 2 + 1)


def test_random_dropout_keeps_its_call():
    x = torch.ones(64, 64)
    cg = _compile(lambda t: (F.dropout(t, 0.5, True),), x)
    assert "dropout returns its input" not in cg.plan, cg.plan
    (y,) = cg(x)
    assert y is not x and ((y == 0) | (y == 2)).all() and (y == 0).any()
