"""A reduction joins the pointwise kernel over its whole input space whose buffers must also be
kept (Note [stored prologues] in src/inductor/scheduler.rs): a training graph's residual sum
before a layer norm, saved for the backward, is stored from inside the norm's kernel instead of
being a kernel of its own. Results equal eager's; the kernel count shows the fusion, and
`DYNAMO_INDUCTOR_STORED_PROLOGUES=0` gives the two kernels back."""

import pytest
import torch
import torch.nn.functional as F

import dynamo._C as C


def residual_norm(x, h, w, b):
    s = x + h * 2
    return s, F.layer_norm(s, (64,), w, b)


def sum_and_softmax(x, y):
    e = torch.exp(x - y)
    return e, e / e.sum(-1, keepdim=True), (x * y).sum(0)


CASES = {
    "residual_norm": (residual_norm, lambda: (torch.randn(4, 8, 64), torch.randn(4, 8, 64), torch.randn(64), torch.randn(64)), 1),
    # The column sum over dim 0 reads x * y over the same space but reduces another dim: its
    # kernel is another one.
    "sum_and_softmax": (sum_and_softmax, lambda: (torch.randn(6, 33), torch.randn(6, 33)), 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("on", [True, False])
def test_stored_prologue_is_one_kernel_and_exact(name, on, monkeypatch):
    fn, make, kernels = CASES[name]
    monkeypatch.setenv("DYNAMO_INDUCTOR_STORED_PROLOGUES", "1" if on else "0")
    args = make()
    compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), list(args))
    if on:
        assert len(compiled.kernel_names) == kernels, compiled.plan
    else:
        assert len(compiled.kernel_names) > kernels, compiled.plan
    for _ in range(2):
        args = make()
        for got, want in zip(compiled(*args), fn(*args)):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_stored_prologue_in_a_training_step_matches_eager():
    torch.manual_seed(0)
    import dynamo

    lin, norm = torch.nn.Linear(32, 32), torch.nn.LayerNorm(32)

    def block(x):
        return norm(x + lin(x)).pow(2).sum()

    x = torch.randn(8, 32)
    ref = torch.autograd.grad(block(x), list(lin.parameters()) + list(norm.parameters()))
    dynamo.reset()
    loss = dynamo.optimize("inductor")(block)(x)
    got = torch.autograd.grad(loss, list(lin.parameters()) + list(norm.parameters()))
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
