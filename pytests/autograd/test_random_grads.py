"""Random compositions of differentiable ops (fixed seeds): the gradients of every input through
dynamo's AOTAutograd equal eager's, for ``aot_eager`` and ``inductor``. Catches rule
interactions the one-op gradchecks cannot: accumulation into values used several times,
broadcasting chains, views of intermediates, reductions feeding pointwise ops."""

import random

import pytest
import torch
import torch.nn.functional as F

import dynamo

UNARY = [
    lambda a: torch.relu(a),
    lambda a: torch.tanh(a),
    lambda a: torch.sigmoid(a),
    lambda a: a.exp() * 0.1,
    lambda a: F.silu(a),
    lambda a: F.gelu(a),
    lambda a: -a,
    lambda a: a * a,
    lambda a: torch.softmax(a, -1),
    lambda a: F.log_softmax(a, 0),
    lambda a: a.t().t(),
    lambda a: a.transpose(0, 1).reshape(a.shape),
    lambda a: a - a.mean(-1, keepdim=True),
    lambda a: a / (a.sum(0, keepdim=True).abs() + 1.0),
    lambda a: F.layer_norm(a, a.shape[-1:]),
    lambda a: a[:, :2].repeat_interleave(1, 0).sum() + a,
    lambda a: torch.cat([a[:, :1], a[:, 1:] * 2], 1),
]
BINARY = [
    lambda a, b: a + b,
    lambda a, b: a * b,
    lambda a, b: a - b * 0.5,
    lambda a, b: a / (b.abs() + 1.0),
    lambda a, b: a @ b.t() @ b,
]


def program(seed):
    """A random function of (x [4, 6], w [6, 6], v [6]) as a list of steps."""
    rng = random.Random(seed)
    steps = []
    for _ in range(rng.randint(3, 7)):
        if rng.random() < 0.5:
            steps.append(("u", rng.randrange(len(UNARY)), rng.randrange(3)))
        else:
            steps.append(("b", rng.randrange(len(BINARY)), rng.randrange(3), rng.randrange(3)))

    def fn(x, w, v):
        vals = [x, x @ w, x + v]
        for step in steps:
            if step[0] == "u":
                vals.append(UNARY[step[1]](vals[-1 - step[2] % len(vals)]))
            else:
                a, b = vals[-1 - step[2] % len(vals)], vals[-1 - step[3] % len(vals)]
                vals.append(BINARY[step[1]](a, b))
        return (vals[-1] * vals[-2]).sum() + vals[-1].mean()

    return fn


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("seed", range(40))
def test_random_program_gradients(seed, backend):
    fn = program(seed)
    torch.manual_seed(seed)
    inputs = [torch.randn(4, 6), torch.randn(6, 6) * 0.3, torch.randn(6)]
    ref = [t.clone().requires_grad_() for t in inputs]
    got = [t.clone().requires_grad_() for t in inputs]
    expected = fn(*ref)
    expected.backward()
    out = dynamo.optimize(backend)(fn)(*got)
    out.backward()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5)
    c = dynamo.counters()
    # Ops without a rule (repeat_interleave) split the graph; a segment whose output is one of its
    # inputs runs eagerly: both only where a split happened.
    assert c["aot_backward_graphs"] >= 1 and c["aot_eager_graphs"] <= c["aot_graph_splits"], c
