"""Real programs under `optimize`: torchvision's resnet18, an MLP training loop, a fused kernel."""

import pytest
import torch
import torch.nn.functional as F

import dynamo
from dynamo import _C


def test_resnet18_one_graph_then_cache_hit():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        ref = model(x)
        opt = dynamo.optimize("inductor")(model)
        out = opt(x)
        c1 = dynamo.counters()
        out2 = opt(x)
        c2 = dynamo.counters()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out2, ref, rtol=1e-4, atol=1e-4)
    assert c1["graphs"] == 1 and c1["compiles"] == 1 and c1["eager_fallbacks"] == 0, c1
    assert c2["compiles"] == 1 and c2["cache_hits"] == 1, c2


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 32)
        self.head = torch.nn.Linear(32, 1)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.head(x)


def compute_loss(model, x, y):
    return F.mse_loss(model(x), y)


def train(model, x, y, steps, compiled):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        if compiled:
            with dynamo.optimize("inductor"):
                loss = compute_loss(model, x, y)
        else:
            loss = compute_loss(model, x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_mlp_training_loop_matches_eager():
    torch.manual_seed(0)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    eager_model = MLP()
    compiled_model = MLP()
    compiled_model.load_state_dict(eager_model.state_dict())
    ref = train(eager_model, x, y, 20, compiled=False)
    got = train(compiled_model, x, y, 20, compiled=True)
    assert max(abs(a - b) for a, b in zip(ref, got)) <= 1e-5, (ref, got)
    c = dynamo.counters()
    assert c["compiles"] == 1 and c["recompiles"] == 0, c
    assert c["cache_hits"] == 19, c
    for p, q in zip(eager_model.parameters(), compiled_model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def sin_cos(x, y):
    return torch.sin(x) + torch.cos(y) * 2


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_sin_cos_is_one_llvm_kernel(layout):
    x = torch.randn(64, 48)
    y = torch.randn(64, 48)
    if layout == "transposed":
        x, y = torch.randn(48, 64).t(), torch.randn(48, 64).t()
    elif layout == "sliced":
        x, y = torch.randn(64, 96)[:, ::2], torch.randn(128, 48)[::2]
    _C.inductor_reset_counters()
    out = dynamo.optimize("inductor")(sin_cos)(x, y)
    torch.testing.assert_close(out, sin_cos(x, y), rtol=1e-6, atol=1e-6)
    c = _C.inductor_counters()
    assert c["kernels_compiled"] == 1, c
    assert c["kernel_calls"] == 1, c
    assert c["fallback_nodes"] == 0, c


def test_inference_under_no_grad_uses_kernels_and_training_still_differentiates():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.Linear(16, 16), torch.nn.Sigmoid())
    x = torch.randn(4, 16)
    opt = dynamo.optimize("inductor")(m)
    _C.inductor_reset_counters()
    with torch.no_grad():
        torch.testing.assert_close(opt(x), m(x))
    c = _C.inductor_counters()
    assert c["kernels_compiled"] >= 1 and c["eager_graphs"] == 0, c
    out = opt(x)  # grad mode on: recompiled, runs through torch so autograd records it
    assert out.requires_grad
    out.sum().backward()
    assert m[0].weight.grad is not None


def test_grad_free_graph_called_with_grad_on_falls_back():
    import torch.fx

    def f(x, w):
        return torch.sigmoid(x * w) + 1

    gm = torch.fx.symbolic_trace(f)
    x, w = torch.randn(8), torch.randn(8, requires_grad=True)
    with torch.no_grad():
        compiled = _C.inductor_compile(gm, [x, w])
        torch.testing.assert_close(compiled(x, w), f(x, w))
    out = compiled(x, w)
    assert out.requires_grad
    torch.testing.assert_close(out, f(x, w))


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_transformers_tiny_models_match_eager(name):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=128, n_positions=64)
        model = transformers.GPT2Model(cfg).eval()
    else:
        cfg = transformers.BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=64,
                                      intermediate_size=128, vocab_size=128, max_position_embeddings=64)
        model = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 128, (2, 16))
    with torch.no_grad():
        ref = model(ids).last_hidden_state
        opt = dynamo.optimize("inductor")(model)
        for _ in range(2):
            torch.testing.assert_close(opt(ids).last_hidden_state, ref, rtol=1e-4, atol=1e-4)
    assert dynamo.counters()["graphs"] >= 1
