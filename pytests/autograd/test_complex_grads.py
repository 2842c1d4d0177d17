"""Derivative rules on complex tensors follow derivatives.yaml."""

import pytest
import torch

import dynamo


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_abs_of_a_complex_tensor_differentiates_with_sgn(backend):
    """abs' derivative is grad * self.sgn() (derivatives.yaml); torch.sign raises on complex
    tensors, so an STFT-magnitude loss crashed in backward."""

    def loss(x):
        z = torch.fft.rfft(x * 2.0)
        return z.abs().pow(2).sum() + (x.abs() * 0.5).sum()

    def grad(f):
        x = torch.linspace(-1.0, 1.0, 16, requires_grad=True)
        f(x).backward()
        return x.grad

    dynamo.reset()
    torch.testing.assert_close(grad(dynamo.optimize(backend)(loss)), grad(loss))
