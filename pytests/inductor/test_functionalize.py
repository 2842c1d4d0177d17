"""Functionalization (src/inductor/functionalize.rs): graphs with in-place ops run on generated
kernels, and every mutation eager would make is visible afterwards (inputs written back, aliases
preserved), or the graph runs through torch when aliasing makes renaming unsound.
"""

import operator

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo
import dynamo._C as C


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def compile_fn(fn, inputs):
    gm = torch.fx.symbolic_trace(fn)
    return C.inductor_compile(gm, list(inputs))


def run_both(fn, *inputs):
    """Runs `fn` eagerly and compiled on separate clones of `inputs`; returns both results and
    both input lists (after the call), plus the CompiledGraph."""
    eager_in = [t.clone() for t in inputs]
    comp_in = [t.clone() for t in inputs]
    C.inductor_reset_counters()
    compiled = compile_fn(fn, [t.clone() for t in inputs])
    want = fn(*eager_in)
    got = compiled(*comp_in)
    return got, want, comp_in, eager_in, compiled


def assert_same(got, want):
    if isinstance(want, torch.Tensor):
        got, want = (got,), (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: (x * 2).add_(1).sin(),
        lambda x: F.relu(x * 2, inplace=True) + 1,
        lambda x: torch.relu_(x - 1) * 3,
        lambda x: (x + 1).mul_(x).clamp_(min=0.5),
        lambda x: operator.iadd(x.sin(), x.cos()),
    ],
    ids=["add_", "relu_inplace_kw", "torch.relu_", "method_chain", "iadd"],
)
def test_inplace_on_intermediate_runs_kernels(fn):
    x = randn(8, 16)
    got, want, comp_in, eager_in, compiled = run_both(fn, x)
    assert_same(got, want)
    assert_same(comp_in, eager_in)
    counters = C.inductor_counters()
    assert counters["eager_graphs"] == 0, compiled.plan
    assert counters["kernels_compiled"] == 1 and counters["fallback_nodes"] == 0, compiled.plan


def test_input_mutation_is_written_back():
    def fn(x, y):
        x.add_(y)
        return x * 2

    got, want, comp_in, eager_in, compiled = run_both(fn, randn(4, 5), randn(4, 5, seed=1))
    assert_same(got, want)
    assert_same(comp_in, eager_in)
    assert "writeback x.copy_(add_)" in compiled.plan
    assert C.inductor_counters()["eager_graphs"] == 0


def test_returned_mutated_input_keeps_identity():
    def fn(x):
        return x.mul_(3).relu_()

    x = randn(6, 6)
    compiled = compile_fn(fn, [x.clone()])
    want = fn(x.clone())
    out = compiled(x)
    assert out is x
    torch.testing.assert_close(x, want)
    assert not compiled.is_eager


def test_mutation_of_a_view_runs_through_torch():
    def fn(x):
        v = x.view(-1)
        x.add_(1)
        return v * 2

    got, want, comp_in, eager_in, compiled = run_both(fn, randn(3, 4))
    assert_same(got, want)
    assert_same(comp_in, eager_in)
    assert compiled.is_eager
    assert "share a storage" in compiled.plan


def test_aliased_inputs_fall_back_at_call_time():
    def fn(x, y):
        x.add_(1)
        return y * 2

    x = randn(4, 4)
    compiled = compile_fn(fn, [x.clone(), x.clone()])
    a = x.clone()
    want_in = x.clone()
    want = fn(want_in, want_in)
    got = compiled(a, a)  # the same tensor twice: y sees x's mutation in eager
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(a, want_in)


def test_out_keyword_runs_on_a_copy():
    # Note [out= on a copy]: torch's out= overload writes a clone of `y`, the new value of `y`
    # for later readers and for the writeback; the rest of the graph is kernels.
    def fn(x, y):
        torch.add(x, 1, out=y)
        return y * 2

    got, want, comp_in, eager_in, compiled = run_both(fn, randn(4), randn(4, seed=1))
    assert_same(got, want)
    assert_same(comp_in, eager_in)
    assert not compiled.is_eager
    assert "out_on_copy" in compiled.plan and compiled.kernel_names, compiled.plan


class Block(nn.Module):
    """A ResNet basic block's tail: batch norm, in-place residual add, in-place ReLU."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.bn(self.conv(x))
        out += x
        return self.relu(out)


def test_resnet_block_under_optimize_runs_kernels():
    torch.manual_seed(0)
    m = Block().eval()
    x = randn(2, 4, 8, 8)
    dynamo.reset()
    C.inductor_reset_counters()
    with torch.no_grad():
        want = m(x)
        got = dynamo.optimize("inductor")(m)(x)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    counters = C.inductor_counters()
    assert counters["eager_graphs"] == 0 and counters["kernel_calls"] >= 1, counters


def test_view_after_last_mutation_of_intermediate_is_renamed():
    # The view reads the final value: no aliasing hazard, so the graph still runs on kernels.
    def fn(x):
        y = x * 2
        y.add_(1)
        return y.t() * 3

    got, want, comp_in, eager_in, compiled = run_both(fn, randn(4, 6))
    assert_same(got, want)
    assert not compiled.is_eager, compiled.plan


def test_view_after_mutation_of_input_keeps_torch():
    # Eager returns a view of x itself; only torch can give that alias.
    def fn(x):
        x.add_(1)
        return x.view(-1)

    x = randn(3, 4)
    compiled = compile_fn(fn, [x.clone()])
    a = x.clone()
    out = compiled(a)
    out.add_(100)  # visible through `a` in eager
    b = x.clone()
    ref = fn(b)
    ref.add_(100)
    torch.testing.assert_close(a, b)


def test_inplace_dunder_methods_are_mutations():
    # `a.__iadd__(b)` called as a method is an in-place op like `a += b` (found by QA).
    def fn(a, b):
        tmp = a + b
        a.__iadd__(b)
        return tmp.sum() + a.sum()

    got, want, comp_in, eager_in, compiled = run_both(fn, torch.zeros(3), torch.ones(3))
    assert_same(got, want)
    assert_same(comp_in, eager_in)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x[:, :1].squeeze(1),
        lambda x: x[:, :1].expand(4, 5, 8),
        lambda x: x.unsqueeze(1).squeeze(),
    ],
)
def test_chained_views_returned_alias_the_input(fn):
    # Every view on the way to an output is made by torch, so writes through the output reach
    # the input as in eager (found by QA).
    x = randn(4, 6, 8)
    dynamo.reset()
    with torch.no_grad():
        out = dynamo.optimize("inductor")(fn)(x)
    want = fn(x.clone())
    assert out.stride() == want.stride()
    out.fill_(0)
    assert (x[:, 0] == 0).all()


def test_a_failing_step_leaves_eagers_state_and_error():
    """Note [errors rerun eagerly]: `x.mul_(2)` then a gather with an index out of range. Eager
    doubles x and raises; the compiled graph defers the mutation to its end, so on the error it
    reruns gm.forward: the same exception, and x doubled exactly once (found by a new-user trial)."""
    def g(x, i):
        x.mul_(2)
        return x.sin().gather(0, i)

    x, i = torch.ones(4), torch.tensor([9])
    compiled = C.inductor_compile(torch.fx.symbolic_trace(g), [x.clone(), i])
    with pytest.raises(RuntimeError) as eager_err:
        g(x.clone(), i)
    with pytest.raises(RuntimeError) as got_err:
        compiled(x, i)
    assert str(got_err.value) == str(eager_err.value)
    assert torch.equal(x, torch.full((4,), 2.0))
    ok = torch.tensor([1])
    assert torch.equal(compiled(x, ok), g(torch.full((4,), 2.0), ok))


# Note [version counter of written-back inputs] (breaker5 finding 17): every in-place op on an
# input bumps its `_version` once, as eager does, though the graph writes it back with one copy.
def _bumps_input_three_times(x, y):
    x.add_(1)
    x.mul_(2)
    y.sub_(1)
    x.clamp_(min=0)
    return x + y


def _reads_version_in_frame(x):
    x.add_(1)
    x.mul_(2)
    return x._version


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_inplace_ops_bump_version_as_eager(backend):
    ex, ey = torch.ones(4), torch.ones(4)
    want = _bumps_input_three_times(ex, ey)
    dynamo.reset()
    cx, cy = torch.ones(4), torch.ones(4)
    got = dynamo.optimize(backend)(_bumps_input_three_times)(cx, cy)
    assert torch.equal(got, want) and torch.equal(cx, ex) and torch.equal(cy, ey)
    assert (cx._version, cy._version) == (ex._version, ey._version) == (3, 1)
    assert dynamo.counters()["graphs"] == 1

    x = torch.ones(2)
    want = (_reads_version_in_frame(x), x._version)
    dynamo.reset()
    x = torch.ones(2)
    got = (dynamo.optimize(backend)(_reads_version_in_frame)(x), x._version)
    assert got == want == (2, 2)


def test_buffer_updates_bump_version_as_eager():
    def make():
        torch.manual_seed(0)
        return nn.BatchNorm1d(3).train()

    x = randn(4, 3)
    m = make()
    m(x)
    want = [b._version for b in m.buffers()]
    dynamo.reset()
    m = make()
    dynamo.optimize("inductor")(m)(x)
    assert [b._version for b in m.buffers()] == want
