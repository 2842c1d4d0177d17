"""Modules' forward passes (each test builds or receives its module and compares with a reference
it computes by hand or returns its output for --dynamo-compare)."""

import torch
import torch.nn.functional as F
from torch.testing import assert_close


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 2 * d)
        self.fc2 = torch.nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Attention(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)
        self.d = d

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = torch.softmax(q @ k.transpose(-2, -1) / self.d**0.5, dim=-1)
        return self.out(att @ v)


def test_mlp_forward(mlp, batch):
    x, _ = batch
    out = mlp(x)
    ref = F.linear(torch.relu(F.linear(x, mlp[0].weight, mlp[0].bias)), mlp[2].weight, mlp[2].bias)
    assert_close(out, ref)


def test_mlp_forward_returns(mlp, batch):
    return mlp(batch[0])


def test_residual_block():
    torch.manual_seed(0)
    blk = Block(8).eval()
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        return blk(x)


def test_attention_block():
    torch.manual_seed(0)
    att = Attention(8).eval()
    x = torch.randn(2, 4, 8)
    with torch.no_grad():
        out = att(x)
    assert out.shape == (2, 4, 8)
    return out


def test_conv_bn_relu_eval():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        out = m(x)
    assert (out >= 0).all()
    return out


def test_batchnorm_train_updates_stats():
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(4)
    x = torch.randn(8, 4)
    out = bn(x)
    assert_close(bn.running_mean, 0.1 * x.mean(0))
    return out.detach()


def test_embedding_and_linear():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 6)
    lin = torch.nn.Linear(6, 3)
    idx = torch.tensor([[1, 2, 3], [4, 5, 9]])
    with torch.no_grad():
        return lin(emb(idx)).sum(1)


def test_dropout_eval_is_identity():
    drop = torch.nn.Dropout(0.5).eval()
    x = torch.randn(4, 4)
    assert_close(drop(x), x)


def test_module_with_buffer():
    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("s", torch.tensor([2.0, 3.0]))

        def forward(self, x):
            return x * self.s + 1

    m = Scale()
    x = torch.randn(3, 2)
    assert_close(m(x), x * torch.tensor([2.0, 3.0]) + 1)


def test_layernorm_matches_formula():
    torch.manual_seed(0)
    ln = torch.nn.LayerNorm(6, elementwise_affine=False)
    x = torch.randn(3, 6)
    ref = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)
    assert_close(ln(x), ref, rtol=1e-4, atol=1e-5)
