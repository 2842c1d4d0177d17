"""Training-mode dropout is a torch-drawn noise tensor times the input (Note [dropout as a
product] in src/inductor/fx_import.rs): the joint graph keeps it (no split, no run through
torch's autograd), the product fuses into kernels, and the random draws, values and gradients
are eager's."""

import pytest
import torch
import torch.nn.functional as F

import dynamo


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(16, 32)
        self.l2 = torch.nn.Linear(32, 16)
        self.drop = torch.nn.Dropout(0.1)
        self.drop_inplace = torch.nn.Dropout(0.2, inplace=True)

    def forward(self, x):
        h = self.drop(F.gelu(self.l1(x)))
        h = self.drop_inplace(self.l2(h))
        return (x + F.dropout(h, 0.3, self.training)).pow(2).mean()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("train", [True, False])
def test_training_step_with_dropout_is_one_joint_graph(backend, train):
    def run(compile_):
        torch.manual_seed(0)
        model = Block().train(train)
        x = torch.randn(8, 16)
        step = dynamo.optimize(backend)(model) if compile_ else model
        torch.manual_seed(5)
        loss = step(x)
        loss.backward()
        return [loss.detach(), torch.rand(4)] + [p.grad for p in model.parameters()]

    want = run(False)
    dynamo.reset()
    got = run(True)
    assert torch.equal(got[1], want[1])  # the generator advanced as eager's did
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    c = dynamo.counters()
    assert (c["graphs"], c["aot_graphs"], c["aot_eager_graphs"], c["aot_graph_splits"]) == (1, 1, 0, 0), c


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p", [0.0, 0.25, 1.0])
def test_dropout_values_are_eagers(dtype, p):
    def f(x):
        return F.dropout(x * 2, p, True) + 1, F.dropout(x, p=p, training=False)

    x = torch.randn(64, 33).to(dtype)
    torch.manual_seed(3)
    want = f(x)
    dynamo.reset()
    torch.manual_seed(3)
    got = dynamo.optimize("inductor")(f)(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        assert torch.equal(g, w)
    assert dynamo.counters()["graphs"] == 1
