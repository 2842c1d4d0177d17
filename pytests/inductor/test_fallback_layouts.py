"""A fallback whose real result has other strides than torch's meta function promised
(wrapper.rs's Note [fallback layouts]): the plan copies the values into the layout it planned
and goes on, instead of running the whole graph again through `gm.forward`, which repeated the
step's effects: a training batch norm updated its running statistics twice a call."""

import torch
import torch.nn as nn

import dynamo
from dynamo import _C as C


def run_bn(compiled, make_input, make_model):
    torch.manual_seed(0)
    model = make_model()
    f = dynamo.optimize("inductor")(model) if compiled else model
    outs = [f(make_input()) for _ in range(3)]
    stats = {k: v.clone() for k, v in model.state_dict().items() if "running" in k or "num_batches" in k}
    return outs, stats


def assert_same(eager, compiled):
    for a, b in zip(eager[0], compiled[0]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert eager[1].keys() == compiled[1].keys()
    for k in eager[1]:
        torch.testing.assert_close(eager[1][k], compiled[1][k], rtol=1e-6, atol=1e-7, msg=k)


class TransposedBn1d(nn.Module):
    """BatchNorm1d over the channels of a (batch, length, channels) sequence, then ReLU."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x):
        return torch.relu(self.bn(x.transpose(1, 2)))


def transposed_bn1d_runs():
    """Three training calls of TransposedBn1d eagerly and compiled (compared), and how many
    fallback results the compiled calls fixed up."""
    make_input = lambda: torch.randn(2, 4, 3)
    eager = run_bn(False, make_input, TransposedBn1d)
    dynamo.reset()
    before = C.inductor_counters()
    compiled = run_bn(True, make_input, TransposedBn1d)
    assert_same(eager, compiled)
    after = C.inductor_counters()
    assert after["kernel_calls"] > before["kernel_calls"]
    return eager, compiled, after["layout_fixups"] - before["layout_fixups"]


def test_training_batch_norm_of_a_transposed_input_keeps_eager_strides():
    """layout.rs's eager_batch_norm_strides: the plan expects eager's contiguous result of a
    batch norm of a transposed input (its meta keeps the input's strides), so no fix-up is
    needed and the ReLU after it returns eager's strides."""
    eager, compiled, fixups = transposed_bn1d_runs()
    assert [o.stride() for o in compiled[0]] == [o.stride() for o in eager[0]]
    assert fixups == 0


def test_a_fallback_with_unplanned_strides_runs_once(monkeypatch):
    """Without the layout pass (`DYNAMO_LAYOUT_OPT=0`) the plan expects the meta's strides for
    that batch norm; its real result is copied into them (a fix-up) instead of the whole graph
    running again through gm.forward, which updated the running statistics twice a call."""
    monkeypatch.setenv("DYNAMO_LAYOUT_OPT", "0")
    _, _, fixups = transposed_bn1d_runs()
    assert fixups >= 3


def test_channels_last_conv_bn_relu_in_training_updates_running_stats_once():
    def make_model():
        return nn.Sequential(nn.Conv2d(2, 2, 1), nn.BatchNorm2d(2), nn.ReLU())

    make_input = lambda: torch.randn(2, 2, 3, 3).to(memory_format=torch.channels_last)
    eager = run_bn(False, make_input, make_model)
    dynamo.reset()
    compiled = run_bn(True, make_input, make_model)
    assert_same(eager, compiled)


def test_training_conv_bn_relu_on_a_channels_last_input_keeps_eager_strides():
    """A contiguous conv weight on a channels-last input gives a channels-last result in eager
    (its meta says contiguous): a graph with a training batch norm skipped the layout pass and
    with it Note [eager conv layouts]'s correction, so the output came back contiguous."""
    torch.manual_seed(0)
    conv, bn = nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4)

    def f(x):
        return torch.relu(bn(conv(x)))

    x = torch.randn(2, 3, 6, 6).to(memory_format=torch.channels_last)
    want = f(x)
    stats = bn.running_mean.clone()
    bn.running_mean.copy_(torch.zeros(4)), bn.running_var.copy_(torch.ones(4)), bn.num_batches_tracked.zero_()
    dynamo.reset()
    got = dynamo.optimize("inductor")(f)(x)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(bn.running_mean, stats)
