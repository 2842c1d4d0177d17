"""Grad-mode regions inside a compiled frame (Note [grad-mode regions] in dynamo/aot.py): a
`torch.enable_grad()` / `set_grad_enabled(True)` block under an ambient `torch.no_grad()`, a
`no_grad` block cut by a graph break, on every backend. Each compares with eager: values,
`requires_grad` and `grad_fn` presence of every output, the gradients, the grad mode the call
leaves, and the graph and break counts."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


def enable_grad_block(x):
    with torch.enable_grad():
        return x * 2


def enable_grad_block_with_break(x):
    with torch.enable_grad():
        print("", end="")
        return x * 2


def set_grad_enabled_block(x):
    y = x + 1  # computed under the ambient no_grad: no history
    with torch.set_grad_enabled(True):
        z = x * y
        s = z.sin()
    return y, z, s, z.cos()  # cos: back under no_grad


def input_gradient(x, w):
    # A gradient with respect to an input inside an evaluation loop.
    with torch.enable_grad():
        x = x.detach().requires_grad_()
        loss = (x * w).sum()
        return torch.autograd.grad(loss, x)[0]


def no_grad_block_with_break(x):
    y = x * 2
    with torch.no_grad():
        print("", end="")
        z = x * 3
    return y, z, y * z


def describe(out):
    """(values, requires_grad, has grad_fn) of each tensor output."""
    outs = out if isinstance(out, tuple) else (out,)
    return [(o.detach(), o.requires_grad, o.grad_fn is not None) for o in outs]


def compare(fn, ambient_grad, backend, make_args, n_graphs, n_breaks):
    dynamo.reset()
    opt = dynamo.optimize(backend)(fn)
    results = []
    base = make_args()
    for run in (fn, opt):
        args = [a.detach().clone().requires_grad_(a.requires_grad) for a in base]
        with torch.set_grad_enabled(ambient_grad):
            out = run(*args)
            mode_after = torch.is_grad_enabled()
        outs = out if isinstance(out, tuple) else (out,)
        diff = [o for o in outs if o.requires_grad]
        leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        grads = torch.autograd.grad(sum(o.sum() for o in diff), leaves, allow_unused=True) if diff and leaves else ()
        results.append((describe(out), mode_after, grads))
    (e_out, e_mode, e_grads), (c_out, c_mode, c_grads) = results
    assert c_mode == e_mode == ambient_grad
    assert len(c_out) == len(e_out)
    for (ev, erg, efn), (cv, crg, cfn) in zip(e_out, c_out):
        torch.testing.assert_close(cv, ev)
        assert (crg, cfn) == (erg, efn)
    assert len(c_grads) == len(e_grads)
    for eg, cg in zip(e_grads, c_grads):
        assert (eg is None) == (cg is None)
        if eg is not None:
            torch.testing.assert_close(cg, eg)
    counts = dynamo.counters()
    assert (counts["graphs"], counts["graph_breaks"]) == (n_graphs, n_breaks)


@pytest.mark.parametrize("backend", BACKENDS)
def test_enable_grad_under_no_grad(backend):
    compare(enable_grad_block, False, backend, lambda: [torch.ones(2, requires_grad=True)], 1, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_enable_grad_under_no_grad_cut_by_a_break(backend):
    # The graph before the break only switches grad on; the resume function runs under it.
    compare(enable_grad_block_with_break, False, backend, lambda: [torch.ones(2, requires_grad=True)], 2, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_set_grad_enabled_under_no_grad_mixes_regions(backend):
    compare(set_grad_enabled_block, False, backend, lambda: [torch.randn(3, requires_grad=True)], 1, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_gradient_under_no_grad(backend):
    dynamo.reset()
    with torch.no_grad():
        e = input_gradient(torch.ones(2), torch.full((2,), 3.0))
        c = dynamo.optimize(backend)(input_gradient)(torch.ones(2), torch.full((2,), 3.0))
        assert not torch.is_grad_enabled()
    assert torch.equal(c, e) and c.requires_grad == e.requires_grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_grad_block_cut_by_a_break_under_grad(backend):
    # The first graph computes `y` with grad on, then switches grad off for the resume function.
    compare(no_grad_block_with_break, True, backend, lambda: [torch.randn(3, requires_grad=True)], 2, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_mode_regions_repeat_calls_hit_the_cache(backend):
    # Second call: same guards, same graphs; the ambient mode is still restored.
    dynamo.reset()
    opt = dynamo.optimize(backend)(set_grad_enabled_block)
    for _ in range(2):
        x = torch.randn(3, requires_grad=True)
        with torch.no_grad():
            y, z, s, c = opt(x)
            assert not torch.is_grad_enabled()
        assert (y.requires_grad, z.requires_grad, s.requires_grad, c.requires_grad) == (False, True, True, False)
        s.sum().backward()
        torch.testing.assert_close(x.grad, (x.detach() + 1) * (x.detach() * (x.detach() + 1)).cos())
    assert dynamo.counters()["graphs"] == 1


def switches_grad_off_for_the_caller(x):
    y = x * 2
    torch.set_grad_enabled(False)
    return y, y * 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_set_grad_enabled_call_leaves_grad_off(backend):
    # The graph leaves grad mode off (its autograd.Function must not restore it).
    dynamo.reset()
    try:
        e = switches_grad_off_for_the_caller(torch.ones(2, requires_grad=True))
        e_mode = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        c = dynamo.optimize(backend)(switches_grad_off_for_the_caller)(torch.ones(2, requires_grad=True))
        c_mode = torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)
    assert c_mode == e_mode is False
    assert describe(c)[0][1:] == describe(e)[0][1:] == (True, True)
    assert describe(c)[1][1:] == describe(e)[1][1:] == (False, False)
    assert dynamo.counters()["graphs"] == 1
