"""Note [forward-side statistics] (src/autograd/partition.rs): layer_norm's mean and rstd are
forward values. The forward graph computes them (as `aten.mean.dim`, plain sums that join the
layer norm's own kernel) and saves them; the backward graph reads them instead of reducing the
input again, so its layer-norm kernel makes one pass over each row for its sums."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo
import dynamo._C as C


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.ln = nn.LayerNorm(16)

    def forward(self, x):
        return self.ln(self.lin(x) + x)


def _graph(module, x):
    graphs = []

    def capture(gm, example_inputs):
        graphs.append((gm, example_inputs))
        return gm.forward

    dynamo.reset()
    dynamo.optimize(capture)(module)(x)
    (gm, example_inputs), = graphs
    return gm, example_inputs


def _calls(graph, name):
    return [n for n in graph.nodes if n.op == "call_function" and name in str(n.target)]


@pytest.mark.parametrize("partitioner", ["min_cut", "save_all"])
def test_statistics_are_computed_in_the_forward_and_saved(partitioner):
    torch.manual_seed(0)
    module = Block()
    gm, example_inputs = _graph(module, torch.randn(2, 5, 16))
    plan = C.aot_joint(gm, example_inputs, partitioner=partitioner)
    # mean and variance of the norm's input, in the forward graph ...
    assert len(_calls(plan.fw.graph, "aten.mean.dim")) == 2, plan.fw.code
    # ... and no reduction of it in the backward: its sums are of gradients only.
    assert not _calls(plan.bw.graph, "aten.mean.dim"), plan.bw.code
    out = next(n for n in plan.fw.graph.nodes if n.op == "output")
    saved = out.args[0][plan.n_outputs:]
    assert any("rsqrt" in str(getattr(v, "target", "")) or "mean" in str(getattr(v, "target", "")) for v in saved), saved


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("shape, normalized", [((4, 8, 16), (16,)), ((3, 4, 6, 8), (6, 8))])
def test_gradients_equal_eager(backend, shape, normalized):
    torch.manual_seed(1)
    x = torch.randn(*shape) * 3 + 1
    w, b = torch.randn(normalized), torch.randn(normalized)
    g = torch.randn(*shape)

    def fn(x, w, b):
        return (F.layer_norm(x, normalized, w, b, 1e-5) * g).sum()

    got, want = [], []
    for compiled, out in ((False, want), (True, got)):
        args = [t.clone().requires_grad_() for t in (x, w, b)]
        dynamo.reset()
        loss = (dynamo.optimize(backend)(fn) if compiled else fn)(*args)
        loss.backward()
        out.extend([loss.detach(), *[a.grad for a in args]])
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    c = dynamo.counters()
    assert c["aot_graphs"] == 1 and c["aot_backward_graphs"] == 1 and c["aot_eager_graphs"] == 0, c


def test_inductor_backward_makes_one_pass_for_the_statistics(monkeypatch):
    # The backward's kernels sum gradients only: two row sums per layer norm (g * w and
    # g * w * xhat) where the recomputing form had four (mean, variance and those two).
    compiled = []
    real = C.inductor_compile

    def spy(gm, inputs, **kw):
        compiled.append((kw, real(gm, inputs, **kw)))
        return compiled[-1][1]

    monkeypatch.setattr(C, "inductor_compile", spy)
    torch.manual_seed(2)
    module = Block()
    x = torch.randn(4, 8, 16)
    dynamo.reset()
    dynamo.optimize("inductor")(module)(x).sum().backward()
    (fw_kw, fw), (bw_kw, bw) = compiled
    assert bw_kw.get("aten_sum_order") is False
    row_sums = [k for k in bw.kernel_ir.split("\n\n") if "reduce [16]" in k]
    assert sum(k.count("reduce_sum") for k in row_sums) == 2, bw.kernel_ir
    # The forward's layer-norm kernel stores the saved statistics: the same two sums as the
    # norm's own (the kernel builder shares equal expressions), so they cost two stores a row.
    norm = [k for k in fw.kernel_ir.split("\n\n") if "reduce [16]" in k]
    assert len(norm) == 1 and norm[0].count("reduce_sum") == 2, fw.kernel_ir


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_cross_entropy_saves_its_row_statistics(backend):
    # The row max and the sum of exp(x - max) of the logits are forward values: the backward
    # graph computes log_softmax from them without reducing the logits again.
    torch.manual_seed(3)
    lin = nn.Linear(8, 12)
    x, t = torch.randn(16, 8), torch.randint(0, 12, (16,))
    t[3] = -100  # an ignored row

    def fn(x, t):
        return F.cross_entropy(lin(x), t)

    graphs = []

    def capture(gm, example_inputs):
        graphs.append((gm, example_inputs))
        return gm.forward

    dynamo.reset()
    dynamo.optimize(capture)(fn)(x, t)
    (gm, example_inputs), = graphs
    plan = C.aot_joint(gm, example_inputs, partitioner="min_cut")
    assert len(_calls(plan.fw.graph, "amax")) == 1 and len(_calls(plan.fw.graph, "aten.sum.dim_IntList")) == 1, plan.fw.code
    assert not _calls(plan.bw.graph, "log_softmax") and not _calls(plan.bw.graph, "amax"), plan.bw.code
    grads = []
    for compiled in (False, True):
        lin.zero_grad()
        dynamo.reset()
        loss = (dynamo.optimize(backend)(fn) if compiled else fn)(x, t)
        loss.backward()
        grads.append([loss.detach(), lin.weight.grad.clone(), lin.bias.grad.clone()])
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
