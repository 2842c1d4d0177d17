"""Note [built-in module entry points] (src/eval_frame/hook.rs): in a `with dynamo.optimize(...)`
block, calling a model made only of torch's own modules compiles the model's `forward` (torch's
files are otherwise skipped as entry points, and the block compiled nothing). Results equal
eager's; a training loop's forward and backward are compiled graphs."""

import copy

import pytest
import torch

import dynamo


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_sequential_of_torch_modules_in_a_block_is_one_graph(backend):
    m = make_model()
    x = torch.randn(4, 6)
    with torch.no_grad():
        ref = m(x)
        with dynamo.optimize(backend):
            out = m(x)
            out2 = m(x + 1)
    assert torch.allclose(out, ref, atol=1e-6) and torch.allclose(out2, m(x + 1), atol=1e-6)
    c = dynamo.counters()
    # One frame (Sequential.forward) compiled into one graph, its Linear/ReLU calls inlined.
    assert c["graphs"] == 1 and c["frames_seen"] == 2 and c["cache_hits"] == 1, c
    if backend == "inductor":
        assert c["inductor_kernels_compiled"] >= 1


def test_training_loop_in_a_block_compiles_forward_and_backward():
    m_eager = make_model()
    m = copy.deepcopy(m_eager)
    opt_eager = torch.optim.SGD(m_eager.parameters(), lr=0.1)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    torch.manual_seed(1)
    batches = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(3)]
    for x, y in batches:
        opt_eager.zero_grad()
        loss_fn(m_eager(x), y).backward()
        opt_eager.step()
    with dynamo.optimize("inductor"):
        for x, y in batches:
            opt.zero_grad()
            loss_fn(m(x), y).backward()
            opt.step()
    for a, b in zip(m_eager.parameters(), m.parameters()):
        assert torch.allclose(a, b, atol=1e-6)
    c = dynamo.counters()
    assert c["aot_graphs"] >= 1 and c["aot_backward_graphs"] >= 1, c


def test_user_subclass_of_a_torch_module_uses_its_forward():
    class Scaled(torch.nn.Linear):  # torch's forward, the user's class
        pass

    m = Scaled(3, 2)
    x = torch.randn(2, 3)
    with dynamo.optimize("eager"):
        out = m(x)
    assert torch.equal(out, m(x))
    assert dynamo.counters()["graphs"] == 1


def test_no_compile_outside_the_block():
    m = make_model()
    m(torch.randn(2, 6))
    assert dynamo.counters()["frames_seen"] == 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_conv_transpose_modules_are_captured(backend):
    """ConvTranspose*d.forward reads `collections.abc` through torch's `_ntuple` closure, a
    module reached without a source: that read broke every ConvTranspose module (GB0011), so a
    generator or decoder split at each one. Standard-library modules of fixed definitions are
    now read there without guards."""
    torch.manual_seed(0)
    gen = torch.nn.Sequential(
        torch.nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
        torch.nn.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1), torch.nn.Tanh(),
    )
    seq = torch.nn.ConvTranspose1d(3, 2, 3, stride=2)
    x, s = torch.randn(2, 8, 4, 4), torch.randn(2, 3, 7)
    dynamo.reset()
    got = dynamo.optimize(backend)(gen)(x), dynamo.optimize(backend)(seq)(s)
    c = dynamo.counters()
    torch.manual_seed(0)
    want = gen(x), seq(s)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    assert c["graphs"] == 2 and c["graph_breaks"] == 0, c
