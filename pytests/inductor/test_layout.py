"""Layout optimization (src/inductor/layout.rs): graphs with 2-d convolutions run channels-last.

Each case compares the compiled graph with eager (values, output strides), checks that the
convolutions were given channels-last operands (the plan names the inserted conversions), that
the pointwise ops between convolutions still run on generated kernels, and that the run-time
checks of fallback results never fail (a failure would run the whole graph eagerly every call).
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo
import dynamo._C as C


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class ConvBnAct(nn.Module):
    def __init__(self, cin, cout, k=3, stride=1, groups=1, act=nn.ReLU):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = act(inplace=True) if act is not None else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Block(nn.Module):
    """Residual block with a squeeze-excitation branch ([N, C, 1, 1] convolutions)."""

    def __init__(self, c):
        super().__init__()
        self.a = ConvBnAct(c, c)
        self.dw = ConvBnAct(c, c, groups=c, act=nn.Hardswish)
        self.se1 = nn.Conv2d(c, c // 2, 1)
        self.se2 = nn.Conv2d(c // 2, c, 1)

    def forward(self, x):
        y = self.dw(self.a(x))
        s = F.adaptive_avg_pool2d(y, 1)
        s = F.hardsigmoid(self.se2(F.relu(self.se1(s))))
        return F.relu(y * s + x)


class Net(nn.Module):
    def __init__(self, head=True):
        super().__init__()
        self.stem = ConvBnAct(3, 16, stride=2)
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.block = Block(16)
        self.head = head
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        y = self.block(self.pool(self.stem(x)))
        if not self.head:
            return y
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


def init(m, seed=0):
    torch.manual_seed(seed)
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 2.0)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.5, 0.5)
    return m.eval()


def run(m, x, calls=3):
    dynamo.reset()
    C.inductor_reset_counters()
    with torch.no_grad():
        want = m(x)
        for _ in range(calls):
            with dynamo.optimize("inductor"):
                got = m(x)
    return want, got, C.inductor_counters()


@pytest.mark.parametrize("shape", [(2, 3, 32, 32), (1, 3, 17, 23)])
@pytest.mark.parametrize("head", [True, False])
def test_conv_net_runs_channels_last(shape, head):
    m = init(Net(head=head))
    x = randn(*shape)
    want, got, c = run(m, x)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    # The output keeps eager's (contiguous) strides even though the convolutions ran NHWC.
    assert got.stride() == want.stride()
    assert c["guard_failures"] == 0 and c["eager_graphs"] == 0, c
    assert c["kernels_compiled"] >= 5, c
    assert c["kernel_calls"] == 3 * c["kernels_compiled"], c


def conv_bn_relu_twice(x, w1, w2, scale, shift):
    y = torch.relu(F.conv2d(x, w1, None, 1, 1) * scale + shift)
    return torch.relu(F.conv2d(y, w2, None, 1, 1) * scale + shift)


def test_plan_shows_conversions_and_fused_pointwise():
    x, w1, w2 = randn(2, 8, 12, 12), randn(8, 8, 3, 3, seed=1), randn(8, 8, 3, 3, seed=2)
    scale, shift = randn(1, 8, 1, 1, seed=3), randn(1, 8, 1, 1, seed=4)
    gm = torch.fx.symbolic_trace(conv_bn_relu_twice)
    C.inductor_reset_counters()
    compiled = C.inductor_compile(gm, [x, w1, w2, scale, shift])
    plan = compiled.plan
    # Only x is converted (weights keep their order: oneDNN reorders them itself); the first
    # relu writes the second conv's input NHWC directly.
    assert plan.count("channels_last") == 1, plan
    got = compiled(x, w1, w2, scale, shift)
    want = conv_bn_relu_twice(x, w1, w2, scale, shift)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert got.stride() == want.stride()
    assert C.inductor_counters()["guard_failures"] == 0


def test_channels_last_input_needs_no_input_conversion():
    m = init(Net(head=False))
    x = randn(2, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    want, got, c = run(m, x)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert got.stride() == want.stride(), (got.stride(), want.stride())
    assert c["guard_failures"] == 0, c


def test_layout_opt_off_gives_the_same_values(monkeypatch):
    m = init(Net())
    x = randn(2, 3, 32, 32)
    want, on, c_on = run(m, x)
    monkeypatch.setenv("DYNAMO_LAYOUT_OPT", "0")
    _, off, c_off = run(m, x)
    torch.testing.assert_close(on, off, atol=1e-5, rtol=1e-5)
    assert c_on["guard_failures"] == 0 and c_off["guard_failures"] == 0


def test_conv_output_returned_directly_and_intermediate_returned():
    def f(x, w, b):
        y = F.conv2d(x, w, b, padding=1)
        z = torch.relu(y) * 2
        return y, z, F.conv2d(z, w, b, padding=1)

    args = [randn(2, 3, 10, 12), randn(3, 3, 3, 3, seed=1), randn(3, seed=2)]
    compiled = C.inductor_compile(torch.fx.symbolic_trace(f), args)
    assert "channels_last" in compiled.plan
    got, want = compiled(*args), f(*args)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)
        assert g.stride() == w.stride()


def test_graph_without_conv_is_untouched():
    def f(x):
        return torch.relu(x) + 1

    compiled = C.inductor_compile(torch.fx.symbolic_trace(f), [randn(2, 3, 4, 5)])
    assert "channels_last" not in compiled.plan


def test_training_batch_norm_keeps_the_traced_layout():
    """Note [batch statistics] in layout.rs: batch statistics over few values per channel
    amplify the summation-order difference of torch's channels-last batch norm, so graphs with
    a training-mode batch norm are left as traced (and equal eager exactly)."""

    def f(x, w, rm, rv):
        y = F.conv2d(x, w, None, 1, 1)
        return F.batch_norm(y, rm, rv, None, None, True, 0.1, 1e-5).relu()

    args = [randn(2, 4, 3, 3), randn(8, 4, 3, 3, seed=1), torch.zeros(8), torch.ones(8)]
    eager_args = [a.clone() for a in args]
    compiled = C.inductor_compile(torch.fx.symbolic_trace(f), args)
    assert "channels_last" not in compiled.plan
    torch.testing.assert_close(compiled(*args), f(*eager_args), atol=0, rtol=0)
    torch.testing.assert_close(args[2], eager_args[2], atol=0, rtol=0)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("weights_cl", [(True,), (True, False), (False, True)])
def test_channels_last_weight_keeps_eagers_channels_last_output(weights_cl, grad):
    """Note [eager conv layouts]: a channels-last weight makes eager's CPU convolution return
    channels-last even for an NCHW input, though torch's meta function answers contiguous. The
    compiled outputs keep eager's strides (a user's `out.view(-1)` raises as eagerly), whichever
    convolution has the channels-last weight."""
    torch.manual_seed(0)
    convs = [nn.Conv2d(3, 3, 3, padding=1) for _ in weights_cl]
    for conv, cl in zip(convs, weights_cl):
        if cl:
            conv.to(memory_format=torch.channels_last)

    def f(x):
        y = x
        for conv in convs:
            y = conv(y).relu() + 1
        return y, y * 2

    x = randn(1, 3, 5, 5)
    dynamo.reset()
    C.inductor_reset_counters()
    with torch.set_grad_enabled(grad):
        want = f(x)
        want_grads = torch.autograd.grad(sum(w.sum() for w in want), convs[0].weight) if grad else ()
        got = dynamo.optimize("inductor")(f)(x)
        got_grads = torch.autograd.grad(sum(g.sum() for g in got), convs[0].weight) if grad else ()
    for g, w in zip(got + got_grads, want + want_grads):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)
        assert g.stride() == w.stride(), (g.stride(), w.stride())
    c = C.inductor_counters()
    assert c["kernels_compiled"] >= 1 and c["guard_failures"] == 0 and c["eager_graphs"] == 0, c
